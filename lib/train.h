/* train.h — the training loop: data, model, optimizer, progress and
 * validation, on an MPI communicator (one rank in this release). */
#ifndef HPT_TRAIN_H
#define HPT_TRAIN_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#include "alert.h"
#include "optim.h"

typedef struct {
    const char *model;     /* preset name or config.json path ("small")     */
    const char *data;      /* directory with train_*.bin, a shard or a glob */
    const char *val_data;  /* validation shards (default: DIR/val_*.bin)    */
    const char *run_dir;   /* output directory (created); NULL = none       */
    const char *backend;   /* compute backend name ("cpu")                  */
    hpt_precision precision; /* arithmetic of the matrix products (FP32)    */
    const char *comm;      /* communication backend: "mpi", "nccl" or "auto"  */
    int batch;             /* micro-batch size B (sequences)                */
    int seq_len;           /* T (tokens)                                    */
    int grad_accum;        /* micro-batches per optimizer step              */
    int steps;             /* optimizer steps                               */
    hpt_optim_opts optim;  /* lr, min_lr, warmup, betas, eps, wd, max_norm  */
    uint64_t seed;         /* initialisation and data order                 */
    int eval_interval;     /* steps between validations; 0 = only at end    */
    int eval_batches;      /* global batches per validation                 */
    int eval_batches_default; /* 1: eval_batches is the default, lowered (with
                            * a note) to what a small validation set holds */
    int max_skips;         /* consecutive non-finite steps before stopping  */
    int tie_embeddings;    /* -1 = config's value, 0/1 override             */
    const char *nan_steps; /* fault injection for tests: "3,4" poison grads  */
    const char *export_path; /* write final weights (HF names) to this HDF5,
                            * or safetensors when it ends in .safetensors */
    int export_bf16;       /* --export-dtype bf16 (safetensors only)        */
    int export_dtype_given; /* --export-dtype was given                     */
    uint64_t export_shard_size; /* --export-shard-size bytes; 0 = 5 GB      */
    const char *init_from; /* initial weights: --export HDF5, safetensors file,
                            * index or directory (lib/init_from.h); NULL =
                            * random. A resumed checkpoint wins over it.   */
    int tp, pp, dp;        /* layout; dp <= 0: inferred from the world size */
    int cp;                /* context parallel: ranks sharing one sequence
                            * (ring attention, lib/attention_ring.h) [1]   */
    int zero;              /* ZeRO stage over the DP ranks (Rajbhandari et al.
                            * 2020, section 5.1): 0 none, 1 AdamW state
                            * sharded, 2 also the reduced gradients, 3 also
                            * the parameters (lib/train_zero3.h)          */
    int zero3_prefetch;    /* ZeRO-3: units gathered ahead of use [1]       */
    int zero_shard_group;  /* HSDP: shard the ZeRO state within groups of
                            * this many DP ranks, replicate across them; 0:
                            * one group of all DP ranks                    */
    int zero_given;        /* --zero N was given (its stage + 1)            */
    int zero1_given;       /* --zero1 was given                             */
    int recompute;         /* hpt_recompute (lib/model.h): 0 none, 1 full, 2 selective */
    int sequence_parallel; /* split norms and residual over TP (TP > 1 only) */
    int pp_schedule;       /* --pp-schedule, hpt_plan_schedule (lib/plan.h):
                            * 1F1B, GPipe, interleaved (Megatron's, over
                            * pp_virtual model chunks per rank) or ZB-H1
                            * (Qi et al. 2024: backward split into B and a
                            * deferred W)                                  */
    int pp_virtual;        /* --pp-virtual V: model chunks per pipeline rank [1] */
    int comm_stats;        /* print per-group communication per step        */
    /* checkpoints (docs/CHECKPOINT.md) */
    const char *ckpt_dir;  /* default RUN_DIR/checkpoints                    */
    int save_every;        /* steps between checkpoints; 0 = only on signal  */
    int keep;              /* checkpoints kept                               */
    int async_save;        /* 1: periodic saves written in the background    */
    int resume;            /* 0 none, 1 auto (fall back if damaged), 2 strict */
    double max_runtime;    /* seconds; save and exit 75 before it; 0 = none  */
    int save_signals;      /* 1: the stop signals checkpoint and exit 75     */
    const char *signals;   /* stop signals, e.g. "USR1,TERM" (the default)   */
    int log_samples;       /* RUN_DIR/samples.<dp>.tsv: step, position, sample */
    int stop_at;           /* checkpoint after this step and exit 75 (as if
                            * preempted); 0 = never                          */
    const char *pp_split;  /* layers per stage "a,b,..."; NULL = balanced   */
    int quiet;             /* 1: no per-step progress line                  */
    /* metrics (docs/METRICS.md) */
    const char *metrics;   /* metrics file; default RUN_DIR/metrics.h5; "none" = off */
    int metrics_interval;  /* steps between gathers and file flushes          */
    const char *trace_steps; /* --trace-steps "A-B": the step timeline into the
                              * metrics file's /trace (lib/trace.h); NULL = off */
    double peak_flops;     /* FLOP/s per rank for MFU; 0 = backend default     */
    double slow_factor;    /* slow-rank event: busy > factor x median over ranks */
    double spike_factor;   /* grad-norm spike: > factor x running median        */
    int fault_nan_rank;    /* testing: --fault-nan-steps poison only this world
                            * rank's gradients (before the DP reduction); -1 all */
    int fault_slow_rank;   /* testing: this world rank sleeps fault_slow_ms per step */
    double fault_slow_ms;
    int event_window;      /* job log: one line per anomaly kind per window of
                            * N steps, then "xN more" (lib/event_window.h); 0 =
                            * every occurrence                                 */
    const char *fault_anomaly; /* testing: "KIND:A-B" as given (--fault-anomaly) */
    int fault_anomaly_kind;    /* its HPT_FAULT_ANOMALY_* (metrics.h); 0 = none */
    int fault_anomaly_from, fault_anomaly_to; /* its steps A, B                */
    hpt_alert_rule alerts[HPT_ALERT_MAX]; /* --alert rules (lib/alert.h)       */
    int nalerts;
    /* hang watchdog (lib/watchdog.h) */
    double collective_timeout; /* seconds; 0 = off; < 0 = max(300, 10 x median step) */
    int fault_stall_rank;  /* testing: this world rank sleeps forever before the */
    int fault_stall_step;  /* first collective of this step (1-based)           */
    int fault_stall_at;    /* where (hpt_stall_at): HPT_STALL_AT_STEP as above;
                            * the others stop that rank itself with SIGSTOP
                            * (watchdog thread too, as a frozen process):
                            * BOUNDARY after that step, before the stop
                            * agreement; BUCKET in that step's backward, just
                            * after its first DP bucket all-reduce is posted
                            * (DP > 1 without ZeRO-1); SAVE inside the
                            * checkpoint save after that step, between the
                            * file's collective create and its close; END
                            * after the run's last step when that is step
                            * fault_stall_step, before the end-of-run
                            * replica check (TP > 1, or PP > 1 with tied
                            * embeddings: a collective follows)             */
} hpt_train_opts;

/* --fault-stall-at (testing): where the stalled rank stops. */
typedef enum {
    HPT_STALL_AT_STEP,
    HPT_STALL_AT_BOUNDARY,
    HPT_STALL_AT_BUCKET,
    HPT_STALL_AT_SAVE,
    HPT_STALL_AT_END
} hpt_stall_at;
/* Their option spellings, indexed by hpt_stall_at: step, boundary, bucket,
 * save, end. */
extern const char *const hpt_stall_at_names[5];

/* Fill *o with the defaults documented in `hpt-train --help`. */
void hpt_train_opts_default(hpt_train_opts *o);

/* The options that take one word of a fixed set: "fault-stall-at"
 * (hpt_stall_at_names), "resume" (auto, strict, none), "pp-schedule"
 * (1f1b, gpipe, interleaved, zb-h1); sets the field of o. Errors: HPT_ERR_USAGE "--OPT 'ARG':
 * expected ..." naming the accepted words. */
hpt_status hpt_train_opts_choice(hpt_train_opts *o, const char *opt, const char *arg);

/* --fault-anomaly KIND:A-B (testing): the anomaly KIND (grad_norm_spike or
 * throughput_drop) forced at every step A..B (1 <= A <= B) into
 * o->fault_anomaly*. Errors: HPT_ERR_USAGE naming the option, the value
 * and the expected form. */
hpt_status hpt_train_opts_fault_anomaly(hpt_train_opts *o, const char *arg);

/* Every rank of `comm` must have parsed the same arguments: a rank whose
 * own failed to parse (st), or that alone was given --help, --version or
 * --print-config (action: 0 train, 1 help, 2 version, 3 print-config),
 * would leave the others waiting in the run's first collective.
 * Collective. Returns the first rank's error, or HPT_ERR_USAGE when the
 * actions differ; HPT_OK otherwise (the run then compares the options
 * themselves). */
hpt_status hpt_train_opts_agree_parse(MPI_Comm comm, hpt_status st, int action);

/* --print-config: resolve o->model (and --tie/--untie-embeddings) on
 * every rank, the same verdict everywhere, and write the config JSON to
 * out (rank 0; NULL elsewhere). Errors: those of hpt_config_resolve. */
hpt_status hpt_train_opts_print_config(const hpt_train_opts *o, FILE *out);

/* Check option values (sizes > 0, lr > 0, ...). Errors: HPT_ERR_USAGE
 * naming the option, the value and the rule. */
hpt_status hpt_train_opts_validate(const hpt_train_opts *o);

/* Train as configured by *o on `comm` (collective), printing progress to
 * `out` on rank 0 only. Data parallelism: each of the DP ranks takes its
 * own micro-batches from the global sample order, gradients are summed
 * with bucketed nonblocking all-reduces started during backward (or
 * reduce-scattered with ZeRO-1), and the loss is averaged over the global
 * batch's tokens. Returns the same status on every rank, with
 * hpt_error_msg() set everywhere; the caller prints it on rank 0 and exits
 * with hpt_status_exit_code(). */
hpt_status hpt_train_run(MPI_Comm comm, FILE *out, const hpt_train_opts *o);

#endif
