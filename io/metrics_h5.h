/* metrics_h5.h — the metrics file on disk (docs/METRICS.md): its layout
 * (columns, tables, attributes), the HDF5 side of its single writer
 * (create, open for appending, append, SWMR flush, close), the settings its
 * readers share, and `hpt-metrics close`. The record keeping, the gather
 * and the anomaly rules are lib/metrics.c's; reading is io/metrics_read.h.
 *
 * Bounded metadata retries: in SWMR mode HDF5 1.10 takes a metadata
 * checksum mismatch for "the writer is in the middle of an update" and
 * reads again, sleeping 1, 2, 4, ... ns between attempts, 100 attempts by
 * default — 2^100 ns, for ever in practice. One flipped bit in metrics.h5
 * then hangs the trainer and every reader. HPT_METRICS_READ_ATTEMPTS
 * attempts sleep at most about 2^30 ns = 1 s in all, ample for a live
 * writer's update to land; after that the read fails ("incorrect metadata
 * checksum after all read attempts") and hpt treats the file as damaged.
 * H5Fstart_swmr_write resets the attempts to 100, so the writer reopens the
 * file with H5F_ACC_SWMR_WRITE and this module's fapl instead. */
#ifndef HPT_METRICS_H5_H
#define HPT_METRICS_H5_H

#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"

#define HPT_METRICS_FORMAT "hpt-metrics"
#define HPT_METRICS_FORMAT_VERSION 1
#define HPT_METRICS_READ_ATTEMPTS 30
#define HPT_METRICS_KIND_LEN 24  /* bytes of an event's kind (NUL-padded)    */
#define HPT_METRICS_MSG_LEN 256  /* bytes of an event's message              */

typedef struct {
    const char *name, *units, *desc;
} hpt_metrics_column;

/* Global per-step columns, /steps/NAME of shape [rows]: the first
 * HPT_SC_NINT are integers (int64 step, int32 segment, int8 repeated and
 * skipped), the rest float64. */
enum {
    HPT_SC_STEP, HPT_SC_SEGMENT, HPT_SC_REPEATED, HPT_SC_SKIPPED, HPT_SC_WALL, HPT_SC_LOSS,
    HPT_SC_VAL, HPT_SC_LR, HPT_SC_NORM, HPT_SC_CLIP, HPT_SC_TOKENS, HPT_SC_STEP_TIME,
    HPT_SC_TOK_S, HPT_SC_FLOPS, HPT_SC_MFU, HPT_SC_G2, HPT_SC_S, HPT_SC_NOISE, HPT_SC_COUNT
};
#define HPT_SC_NINT 4
/* Per-rank columns, /ranks/NAME of shape [rows, ranks], float64, in the
 * order of lib/metrics.h's HPT_MR_* (which checks the count). The first
 * HPT_RC_V1_COUNT are in every file of format version 1; the later ones
 * (validation; the ZeRO gather and reduce-scatter split of comm_dp; the
 * pipeline bubble; the context-parallel ring's comm_cp, bytes_cp,
 * cp_ring_hidden) were
 * added since: the writer creates them in an older file it appends to
 * (NaN in the rows before), readers take them where present. */
#define HPT_RC_COUNT 34
#define HPT_RC_V1_COUNT 24

extern const hpt_metrics_column hpt_metrics_step_cols[HPT_SC_COUNT];
extern const hpt_metrics_column hpt_metrics_rank_cols[HPT_RC_COUNT];

#define HPT_METRICS_STR_LEN 32   /* bytes of a segment's hpt_version, slurm_job_id */
#define HPT_METRICS_HOST_LEN 64  /* bytes of a segment's host                    */

/* The tables /segments and /events: their one definition. A row as held
 * in memory by the writer and every reader; strings are NUL-terminated and
 * one byte longer than in the file (HPT_METRICS_*_LEN bytes there, at most
 * one byte less of text). A new member: here, in the file type and the
 * memory type of io/metrics_h5.c (hpt_metrics_seg_type), docs/METRICS.md. */
typedef struct {
    int32_t segment;
    int64_t first_row, first_step, resumed_from, last_step_before;
    int32_t world, tp, pp, dp, zero1, grad_accum, micro_batch, seq_len;
    double start_time, flops_per_token, peak_flops_per_rank;
    char hpt_version[HPT_METRICS_STR_LEN + 1], slurm_job_id[HPT_METRICS_STR_LEN + 1];
    char host[HPT_METRICS_HOST_LEN + 1];
    /* hpt-train --sequence-parallel (0/1) and --recompute (0 none, 1 full,
     * 2 selective); files written before them lack the members */
    int32_t sequence_parallel, recompute;
    /* Unix time rank 0's process started, seconds spent loading the
     * checkpoint resumed from (0 for a fresh start); files written before
     * them lack the members (readers give NaN) */
    double process_start, load_seconds;
    /* the pipeline schedule (hpt_plan_schedule: 0 1F1B, 1 GPipe, 2
     * interleaved, 3 ZB-H1), its model chunks per rank, and its bubble in
     * theory as a fraction of the step (hpt_plan_bubble); files written
     * before them lack the members (readers give -1, -1, NaN) */
    int32_t pp_schedule, pp_virtual;
    double bubble_theory;
} hpt_metrics_seg_row;

typedef struct {
    int64_t step;
    double wall_time;
    int32_t rank;
    char kind[HPT_METRICS_KIND_LEN + 1];
    char message[HPT_METRICS_MSG_LEN + 1];
} hpt_metrics_event_row;

/* One row of /trace (the step timeline, hpt-train --trace-steps; lib/
 * trace.h): a span of work on one rank. Written in this layout (memory
 * and file alike); names are NUL-terminated, at most
 * HPT_METRICS_TRACE_NAME_LEN - 1 characters. */
#define HPT_METRICS_TRACE_NAME_LEN 16
typedef struct hpt_metrics_trace_row {
    int32_t segment;  /* row of /segments that traced it                    */
    int32_t step;     /* 1-based optimizer step it belongs to               */
    int32_t rank;     /* world rank                                         */
    int32_t stage;    /* pipeline stage of that rank                        */
    int32_t micro;    /* micro-batch (0-based) of a forward/backward; -1    */
    int32_t peer;     /* point-to-point: the peer's world rank; -1          */
    int64_t bytes;    /* communication: payload bytes this rank handed in; 0 */
    double t_start;   /* Unix time, seconds (this rank's clock)             */
    double t_end;
    char name[HPT_METRICS_TRACE_NAME_LEN];   /* forward, backward, data, optimizer,
                                              * checkpoint, validation, step; or the
                                              * operation: allreduce, isend, recv ... */
    char stream[HPT_METRICS_TRACE_NAME_LEN]; /* "step", "compute", or the group:
                                              * "tp", "dp", "pp", "mp", ...       */
} hpt_metrics_trace_row;

/* The HDF5 type of hpt_metrics_trace_row (H5Tclose it). */
hid_t hpt_metrics_trace_type(void);

/* The HDF5 memory type of hpt_metrics_seg_row for a /segments of file
 * type `file_type`: every member the struct has, the newer ones
 * (sequence_parallel, recompute, process_start, load_seconds, pp_schedule,
 * pp_virtual, bubble_theory) only where
 * file_type has them
 * (file_type < 0: all, for writing; not a compound: none; the caller
 * fills absent ones). The
 * caller closes it (H5Tclose); negative on failure. */
hid_t hpt_metrics_seg_type(hid_t file_type);

/* 1 when the memory type t (hpt_metrics_seg_type) reads member `name`. */
int hpt_metrics_seg_type_has(hid_t t, const char *name);

/* The HDF5 memory type of hpt_metrics_event_row (H5Tclose it). */
hid_t hpt_metrics_event_type(void);

/* Root attributes of a new file. Strings may be NULL (written empty). */
typedef struct {
    const char *model_config, *flop_formula;
    double flops_per_token, peak_flops_per_rank;
} hpt_metrics_h5_attrs;

/* The writer's open file (one per process; fields read-only outside io/). */
typedef struct {
    char path[4096];
    hid_t file, sd[HPT_SC_COUNT], rd[HPT_RC_COUNT], seg_ds, ev_ds, seg_t, ev_t;
    hid_t tr_ds;           /* /trace; 0 when the file has none               */
    int want_trace;        /* set before start_segment: create /trace if absent */
    int64_t rows;          /* complete rows in the file                     */
    int64_t rank_cols_n;   /* extent of the rank axis                       */
    int64_t prev_max_step; /* largest step logged by earlier segments       */
    int32_t segment;       /* index of this segment's row in /segments      */
    int damaged;           /* open found damage: the caller moves it aside  */
    char cause[256];       /* HDF5's innermost cause of the last failure    */
} hpt_metrics_h5;

/* A new file access property list for a metrics file: serial sec2 driver,
 * libver bounds latest (SWMR needs them), HDF5's own file locking off (hpt
 * locks PATH.lock itself, and file systems without lock support must not
 * stop a reader or the writer), metadata read attempts bounded to
 * HPT_METRICS_READ_ATTEMPTS. The caller closes it (H5Pclose). Returns a
 * negative id when HDF5 cannot create the list. */
hid_t hpt_metrics_h5_fapl(void);

/* Seconds hpt_metrics_h5_probe lets the child read (milliseconds on a
 * sound file). */
#define HPT_METRICS_PROBE_S 60

/* Read every string attribute of `path` (the root, its groups and
 * datasets) in a child process, to see whether that crashes or hangs HDF5:
 * HDF5 1.10 trusts the object sizes in a global heap collection (where the
 * variable-length strings of the attributes live: format, model_config,
 * units, ...), which carry no checksum, and one overwritten size byte makes
 * H5Aread crash with SIGSEGV, abort in malloc, or loop. Call before the
 * caller's own process reads them. HPT_ERR_DATA "PATH: damaged file: HDF5
 * crashed reading its attributes (signal N, ...)", "... failed reading
 * its attributes (the reader ended with status N ...)" (a sanitizer build's
 * report: the child itself exits 0) or "... did not finish ... in
 * HPT_METRICS_PROBE_S s"; HPT_OK otherwise, also when fork failed. The
 * caller holds no other thread inside HDF5 meanwhile. */
hpt_status hpt_metrics_h5_probe(const char *path);

/* Set up h for `path` (no file opened yet; builds the compound types).
 * Free with hpt_metrics_h5_free. */
void hpt_metrics_h5_init(hpt_metrics_h5 *h, const char *path);

/* Create the file (exclusively: it must not exist) with every dataset and
 * the root attributes `a`. On failure nothing is left behind. Errors:
 * HPT_ERR_IO naming the path and HDF5's cause. */
hpt_status hpt_metrics_h5_create(hpt_metrics_h5 *h, hid_t fapl, const hpt_metrics_h5_attrs *a);

/* Open an existing file for appending, not yet in SWMR mode. HDF5's
 * "open for write" flags of a killed writer are cleared; a writer killed
 * mid-append may have left some columns longer than others: they are cut
 * to the rows every column holds. Refused and untouched (HPT_ERR_IO): not
 * HDF5 without HDF5's signature, not an hpt metrics file, another
 * format_version, another model_config (when `model_config` is given).
 * Damaged (HPT_ERR_IO and h->damaged = 1; the caller moves it aside):
 * empty, HDF5's signature but unopenable, a dataset missing, metadata
 * failing its checksum, attributes that crash HDF5 (hpt_metrics_h5_probe).
 * Messages name the part and HDF5's cause. */
hpt_status hpt_metrics_h5_open(hpt_metrics_h5 *h, hid_t fapl, const char *model_config);

/* Append this segment's row `s` (s->segment, first_row, last_step_before
 * are set here from the file), then reopen the file for SWMR writing with
 * `fapl`. -1 on failure (h->cause: HDF5's cause): a damaged file. */
int hpt_metrics_h5_start_segment(hpt_metrics_h5 *h, hid_t fapl, hpt_metrics_seg_row *s);

/* Append n rows and flush: ints[c][i] for the HPT_SC_NINT integer
 * columns (as int64), cols[c][i] for the float64 ones (c >= HPT_SC_NINT;
 * cols[c] for c < HPT_SC_NINT unused), per-rank values `all` as
 * MPI_Gather lays them out, [world][n][HPT_RC_COUNT]; then the nev
 * pending events `ev`; then one flush (SWMR readers see all or nothing of
 * it). 0, or -1 with h->cause (rows not counted). */
int hpt_metrics_h5_append(hpt_metrics_h5 *h, int n, int64_t *const ints[HPT_SC_NINT],
                          double *const cols[HPT_SC_COUNT], const double *all, int world,
                          const hpt_metrics_event_row *ev, int nev);

/* Append n rows to /trace and flush (SWMR: the table exists from
 * hpt_metrics_h5_start_segment with want_trace). 0, or -1 with h->cause
 * (no /trace: "no /trace table"). */
int hpt_metrics_h5_append_trace(hpt_metrics_h5 *h, const hpt_metrics_trace_row *rows, size_t n);

/* Close the file (types kept; h->file = 0). Safe when nothing is open. */
void hpt_metrics_h5_close(hpt_metrics_h5 *h);

/* Close the file and free the types. */
void hpt_metrics_h5_free(hpt_metrics_h5 *h);

/* 1 when `path` is a damaged HDF5 file to move aside rather than refuse:
 * empty, or starting with HDF5's signature. */
int hpt_metrics_h5_looks_hdf5(const char *path);

/* `hpt-metrics close FILE`: clear the "open for write" status flags that a
 * killed writer leaves in the superblock (as h5clear -s does), so that a
 * plain reader (h5py.File(FILE, "r"), h5dump) opens the file; a SWMR
 * reader does not need this. Refused while a live hpt-train holds
 * FILE.lock (the writer's lock, lib/metrics.c); the lock is held while
 * clearing so that no writer starts meanwhile. Where the file system has
 * no locks, a warning goes to `log` and the flags are cleared. *cleared:
 * 1 if flags were set and are now cleared, 0 if the file opened plainly
 * already (nothing done). Errors: HPT_ERR_DATA (missing file, not HDF5,
 * HDF5's cause named), HPT_ERR_IO (a live writer holds the lock). */
hpt_status hpt_metrics_h5_clear(const char *path, FILE *log, int *cleared);

/* The root attribute `format` of `path` as read (fmt; NULL when missing) is
 * HPT_METRICS_FORMAT. Errors: HPT_ERR_DATA "PATH: not an hpt metrics file
 * (root attribute format = ..., expected ...)". */
hpt_status hpt_metrics_h5_check_format(const char *path, const char *fmt);

#endif
