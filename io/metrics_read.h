/* metrics_read.h — reading a metrics file (docs/METRICS.md, docs/ANALYSIS.md):
 * the reader API under `hpt-metrics` (and a live view).
 *
 * Serial HDF5 in SWMR-read mode (libver latest, metadata read attempts
 * bounded: io/metrics_h5.h), so the file of a live or a killed run opens
 * and a damaged one fails instead of hanging. Every step is reported once:
 * rows are in time order and after a resume a step can be logged again, so
 * for each step the LAST row is kept (the later segment wins) — the rule
 * analysis/hpt_metrics.py applies too. Columns are returned for the kept
 * rows ("kept index" 0..n-1, sorted by step).
 *
 * Use: hpt_mread_open (checks the format, the layout and applies the dedup
 * rule), then any of the column/table readers, then hpt_mread_close. A live
 * view re-opens the file to see new rows and reads columns from the kept
 * index it had reached onward (`from`). Errors are HPT_ERR_DATA naming the
 * file and the dataset or attribute, with HDF5's innermost cause for a
 * damaged file; HPT_ERR_INTERNAL when out of memory. HDF5's automatic
 * error printing is the caller's to turn off (hpt-metrics does). */
#ifndef HPT_METRICS_READ_H
#define HPT_METRICS_READ_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "metrics_h5.h"

/* A row of /segments, /events as read (io/metrics_h5.h: strings
 * NUL-terminated; sequence_parallel and recompute 0 in files written
 * before these fields). */
typedef hpt_metrics_seg_row hpt_mread_seg;
typedef hpt_metrics_event_row hpt_mread_event;

/* An open metrics file (fields read-only for callers). */
typedef struct {
    const char *path;
    hid_t file;
    size_t rows;   /* rows every /steps and /ranks dataset holds            */
    size_t nranks; /* extent of the rank axis                               */
    size_t n;      /* distinct steps                                        */
    size_t *keep;  /* [n]: row kept for each step, sorted by step           */
    int64_t *step; /* [rows]                                                */
    char *hpt_version;    /* root attribute hpt_version (NULL if absent)    */
    int format_version;
    double peak_flops;    /* root attribute peak_flops_per_rank (NaN if absent) */
} hpt_mread;

/* Open `path`, check that it is an hpt metrics file of a known version and
 * that every dataset of the layout is there, and apply the dedup rule
 * (m->n kept steps of m->rows rows, m->nranks ranks). `path` must outlive
 * m. On error m is still safe to pass to hpt_mread_close. */
hpt_status hpt_mread_open(hpt_mread *m, const char *path);

/* The dedup rule on its own: of `rows` rows in time order with steps
 * step[], the row kept for each distinct step (its last), sorted by step,
 * into keep[] (room for rows); returns how many, -1 out of memory. */
long hpt_mread_keep(const int64_t *step, size_t rows, size_t *keep);

/* Close the file and free what hpt_mread_open allocated (zeroes m). */
void hpt_mread_close(hpt_mread *m);

/* /steps/NAME of the kept rows from kept index `from` (<= m->n) onward as
 * doubles: *out a malloc'd [m->n - from] array the caller frees. */
hpt_status hpt_mread_steps_col(const hpt_mread *m, const char *name, size_t from, double **out);

/* /ranks/NAME of the kept rows from kept index `from` onward: *out a
 * malloc'd [m->n - from][m->nranks] array (NaN where a rank did not exist
 * in the row's segment) the caller frees. */
hpt_status hpt_mread_ranks_col(const hpt_mread *m, const char *name, size_t from, double **out);

/* Every raw row (file order, the dedup rule not applied: analyses over all
 * segments, lib/goodput.h): /steps/NAME as doubles in *out, malloc'd
 * [m->rows] (caller frees). */
hpt_status hpt_mread_rows_col(const hpt_mread *m, const char *name, double **out);

/* Every raw row of rank w's column of /ranks/NAME (w < m->nranks) in *out,
 * malloc'd [m->rows]; *out NULL (and HPT_OK) when the file has no such
 * column (one newer than the file, io/metrics_h5.h). */
hpt_status hpt_mread_rows_rank(const hpt_mread *m, const char *name, size_t w, double **out);

/* 1 when /ranks/NAME exists as a 2-D dataset (NAME a plain name). */
int hpt_mread_has_ranks_col(const hpt_mread *m, const char *name);

/* The names in /ranks, comma-separated, into buf (for messages). */
void hpt_mread_ranks_col_names(const hpt_mread *m, char *buf, size_t len);

/* Every row of /segments, /events: *out malloc'd [*n] (caller frees). */
hpt_status hpt_mread_segments(const hpt_mread *m, hpt_mread_seg **out, size_t *n);
hpt_status hpt_mread_events(const hpt_mread *m, hpt_mread_event **out, size_t *n);

/* Every row of /trace (the step timeline, io/metrics_h5.h): *out
 * malloc'd [*n] (caller frees). A file without /trace: HPT_ERR_DATA
 * "PATH has no /trace: the run was not traced (hpt-train --trace-steps
 * A-B)". */
hpt_status hpt_mread_trace(const hpt_mread *m, hpt_metrics_trace_row **out, size_t *n);

/* ------------------------------------------------- incremental follow */
/* For a reader that keeps the file and its datasets open and reads only
 * what was appended since its last look (lib/live_follow.c, SWMR read).
 * Errors are HPT_ERR_DATA "PATH: cannot refresh/read dataset GROUPNAME
 * (damaged file; HDF5: cause)" (path, group as "/steps/" or "", name for
 * the message); HPT_ERR_INTERNAL out of memory. */

/* Refresh open dataset d (H5Drefresh) and give its extent: *rows, and
 * *cols for a 2-D one (cols may be NULL). A refresh that fails (an object
 * header failing its checksum, a cut file) is damage, never "no rows". */
hpt_status hpt_mread_follow_extent(hid_t d, const char *path, const char *group,
                                   const char *name, hsize_t *rows, hsize_t *cols);

/* Rows [from, from + n) of the 1-D dataset d as `type` into out. */
hpt_status hpt_mread_follow_rows(hid_t d, hid_t type, size_t from, size_t n, void *out,
                                 const char *path, const char *group, const char *name);

/* The rows of compound table d (/segments, /events; memory type t of
 * `size` bytes a row) appended since *count: *arr (malloc'd, of *count
 * rows) grown to the new extent, the new rows zeroed then read, *count
 * updated; on error *count is unchanged (*arr may have grown). */
hpt_status hpt_mread_follow_table(hid_t d, hid_t t, size_t size, const char *path,
                                  const char *name, void **arr, size_t *count);

#endif
