/* train_state.h — the run state shared by the trainer's files (the wing
 * lib/train*.c: train.c, the step loop; train_opts.c, options; train_signals.c,
 * stop signals; train_rundir.c, the run directory; train_pipeline.c, the
 * pipeline schedule; train_dp_buckets.c, the DP gradient buckets;
 * train_ckpt.c, checkpoints and resume; train_export.c, export and replica
 * checks; train_metrics.c, the metrics file and --comm-stats), with two
 * inline helpers. Each file's functions are declared in its own header;
 * this one declares none, so no file below train.c depends on train.c.
 * Not installed. */
#ifndef HPT_TRAIN_STATE_H
#define HPT_TRAIN_STATE_H

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

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
    int *shard_counts;         /* ZeRO-1/2: elements owned by each DP rank */
    float *grad_shard;         /* ZeRO-1/2: reduced gradients of own shard */
    int *bucket_counts;        /* ZeRO-2: (bucket_cap, DP) per-rank counts of
                                * the buckets in flight (MPI reads them until
                                * the wait)                               */
    int bucket_cap;            /* ZeRO-2: buckets per step (stage layers + 2) */
    int ndeferred;             /* ZeRO-2: buckets held back until the TP sum
                                * of the norm weights (sequence parallel) or
                                * the tied embedding's sum over its stages */
    size_t (*deferred)[2];     /* their (offset, count), bucket_cap entries */
    size_t (*bucket_range)[2]; /* ZeRO-2: (offset, count) of each bucket    */
    size_t (*bucket_own)[3];   /* ZeRO-2 accumulating: (place in the shard,
                                * count, micro-batch) of each bucket's own
                                * part, received in rs_tmp; count 0:
                                * received in place                       */
    float *rs_tmp;             /* ZeRO-2/3 with gradient accumulation: the
                                * shard-sized receive buffer of the buckets,
                                * added into grad_shard when waited for    */
    int acc_micro, acc_count;  /* ZeRO-2/3: the micro-batch whose backward
                                * runs (0-based) of acc_count per step: every
                                * one's gradient is reduce-scattered and
                                * summed into grad_shard                   */
    int nwaited;               /* buckets [0, nwaited) already waited for  */
    int grads_release;         /* ZeRO-2 on host memory: a bucket's gradients
                                * return to zero once reduce-scattered, whole
                                * pages given back to the OS (MADV_DONTNEED) */
    int grads_zero;            /* the gradient block is all zero (released):
                                * the next step skips hpt_model_zero_grad  */
    struct hpt_zero3 *z3;      /* ZeRO-3 parameter sharding (train_zero3.h);
                                * NULL below ZeRO-3                        */
    /* pipeline parallelism */
    int l0, l1;                /* this stage's layers                   */
    int nchunks;               /* model chunks on this rank (interleaved: V) */
    int chunk_l0[64], chunk_l1[64]; /* their global layer ranges            */
    int wstash;                /* zb-h1: W operand sets (deferred weight-
                                * gradient passes in flight + 1); 0 = none */
    int wnext, wpending;       /* zb-h1: the oldest pending W (micro-batch)
                                * and how many are pending                 */
    int slots_per_chunk;       /* one chunk: the activation slots (micro-batch
                                * i uses slot i mod this)                */
    int head_slots;            /* interleaved: slots of the head's chunk (the
                                * last stage's last), after the pool       */
    int *slot_of;              /* interleaved: (chunk x M + i) -> its slot  */
    int *free_slot, nfree, free_at; /* interleaved: free pool slots, a queue
                                * (ring of nslots from free_at)           */
    int *free_head, nfree_head, free_head_at; /* the free head slots, as well */
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
    double t_pipe0, t_pipe_end, t_pipe_busy; /* the pipeline phase: its start,
                                * the end of this rank's last backward, and
                                * the data, forward and backward spans in it
                                * (TP communication inside them is work) */
    double local_loss;         /* this rank's loss sum over its micro-batches */
    double local_sumsq;        /* this rank's pre-DP-reduction gradient sum of squares */
    double *sumsq_dev;         /* the DP buckets' range sums on the device (sumsq_list_async),
                                * read after backward; NULL: none yet    */
    int sumsq_cap, sumsq_nk, sumsq_nb; /* its doubles; ranges, buckets in it */
    int *sumsq_per;            /* ranges of each bucket in it (sumsq_nb)   */
    double ckpt_load_s, ckpt_save_s, ckpt_save_bytes;
    double val_s;              /* validation after the current step, seconds */
    hpt_ckpt_async *async;     /* --async-save: the save in flight; NULL = off */
    int fault_stop_bucket;     /* test: SIGSTOP after this step's first DP bucket */
    int fault_stop_save;       /* test: SIGSTOP inside this step's checkpoint save */
    int poison;                /* poison this rank's gradients this step (test) */
    double comm_s_acc;         /* seconds in communication at the end of accumulate */
    hpt_comm_counter step_ctr[HPT_GROUP_COUNT]; /* this step's communication */
    hpt_comm_kind_counter step_kinds[HPT_CK_COUNT]; /* its ZeRO gathers, reduce-scatters */
    double step_ring[2]; /* its CP ring transfers: seconds waited, in flight
                          * (hpt_ring_timing; NaN without CP or on NCCL)   */
    struct hpt_watchdog *watchdog; /* hang watchdog (lib/watchdog.h); NULL = off */
    struct hpt_trace *trace;   /* --trace-steps (lib/trace.h); NULL = off   */
    hpt_comm_stage stage;      /* host staging of device buffers (--comm mpi on a GPU) */
} run_state;

/* " ZeRO-1", " ZeRO-2", " ZeRO-3" for ZeRO stage z; "" for 0 (messages). */
static inline const char *zero_words(int z)
{
    return z == 3 ? " ZeRO-3" : z == 2 ? " ZeRO-2" : z == 1 ? " ZeRO-1" : z > 3 ? " ZeRO-?" : "";
}

/* Monotonic clock, seconds. */
static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Each ZeRO shard's part of parameter elements [lo, hi): counts[i] for
 * rank i of the shard group (HPT_GROUP_DPS; the shards r->shard_counts
 * lie back to back in rank order) and, when displs is not NULL, displs[i]
 * = counts[0] + ... + counts[i-1]. A part is at most a shard (< 2^31). */
static inline void shard_parts(const run_state *r, size_t lo, size_t hi, int *counts, int *displs)
{
    size_t a = 0;
    int off = 0;
    for (int i = 0; i < r->comm.group_size[HPT_GROUP_DPS]; i++) {
        size_t b = a + (size_t)r->shard_counts[i];
        size_t x = a > lo ? a : lo, y = b < hi ? b : hi;
        counts[i] = x < y ? (int)(y - x) : 0;
        if (displs)
            displs[i] = off;
        off += counts[i];
        a = b;
    }
}

/* Give the whole pages inside bytes [p, end) of host memory back to the OS
 * (MADV_DONTNEED: anonymous private pages then read as zero and take no
 * memory until written again): ZeRO-2's reduced gradient buckets (ZeRO-3's
 * dropped parameters go through the backend's decommit, backend.h, the
 * CPU's doing the same). Returns 1 with [*a, *b) the pages given back, 0
 * when there is no whole page or madvise refused (nothing given back). */
static inline int pages_release(char *p, char *end, char **a, char **b)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    *a = (char *)(((uintptr_t)p + pg - 1) / pg * pg);
    *b = (char *)((uintptr_t)end / pg * pg);
    return *a < *b && madvise(*a, (size_t)(*b - *a), MADV_DONTNEED) == 0;
}

/* Seconds spent in communication calls so far, all groups. */
static inline double comm_seconds(const run_state *r)
{
    double s = 0;
    for (int g = 0; g < HPT_GROUP_COUNT; g++)
        s += r->comm.counters[g].seconds;
    return s;
}

#endif
