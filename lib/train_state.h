/* train_state.h — state shared by the trainer's files (train.c: setup
 * and the step loop; train_pipeline.c: the pipeline schedule; train_ckpt.c:
 * checkpoints and resume; train_export.c: export and replica checks;
 * train_metrics.c: metrics file, --comm-stats). Not installed; only those
 * files include it. */
#ifndef HPT_TRAIN_STATE_H
#define HPT_TRAIN_STATE_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "checkpoint.h"
#include "comm.h"
#include "config.h"
#include "data.h"
#include "metrics.h"
#include "model.h"
#include "optim.h"
#include "train.h"

#define MAX_BUCKETS 4096 /* DP all-reduce buckets in flight per step */

/* One training run's state on this rank: set up by hpt_train_run
 * (train.c), freed by run_free. */
typedef struct {
    hpt_config cfg;
    hpt_comm comm;
    hpt_model model;
    hpt_optim opt;
    hpt_loader *train, *val;
    int32_t *inputs, *targets; /* host (B,T) */
    FILE *log;                 /* RUN_DIR/log.tsv on rank 0, else NULL */
    int64_t cursor;            /* samples consumed in the global order */
    int root;                  /* 1 on world rank 0: prints and writes  */
    /* data parallelism */
    int nbuckets;
    hpt_comm_req buckets[MAX_BUCKETS];
    int *shard_counts;         /* ZeRO-1: elements owned by each DP rank */
    float *grad_shard;         /* ZeRO-1: reduced gradients of own shard */
    /* pipeline parallelism */
    int l0, l1;                /* this stage's layers                   */
    int *layer_stage;          /* stage of every layer (L entries)       */
    float *grad_send;          /* (nslots, N, C) gradients being sent    */
    hpt_comm_req *fwd_req, *bwd_req; /* per slot: pending sends         */
    char *fwd_busy, *bwd_busy;
    /* communication of the training steps only (validation excluded) */
    hpt_comm_counter train_ctr[HPT_GROUP_COUNT];
    int train_steps;
    /* checkpoints */
    char ckpt_dir[4096];       /* "" = checkpointing off                */
    int start_step;            /* first step to run (resume)             */
    int64_t resume_from;       /* step of the checkpoint loaded, -1 none */
    int skipped_total, consecutive;
    FILE *samples;             /* --log-samples, first TP/PP rank of a DP replica */
    int step;                  /* the step being trained, 1-based (samples rows) */
    int val_stopped;           /* the last validation was cut short by a stop signal */
    /* metrics of the current step (docs/METRICS.md) */
    hpt_metrics *metrics;      /* NULL = off                              */
    double t_fwd, t_bwd, t_data, t_wait; /* seconds in this step           */
    double local_loss;         /* this rank's loss sum over its micro-batches */
    double local_sumsq;        /* this rank's pre-DP-reduction gradient sum of squares */
    double ckpt_load_s, ckpt_save_s, ckpt_save_bytes;
    hpt_ckpt_async *async;     /* --async-save: the save in flight; NULL = off */
    int poison;                /* poison this rank's gradients this step (test) */
    double comm_s_acc;         /* seconds in communication at the end of accumulate */
    hpt_comm_counter step_ctr[HPT_GROUP_COUNT]; /* this step's communication */
    struct hpt_watchdog *watchdog; /* hang watchdog (lib/watchdog.h); NULL = off */
    hpt_comm_stage stage;      /* host staging of device buffers (--comm mpi on a GPU) */
} run_state;

/* The last stop signal received (0 none); set by the handler, read at step
 * and validation-batch boundaries (train.c). */
extern volatile sig_atomic_t train_stop_signal;

/* Monotonic clock, seconds. */
static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Seconds spent in communication calls so far, all groups. */
static inline double comm_seconds(const run_state *r)
{
    double s = 0;
    for (int g = 0; g < HPT_GROUP_COUNT; g++)
        s += r->comm.counters[g].seconds;
    return s;
}

/* ---- train.c */

/* Open RUN_DIR/name for writing (*f; the caller closes it). Errors:
 * HPT_ERR_IO naming the path. */
hpt_status open_in_run_dir(const char *dir, const char *name, FILE **f);

/* ---- train_metrics.c: metrics file, per-step records, --comm-stats */

/* Open the metrics file (--metrics, else RUN_DIR/metrics.h5; "none" or
 * neither: off) and record the run's opening events (run_start, resume,
 * layout change). Collective. Errors: HPT_ERR_USAGE (the path is another
 * output of the run), HPT_ERR_IO. */
hpt_status open_metrics(run_state *r, const hpt_train_opts *o, const hpt_ckpt_meta *meta);
/* This step's global and per-rank record; t0, t_acc, t1 as in the step
 * loop; skip: the step was skipped. */
void record_metrics(run_state *r, const hpt_train_opts *o, int step, double t0, double t_acc,
                    double t1, double loss, double val, float lr, double norm, int skip);
/* A skipped step's event naming the first rank with non-finite values.
 * Collective (one all-reduce); every rank calls it for the same step. */
void skipped_step_event(run_state *r, int step, double loss, double norm, FILE *out);
/* --comm-stats: per-group communication per training step and peak RSS,
 * gathered to rank 0 (printed; RUN_DIR/comm.tsv). Collective. */
void comm_stats(run_state *r, const hpt_train_opts *o, FILE *out);

/* ---- train_pipeline.c: pipeline schedule (1F1B, GPipe), validation */

/* Layers [l0, l1) of this stage into r->l0/l1, r->layer_stage (every
 * layer's stage): balanced, or --pp-split. Errors: HPT_ERR_USAGE. */
hpt_status stage_layers(run_state *r, const hpt_train_opts *o);
/* Micro-batches in flight on this stage (activation slots). */
int pipeline_slots(const run_state *r, const hpt_train_opts *o);
/* Pipeline send buffers and requests for nslots slots. Errors:
 * HPT_ERR_INTERNAL (out of memory). */
hpt_status setup_pipeline(run_state *r, int nslots);
/* Forward+backward of one step's micro-batches (1F1B or GPipe), gradients
 * summed over DP; returns the global batch's mean loss per token. */
double pipe_accumulate(run_state *r, const hpt_train_opts *o);
/* Mean validation loss; NaN with r->val_stopped = 1 when a stop signal
 * cut it short. Collective. */
double pipe_evaluate(run_state *r, const hpt_train_opts *o);

/* ---- train_ckpt.c: checkpoints, resume, fallback, log trimming */

/* r->ckpt_dir from --checkpoint-dir or RUN_DIR/checkpoints ("" = none).
 * Errors: HPT_ERR_USAGE (--save-every without a directory). */
hpt_status checkpoint_dir(run_state *r, const hpt_train_opts *o);
/* Pick the checkpoint to resume (metadata only), check it fits, adapt
 * o->grad_accum; sets r->resume_from (-1: fresh start). Collective. */
hpt_status probe_resume(run_state *r, hpt_train_opts *o, hpt_ckpt_meta *meta);
/* Load the probed checkpoint (falling back with --resume auto), restore
 * the training state, cut the logs back to it. Collective. */
hpt_status load_resume(run_state *r, const hpt_train_opts *o, hpt_ckpt_meta *meta);
/* Save step `step` (collective); prints the save line on rank 0. */
hpt_status save_checkpoint(run_state *r, const hpt_train_opts *o, int step, FILE *out);
/* --async-save with a checkpoint directory and --save-every: the handle of the background
 * saves and its staging buffer, allocated now. The writer thread makes no
 * MPI call, but MPI must know other threads exist: hpt-train asks for
 * MPI_THREAD_FUNNELED; under a lower level (a caller's MPI_Init) saves
 * stay synchronous, with a warning. Local. Errors: HPT_ERR_INTERNAL,
 * HPT_ERR_IO (out of memory). */
hpt_status setup_async_save(run_state *r, const hpt_train_opts *o);
/* --async-save: snapshot step `step` and start writing it in the
 * background (collective); a failure is reported and training goes on
 * (HPT_OK). */
hpt_status start_async_save(run_state *r, const hpt_train_opts *o, int step, FILE *out);
/* --async-save: commit the save in flight, if any (collective, after step
 * `at`); prints and records it; a failure is reported and training goes
 * on. Returns its start-to-commit seconds (0: none). */
double finish_async_save(run_state *r, int at, FILE *out);
/* Rank 0: cut back (upto >= 0) or remove (upto < 0) the samples.<d>.tsv
 * files no rank of this run writes. */
void tidy_samples(run_state *r, const hpt_train_opts *o, int64_t upto);

/* ---- train_export.c: final weights, replica consistency */

/* Write the final weights with Hugging Face names to HDF5 `path` (rank 0
 * writes). Collective. Errors: HPT_ERR_IO. */
hpt_status export_weights(run_state *r, const char *path);
/* Tied-embedding copies and TP-replicated tensors bitwise identical.
 * Collective. Errors: HPT_ERR_INTERNAL naming the tensor. */
hpt_status check_replicas(run_state *r);

#endif
