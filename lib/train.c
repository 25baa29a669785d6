/* train.c — hpt_train_run: setup, the step loop and its records (progress,
 * log.tsv rows, metrics points, save points); see train.h. The rest of
 * the trainer is one wing of lib/train_*.c, each with its own header:
 * options (train_opts.c), stop signals (train_signals.c), the run
 * directory (train_rundir.c), the pipeline schedule (train_pipeline.c),
 * the DP gradient buckets (train_dp_buckets.c), checkpoints and resume
 * (train_ckpt.c), the weight export and the replica checks
 * (train_export.c), the metrics file and --comm-stats (train_metrics.c);
 * shared state: train_state.h. Only this file includes them all. */
#include "plan.h"
#include "train.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hpt_config.h"
#include "fsutil.h"
#include "init_from.h"
#include "prep.h"
#include "ckpt_read.h"
#include "train_ckpt.h"
#include "train_dp_buckets.h"
#include "train_export.h"
#include "train_metrics.h"
#include "train_opts.h"
#include "train_pipeline.h"
#include "train_rundir.h"
#include "train_signals.h"
#include "train_state.h"
#include "train_zero3.h"
#include "attention_ring.h"
#include "trace.h"
#include "watchdog.h"

static void format_eta(char *buf, size_t n, double s)
{
    long t = (long)(s + 0.5);
    snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
}

/* ------------------------------------------------------------ the run */

static void run_free(run_state *r)
{
    zero3_free(r);
    if (r->model.be) {
        r->model.be->free(r->grad_shard);
        r->model.be->free(r->rs_tmp);
        r->model.be->free(r->sumsq_dev);
        r->model.be->free(r->grad_send);
    }
    free(r->layer_stage);
    free(r->sumsq_per);
    free(r->slot_of);
    free(r->free_slot);
    free(r->free_head);
    if (r->samples)
        fclose(r->samples);
    free(r->fwd_req);
    free(r->bwd_req);
    free(r->fwd_busy);
    free(r->bwd_busy);
    hpt_ckpt_async_free(r->async);
    hpt_comm_stage_off(&r->comm);
    hpt_comm_nccl_off(&r->comm);
    hpt_model_free(&r->model);
    hpt_optim_free(&r->opt);
    hpt_loader_close(r->train);
    hpt_loader_close(r->val);
    free(r->inputs);
    free(r->targets);
    free(r->shard_counts);
    free(r->bucket_counts);
    free(r->deferred);
    free(r->bucket_range);
    free(r->bucket_own);
    hpt_watchdog_stop(r->watchdog);
    hpt_trace_free(r->trace); /* before the flight recorder it captures from */
    if (r->log)
        fclose(r->log);
    hpt_comm_free(&r->comm);
}

/* Whether directory `dir` holds a val*.bin shard. */
static int has_val_shards(const char *dir)
{
    char pat[4096];
    glob_t g;
    snprintf(pat, sizeof pat, "%s/val*.bin", dir);
    int found = glob(pat, 0, NULL, &g) == 0 && g.gl_pathc > 0;
    globfree(&g);
    return found;
}

/* The global batch must fit in one epoch of the training data. */
static hpt_status check_epoch(const run_state *r, const hpt_train_opts *o)
{
    long long G = (long long)o->batch * o->grad_accum * r->comm.dp;
    long long S = (long long)hpt_loader_num_samples(r->train);
    if (G > S)
        return hpt_error_set(HPT_ERR_USAGE,
                             "global batch of %lld sequences (--batch %d x --grad-accum %d x DP %d) "
                             "exceeds the %lld samples of %d+1 tokens in %s",
                             G, o->batch, o->grad_accum, r->comm.dp, S, o->seq_len, o->data);
    return HPT_OK;
}

/* One validation pass must not repeat sequences: --eval-batches global
 * batches fit in the validation shards (a single batch may wrap around a
 * set smaller than it). Without this bound 2^31 batches were accepted and
 * the final validation never ended. */
static hpt_status check_eval(const run_state *r, hpt_train_opts *o)
{
    if (!r->val)
        return HPT_OK;
    long long G = (long long)o->batch * o->grad_accum * r->comm.dp;
    long long S = (long long)hpt_loader_num_samples(r->val);
    if (S < G && (o->eval_batches <= 1 || o->eval_batches_default)) { /* said, not refused */
        if (r->root)
            fprintf(stderr, "hpt-train: warning: the validation set holds %lld sample%s of %d+1 "
                    "tokens, fewer than one global batch of %lld sequences: every validation "
                    "repeats %s (more validation text avoids that)\n", S,
                    S == 1 ? "" : "s", o->seq_len, G, S == 1 ? "it" : "some of them");
        o->eval_batches = 1;
        return HPT_OK;
    }
    if (o->eval_batches_default && o->eval_batches > 1 && o->eval_batches > S / G) {
        int fit = S / G > 1 ? (int)(S / G) : 1; /* the default, not the user's: fit it */
        if (r->root)
            fprintf(stderr, "hpt-train: note: validating on %d global batch%s of %lld sequences, "
                    "not the default %d: the validation set holds %lld samples of %d+1 tokens "
                    "(--eval-batches N to choose)\n", fit, fit > 1 ? "es" : "", G,
                    o->eval_batches, S, o->seq_len);
        o->eval_batches = fit;
    }
    if (o->eval_batches > 1 && o->eval_batches > S / G)
        return hpt_error_set(HPT_ERR_USAGE,
                             "--eval-batches %d: %d global batches of %lld sequences exceed the "
                             "%lld validation samples of %d+1 tokens (validation would repeat "
                             "them): use at most %lld", o->eval_batches, o->eval_batches, G, S,
                             o->seq_len, S / G > 1 ? S / G : 1);
    return HPT_OK;
}

static hpt_status open_data(run_state *r, const hpt_train_opts *o)
{
    hpt_status st;
    struct stat sb;
    int is_dir = stat(o->data, &sb) == 0 && S_ISDIR(sb.st_mode);
    int tok_vocab = is_dir ? hpt_prep_vocab_size(o->data) : -1, V = r->cfg.vocab_size;
    if (tok_vocab > V) /* the shards' ids would be refused one by one: say why */
        return hpt_error_set(HPT_ERR_DATA, "%s: its tokenizer has %d pieces (prep.json) but the "
                             "model's vocabulary is %d: give --model a config.json with \"vocab_size\": %d or "
                             "more", o->data,
                             tok_vocab, V, tok_vocab);
    if (tok_vocab > 0 && V > (tok_vocab + 127) / 128 * 128 && r->root)
        fprintf(stderr, "hpt-train: note: the model's vocabulary (%d) is larger than %s's "
                "tokenizer (%d pieces, prep.json): ids %d..%d never occur and only take memory "
                "and compute (a --model config.json with \"vocab_size\": %d would do)\n", V, o->data, tok_vocab, tok_vocab,
                V - 1, (tok_vocab + 127) / 128 * 128);
    if ((st = hpt_loader_open(&r->train, o->data, is_dir ? "train" : NULL, o->seq_len,
                              r->cfg.vocab_size, o->seed, 1)))
        return st;
    const char *val = o->val_data;
    if (!val && is_dir && has_val_shards(o->data))
        val = o->data;
    else if (!val && is_dir && r->root)
        fprintf(stderr, "hpt-train: note: %s has no val*.bin shard: training without validation\n",
                o->data);
    if (val && (st = hpt_loader_open(&r->val, val, is_dir && !o->val_data ? "val" : NULL,
                                     o->seq_len, r->cfg.vocab_size, o->seed, 0)))
        return st;
    return HPT_OK;
}

/* ZeRO-1, 2 and 3: parameter range [lo, hi) owned by this DP rank,
 * contiguous blocks of ceil(nparams/DP) elements in rank order (the last
 * ones shorter or empty when DP does not divide nparams), and the buffer
 * of this rank's reduced gradients, grad_shard (ceil(nparams/DP) floats). */
static hpt_status setup_zero(run_state *r, int stage, int micro_batches, size_t *lo, size_t *hi)
{
    int D = r->comm.group_size[HPT_GROUP_DPS], me = r->comm.group_rank[HPT_GROUP_DPS];
    size_t n = r->model.nparams, S = (n + D - 1) / D;
    if (S > 2147483647u)
        return hpt_error_set(HPT_ERR_USAGE, "--zero %d: shard of %zu elements exceeds 2^31",
                             stage, S);
    r->shard_counts = calloc((size_t)D, sizeof(int));
    if (!r->shard_counts)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    for (int i = 0; i < D; i++) {
        size_t a = (size_t)i * S < n ? (size_t)i * S : n, b = a + S < n ? a + S : n;
        r->shard_counts[i] = (int)(b - a);
    }
    *lo = (size_t)me * S < n ? (size_t)me * S : n;
    *hi = *lo + (size_t)r->shard_counts[me];
    r->grad_shard = r->model.be->alloc(sizeof(float) * (S ? S : 1));
    if (!r->grad_shard)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    return stage >= 2 ? dp_buckets_zero2_init(r, micro_batches) : HPT_OK;
}

static void abort_nccl(void *comm) { hpt_comm_nccl_abort(comm); }

/* --comm: the communication backend for the compute backend `be`
 * (collective over the world: the NCCL set-up agrees on its result). A
 * backend with device memory (is_device) gets NCCL (auto, when built with
 * it) or MPI behind host staging (lib/comm_stage.c); a host backend MPI. */
static hpt_status choose_comm(run_state *r, const hpt_train_opts *o, const hpt_backend *be)
{
    const char *c = o->comm;
    int device = be->is_device != NULL, size1;
    hpt_status st = hpt_nccl_size1_env(&size1); /* a bad value is refused with any --comm */
    if (st)
        return st;
#ifdef HAVE_NCCL
    int have_nccl = 1;
#else
    int have_nccl = 0;
#endif
    if (!strcmp(c, "auto")) {
        c = device && have_nccl ? "nccl" : "mpi"; /* CP's ring too: its edge pairs */
        /* ranks sharing a GPU (more tasks than GPUs on a node): NCCL would
         * refuse them, MPI with host staging works (the launcher's rule,
         * slurm/launch.sh); same answer on every rank */
        char why[512];
        if (!strcmp(c, "nccl") && hpt_comm_nccl_gpus_shared(&r->comm, why, sizeof why) != 0)
            c = "mpi";
    }
    if (!strcmp(c, "nccl")) {
        if (!device)
            return hpt_error_set(HPT_ERR_USAGE, "--comm nccl: --backend %s keeps its buffers in "
                                 "host memory (use --comm mpi)", be->name);
        return hpt_comm_nccl_on(&r->comm);
    }
    if (device)
        hpt_comm_stage_on(&r->comm, &r->stage, be->is_device, be->download, be->upload);
    return HPT_OK;
}

/* Setup, part 1: checks that need no communication. */
static hpt_status setup_local(run_state *r, const hpt_train_opts *o, const hpt_backend **be)
{
    hpt_status st;
    if ((st = hpt_train_opts_validate(o)) || (st = hpt_flight_check_env()) ||
        (st = hpt_ckpt_check_env()) ||
        (st = hpt_config_resolve(o->model, &r->cfg)))
        return st;
    if (o->tie_embeddings >= 0)
        r->cfg.tie_word_embeddings = o->tie_embeddings;
    if (o->seq_len > r->cfg.max_position_embeddings)
        return hpt_error_set(HPT_ERR_USAGE,
                             "--seq-len %d exceeds max_position_embeddings = %d of model '%s'",
                             o->seq_len, r->cfg.max_position_embeddings, o->model);
    if ((st = hpt_backend_get(o->backend, be)) ||
        (st = hpt_backend_set_precision(*be, o->precision)) ||
        (st = open_data(r, o)) ||
        (st = checkpoint_dir(r, o)))
        return st;
    if (r->root && o->export_path && (st = train_opts_check_export(o)))
        return st;
    /* where checkpoints go, checked before any step (a save's failure would
     * come after the steps it was to keep); when only a stop signal's save
     * would use it, a warning */
    if (r->root && r->ckpt_dir[0] &&
        (st = hpt_check_output_dir(o->ckpt_dir ? "--checkpoint-dir" : "checkpoint directory",
                                   r->ckpt_dir))) {
        char why[1024], due[64] = "";
        snprintf(why, sizeof why, "%s", hpt_error_msg());
        if (o->save_every > 0)
            snprintf(due, sizeof due, "--save-every %d", o->save_every);
        else if (o->stop_at > 0)
            snprintf(due, sizeof due, "--stop-at %d", o->stop_at);
        else if (o->max_runtime > 0)
            snprintf(due, sizeof due, "--max-runtime %g", o->max_runtime);
        if (due[0])
            return hpt_error_set(st, "%s (checkpoints are saved there: %s)", why, due);
        /* a --run-dir that cannot be made is refused with the run files */
        struct stat sb;
        if (o->ckpt_dir || (o->run_dir && stat(o->run_dir, &sb) == 0))
            fprintf(stderr, "hpt-train: warning: %s: a stop signal's checkpoint would fail\n",
                    why);
    }
    return HPT_OK;
}

/* Setup, part 3 (after the resume probe): run files, model, optimizer. */
static hpt_status setup_model(run_state *r, hpt_train_opts *o, const hpt_backend *be)
{
    hpt_status st;
    if ((st = check_epoch(r, o)) || (st = check_eval(r, o)))
        return st;
    if (r->root && o->run_dir && (st = train_rundir_write(r, o)))
        return st;
    if (r->resume_from < 0) /* a fresh start: no samples of an earlier run left behind */
        tidy_samples(r, o, -1);
    if (o->log_samples && o->run_dir && r->comm.tp_rank == 0 && r->comm.pp_rank == 0 &&
        r->comm.cp_rank == 0) {
        char path[4096];
        if ((st = train_rundir_make(o->run_dir))) /* rank 0 may not have created it yet */
            return st;
        snprintf(path, sizeof path, "%s/samples.%d.tsv", o->run_dir, r->comm.dp_rank);
        if (!(r->samples = fopen(path, r->resume_from >= 0 ? "a" : "w")))
            return hpt_error_set(HPT_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    }
    hpt_optim_opts oo = o->optim;
    oo.total_steps = o->steps;
    size_t lo = 0, hi = 0;
    if ((st = stage_layers(r, o)))
        return st;
    int nslots = pipeline_slots(r, o); /* sets r->wstash too */
    hpt_model_opts mo = {.comm = &r->comm, .recompute = o->recompute,
                         .sequence_parallel = o->sequence_parallel,
                         .nslots = nslots, .l0 = r->l0, .l1 = r->l1,
                         .nchunks = r->nchunks, .head_slots = r->head_slots,
                         .chunk_l0 = r->chunk_l0, .chunk_l1 = r->chunk_l1,
                         .wstash = r->wstash,
                         .skip_init = r->resume_from >= 0 || o->init_from || o->zero == 3,
                         .params_virtual = o->zero == 3};
    if ((st = hpt_model_init_opts(&r->model, &r->cfg, be, &mo, o->batch, o->seq_len, o->seed)) ||
        (st = setup_pipeline(r, mo.nslots, o->grad_accum)))
        return st;
    if (o->init_from && (st = hpt_init_from(&r->model, o->init_from, r->resume_from,
                                            r->root ? stderr : NULL)))
        return st;
    hi = r->model.nparams;
    if (o->zero && (st = setup_zero(r, o->zero, o->grad_accum, &lo, &hi)))
        return st;
    if (o->zero == 3 && (st = zero3_init(r, o->zero3_prefetch, lo, hi)))
        return st;
    if (o->zero == 3 && r->resume_from < 0 && !o->init_from) {
        /* a fresh ZeRO-3 start: each rank draws its own block only (the
         * draws are per element), so the whole block is never held */
        hpt_model_init_params_range(&r->model, o->seed, lo, hi);
        zero3_drop_all(r);
    }
    if ((st = hpt_optim_init(&r->opt, &r->model, &oo, lo, hi)))
        return st;
    size_t n = (size_t)o->batch * o->seq_len;
    r->inputs = malloc(sizeof(int32_t) * n);
    r->targets = malloc(sizeof(int32_t) * n);
    if (!r->inputs || !r->targets)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory for the batch buffers");
    return HPT_OK;
}

/* Mean validation loss over eval_batches global batches (B x accum x DP
 * sequences each) taken in order from the start of the validation shards,
 * wrapping around; sequences are split over micro-batches and DP ranks as
 * in training, so the result does not depend on the layout. */
/* Global gradient L2 norm, each parameter counted once (TP-replicated
 * tensors on one TP rank, shards summed over TP and, with ZeRO, over DP).
 * With ZeRO-1 the gradients are first reduce-scattered into this rank's
 * shard; with ZeRO-2 and 3 the buckets did that during backward
 * (lib/train_dp_buckets.c). */
static double grad_norm(run_state *r, const hpt_train_opts *o)
{
    double ss;
    int R = r->comm.group_size[HPT_GROUP_DP]; /* weight replicas: CP x DP */
    if (r->metrics && o->zero == 1 && R > 1) /* pre-reduction, for the noise scale */
        r->local_sumsq = hpt_model_grad_sumsq(&r->model, r->model.grads, 0, r->model.nparams);
    if (o->zero) {
        if (o->zero == 1)
            r->comm.be->reduce_scatter_sum_f32(&r->comm, HPT_GROUP_DPS, r->model.grads,
                                               r->grad_shard, r->shard_counts);
        if (r->comm.group_size[HPT_GROUP_DPR] > 1) /* HSDP: the shard summed over the replicas */
            r->comm.be->allreduce_sum_f32(&r->comm, HPT_GROUP_DPR, r->grad_shard,
                                          r->opt.hi - r->opt.lo);
        ss = hpt_model_grad_sumsq(&r->model, r->grad_shard, r->opt.lo, r->opt.hi);
        if (R == 1)
            r->local_sumsq = ss;
        /* each shard once: over the shard group (its replicas hold the same) */
        r->comm.be->allreduce_sum_f64(&r->comm, HPT_GROUP_DPS, &ss, 1);
    } else {
        ss = hpt_model_grad_sumsq(&r->model, r->model.grads, 0, r->model.nparams);
        if (R == 1)
            r->local_sumsq = ss;
    }
    if (r->comm.tp * r->comm.pp > 1) /* shards of TP and stages of PP */
        r->comm.be->allreduce_sum_f64(&r->comm, HPT_GROUP_MP, &ss, 1);
    return sqrt(ss);
}

static void update(run_state *r, const hpt_train_opts *o, float lr, double norm)
{
    float clip = hpt_clip_coef(&r->opt.o, norm);
    /* --async-save: the save in flight must have its copy of the weights
     * and moments before they change (a training stall, if any) */
    r->ckpt_save_s += hpt_ckpt_async_snapshot_wait(r->async);
    if (!o->zero) {
        hpt_optim_step(&r->opt, &r->model, r->model.grads, lr, clip);
        return;
    }
    hpt_optim_step(&r->opt, &r->model, r->grad_shard, lr, clip);
    if (r->z3) /* ZeRO-3: the other blocks are gathered when next used */
        zero3_drop_all(r);
    else
        r->comm.be->allgather_inplace_f32(&r->comm, HPT_GROUP_DPS, r->model.params,
                                          r->shard_counts);
}

static void print_step(FILE *out, const hpt_train_opts *o, int dp, int step, double loss, float lr,
                       double norm, double dt, double elapsed, int skipped)
{
    double tok = (double)o->grad_accum * o->batch * o->seq_len * dp;
    char eta[32];
    format_eta(eta, sizeof eta, elapsed / (step + 1) * (o->steps - step - 1));
    fprintf(out,
            "step %*d/%d | loss %.4f | lr %.2e | grad norm %.4f | %.0f tok/s | %.1f ms/step | "
            "ETA %s%s\n",
            (int)snprintf(NULL, 0, "%d", o->steps), step + 1, o->steps, loss, lr, norm, tok / dt,
            dt * 1e3, eta, skipped ? " | SKIPPED (non-finite)" : "");
    fflush(out);
}

/* At a step boundary: did a stop signal arrive on any rank, or would the
 * next step (and a save) overrun --max-runtime? *busy (in: this rank's
 * background checkpoint write is still running; out: on any rank). One
 * all-reduce, so every rank agrees. */
static int should_stop(run_state *r, const hpt_train_opts *o, double t_start, double step_s,
                       double save_s, int *busy)
{
    int v[2] = {train_stop_signal != 0, *busy};
    if (o->max_runtime > 0 && now_s() - t_start + 1.5 * step_s + 2 * save_s + 1 > o->max_runtime)
        v[0] = 2;
    if (r->comm.world_size > 1) {
        MPI_Comm world = r->comm.comms[HPT_GROUP_WORLD];
        hpt_comm_watch w = hpt_comm_watch_begin(world, HPT_FLIGHT_ALLREDUCE, sizeof v);
        MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MAX, world);
        hpt_comm_watch_end(w);
    }
    *busy = v[1];
    return v[0];
}

/* --trace-steps: the recorder (lib/trace.h), or a note when the run
 * starts after the traced steps. Needs the flight recorder (it captures
 * the communication). */
static hpt_status setup_trace(run_state *r, const hpt_train_opts *o, FILE *out)
{
    int a, b;
    hpt_status st = hpt_trace_parse(o->trace_steps, &a, &b);
    if (st)
        return st;
    if (!r->comm.fr)
        return hpt_error_set(HPT_ERR_USAGE, "--trace-steps %s records the communication from "
                             "the flight recorder, which HPT_FLIGHT_RECORDER=0 turns off (unset "
                             "it)", o->trace_steps);
    if (r->start_step >= b) {
        if (r->root)
            fprintf(out, "trace: --trace-steps %s: this run starts after step %d, past the "
                    "traced steps: nothing traced\n", o->trace_steps, r->start_step);
        return HPT_OK;
    }
    if (!(r->trace = hpt_trace_new(a, b, r->comm.world_rank, r->comm.pp_rank, r->comm.fr)))
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory for the trace (--trace-steps)");
    return HPT_OK;
}

/* One optimizer step's results, for the progress line, log.tsv and the
 * metrics. t0, t_acc, t1: start of the step, end of forward/backward, end
 * of the update (seconds, monotonic). */
typedef struct {
    double t0, t_acc, t1, loss, norm, val;
    float lr;
    int skip, diverged;
} step_result;

/* This step's communication (counters since `before`) into r->step_ctr,
 * added to r->train_ctr (training steps only, for --comm-stats). */
static void count_step_comm(run_state *r, const hpt_comm_counter *before)
{
    for (int g = 0; g < HPT_GROUP_COUNT; g++) {
        r->step_ctr[g].calls = r->comm.counters[g].calls - before[g].calls;
        r->step_ctr[g].bytes = r->comm.counters[g].bytes - before[g].bytes;
        r->step_ctr[g].seconds = r->comm.counters[g].seconds - before[g].seconds;
        r->train_ctr[g].calls += r->comm.counters[g].calls - before[g].calls;
        r->train_ctr[g].bytes += r->comm.counters[g].bytes - before[g].bytes;
        r->train_ctr[g].seconds += r->comm.counters[g].seconds - before[g].seconds;
    }
}

/* Step `step` (0-based): forward/backward, gradient norm and the update,
 * or a skip when the loss or the norm is non-finite (s->diverged after
 * --max-skips in a row). Both are reduced, so every rank takes the same
 * branch. Collective. */
static void train_step(run_state *r, const hpt_train_opts *o, int step, FILE *out, step_result *s)
{
    hpt_comm_counter before[HPT_GROUP_COUNT];
    hpt_comm_kind_counter kinds0[HPT_CK_COUNT];
    s->t0 = now_s();
    memcpy(before, r->comm.counters, sizeof before);
    memcpy(kinds0, r->comm.kinds, sizeof kinds0);
    double ring0[2];
    hpt_ring_timing(r->model.ring, &ring0[0], &ring0[1]);
    r->t_fwd = r->t_bwd = r->t_data = r->t_wait = 0;
    int poison = train_opts_in_list(o->nan_steps, step + 1);
    r->poison = poison && o->fault_nan_rank == r->comm.world_rank;
    r->step = step + 1;
    s->loss = pipe_accumulate(r, o);
    s->t_acc = now_s();
    r->comm_s_acc = comm_seconds(r);
    if (poison && o->fault_nan_rank < 0)
        /* ZeRO-2/3 reduced the gradients into the shard during backward */
        r->model.be->scale(o->zero >= 2 ? r->grad_shard : r->model.grads, NAN, 1);
    s->norm = grad_norm(r, o);
    s->lr = hpt_lr_at(&r->opt.o, step);
    s->skip = !isfinite(s->loss) || !isfinite(s->norm);
    s->diverged = 0;
    if (s->skip) {
        skipped_step_event(r, step + 1, s->loss, s->norm, out);
        r->skipped_total++;
        s->diverged = ++r->consecutive >= o->max_skips;
    } else {
        r->consecutive = 0;
        update(r, o, s->lr, s->norm);
    }
    s->t1 = now_s();
    hpt_trace_span(r->trace, "optimizer", "compute", -1, s->t_acc, s->t1);
    count_step_comm(r, before);
    for (int k = 0; k < HPT_CK_COUNT; k++) {
        r->step_kinds[k].calls = r->comm.kinds[k].calls - kinds0[k].calls;
        r->step_kinds[k].bytes = r->comm.kinds[k].bytes - kinds0[k].bytes;
        r->step_kinds[k].seconds = r->comm.kinds[k].seconds - kinds0[k].seconds;
        r->step_kinds[k].inflight = r->comm.kinds[k].inflight - kinds0[k].inflight;
    }
    hpt_ring_timing(r->model.ring, &r->step_ring[0], &r->step_ring[1]);
    r->step_ring[0] -= ring0[0];
    r->step_ring[1] -= ring0[1];
    r->train_steps++;
}

/* --max-skips reached at step `step`: the step is recorded in the metrics
 * too; returns HPT_ERR_DIVERGED with the message. Collective (flush). */
static hpt_status stop_diverged(run_state *r, const hpt_train_opts *o, int step, FILE *out,
                                const step_result *s)
{
    if (r->metrics) {
        record_metrics(r, o, step, s->t0, s->t_acc, s->t1, s->loss, NAN, s->lr, s->norm, s->skip);
        hpt_metrics_flush(r->metrics, r->root ? out : NULL);
    }
    return hpt_error_set(HPT_ERR_DIVERGED,
                         "%d consecutive steps with a non-finite loss or gradient norm (last at "
                         "step %d; %d skipped in all): stopping. Lower --lr or check the data",
                         r->consecutive, step + 1, r->skipped_total);
}

/* Validation after step `step` when due (every --eval-interval steps and
 * after the last); NaN when not due or cut short by a stop signal.
 * Collective. */
static double maybe_validate(run_state *r, const hpt_train_opts *o, int step, FILE *out)
{
    int last = step + 1 == o->steps;
    if (!r->val || !(last || (o->eval_interval > 0 && (step + 1) % o->eval_interval == 0)))
        return NAN;
    double t0 = now_s(), val = pipe_evaluate(r, o);
    r->val_s = now_s() - t0; /* the metrics' per-rank validation seconds */
    hpt_trace_span(r->trace, "validation", "compute", -1, t0, t0 + r->val_s);
    if (r->root && r->val_stopped)
        fprintf(out, "step %d: validation stopped by a stop signal\n", step + 1);
    else if (r->root)
        fprintf(out, "step %d: val loss %.4f\n", step + 1, val);
    fflush(out);
    return val;
}

/* The step's row of RUN_DIR/log.tsv (rank 0), flushed: a killed run keeps
 * every finished step. */
static void log_row(run_state *r, int step, const step_result *s)
{
    if (!r->log)
        return;
    fprintf(r->log, "%d\t%.17g\t%.9g\t%.17g\t%.17g\t%d\n", step + 1, s->loss, s->lr, s->norm,
            s->val, s->skip);
    fflush(r->log);
}

/* After step `step`: agree on stopping (signal, --max-runtime, --stop-at),
 * record and flush the metrics, checkpoint when due or stopping. Returns
 * HPT_REQUEUE to stop before the last step, a save error, or HPT_OK.
 * *save_s: the last save's seconds (for --max-runtime). Collective. */
static hpt_status step_boundary(run_state *r, const hpt_train_opts *o, int step, FILE *out,
                                const step_result *s, double t_start, double *save_s)
{
    int last = step + 1 == o->steps;
    int busy = !hpt_ckpt_async_written(r->async);
    int stop = r->ckpt_dir[0] ? should_stop(r, o, t_start, s->t1 - s->t0, *save_s, &busy) : 0;
    if (stop == 1)
        hpt_metrics_event(r->metrics, step + 1, 0, "signal",
                          "stop signal received (%s): checkpoint and exit 75",
                          train_stop_signal ? strsignal(train_stop_signal) : "on another rank");
    if (o->stop_at == step + 1)
        stop = 3;
    int save = r->ckpt_dir[0] && (stop || (o->save_every > 0 && (step + 1) % o->save_every == 0) ||
                                  (last && o->save_every > 0));
    if (r->metrics) {
        /* rows reach the file before a checkpoint commits, so a run killed
         * after the commit never loses the rows of the steps it saved */
        record_metrics(r, o, step, s->t0, s->t_acc, s->t1, s->loss, s->val, s->lr, s->norm,
                       s->skip);
        if (hpt_metrics_due(r->metrics) || save || (stop && !last))
            hpt_metrics_flush(r->metrics, r->root ? out : NULL);
    }
    /* --async-save: commit the save in flight once every writer is done;
     * before another save, a stop or the end, wait for it */
    if (hpt_ckpt_async_inflight(r->async) >= 0 && (!busy || save || stop || last))
        *save_s = finish_async_save(r, step + 1, out);
    if (save) {
        double ts = now_s();
        int bg = r->async && !stop && !last; /* the stop and the final saves are synchronous */
        hpt_status st = bg ? start_async_save(r, o, step + 1, out)
                           : save_checkpoint(r, o, step + 1, out);
        if (!bg)
            *save_s = now_s() - ts;
        r->ckpt_save_s += now_s() - ts; /* the training stall, recorded with the next step */
        hpt_trace_span(r->trace, bg ? "checkpoint_snap" : "checkpoint", "compute", -1, ts,
                       now_s());
        if (st)
            return st;
        hpt_metrics_write_events(r->metrics); /* rank 0, no communication */
    }
    if (hpt_trace_due(r->trace, step + 1, stop || last))
        hpt_trace_flush(r->trace, r->comm.comms[HPT_GROUP_WORLD], r->metrics, r->root ? out : NULL);
    if (stop && !last)
        return hpt_error_set(HPT_REQUEUE,
                             "checkpointed step %d after %s; exiting with status 75 (requeue "
                             "me); resume with the same --run-dir/--checkpoint-dir",
                             step + 1, stop == 2 ? "--max-runtime" : stop == 3 ? "--stop-at"
                                                                     : "a stop signal");
    return HPT_OK;
}

/* The "done" line (rank 0); val: the last validation loss; dev_peak: the
 * largest peak device memory of any rank, bytes (NaN: a backend without
 * device memory), printed on a line of its own. */
static void print_done(const run_state *r, const hpt_train_opts *o, FILE *out, double t_start,
                       double val, double dev_peak)
{
    if (isfinite(dev_peak))
        fprintf(out, "peak device memory: %.3f GiB (%.0f bytes; the most of any rank, each "
                "rank's in metrics.h5 /ranks/device_mem)\n", dev_peak / 1073741824.0, dev_peak);
    fprintf(out, "done: %d steps, %d skipped, %.1f s", o->steps, r->skipped_total,
            now_s() - t_start);
    if (r->start_step > o->steps)
        fprintf(out, " (the checkpoint is at step %d, past --steps %d: nothing to train)",
                r->start_step, o->steps);
    else if (r->start_step == o->steps)
        fprintf(out, " (all of them before the checkpoint: nothing left to train)");
    else if (r->val && !r->val_stopped)
        fprintf(out, ", final val loss %.4f", val);
    fprintf(out, "\n");
}

/* Steps start_step .. --steps - 1. Every exit is agreed by all ranks.
 * Collective. */
static hpt_status train_loop(run_state *r, const hpt_train_opts *o, FILE *out)
{
    double t_start = now_s(), save_s = 0;
    step_result s = {.val = NAN};
    for (int step = r->start_step; step < o->steps; step++) {
        if (r->comm.fr)
            hpt_flight_step_begin(r->comm.fr, step + 1);
        hpt_trace_step(r->trace, step + 1);
        if (o->fault_stall_step == step + 1 && o->fault_stall_rank == r->comm.world_rank &&
            o->fault_stall_at == HPT_STALL_AT_STEP)
            for (;;) /* test: a stalled rank, before the step's first collective */
                sleep(3600);
        r->fault_stop_bucket = o->fault_stall_at == HPT_STALL_AT_BUCKET &&
                               o->fault_stall_step == step + 1 &&
                               o->fault_stall_rank == r->comm.world_rank;
        train_step(r, o, step, out, &s);
        if (r->comm.fr)
            hpt_flight_step_end(r->comm.fr);
        hpt_trace_span(r->trace, "step", "step", -1, s.t0, s.t1);
        hpt_watchdog_step(r->watchdog, s.t1 - s.t0);
        if (!o->quiet && r->root)
            print_step(out, o, r->comm.dp, step, s.loss, s.lr, s.norm, s.t1 - s.t0,
                       (s.t1 - t_start) * (step + 1) / (step + 1 - r->start_step), s.skip);
        if (s.diverged)
            return stop_diverged(r, o, step, out, &s);
        s.val = maybe_validate(r, o, step, out);
        log_row(r, step, &s);
        if (o->fault_stall_at == HPT_STALL_AT_BOUNDARY && o->fault_stall_step == step + 1 &&
            o->fault_stall_rank == r->comm.world_rank)
            raise(SIGSTOP); /* test: a frozen rank, the others in the stop agreement */
        r->fault_stop_save = o->fault_stall_at == HPT_STALL_AT_SAVE &&
                             o->fault_stall_step == step + 1 &&
                             o->fault_stall_rank == r->comm.world_rank;
        hpt_status st = step_boundary(r, o, step, out, &s, t_start, &save_s);
        if (st)
            return st;
    }
    /* every rank is here (each exit above is agreed) with the same backend */
    double dev_peak = NAN;
    if (r->model.be->mem_peak) {
        double mine = (double)r->model.be->mem_peak();
        hpt_comm_watch w = hpt_comm_watch_begin(r->comm.comms[HPT_GROUP_WORLD],
                                                HPT_FLIGHT_ALLREDUCE, sizeof mine);
        MPI_Allreduce(&mine, &dev_peak, 1, MPI_DOUBLE, MPI_MAX, r->comm.comms[HPT_GROUP_WORLD]);
        hpt_comm_watch_end(w);
    }
    if (r->root)
        print_done(r, o, out, t_start, s.val, dev_peak);
    if (r->root && r->z3 && r->train_steps > 0) { /* rank 0's own figures: no collective */
        size_t peak;
        int64_t gathers;
        double wait_s;
        zero3_stats(r, &peak, &gathers, &wait_s);
        fprintf(out, "ZeRO-3 (rank 0): %.1f parameter gathers per step, %.4f s per step waited "
                "for them (prefetch %d; validation included), at most %zu bytes of parameters "
                "held\n",
                (double)gathers / r->train_steps, wait_s / r->train_steps, o->zero3_prefetch, peak);
        hpt_commit_stats c;
        if (zero3_device_stats(r, &c)) /* the backend's count: whole granules */
            fprintf(out, "ZeRO-3 (rank 0): device memory backing the parameter block: at most "
                    "%zu bytes since the first step, %zu now (%s%zu-byte granules)\n", c.peak,
                    c.now, c.granule ? "" : "held whole, no virtual memory management; ",
                    c.granule);
    }
    return HPT_OK;
}

/* ", 1F1B", ", GPipe", ", zero-bubble ZB-H1" or ", interleaved 1F1B, 2 model
 * chunks per stage" (the banner). */
static const char *sched_banner(const hpt_train_opts *o)
{
    static char buf[64];
    switch (o->pp_schedule) {
    case HPT_PLAN_SCHEDULE_GPIPE: return ", GPipe";
    case HPT_PLAN_SCHEDULE_ZBH1: return ", zero-bubble ZB-H1";
    case HPT_PLAN_SCHEDULE_INTERLEAVED:
        snprintf(buf, sizeof buf, ", interleaved 1F1B, %d model chunks per stage", o->pp_virtual);
        return buf;
    default: return ", 1F1B";
    }
}

/* " (ZeRO-3)", " (ZeRO-2, HSDP: 2 shard groups of 2 DP ranks)", "" (the banner). */
static const char *zero_banner(const run_state *r, const hpt_train_opts *o)
{
    static char buf[96];
    int n = r->comm.group_size[HPT_GROUP_DPS], q = r->comm.group_size[HPT_GROUP_DPR];
    if (!o->zero)
        return "";
    if (q > 1)
        snprintf(buf, sizeof buf, " (ZeRO-%d, HSDP: %d shard groups of %d DP ranks)", o->zero, q, n);
    else
        snprintf(buf, sizeof buf, " (ZeRO-%d)", o->zero);
    return buf;
}

/* "CP 2 x " (the layout line's context parallelism), "" without. */
static const char *cp_banner(const run_state *r)
{
    static char buf[32];
    if (r->comm.cp <= 1)
        return "";
    snprintf(buf, sizeof buf, "CP %d x ", r->comm.cp);
    return buf;
}

static void print_banner(run_state *r, const hpt_train_opts *o, FILE *out)
{
    fprintf(out,
            "hpt-train: model %s (%.2f M parameters, %d layers, hidden %d, heads %d/%d kv, "
            "vocab %d%s), backend %s%s%s%s, comm %s\n"
            "hpt-train: layout TP %d x %sPP %d x DP %d%s on %d rank%s%s%s%s; %.1f MiB of activations "
            "per rank\n"
            "hpt-train: %lld training samples of %d tokens; micro-batch %d x grad-accum %d x DP "
            "%d = %lld tokens/step; %d steps\n",
            o->model, hpt_config_num_params(&r->cfg) / 1e6, r->cfg.num_hidden_layers,
            r->cfg.hidden_size, r->cfg.num_attention_heads, r->cfg.num_key_value_heads,
            r->cfg.vocab_size, r->cfg.tie_word_embeddings ? ", tied" : "", o->backend,
            r->model.be->describe ? " (" : "", r->model.be->describe ? r->model.be->describe() : "",
            r->model.be->describe ? ")" : "", r->comm.stage ? "mpi+host-staging" : (r->comm.inner ? r->comm.inner : r->comm.be)->name,
            r->comm.tp, cp_banner(r),
            r->comm.pp, r->comm.dp, zero_banner(r, o),
            r->comm.world_size, r->comm.world_size == 1 ? "" : "s",
            o->recompute == HPT_RECOMPUTE_SELECTIVE ? ", selective activation recomputation"
            : o->recompute ? ", full activation recomputation" : "",
            r->model.sp ? ", sequence parallel" : "",
            r->comm.pp > 1 ? sched_banner(o) : "",
            r->model.act_bytes / 1048576.0,
            (long long)hpt_loader_num_samples(r->train), o->seq_len, o->batch, o->grad_accum,
            r->comm.dp, (long long)o->batch * o->grad_accum * o->seq_len * r->comm.dp, o->steps);
    int size1 = 0;
    if (!hpt_nccl_size1_env(&size1) && size1) { /* rank 0's communicators (comm_nccl_plan.c) */
        hpt_nccl_plan p;
        char d[512];
        hpt_nccl_plan_make(&r->comm, 1, &p);
        hpt_nccl_plan_describe(&p, &r->comm, d, sizeof d);
        fprintf(out, "hpt-train: HPT_NCCL_SIZE1=1: NCCL communicators %s%s\n", d,
                r->comm.nccl ? "" : " (none made: the run's comm is not nccl)");
    }
    /* the gradient buffers as allocated (rank 0's stage): the full block
     * backward writes into, and with ZeRO the reduced shard */
    int ZD = r->comm.group_size[HPT_GROUP_DPS];
    size_t S = r->shard_counts ? (r->model.nparams + ZD - 1) / ZD : 0;
    fprintf(out, "hpt-train: gradients: %zu bytes full block", sizeof(float) * r->model.nparams);
    if (o->zero)
        fprintf(out, " + %zu bytes reduced shard (ZeRO-%d, %s%s)", sizeof(float) * (S ? S : 1),
                o->zero, o->zero >= 2 ? "bucket reduce-scatters" : "one reduce-scatter",
                r->grads_release ? "; the block's pages given back after each bucket" : "");
    if (r->rs_tmp) /* ZeRO-2/3 with gradient accumulation */
        fprintf(out, " + %zu bytes receive buffer (each of the %d micro-batches reduce-scattered "
                "and summed into the shard)", sizeof(float) * (S ? S : 1), o->grad_accum);
    fprintf(out, "; AdamW state %zu bytes\n", 2 * sizeof(float) * (r->opt.hi - r->opt.lo));
    hpt_commit_stats c = {0, 0, 0};
    int dev = r->z3 && zero3_device_stats(r, &c);
    if (r->z3) /* the parameters as held: the own block, the units gathered when used */
        fprintf(out, "hpt-train: parameters: %zu bytes own block of %zu (ZeRO-3: each layer "
                "all-gathered before its forward and its backward, prefetch %d%s)\n",
                sizeof(float) * (r->opt.hi - r->opt.lo), sizeof(float) * r->model.nparams,
                o->zero3_prefetch, !dev ? "; the other blocks' pages given back after use"
                : c.granule ? "; device memory: the other blocks' granules unmapped after use"
                            : "; device memory: the block held whole");
    fflush(out);
}

/* The final --export failed (status st, agreed): keep the trained weights.
 * With a checkpoint directory, save the final step unless --save-every
 * already did (collective), and say where the weights are and the
 * hpt-ckpt export command that writes the export from them; without one,
 * say the weights are lost. Returns st with the extended message. */
static hpt_status keep_after_failed_export(run_state *r, const hpt_train_opts *o,
                                           hpt_status st, FILE *out)
{
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", hpt_error_msg());
    if (!r->ckpt_dir[0])
        return hpt_error_set(st, "%s (no --run-dir or --checkpoint-dir: the trained weights are "
                             "not saved)", msg);
    int step = o->steps;
    hpt_status sv = HPT_OK;
    if (o->save_every <= 0 && r->start_step < o->steps)
        sv = hpt_comm_agree(r->comm.comms[HPT_GROUP_WORLD], save_checkpoint(r, o, step, out));
    if (sv) {
        char why[1024];
        snprintf(why, sizeof why, "%s", hpt_error_msg());
        return hpt_error_set(st, "%s; saving checkpoint step_%08d instead failed too: %s", msg,
                             step, why);
    }
    return hpt_error_set(st, "%s; the trained weights are in checkpoint %s/step_%08d: write the "
                         "export with hpt-ckpt export %s/step_%08d %s", msg, r->ckpt_dir, step,
                         r->ckpt_dir, step, o->export_path);
}

hpt_status hpt_train_run(MPI_Comm comm, FILE *out, const hpt_train_opts *opts)
{
    int dp;
    hpt_status st = train_opts_agree(comm, opts);
    if (st || (st = train_opts_check_layout(comm, opts, &dp)))
        return st;
    hpt_train_opts copy = *opts, *o = &copy; /* a resume may change grad_accum */
    run_state r;
    hpt_ckpt_meta meta;
    const hpt_backend *be = NULL;
    memset(&r, 0, sizeof r);
    memset(&meta, 0, sizeof meta);
    r.resume_from = -1;
    /* the stop signals checkpoint only where there is somewhere to save to;
     * otherwise they keep their default action (terminate) */
    if (o->save_signals && (st = train_signals_install(o, o->run_dir || o->ckpt_dir)))
        return st; /* same verdict on every rank: no collective has started */
    hpt_comm_init_cp(&r.comm, comm, o->tp, o->cp, o->pp, dp, stderr);
    r.root = r.comm.world_rank == 0;
    if (o->zero_shard_group && o->zero && dp > 1) /* HSDP; checked to divide DP */
        hpt_comm_shard_group(&r.comm, o->zero_shard_group);
    if (o->zero_shard_group == 1 && o->zero && dp > 1 && r.root) /* allowed, but pointless */
        fprintf(stderr, "hpt-train: warning: --zero-shard-group 1 shards nothing: every rank "
                "keeps the whole ZeRO-%d state and pays its collectives within itself (use "
                "--zero 0, or a group of 2 or more)\n", o->zero);
    if (o->zero >= 2 && dp == 1) { /* one replica: nothing to shard */
        if (r.root)
            fprintf(stderr, "hpt-train: note: --zero %d with DP 1 shards nothing: running as "
                    "--zero 0\n", o->zero);
        o->zero = 0;
    }
    if (r.comm.pp == 1 && (o->pp_schedule == HPT_PLAN_SCHEDULE_GPIPE ||
                           o->pp_schedule == HPT_PLAN_SCHEDULE_ZBH1)) { /* one stage */
        if (r.root)
            fprintf(stderr, "hpt-train: note: --pp-schedule %s with --pp 1 has no pipeline to "
                    "schedule: running as 1f1b (each micro-batch's forward, then its backward)\n",
                    hpt_plan_schedule_str(o->pp_schedule));
        o->pp_schedule = HPT_PLAN_SCHEDULE_1F1B;
    }
    /* each phase ends in an agreement, so no rank enters a collective that
     * another rank skipped after an error */
    st = hpt_comm_agree(comm, setup_local(&r, o, &be));
    if (!st) /* collective; agrees itself */
        st = hpt_comm_agree(comm, choose_comm(&r, o, be));
    if (!st)
        st = probe_resume(&r, o, &meta);
    if (!st)
        st = hpt_comm_agree(comm, setup_model(&r, o, be));
    if (!st && r.resume_from >= 0)
        st = load_resume(&r, o, &meta);
    char hang_prev[1024] = ""; /* a previous hang's summary (lib/watchdog.h) */
    int hang_dir = 0;          /* RUN_DIR/hang prepared: tidied at the end */
    if (!st && o->run_dir && o->collective_timeout != 0) {
        st = hpt_comm_agree(comm, r.root ? hpt_watchdog_prepare(o->run_dir, hang_prev,
                                                                sizeof hang_prev) : HPT_OK);
        hang_dir = !st;
    }
    /* from here on every collective is timed (docs/ARCHITECTURE.md, "Hang
     * watchdog"): the metrics file's open verdict too */
    if (!st)
        st = hpt_comm_agree(comm, hpt_watchdog_start(&r.watchdog, &r.comm, o->run_dir,
                                                     o->collective_timeout));
    if (!st && r.comm.nccl) /* a hang ends NCCL's kernels before MPI_Abort */
        hpt_watchdog_on_abort(r.watchdog, abort_nccl, &r.comm);
    if (!st)
        st = open_metrics(&r, o, &meta);
    if (!st && o->trace_steps)
        st = hpt_comm_agree(comm, setup_trace(&r, o, out));
    if (!st && hang_prev[0]) {
        const char *p = strstr(hang_prev, "suspect: rank ");
        hpt_metrics_event(r.metrics, r.start_step, p ? atoi(p + 14) : 0, "hang",
                          "the previous run hung: %s", hang_prev);
    }
    if (!st)
        st = hpt_comm_agree(comm, setup_async_save(&r, o));
    if (!st) {
        if (r.root && o->zero3_prefetch != 1 && o->zero != 3)
            fprintf(stderr, "hpt-train: warning: --zero3-prefetch %d applies to --zero 3 only "
                    "(ZeRO-%d here): it does nothing\n", o->zero3_prefetch, o->zero);
        if (r.root && o->sequence_parallel && r.comm.tp == 1)
            fprintf(stderr, "hpt-train: warning: --sequence-parallel splits the tokens over the "
                    "tensor-parallel ranks; with --tp 1 there is nothing to split and it does "
                    "nothing\n");
        if (r.root)
            print_banner(&r, o, out);
        zero3_drop_all(&r); /* ZeRO-3: from here each rank holds its block */
        st = train_loop(&r, o, out);
        finish_async_save(&r, r.start_step + r.train_steps, out); /* an exit mid-save (agreed) */
        hpt_metrics_event(r.metrics, r.start_step + r.train_steps, 0, "run_end", "%s",
                          st == HPT_OK ? "done" : hpt_error_msg());
        hpt_metrics_close(r.metrics, 1, r.root ? out : NULL); /* every exit of the loop is agreed */
        r.metrics = NULL;
    }
    if (!st && o->fault_stall_at == HPT_STALL_AT_END && o->fault_stall_rank == r.comm.world_rank &&
        o->fault_stall_step == r.start_step + r.train_steps)
        raise(SIGSTOP); /* test: a frozen rank, the others in the replica check */
    /* the end-of-run collectives are watched too: a rank frozen after the
     * loop would hang the others in them for ever */
    if (!st)
        st = hpt_comm_agree(comm, check_replicas(&r));
    if (!st && o->comm_stats)
        comm_stats(&r, o, out);
    if (!st && r.z3 && o->export_path) /* ZeRO-3: the export reads the whole block */
        zero3_gather_all(&r);
    /* not the export: rank 0 alone writes the whole model while the others
     * wait for it, a wait a slow disk lengthens without bound
     * (docs/ARCHITECTURE.md, "Hang watchdog") */
    hpt_watchdog_stop(r.watchdog);
    r.watchdog = NULL;
    if (r.root && hang_dir)
        hpt_watchdog_tidy(o->run_dir); /* the empty RUN_DIR/hang prepare made */
    if (!st && o->export_path && (st = hpt_comm_agree(comm, export_weights(&r, o))))
        st = keep_after_failed_export(&r, o, st, out);
    run_free(&r);
    return st;
}
