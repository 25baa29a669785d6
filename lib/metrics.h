/* metrics.h — per-step, per-rank training metrics gathered into one HDF5
 * file, with an events table (docs/METRICS.md describes the file).
 *
 * Every rank records one small fixed-size record per optimizer step
 * (hpt_metrics_record); every `interval` steps the records are gathered to
 * world rank 0 (hpt_metrics_flush, collective) which appends them to
 * chunked, extendable datasets of RUN_DIR/metrics.h5 — [rows] for global
 * values, [rows x ranks] for per-rank values — and flushes the file. The
 * file is written in SWMR mode by that one rank (serial sec2 driver), so a
 * reader can follow a live run and a kill -9 leaves every flushed row
 * readable. A restart appends a new segment to the same file. */
#ifndef HPT_METRICS_H
#define HPT_METRICS_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#include "alert.h"
#include "error.h"

/* Per-rank values of one step (index into hpt_metrics_rank.v). Times in
 * seconds of wall time on that rank, bytes are payload bytes this rank
 * handed to communication calls of the group. */
enum {
    HPT_MR_STEP_TIME,  /* forward+backward+optimizer of the step          */
    HPT_MR_FORWARD,    /* compute in the stage forwards                   */
    HPT_MR_BACKWARD,   /* compute in the stage backwards                  */
    HPT_MR_OPTIMIZER,  /* gradient norm and AdamW, communication excluded */
    HPT_MR_DATA,       /* building micro-batches from the shards          */
    HPT_MR_PIPE_WAIT,  /* blocked receiving from neighbour stages         */
    HPT_MR_CHECKPOINT, /* saving a checkpoint after the step              */
    HPT_MR_COMM_TP, HPT_MR_COMM_PP, HPT_MR_COMM_DP, HPT_MR_COMM_MP, HPT_MR_COMM_EMBED,
    HPT_MR_BYTES_TP, HPT_MR_BYTES_PP, HPT_MR_BYTES_DP, HPT_MR_BYTES_MP, HPT_MR_BYTES_EMBED,
    HPT_MR_TOKENS,     /* tokens this rank processed (its micro-batches)   */
    HPT_MR_LOSS,       /* this rank's mean loss per token; NaN off the last stage */
    HPT_MR_GRAD_SUMSQ, /* sum of squares of this rank's gradient before the
                        * data-parallel reduction (each parameter once over TP) */
    HPT_MR_PEAK_RSS,   /* bytes                                           */
    HPT_MR_DEVICE_MEM, /* bytes of device memory at peak; NaN on the CPU  */
    HPT_MR_BUSY,       /* step time minus time in communication calls     */
    HPT_MR_NONFINITE,  /* 1 if this rank's own loss or gradient was non-finite */
    HPT_MR_VALIDATION, /* validation after the step (0 when none was due)  */
    HPT_MR_COMM_DP_GATHER, /* of comm_dp: waited for ZeRO parameter all-gathers */
    HPT_MR_BYTES_DP_GATHER,
    HPT_MR_COMM_DP_RS,     /* of comm_dp: waited for gradient reduce-scatters  */
    HPT_MR_BYTES_DP_RS,
    HPT_MR_DP_GATHER_HIDDEN, /* share of the gathers' time in flight not waited
                              * for (hidden behind compute); NaN without
                              * gathers or where unmeasured (NCCL)          */
    HPT_MR_PIPE_BUBBLE, /* PP > 1: this rank's idle time in the step's pipeline
                         * phase (from its start to the end of the rank's
                         * last backward) — neither data, forward nor
                         * backward; NaN without PP                        */
    HPT_MR_COMM_CP,    /* time in the context-parallel ring (sends, receives,
                        * waits); 0 without CP                             */
    HPT_MR_BYTES_CP,   /* payload bytes sent around the CP ring            */
    HPT_MR_CP_RING_HIDDEN, /* share of the ring transfers' time in flight not
                            * waited for (hidden behind the block compute);
                            * NaN without CP or where unmeasured (NCCL)     */
    HPT_MR_COUNT
};

/* Global values of one step (identical on every rank after the step's
 * reductions; world rank 0's copy is written). */
typedef struct {
    int64_t step;       /* 1-based optimizer step                         */
    double wall_time;   /* Unix time at the end of the step, seconds      */
    double loss;        /* mean training loss per token of the global batch (nats) */
    double val_loss;    /* NaN when not evaluated after this step          */
    double lr;
    double grad_norm;   /* global L2 norm before clipping                  */
    double clip_coef;   /* factor applied to the gradients (1 = none)      */
    int skipped;        /* 1: non-finite, no update                        */
    double tokens;      /* tokens of the global batch                      */
    double step_time;   /* seconds (world rank 0)                          */
} hpt_metrics_step;

typedef struct {
    double v[HPT_MR_COUNT];
} hpt_metrics_rank;

/* What a run segment records about itself (the segments table). */
typedef struct {
    int world, tp, pp, dp, zero1, grad_accum, micro_batch, seq_len, dp_rank_of_rank0;
    int sequence_parallel;     /* 1: --sequence-parallel in effect (TP > 1)  */
    int recompute;             /* --recompute: 0 none, 1 full, 2 selective   */
    int64_t first_step;        /* first step this segment runs (0-based count done) */
    int64_t resumed_from;      /* step of the checkpoint loaded; -1 = fresh  */
    double process_start;      /* Unix time rank 0's process started (NaN unknown) */
    double load_seconds;       /* loading the checkpoint resumed from (0 fresh) */
    int pp_schedule;           /* hpt_plan_schedule (0 1F1B ... 3 ZB-H1)       */
    int pp_virtual;            /* model chunks per pipeline rank (1 but interleaved) */
    double bubble_theory;      /* hpt_plan_bubble: the schedule's bubble, of the step */
    double flops_per_token;    /* model FLOPs per token, forward+backward     */
    double peak_flops_per_rank;/* FLOP/s used for MFU                          */
    const char *flop_formula;  /* human-readable formula                     */
    const char *model_config;  /* JSON                                        */
    const int *dp_rank;        /* [world]: DP rank of every world rank        */
    double slow_factor;        /* slow rank: busy > factor x median           */
    double spike_factor;       /* grad-norm spike: > factor x running median  */
    int trace;                 /* 1: --trace-steps, the file gets a /trace table */
    int cp;                    /* context-parallel ranks (> 1: no gradient noise
                                * scale: the CP ranks' pre-reduction gradients
                                * are parts of one batch's); 0 or 1 none     */
    int sumsq_micro;           /* 1: HPT_MR_GRAD_SUMSQ sums each micro-batch's
                                * squared gradient norm (ZeRO-2/3 with gradient
                                * accumulation never holds a replica's summed
                                * gradient): the noise scale's small batch is
                                * one micro-batch, not one replica's batch  */
    const hpt_alert_rule *alerts; /* --alert rules (lib/alert.h), copied at open */
    int nalerts;
    int event_window;          /* --event-window: steps per job-log window of
                                * an anomaly kind (lib/event_window.h); 0 = a
                                * line for every occurrence                  */
    int fault_anomaly;         /* testing (--fault-anomaly): 0 none, else an
                                * HPT_FAULT_ANOMALY_* forced at every step of */
    int64_t fault_from, fault_to; /* [fault_from, fault_to] (1-based steps)  */
} hpt_metrics_info;

/* --fault-anomaly (testing): the anomaly forced at every step of a range,
 * whatever the detector's rule says. */
enum { HPT_FAULT_ANOMALY_NONE, HPT_FAULT_ANOMALY_SPIKE, HPT_FAULT_ANOMALY_DROP };
/* Their event kinds, indexed by the enum ("" for NONE): grad_norm_spike,
 * throughput_drop. */
extern const char *const hpt_fault_anomaly_kinds[3];

typedef struct hpt_metrics hpt_metrics;

/* Open (create, or append a segment to) the metrics file `path` on world
 * rank 0 of `comm`; other ranks only buffer. `interval` = steps between
 * gathers/flushes (>= 1). Collective; the same status on every rank.
 * Errors: HPT_ERR_IO naming the path (not writable, another process writing
 * it (a flock on PATH.lock), an existing file that is not an hpt metrics
 * file, has another format_version or holds another model's metrics —
 * never overwritten). Not errors (one warning each, the run goes on): a
 * file system too full for the file (no metrics), one without lock support
 * (no lock), a damaged file — HDF5 cannot open it, empty, a dataset
 * missing, metadata failing its checksum — moved aside to
 * PATH.unreadable-TIME and a new file started. The HDF5 side is
 * io/metrics_h5.h. *out is owned by the caller (hpt_metrics_close). */
hpt_status hpt_metrics_open(hpt_metrics **out, MPI_Comm comm, const char *path, int interval,
                            const hpt_metrics_info *info);

/* Buffer this rank's record of one step (local, no communication); every
 * `interval` records the caller must call hpt_metrics_flush on all ranks
 * (hpt_metrics_due says when). */
void hpt_metrics_record(hpt_metrics *m, const hpt_metrics_step *s, const hpt_metrics_rank *r);

/* 1 when the buffer holds `interval` records. Same answer on every rank. */
int hpt_metrics_due(const hpt_metrics *m);

/* Gather the buffered records to rank 0 and append them (collective over
 * the world). Rank 0 also derives the gradient noise scale and detects
 * slow ranks, gradient-norm spikes and throughput drops, each appended to
 * the events table and printed as one line to `log` (may be NULL) within
 * the rate limit of info.event_window (hpt_metrics_log_anomaly); the "xN
 * more" lines of the windows that end by the last flushed step follow.
 * Never fails: a full disk or an HDF5 failure (a damaged file: moved
 * aside) stops the metrics with one warning, training goes on. */
hpt_status hpt_metrics_flush(hpt_metrics *m, FILE *log);

/* Append an event (rank 0 only; a no-op elsewhere). kind: run_start,
 * run_end, checkpoint_save, checkpoint_error, checkpoint_load, signal, resume, layout_change,
 * skipped_step, grad_norm_spike, throughput_drop, slow_rank. rank: the
 * world rank the event concerns. Written at the next flush. */
void hpt_metrics_event(hpt_metrics *m, int64_t step, int rank, const char *kind,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* The job log's rate limit of anomaly lines (lib/event_window.h, window
 * info.event_window): 1 when the caller is to print the line of this
 * occurrence of `kind` at `step` (the first of its window), 0 when it is
 * only counted for the window's "KIND xN more, steps A-B" line — printed
 * to `log` by this call when `step` lies past a window that counted some,
 * else by hpt_metrics_flush or hpt_metrics_close. The key is the kind, and
 * for slow_rank also `rank`. Records no event (hpt_metrics_event does).
 * Rank 0; 0 elsewhere and for m NULL. */
int hpt_metrics_log_anomaly(hpt_metrics *m, FILE *log, int64_t step, int rank, const char *kind);

/* Append the pending events now (rank 0 only, no communication; a no-op
 * elsewhere), e.g. right after a checkpoint is committed. */
void hpt_metrics_write_events(hpt_metrics *m);

/* Append n rows of the step timeline to /trace (rank 0, no
 * communication; a no-op elsewhere, without info.trace, or after the
 * metrics stopped). Each row's segment is set to this segment's. Never
 * fails: a full disk or an HDF5 failure stops the metrics with one
 * warning, as hpt_metrics_flush. The row is io/metrics_h5.h's. */
struct hpt_metrics_trace_row;
void hpt_metrics_trace(hpt_metrics *m, struct hpt_metrics_trace_row *rows, size_t n);

/* Flush what is buffered when `collective` (every rank calls it), print
 * the "xN more" lines of the job log's open windows to `log` (rank 0),
 * then close the file and free m (NULL is accepted). */
void hpt_metrics_close(hpt_metrics *m, int collective, FILE *log);

#endif
