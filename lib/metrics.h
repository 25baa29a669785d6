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
    double flops_per_token;    /* model FLOPs per token, forward+backward     */
    double peak_flops_per_rank;/* FLOP/s used for MFU                          */
    const char *flop_formula;  /* human-readable formula                     */
    const char *model_config;  /* JSON                                        */
    const int *dp_rank;        /* [world]: DP rank of every world rank        */
    double slow_factor;        /* slow rank: busy > factor x median           */
    double spike_factor;       /* grad-norm spike: > factor x running median  */
    const hpt_alert_rule *alerts; /* --alert rules (lib/alert.h), copied at open */
    int nalerts;
} hpt_metrics_info;

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
 * the events table and printed as one line to `log` (may be NULL). Never
 * fails: a full disk or an HDF5 failure (a damaged file: moved aside)
 * stops the metrics with one warning, training goes on. */
hpt_status hpt_metrics_flush(hpt_metrics *m, FILE *log);

/* Append an event (rank 0 only; a no-op elsewhere). kind: run_start,
 * run_end, checkpoint_save, checkpoint_error, checkpoint_load, signal, resume, layout_change,
 * skipped_step, grad_norm_spike, throughput_drop, slow_rank. rank: the
 * world rank the event concerns. Written at the next flush. */
void hpt_metrics_event(hpt_metrics *m, int64_t step, int rank, const char *kind,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Append the pending events now (rank 0 only, no communication; a no-op
 * elsewhere), e.g. right after a checkpoint is committed. */
void hpt_metrics_write_events(hpt_metrics *m);

/* Flush what is buffered when `collective` (every rank calls it), then
 * close the file and free m (NULL is accepted). */
void hpt_metrics_close(hpt_metrics *m, int collective, FILE *log);

#endif
