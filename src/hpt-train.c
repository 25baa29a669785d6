/* hpt-train — train a Llama-style model. Parses options, calls
 * hpt_train_run() (lib/train.c). */
#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "comm.h"
#include "hpt_config.h"
#include "safetensors_write.h"
#include "train.h"

static void usage_output(FILE *f, const hpt_train_opts *d);

/* --help, first part: model, data, layout, batch and optimizer. */
static void usage(FILE *f, const hpt_train_opts *d)
{
    fprintf(f,
            "Usage: hpt-train [OPTION]...\n"
            "Train a Llama-style language model on token shards (llm.c format).\n\n"
            "Model and data:\n"
            "  --model NAME|PATH     preset (tiny, small, llama2-7b, llama2-13b, llama2-70b,\n"
            "                        llama3-8b, llama3-70b, llama3-405b) or a Hugging Face\n"
            "                        config.json\n"
            "                        [%s]\n"
            "  --tie-embeddings      share the LM head with the token embedding\n"
            "  --untie-embeddings    separate LM head (overrides the config) [config's value]\n"
            "  --data DIR|FILE|GLOB  training shards; a directory means DIR/train_*.bin [%s]\n"
            "  --val-data FILE|GLOB  validation shards [DIR/val_*.bin when --data is a directory]\n"
            "  --backend NAME        compute backend [%s]\n"
            "  --comm NAME           communication backend: mpi, nccl or auto (nccl with\n"
            "                        --backend cuda when built with NCCL and no two ranks\n"
            "                        share a GPU, else mpi; mpi stages GPU buffers through\n"
            "                        host memory) [auto]\n"
            "  --precision P         matrix products: fp32 (exact), tf32 (tensor cores,\n"
            "                        cuda backend) or bf16 (cuda backend: bf16 operands,\n"
            "                        fp32 accumulation and master weights) [fp32]\n"
            "  --init-from PATH      start from these weights instead of random ones: an\n"
            "                        --export HDF5 file, a .safetensors file (F32, BF16, F16),\n"
            "                        a model.safetensors.index.json or a directory holding\n"
            "                        either; optimizer fresh, step 0; a checkpoint to resume\n"
            "                        wins over it\n\n"
            "Parallel layout (world = TP x CP x DP x PP; run under mpiexec or srun):\n"
            "  --tp N                tensor parallel size (divides heads, kv heads, SwiGLU) [1]\n"
            "  --cp N                context parallel: ranks sharing each sequence (ring\n"
            "                        attention; 2 x CP must divide --seq-len; CPU backend) [1]\n"
            "  --pp N                pipeline parallel size (stages; at most the layers) [1]\n"
            "  --pp-schedule S       1f1b, gpipe, interleaved (--pp-virtual V) or zb-h1 [1f1b]\n"
            "  --pp-virtual V        interleaved: model chunks per pipeline rank [1]\n"
            "  --pp-split A,B,...    layers per stage [balanced]\n"
            "  --dp N                data parallel size [world size / (TP x CP x PP)]\n"
            "  --zero N              ZeRO stage over the DP ranks: 0 none, 1 AdamW state\n"
            "                        sharded, 2 also the gradients (reduce-scattered per\n"
            "                        bucket during backward), 3 also the parameters (each\n"
            "                        layer all-gathered before its forward and backward) [0]\n"
            "  --zero1               the same as --zero 1\n"
            "  --zero3-prefetch N    ZeRO-3: layers gathered ahead of the one computing [1]\n"
            "  --zero-shard-group N  HSDP: shard within groups of N DP ranks (a node), all-reduce\n"
            "                        the shards across the DP/N groups [DP]\n"
            "  --recompute [MODE]    activation recomputation in backward: full (the default\n"
            "                        MODE: keep only layer inputs) or selective (keep GEMM\n"
            "                        outputs, recompute attention core, norms, SwiGLU);\n"
            "                        none turns it off\n"
            "  --sequence-parallel   with --tp > 1: split the norms and the residual stream\n"
            "                        over the TP ranks along the tokens (TP must divide\n"
            "                        batch x seq-len); all-gather + reduce-scatter instead\n"
            "                        of all-reduce\n\n"
            "Batch and schedule:\n"
            "  --batch N             micro-batch size, sequences [%d]\n"
            "  --seq-len N           sequence length T, tokens [%d]\n"
            "  --grad-accum N        micro-batches per optimizer step [%d]\n"
            "  --steps N             optimizer steps [%d]\n"
            "  --lr X                peak learning rate [%g]\n"
            "  --min-lr X            final learning rate of the cosine decay [%g]\n"
            "  --warmup N            linear warm-up, steps [%d]\n"
            "  --beta1 X, --beta2 X  AdamW moment decay rates [%g, %g]\n"
            "  --adam-eps X          AdamW epsilon [%g]\n"
            "  --weight-decay X      decoupled weight decay on 2-D weights [%g]\n"
            "  --clip X              max global gradient L2 norm; 0 = no clipping [%g]\n"
            "  --seed N              seed of initialisation and data order [%llu]\n\n",
            d->model, d->data, d->backend, d->batch, d->seq_len, d->grad_accum, d->steps,
            d->optim.lr, d->optim.min_lr, d->optim.warmup, d->optim.beta1, d->optim.beta2,
            d->optim.eps, d->optim.weight_decay, d->optim.max_norm, (unsigned long long)d->seed);
    usage_output(f, d);
}

/* --help, second part: evaluation, output, checkpoints, metrics, exit
 * status. */
static void usage_output(FILE *f, const hpt_train_opts *d)
{
    fprintf(f,
            "Evaluation and output:\n"
            "  --eval-interval N     validate every N steps (0 = only at the end) [%d]\n"
            "  --eval-batches N      global batches per validation, at most one pass over\n"
            "                        the validation shards [%d, or fewer to fit them]\n"
            "  --run-dir DIR         write config.json and log.tsv (per-step loss, lr,\n"
            "                        grad norm, val loss) there; created if missing [none]\n"
            "  --max-skips N         stop after N consecutive non-finite steps [%d]\n"
            "  --fault-nan-steps L   testing: poison the gradients of steps L (e.g. 3,4)\n"
            "  --quiet               no per-step progress line\n"
            "  --export FILE         write the final weights (Hugging Face names) to HDF5,\n"
            "                        or, FILE ending in .safetensors, as Hugging Face\n"
            "                        safetensors with config.json beside it\n"
            "  --export-dtype D      f32 or bf16 (round to nearest even), safetensors [f32]\n"
            "  --export-shard-size B bytes per safetensors shard; more: shards and\n"
            "                        FILE.index.json [5000000000]\n"
            "  --save-every N        checkpoint every N steps (and at the end) [0: only on a\n"
            "                        stop signal or --max-runtime]\n"
            "  --checkpoint-dir DIR  checkpoints [RUN_DIR/checkpoints]\n"
            "  --keep N              checkpoints kept [%d]\n"
            "  --async-save          write the periodic checkpoints (--save-every) in the\n"
            "                        background, from a staging buffer (host memory of the\n"
            "                        rank's share of the checkpoint; docs/CHECKPOINT.md); the\n"
            "                        final and stop saves stay synchronous, so without\n"
            "                        --save-every it does nothing (a warning says so)\n"
            "  --resume MODE         auto: continue from the newest checkpoint that loads,\n"
            "                        falling back past damaged ones; strict: refuse a damaged\n"
            "                        one; none: start fresh [auto]\n"
            "  --max-runtime S       checkpoint and exit 75 before S seconds of wall time\n"
            "                        (needs --run-dir or --checkpoint-dir) [none]\n"
            "  --stop-at N           checkpoint after step N and exit 75, as if preempted\n"
            "                        (needs --run-dir or --checkpoint-dir)\n"
            "  --signals LIST        stop signals: checkpoint at the next step boundary (a\n"
            "                        validation stops at its next batch) and exit 75\n"
            "                        [USR1,TERM]\n"
            "  --no-signal-save      the stop signals keep their default action\n"
            "  --log-samples         write RUN_DIR/samples.<dp rank>.tsv: step, global position,\n"
            "                        sample index of every sequence trained on\n"
            "  --comm-stats          at the end, print communication per step and group\n"
            "                        (calls, bytes, seconds; also RUN_DIR/comm.tsv) and peak RSS\n"
            "  --print-config        print the resolved model config.json and exit\n\n"
            "Metrics (docs/METRICS.md):\n"
            "  --metrics FILE        per-step, per-rank metrics and events in HDF5 (SWMR);\n"
            "                        'none' = off [RUN_DIR/metrics.h5 with --run-dir]\n"
            "  --metrics-interval N  steps between gathering to rank 0 and flushing [%d]\n"
            "  --trace-steps A-B     step timeline of steps A..B on every rank into /trace\n"
            "                        (hpt-metrics trace RUN_DIR -o trace.json) [off]\n"
            "  --peak-flops X        peak FLOP/s of one rank, for MFU [CPU: 233e9 per node\n"
            "                        shared by its ranks]\n"
            "  --slow-rank-factor X  slow-rank event: compute time > X x median of ranks [%g]\n"
            "  --spike-factor X      gradient-norm spike: > X x running median [%g]\n"
            "  --alert RULE          e.g. 'grad_norm>10', 'loss>8', nonfinite: a job-log line\n"
            "                        and an alert event when it fires (docs/LIVE.md); repeatable\n"
            "  --event-window N      job log: more anomalies of a kind within N steps of its\n"
            "                        first are one line 'KIND xM more, steps A-B'; 0: all [%d]\n"
            "  --fault-nan-rank R    testing: --fault-nan-steps poison world rank R's only\n"
            "  --fault-slow-rank R   testing: world rank R sleeps --fault-slow-ms MS per step\n"
            "  --fault-anomaly KIND:A-B  testing: report grad_norm_spike or throughput_drop\n"
            "                        at every step A to B (needs the metrics file)\n"
            "  --collective-timeout S  hang watchdog: a communication call (or a step without\n"
            "                        progress) taking over S seconds dumps the flight\n"
            "                        recorders to RUN_DIR/hang and aborts the job with exit\n"
            "                        status 6; 0 = off [max(300, 10 x median step time)]\n"
            "  --fault-stall-rank R, --fault-stall-step S  testing: world rank R sleeps\n"
            "                        forever before the first collective of step S\n"
            "  --fault-stall-at WHERE  testing: step (as above), or that rank stops (SIGSTOP)\n"
            "                        at boundary, bucket (step S's first DP bucket), save\n"
            "                        (inside the save) or end (docs/ARCHITECTURE.md)\n"
            "  --help, --version\n\n"
            "Exit status: 0 done; 1 internal error; 2 bad option or model config;\n"
            "3 bad data (missing, truncated or malformed shard, token id >= vocab_size);\n"
            "4 stopped after --max-skips consecutive non-finite steps; 5 output not writable\n"
            "(--run-dir, --export, checkpoints, RUN_DIR/hang); 6 hang: the watchdog aborted\n"
            "the job (--collective-timeout; see `hpt-metrics hang RUN_DIR`); 75 checkpointed\n"
            "after a signal or --max-runtime: requeue the job (it resumes from the\n"
            "checkpoint).\n",
            d->eval_interval, d->eval_batches, d->max_skips, d->keep, d->metrics_interval,
            d->slow_factor, d->spike_factor, d->event_window);
}

enum {
    OPT_MODEL = 256, OPT_DATA, OPT_VAL, OPT_RUN_DIR, OPT_BACKEND, OPT_BATCH, OPT_SEQ, OPT_ACCUM,
    OPT_STEPS, OPT_LR, OPT_MIN_LR, OPT_WARMUP, OPT_B1, OPT_B2, OPT_EPS, OPT_WD, OPT_CLIP, OPT_SEED,
    OPT_EVAL_INT, OPT_EVAL_BATCHES, OPT_MAX_SKIPS, OPT_TIE, OPT_UNTIE, OPT_NAN, OPT_QUIET,
    OPT_PRINT_CONFIG, OPT_HELP, OPT_VERSION, OPT_TP, OPT_CP, OPT_PP, OPT_DP, OPT_ZERO1, OPT_ZERO, OPT_ZERO3_PREFETCH, OPT_ZERO_SHARD, OPT_EXPORT, OPT_RECOMPUTE, OPT_PP_SCHEDULE, OPT_PP_SPLIT, OPT_COMM_STATS, OPT_SAVE_EVERY, OPT_CKPT_DIR, OPT_KEEP,
    OPT_RESUME, OPT_MAX_RUNTIME, OPT_NO_SIGNAL_SAVE, OPT_STOP_AT, OPT_LOG_SAMPLES, OPT_SIGNALS,
    OPT_METRICS, OPT_METRICS_INT, OPT_PEAK, OPT_SLOW_F, OPT_SPIKE_F, OPT_NAN_RANK, OPT_SLOW_RANK,
    OPT_SLOW_MS, OPT_INIT_FROM, OPT_ALERT, OPT_COLL_TIMEOUT, OPT_STALL_RANK, OPT_STALL_STEP,
    OPT_STALL_AT, OPT_TRACE_STEPS, OPT_ASYNC_SAVE, OPT_PRECISION, OPT_COMM, OPT_SEQ_PAR, OPT_EXPORT_DTYPE,
    OPT_EXPORT_SHARD, OPT_EVENT_WINDOW, OPT_FAULT_ANOMALY, OPT_PP_VIRTUAL,
};

static const struct option long_opts[] = {
    {"model", 1, 0, OPT_MODEL}, {"data", 1, 0, OPT_DATA}, {"val-data", 1, 0, OPT_VAL},
    {"run-dir", 1, 0, OPT_RUN_DIR}, {"backend", 1, 0, OPT_BACKEND}, {"batch", 1, 0, OPT_BATCH},
    {"seq-len", 1, 0, OPT_SEQ}, {"grad-accum", 1, 0, OPT_ACCUM}, {"steps", 1, 0, OPT_STEPS},
    {"lr", 1, 0, OPT_LR}, {"min-lr", 1, 0, OPT_MIN_LR}, {"warmup", 1, 0, OPT_WARMUP},
    {"beta1", 1, 0, OPT_B1}, {"beta2", 1, 0, OPT_B2}, {"adam-eps", 1, 0, OPT_EPS},
    {"weight-decay", 1, 0, OPT_WD}, {"clip", 1, 0, OPT_CLIP}, {"seed", 1, 0, OPT_SEED},
    {"eval-interval", 1, 0, OPT_EVAL_INT}, {"eval-batches", 1, 0, OPT_EVAL_BATCHES},
    {"max-skips", 1, 0, OPT_MAX_SKIPS}, {"tie-embeddings", 0, 0, OPT_TIE},
    {"untie-embeddings", 0, 0, OPT_UNTIE}, {"fault-nan-steps", 1, 0, OPT_NAN},
    {"quiet", 0, 0, OPT_QUIET}, {"print-config", 0, 0, OPT_PRINT_CONFIG}, {"help", 0, 0, OPT_HELP},
    {"version", 0, 0, OPT_VERSION}, {"tp", 1, 0, OPT_TP}, {"pp", 1, 0, OPT_PP},
    {"cp", 1, 0, OPT_CP}, {"dp", 1, 0, OPT_DP}, {"zero1", 0, 0, OPT_ZERO1},
    {"zero", 1, 0, OPT_ZERO},
    {"zero3-prefetch", 1, 0, OPT_ZERO3_PREFETCH}, {"zero-shard-group", 1, 0, OPT_ZERO_SHARD},
    {"export", 1, 0, OPT_EXPORT}, {"recompute", 2, 0, OPT_RECOMPUTE},
    {"sequence-parallel", 0, 0, OPT_SEQ_PAR}, {"pp-schedule", 1, 0, OPT_PP_SCHEDULE},
    {"pp-virtual", 1, 0, OPT_PP_VIRTUAL},
    {"pp-split", 1, 0, OPT_PP_SPLIT}, {"comm-stats", 0, 0, OPT_COMM_STATS},
    {"save-every", 1, 0, OPT_SAVE_EVERY}, {"checkpoint-dir", 1, 0, OPT_CKPT_DIR},
    {"keep", 1, 0, OPT_KEEP}, {"resume", 1, 0, OPT_RESUME}, {"max-runtime", 1, 0, OPT_MAX_RUNTIME},
    {"no-signal-save", 0, 0, OPT_NO_SIGNAL_SAVE}, {"stop-at", 1, 0, OPT_STOP_AT},
    {"log-samples", 0, 0, OPT_LOG_SAMPLES}, {"signals", 1, 0, OPT_SIGNALS},
    {"metrics", 1, 0, OPT_METRICS}, {"metrics-interval", 1, 0, OPT_METRICS_INT},
    {"peak-flops", 1, 0, OPT_PEAK}, {"slow-rank-factor", 1, 0, OPT_SLOW_F},
    {"spike-factor", 1, 0, OPT_SPIKE_F}, {"fault-nan-rank", 1, 0, OPT_NAN_RANK},
    {"fault-slow-rank", 1, 0, OPT_SLOW_RANK}, {"fault-slow-ms", 1, 0, OPT_SLOW_MS},
    {"init-from", 1, 0, OPT_INIT_FROM}, {"alert", 1, 0, OPT_ALERT},
    {"collective-timeout", 1, 0, OPT_COLL_TIMEOUT}, {"fault-stall-rank", 1, 0, OPT_STALL_RANK},
    {"fault-stall-step", 1, 0, OPT_STALL_STEP}, {"fault-stall-at", 1, 0, OPT_STALL_AT},
    {"trace-steps", 1, 0, OPT_TRACE_STEPS}, {"event-window", 1, 0, OPT_EVENT_WINDOW},
    {"fault-anomaly", 1, 0, OPT_FAULT_ANOMALY}, {"async-save", 0, 0, OPT_ASYNC_SAVE},
    {"precision", 1, 0, OPT_PRECISION}, {"comm", 1, 0, OPT_COMM},
    {"export-dtype", 1, 0, OPT_EXPORT_DTYPE}, {"export-shard-size", 1, 0, OPT_EXPORT_SHARD},
    {0, 0, 0, 0},
};

/* Apply one option; *action is set to 1 for --help, 2 for --version, 3 for
 * --print-config. */
static hpt_status apply(hpt_train_opts *o, int c, const char *arg, int *action)
{
    const char *name = hpt_cli_opt_name(long_opts, c);
    switch (c) {
    case OPT_MODEL: o->model = arg; return HPT_OK;
    case OPT_DATA: o->data = arg; return HPT_OK;
    case OPT_VAL: o->val_data = arg; return HPT_OK;
    case OPT_RUN_DIR: o->run_dir = arg; return HPT_OK;
    case OPT_BACKEND: o->backend = arg; return HPT_OK;
    case OPT_COMM: o->comm = arg; return HPT_OK;
    case OPT_PRECISION: return hpt_precision_parse(arg, &o->precision);
    case OPT_BATCH: return hpt_cli_parse_int(name, arg, &o->batch);
    case OPT_SEQ: return hpt_cli_parse_int(name, arg, &o->seq_len);
    case OPT_ACCUM: return hpt_cli_parse_int(name, arg, &o->grad_accum);
    case OPT_STEPS: return hpt_cli_parse_int(name, arg, &o->steps);
    case OPT_LR: return hpt_cli_parse_float(name, arg, &o->optim.lr);
    case OPT_MIN_LR: return hpt_cli_parse_float(name, arg, &o->optim.min_lr);
    case OPT_WARMUP: return hpt_cli_parse_int(name, arg, &o->optim.warmup);
    case OPT_B1: return hpt_cli_parse_float(name, arg, &o->optim.beta1);
    case OPT_B2: return hpt_cli_parse_float(name, arg, &o->optim.beta2);
    case OPT_EPS: return hpt_cli_parse_float(name, arg, &o->optim.eps);
    case OPT_WD: return hpt_cli_parse_float(name, arg, &o->optim.weight_decay);
    case OPT_CLIP: return hpt_cli_parse_float(name, arg, &o->optim.max_norm);
    case OPT_SEED: return hpt_cli_parse_u64(name, arg, &o->seed);
    case OPT_EVAL_INT: return hpt_cli_parse_int(name, arg, &o->eval_interval);
    case OPT_EVAL_BATCHES: o->eval_batches_default = 0; return hpt_cli_parse_int(name, arg, &o->eval_batches);
    case OPT_MAX_SKIPS: return hpt_cli_parse_int(name, arg, &o->max_skips);
    case OPT_TIE: o->tie_embeddings = 1; return HPT_OK;
    case OPT_UNTIE: o->tie_embeddings = 0; return HPT_OK;
    case OPT_NAN: o->nan_steps = arg; return HPT_OK;
    case OPT_QUIET: o->quiet = 1; return HPT_OK;
    case OPT_TP: return hpt_cli_parse_int(name, arg, &o->tp);
    case OPT_PP: return hpt_cli_parse_int(name, arg, &o->pp);
    case OPT_DP: return hpt_cli_parse_int_min(name, arg, 1, "omit --dp to infer it", &o->dp);
    case OPT_CP: return hpt_cli_parse_int_min(name, arg, 1, "ranks per sequence", &o->cp);
    case OPT_ZERO1:
    case OPT_ZERO:
        return hpt_cli_zero_option(c == OPT_ZERO ? arg : NULL, &o->zero, &o->zero_given,
                                   &o->zero1_given);
    case OPT_ZERO_SHARD:
        return hpt_cli_parse_int_min(name, arg, 1, HPT_CLI_SHARD_WHAT, &o->zero_shard_group);
    case OPT_ZERO3_PREFETCH:
        return hpt_cli_parse_int_min(name, arg, 0, "layers gathered ahead; 0: each when used",
                                     &o->zero3_prefetch);
    case OPT_ASYNC_SAVE: o->async_save = 1; return HPT_OK;
    case OPT_EXPORT: o->export_path = arg; return HPT_OK;
    case OPT_EXPORT_DTYPE: {
        hpt_st_out_dtype dt;
        hpt_status st = hpt_st_out_dtype_parse("--export-dtype", arg, &dt);
        o->export_bf16 = dt == HPT_ST_OUT_BF16, o->export_dtype_given = 1;
        return st;
    }
    case OPT_EXPORT_SHARD: {
        hpt_status st = hpt_cli_parse_u64(name, arg, &o->export_shard_size);
        return st || o->export_shard_size ? st
                                          : hpt_error_set(HPT_ERR_USAGE, "--%s 0: must be >= 1 "
                                                          "(bytes per shard)", name);
    }
    case OPT_INIT_FROM: o->init_from = arg; return HPT_OK;
    case OPT_RECOMPUTE: return hpt_recompute_parse(arg, &o->recompute);
    case OPT_SEQ_PAR: o->sequence_parallel = 1; return HPT_OK;
    case OPT_PP_SPLIT: o->pp_split = arg; return HPT_OK;
    case OPT_COMM_STATS: o->comm_stats = 1; return HPT_OK;
    case OPT_SAVE_EVERY: return hpt_cli_parse_int(name, arg, &o->save_every);
    case OPT_STOP_AT: return hpt_cli_parse_int(name, arg, &o->stop_at);
    case OPT_LOG_SAMPLES: o->log_samples = 1; return HPT_OK;
    case OPT_SIGNALS: o->signals = arg; return HPT_OK;
    case OPT_METRICS: o->metrics = arg; return HPT_OK;
    case OPT_METRICS_INT: return hpt_cli_parse_int(name, arg, &o->metrics_interval);
    case OPT_NAN_RANK: return hpt_cli_parse_int(name, arg, &o->fault_nan_rank);
    case OPT_SLOW_RANK: return hpt_cli_parse_int(name, arg, &o->fault_slow_rank);
    case OPT_PEAK: return hpt_cli_parse_double(name, arg, &o->peak_flops);
    case OPT_SLOW_F: return hpt_cli_parse_double(name, arg, &o->slow_factor);
    case OPT_SPIKE_F: return hpt_cli_parse_double(name, arg, &o->spike_factor);
    case OPT_EVENT_WINDOW: return hpt_cli_parse_int(name, arg, &o->event_window);
    case OPT_FAULT_ANOMALY: return hpt_train_opts_fault_anomaly(o, arg);
    case OPT_ALERT:
        if (o->nalerts == HPT_ALERT_MAX)
            return hpt_error_set(HPT_ERR_USAGE, "--alert '%s': at most %d rules", arg,
                                 HPT_ALERT_MAX);
        if (hpt_alert_parse(arg, &o->alerts[o->nalerts]))
            return HPT_ERR_USAGE;
        o->nalerts++;
        return HPT_OK;
    case OPT_SLOW_MS: return hpt_cli_parse_double(name, arg, &o->fault_slow_ms);
    case OPT_CKPT_DIR: o->ckpt_dir = arg; return HPT_OK;
    case OPT_COLL_TIMEOUT: {
        hpt_status st = hpt_cli_parse_double(name, arg, &o->collective_timeout);
        if (!st && o->collective_timeout < 0)
            return hpt_error_set(HPT_ERR_USAGE, "--collective-timeout %s: must be >= 0 seconds "
                                 "(0 = off)", arg);
        return st;
    }
    case OPT_STALL_RANK: return hpt_cli_parse_int(name, arg, &o->fault_stall_rank);
    case OPT_STALL_STEP: return hpt_cli_parse_int(name, arg, &o->fault_stall_step);
    case OPT_STALL_AT: return hpt_train_opts_choice(o, "fault-stall-at", arg);
    case OPT_TRACE_STEPS: o->trace_steps = arg; return HPT_OK;
    case OPT_KEEP: return hpt_cli_parse_int(name, arg, &o->keep);
    case OPT_NO_SIGNAL_SAVE: o->save_signals = 0; return HPT_OK;
    case OPT_MAX_RUNTIME: return hpt_cli_parse_double(name, arg, &o->max_runtime);
    case OPT_RESUME: return hpt_train_opts_choice(o, "resume", arg);
    case OPT_PP_SCHEDULE: return hpt_train_opts_choice(o, "pp-schedule", arg);
    case OPT_PP_VIRTUAL: return hpt_cli_parse_int(name, arg, &o->pp_virtual);
    case OPT_PRINT_CONFIG: *action = 3; return HPT_OK;
    case OPT_HELP: *action = 1; return HPT_OK;
    case OPT_VERSION: *action = 2; return HPT_OK;
    default:
        return hpt_error_set(HPT_ERR_USAGE, "unknown or incomplete option (see hpt-train --help)");
    }
}

static hpt_status apply_cb(void *ctx, int c, const char *arg, int *action)
{
    return apply(ctx, c, arg, action);
}

static hpt_status parse_args(int argc, char **argv, hpt_train_opts *o, int *action)
{
    return hpt_cli_parse(argc, argv, long_opts, "hpt-train", OPT_HELP, apply_cb, o, action);
}

int main(int argc, char **argv)
{
    /* FUNNELED: --async-save's writer threads make no MPI calls, but MPI
     * is told they exist */
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int rank, action = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    hpt_train_opts o, defaults;
    hpt_train_opts_default(&o);
    defaults = o;
    hpt_status st = parse_args(argc, argv, &o, &action);
    st = hpt_train_opts_agree_parse(MPI_COMM_WORLD, st, action);
    /* --help, --version and --print-config print on rank 0 and never train
     * on any rank. */
    if (!st && action == 1) {
        if (rank == 0)
            usage(stdout, &defaults);
    } else if (!st && action == 2) {
        if (rank == 0)
            printf("hpt-train (hpt) %s\n", PACKAGE_VERSION);
    } else if (!st && action == 3) {
        st = hpt_train_opts_print_config(&o, rank == 0 ? stdout : NULL);
    } else if (!st) {
        st = hpt_train_run(MPI_COMM_WORLD, stdout, &o);
    }
    if (st && rank == 0)
        fprintf(stderr, "hpt-train: %s\n", hpt_error_msg());
    fflush(stdout);
    MPI_Finalize();
    return hpt_status_exit_code(st);
}
