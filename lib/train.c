/* train.c — the training loop; see train.h. */
#include "train.h"

#include <errno.h>
#include <glob.h>
#include <signal.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "checkpoint.h"
#include "hpt_config.h"
#include "data.h"
#include "fsutil.h"
#include "metrics.h"
#include "weights.h"

void hpt_train_opts_default(hpt_train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->model = "small";
    o->data = "data/gcide";
    o->backend = "cpu";
    o->batch = 4;
    o->seq_len = 256;
    o->grad_accum = 1;
    o->steps = 1000;
    o->optim = (hpt_optim_opts){.lr = 6e-4f, .min_lr = 6e-5f, .warmup = 100, .total_steps = 1000,
                                .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                .weight_decay = 0.1f, .max_norm = 1.0f};
    o->seed = 1234;
    o->eval_interval = 100;
    o->eval_batches = 8;
    o->max_skips = 5;
    o->tie_embeddings = -1;
    o->tp = 1;
    o->pp = 1;
    o->dp = 0;
    o->keep = 3;
    o->resume = 1;
    o->save_signals = 1;
    o->metrics_interval = 10;
    o->slow_factor = 1.5;
    o->spike_factor = 4.0;
    o->fault_nan_rank = -1;
    o->fault_slow_rank = -1;
}

hpt_status hpt_train_opts_validate(const hpt_train_opts *o)
{
    const struct {
        const char *opt;
        long v;
    } pos[] = {{"--batch", o->batch},           {"--seq-len", o->seq_len},
               {"--grad-accum", o->grad_accum}, {"--steps", o->steps},
               {"--eval-batches", o->eval_batches}, {"--max-skips", o->max_skips}};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v <= 0)
            return hpt_error_set(HPT_ERR_USAGE, "%s %ld: must be > 0", pos[i].opt, pos[i].v);
    if ((long long)o->batch * o->seq_len > 2147483647LL / 64)
        return hpt_error_set(HPT_ERR_USAGE, "--batch %d x --seq-len %d: micro-batch too large",
                             o->batch, o->seq_len);
    const hpt_optim_opts *p = &o->optim;
    if (!(p->lr > 0) || !isfinite(p->lr))
        return hpt_error_set(HPT_ERR_USAGE, "--lr %g: must be > 0", p->lr);
    if (!(p->min_lr >= 0) || p->min_lr > p->lr)
        return hpt_error_set(HPT_ERR_USAGE, "--min-lr %g: must be in [0, --lr %g]", p->min_lr,
                             p->lr);
    if (p->warmup < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--warmup %d: must be >= 0", p->warmup);
    if (o->nan_steps)
        for (const char *p = o->nan_steps; *p; p++)
            if (!(*p == ',' || (*p >= '0' && *p <= '9')))
                return hpt_error_set(HPT_ERR_USAGE,
                                     "--fault-nan-steps '%s': expected step numbers like 3,4",
                                     o->nan_steps);
    if (o->stop_at < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--stop-at %d: must be >= 1 (a step number; 0 = never)",
                             o->stop_at);
    if (o->stop_at && !o->run_dir && !o->ckpt_dir)
        return hpt_error_set(HPT_ERR_USAGE, "--stop-at needs --run-dir or --checkpoint-dir");
    if (o->save_every < 0 || o->keep < 1 || o->max_runtime < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--save-every %d / --keep %d / --max-runtime %g: must be "
                             ">= 0 / >= 1 / >= 0", o->save_every, o->keep, o->max_runtime);
    if (o->eval_interval < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--eval-interval %d: must be >= 0", o->eval_interval);
    if (o->metrics_interval < 1)
        return hpt_error_set(HPT_ERR_USAGE, "--metrics-interval %d: must be >= 1",
                             o->metrics_interval);
    if (!(o->peak_flops >= 0) || !isfinite(o->peak_flops))
        return hpt_error_set(HPT_ERR_USAGE, "--peak-flops %g: must be >= 0 (0 = backend default)",
                             o->peak_flops);
    if (!(o->slow_factor > 1) || !(o->spike_factor > 1))
        return hpt_error_set(HPT_ERR_USAGE, "--slow-rank-factor %g / --spike-factor %g: must be > 1",
                             o->slow_factor, o->spike_factor);
    if (o->fault_slow_rank >= 0 && !(o->fault_slow_ms > 0))
        return hpt_error_set(HPT_ERR_USAGE, "--fault-slow-rank needs --fault-slow-ms > 0");
    if (!(p->beta1 >= 0 && p->beta1 < 1) || !(p->beta2 >= 0 && p->beta2 < 1))
        return hpt_error_set(HPT_ERR_USAGE, "--beta1 %g / --beta2 %g: must be in [0, 1)", p->beta1,
                             p->beta2);
    if (!(p->eps > 0))
        return hpt_error_set(HPT_ERR_USAGE, "--adam-eps %g: must be > 0", p->eps);
    if (!(p->weight_decay >= 0))
        return hpt_error_set(HPT_ERR_USAGE, "--weight-decay %g: must be >= 0", p->weight_decay);
    if (!(p->max_norm >= 0))
        return hpt_error_set(HPT_ERR_USAGE, "--clip %g: must be >= 0 (0 disables clipping)",
                             p->max_norm);
    return HPT_OK;
}

/* ------------------------------------------------------------ helpers */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* mkdir -p. Errors: HPT_ERR_IO naming the directory. */
static hpt_status make_dirs(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return hpt_error_set(HPT_ERR_IO, "--run-dir: path too long");
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char save = *p;
            *p = 0;
            if (mkdir(buf, 0777) && errno != EEXIST)
                return hpt_error_set(HPT_ERR_IO, "--run-dir %s: cannot create %s: %s", path, buf,
                                     strerror(errno));
            *p = save;
            if (!save)
                break;
        }
    }
    struct stat st;
    if (stat(path, &st) || !S_ISDIR(st.st_mode))
        return hpt_error_set(HPT_ERR_IO, "--run-dir %s: not a directory", path);
    if (access(path, W_OK))
        return hpt_error_set(HPT_ERR_IO, "--run-dir %s: not writable: %s", path, strerror(errno));
    return HPT_OK;
}

/* Open RUN_DIR/name for writing. Errors: HPT_ERR_IO. */
static hpt_status open_in_run_dir(const char *dir, const char *name, FILE **f)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *f = fopen(path, "w");
    if (!*f)
        return hpt_error_set(HPT_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    return HPT_OK;
}

static int in_list(const char *list, int step)
{
    if (!list)
        return 0;
    for (const char *p = list; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        if (v == step)
            return 1;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

static void format_eta(char *buf, size_t n, double s)
{
    long t = (long)(s + 0.5);
    snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
}

/* ------------------------------------------------------------ the run */

#define MAX_BUCKETS 4096

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
    int poison;                /* poison this rank's gradients this step (test) */
    double comm_s_acc;         /* seconds in communication at the end of accumulate */
    hpt_comm_counter step_ctr[HPT_GROUP_COUNT]; /* this step's communication */
} run_state;

/* Set by SIGUSR1/SIGTERM: checkpoint at the next step boundary. */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) { stop_signal = sig; }

static const struct {
    const char *name;
    int sig;
} signal_names[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"INT", SIGINT},
                    {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"XCPU", SIGXCPU}};

/* Parse "USR1,TERM" into a signal set. Errors: HPT_ERR_USAGE naming the
 * unknown signal and the accepted ones. */
static hpt_status parse_signals(const char *list, sigset_t *set)
{
    sigemptyset(set);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strncmp(t, "SIG", 3))
            t += 3;
        size_t i = 0, n = sizeof signal_names / sizeof signal_names[0];
        while (i < n && strcmp(signal_names[i].name, t))
            i++;
        if (i == n)
            return hpt_error_set(HPT_ERR_USAGE, "--signals '%s': unknown signal '%s' (accepted: "
                                 "USR1, USR2, TERM, INT, HUP, QUIT, XCPU)", list, t);
        sigaddset(set, signal_names[i].sig);
    }
    return HPT_OK;
}

/* The stop signals only set a flag (a second one during a save changes
 * nothing); the step loop agrees on it at the next boundary. */
/* Install the stop-signal handlers (the list is checked either way); with
 * `install` 0 the signals keep their default action (no checkpoint dir). */
static hpt_status install_signals(const hpt_train_opts *o, int install)
{
    sigset_t set;
    hpt_status st = parse_signals(o->signals ? o->signals : "USR1,TERM", &set);
    if (st)
        return st;
    signal(SIGXFSZ, SIG_IGN); /* a file-size limit fails the write (EFBIG) instead */
    if (!install)
        return HPT_OK;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof signal_names / sizeof signal_names[0]; i++)
        if (sigismember(&set, signal_names[i].sig))
            sigaction(signal_names[i].sig, &sa, NULL);
    return HPT_OK;
}

static void run_free(run_state *r)
{
    if (r->model.be) {
        r->model.be->free(r->grad_shard);
        r->model.be->free(r->grad_send);
    }
    free(r->layer_stage);
    if (r->samples)
        fclose(r->samples);
    free(r->fwd_req);
    free(r->bwd_req);
    free(r->fwd_busy);
    free(r->bwd_busy);
    hpt_model_free(&r->model);
    hpt_optim_free(&r->opt);
    hpt_loader_close(r->train);
    hpt_loader_close(r->val);
    free(r->inputs);
    free(r->targets);
    free(r->shard_counts);
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
static hpt_status check_eval(const run_state *r, const hpt_train_opts *o)
{
    if (!r->val)
        return HPT_OK;
    long long G = (long long)o->batch * o->grad_accum * r->comm.dp;
    long long S = (long long)hpt_loader_num_samples(r->val);
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

/* Keep only the rows of a per-step log (log.tsv, samples.*.tsv: step in
 * the first column) up to step `upto`: a resume continues the log from its
 * checkpoint. */
static void trim_rows(const char *path, int upto)
{
    char tmp[4200], line[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *in = fopen(path, "r"), *out = in ? fopen(tmp, "w") : NULL;
    while (in && out && fgets(line, sizeof line, in)) {
        char *end;
        long step = strtol(line, &end, 10);
        if (end == line || step <= upto) /* header or an earlier step */
            fputs(line, out);
    }
    if (in)
        fclose(in);
    if (out && !fclose(out))
        rename(tmp, path);
}

/* World rank 0: the RUN_DIR/samples.<d>.tsv files no rank of this run
 * writes (DP ranks that no longer exist after a resume on fewer ranks, or
 * every one without --log-samples): cut back to step `upto` (a resume: the
 * steps after it run again), or removed when upto < 0 (a fresh start). */
static void tidy_samples(run_state *r, const hpt_train_opts *o, int64_t upto)
{
    char pat[4200];
    glob_t g;
    if (!r->root || !o->run_dir)
        return;
    snprintf(pat, sizeof pat, "%s/samples.*.tsv", o->run_dir);
    if (glob(pat, 0, NULL, &g))
        return;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *base = strrchr(g.gl_pathv[i], '/') + 1;
        char *end;
        long d = strtol(base + strlen("samples."), &end, 10);
        if (end == base + strlen("samples.") || strcmp(end, ".tsv") || d < 0 ||
            (o->log_samples && d < r->comm.dp))
            continue; /* not ours, or written by its own rank */
        if (upto < 0)
            unlink(g.gl_pathv[i]);
        else
            trim_rows(g.gl_pathv[i], (int)upto);
    }
    globfree(&g);
}

static hpt_status write_run_files(run_state *r, const hpt_train_opts *o)
{
    FILE *f;
    hpt_status st;
    if ((st = make_dirs(o->run_dir)) || (st = open_in_run_dir(o->run_dir, "config.json", &f)))
        return st;
    st = hpt_config_write(&r->cfg, f);
    if (fclose(f) && !st)
        st = hpt_error_set(HPT_ERR_IO, "%s/config.json: write failed", o->run_dir);
    if (st)
        return st;
    char path[4096];
    snprintf(path, sizeof path, "%s/log.tsv", o->run_dir);
    if (r->resume_from >= 0) { /* continued after the checkpoint's step (retrim_logs) */
        if (!(r->log = fopen(path, "a")))
            return hpt_error_set(HPT_ERR_IO, "%s: cannot append: %s", path, strerror(errno));
        if (ftell(r->log) == 0)
            fprintf(r->log, "step\tloss\tlr\tgrad_norm\tval_loss\tskipped\n");
        return HPT_OK;
    }
    if ((st = open_in_run_dir(o->run_dir, "log.tsv", &r->log)))
        return st;
    fprintf(r->log, "step\tloss\tlr\tgrad_norm\tval_loss\tskipped\n");
    return HPT_OK;
}

/* The checkpoint directory: --checkpoint-dir, else RUN_DIR/checkpoints;
 * "" when neither is given (then --save-every is refused). */
static hpt_status checkpoint_dir(run_state *r, const hpt_train_opts *o)
{
    const char *d = o->ckpt_dir;
    char buf[4096];
    if (!d && o->run_dir) {
        snprintf(buf, sizeof buf, "%s/checkpoints", o->run_dir);
        d = buf;
    }
    if (!d && o->save_every > 0)
        return hpt_error_set(HPT_ERR_USAGE, "--save-every %d needs --run-dir or --checkpoint-dir",
                             o->save_every);
    snprintf(r->ckpt_dir, sizeof r->ckpt_dir, "%s", d ? d : "");
    return HPT_OK;
}

/* The checkpoint's global batch must be kept: change gradient
 * accumulation, or refuse with the layouts that would work. */
static hpt_status keep_global_batch(run_state *r, hpt_train_opts *o, const hpt_ckpt_meta *meta)
{
    long long G = meta->global_batch, per = (long long)o->batch * r->comm.dp;
    if (G == per * o->grad_accum)
        return HPT_OK;
    if (G % per == 0) {
        if (r->root)
            fprintf(stderr, "hpt-train: note: resuming a global batch of %lld sequences: "
                    "--grad-accum %lld (micro-batch %d x DP %d)\n",
                    G, G / per, o->batch, r->comm.dp);
        o->grad_accum = (int)(G / per);
        return HPT_OK;
    }
    char ok[512] = "";
    for (int b = 1; b <= G && strlen(ok) < 400; b++)
        if (G % ((long long)b * r->comm.dp) == 0)
            snprintf(ok + strlen(ok), sizeof ok - strlen(ok), "%s%d", ok[0] ? ", " : "", b);
    return hpt_error_set(HPT_ERR_USAGE,
                         "%s: checkpoint global batch %lld cannot be kept with --batch %d x DP %d "
                         "(%d ranks / TP %d / PP %d): micro-batch x DP must divide it; with this "
                         "layout use --batch in {%s}, or a DP that divides %lld",
                         r->ckpt_dir, G, o->batch, r->comm.dp, r->comm.world_size, r->comm.tp,
                         r->comm.pp, ok[0] ? ok : "none", G);
}

/* How checkpoint metadata m differs from this run: 0 not; 1 another model
 * (what: the first differing config field); 2 another sequence length
 * (what: "--seq-len A, not B"); -1 its config does not parse (*st: the
 * parser's status, message set; what: that message). */
static int meta_differs(const run_state *r, const hpt_ckpt_meta *m, int seq_len, char *what,
                        size_t n, hpt_status *st)
{
    hpt_config saved;
    if ((*st = hpt_config_parse(m->config_json, r->ckpt_dir, &saved))) {
        snprintf(what, n, "%s", hpt_error_msg());
        return -1;
    }
    if (hpt_config_diff(&saved, &r->cfg, what, n))
        return 1;
    if (m->seq_len != seq_len) {
        snprintf(what, n, "--seq-len %d, not %d", m->seq_len, seq_len);
        return 2;
    }
    return 0;
}

/* A resume candidate failed with error st (message set): --resume strict
 * refuses (returns the error, message extended); --resume auto warns
 * (rank 0) and returns HPT_OK, to try the previous checkpoint. */
static hpt_status fall_back(const run_state *r, const hpt_train_opts *o, hpt_status st)
{
    if (o->resume == 2)
        return hpt_error_set(st, "%s (--resume strict: not falling back)", hpt_error_msg());
    if (r->root)
        fprintf(stderr, "hpt-train: warning: %s; falling back to the previous checkpoint\n",
                hpt_error_msg());
    return HPT_OK;
}

/* Before the model exists: pick the checkpoint to resume, check that it
 * fits (config, sequence length) and adapt gradient accumulation. */
static hpt_status probe_resume(run_state *r, hpt_train_opts *o, hpt_ckpt_meta *meta)
{
    MPI_Comm world = r->comm.comms[HPT_GROUP_WORLD];
    r->resume_from = -1;
    if (!r->ckpt_dir[0] || !o->resume)
        return HPT_OK;
    hpt_status st = hpt_checkpoint_clean(r->ckpt_dir, world);
    int64_t *steps = malloc(sizeof(int64_t) * HPT_CKPT_MAX_CANDIDATES);
    if (!steps)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    int n = st ? 0 : hpt_checkpoint_candidates(r->ckpt_dir, world, steps, HPT_CKPT_MAX_CANDIDATES);
    if (st || n == 0) {
        free(steps);
        return st;
    }
    for (int i = 0; i < n; i++) { /* the newest whose metadata reads */
        hpt_status e;
        meta->format_version = 0;
        if (!(st = hpt_checkpoint_meta(r->ckpt_dir, steps[i], world, meta)))
            break;
        if (meta->format_version > HPT_CKPT_VERSION) /* a newer hpt's: never skip its work */
            break;
        if ((e = fall_back(r, o, st))) {
            free(steps);
            return e;
        }
    }
    free(steps);
    if (st && meta->format_version > HPT_CKPT_VERSION)
        return st;
    if (st)
        return hpt_error_set(st, "%s: no loadable checkpoint (%s)", r->ckpt_dir, hpt_error_msg());
    char what[256];
    int d = meta_differs(r, meta, o->seq_len, what, sizeof what, &st);
    if (d < 0)
        return st; /* the parser's message */
    if (d == 1)
        return hpt_error_set(HPT_ERR_USAGE,
                             "%s: checkpoint of step %lld is of another model: %s from --model %s; "
                             "nothing was overwritten",
                             r->ckpt_dir, (long long)meta->step, what, o->model);
    if (d == 2)
        return hpt_error_set(HPT_ERR_USAGE, "%s: checkpoint was trained with %s",
                             r->ckpt_dir, what);
    if ((st = keep_global_batch(r, o, meta)))
        return st;
    r->resume_from = meta->step;
    return HPT_OK;
}

/* ZeRO-1: parameter range [lo, hi) owned by this DP rank, contiguous
 * blocks of ceil(nparams/DP) elements in rank order. */
static hpt_status setup_zero1(run_state *r, size_t *lo, size_t *hi)
{
    int D = r->comm.dp;
    size_t n = r->model.nparams, S = (n + D - 1) / D;
    if (S > 2147483647u)
        return hpt_error_set(HPT_ERR_USAGE, "--zero1: shard of %zu elements exceeds 2^31", S);
    r->shard_counts = calloc((size_t)D, sizeof(int));
    if (!r->shard_counts)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    for (int i = 0; i < D; i++) {
        size_t a = (size_t)i * S < n ? (size_t)i * S : n, b = a + S < n ? a + S : n;
        r->shard_counts[i] = (int)(b - a);
    }
    *lo = (size_t)r->comm.dp_rank * S < n ? (size_t)r->comm.dp_rank * S : n;
    *hi = *lo + (size_t)r->shard_counts[r->comm.dp_rank];
    r->grad_shard = r->model.be->alloc(sizeof(float) * (S ? S : 1));
    return r->grad_shard ? HPT_OK : hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
}

/* Layers [l0, l1) of this pipeline stage: balanced (stage s gets layers
 * s*L/P .. (s+1)*L/P) or from --pp-split "a,b,..." (one count per stage,
 * summing to L). Errors: HPT_ERR_USAGE for more stages than layers or a
 * split that does not match. */
static hpt_status stage_layers(run_state *r, const hpt_train_opts *o)
{
    int P = r->comm.pp, L = r->cfg.num_hidden_layers, count = 0, total = 0;
    if (P > L)
        return hpt_error_set(HPT_ERR_USAGE, "--pp %d: more pipeline stages than the model's %d layers",
                             P, L);
    if (!(r->layer_stage = calloc((size_t)L, sizeof(int))))
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    for (int s = 0; !o->pp_split && s < P; s++) /* balanced */
        for (int l = (int)((long)s * L / P); l < (int)((long)(s + 1) * L / P); l++)
            r->layer_stage[l] = s;
    for (const char *p = o->pp_split; p && *p; count++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v <= 0 || (*end && *end != ',') || count >= P || total + v > L)
            return hpt_error_set(HPT_ERR_USAGE,
                                 "--pp-split '%s': expected %d positive layer counts (--pp) "
                                 "summing to the model's %d layers", o->pp_split, P, L);
        for (long l = total; l < total + v; l++)
            r->layer_stage[l] = count;
        total += (int)v;
        p = *end ? end + 1 : end;
    }
    if (o->pp_split && (count != P || total != L))
        return hpt_error_set(HPT_ERR_USAGE,
                             "--pp-split '%s': %d counts summing to %d, expected %d counts (--pp) "
                             "summing to %d layers", o->pp_split, count, total, P, L);
    r->l0 = L;
    r->l1 = 0;
    for (int l = 0; l < L; l++)
        if (r->layer_stage[l] == r->comm.pp_rank) {
            r->l0 = l < r->l0 ? l : r->l0;
            r->l1 = l + 1;
        }
    return HPT_OK;
}

/* Micro-batches in flight on this stage: 1F1B keeps at most PP - stage
 * (Narayanan et al. 2021, section 2.2), GPipe all of them. */
static int pipeline_slots(const run_state *r, const hpt_train_opts *o)
{
    int inflight = o->gpipe ? o->grad_accum : r->comm.pp - r->comm.pp_rank;
    return inflight < o->grad_accum ? inflight : o->grad_accum;
}

static hpt_status setup_pipeline(run_state *r, int nslots)
{
    size_t NC = (size_t)r->model.B * r->model.T * r->cfg.hidden_size;
    r->fwd_req = calloc((size_t)nslots, sizeof(hpt_comm_req));
    r->bwd_req = calloc((size_t)nslots, sizeof(hpt_comm_req));
    r->fwd_busy = calloc((size_t)nslots, 1);
    r->bwd_busy = calloc((size_t)nslots, 1);
    r->grad_send = r->comm.pp > 1 ? r->model.be->alloc(sizeof(float) * NC * nslots) : NULL;
    if (!r->fwd_req || !r->bwd_req || !r->fwd_busy || !r->bwd_busy ||
        (r->comm.pp > 1 && !r->grad_send))
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory for pipeline buffers");
    return HPT_OK;
}

/* Setup, part 1: checks that need no communication. */
static hpt_status setup_local(run_state *r, const hpt_train_opts *o, const hpt_backend **be)
{
    hpt_status st;
    if ((st = hpt_train_opts_validate(o)) || (st = hpt_config_resolve(o->model, &r->cfg)))
        return st;
    if (o->tie_embeddings >= 0)
        r->cfg.tie_word_embeddings = o->tie_embeddings;
    if (o->seq_len > r->cfg.max_position_embeddings)
        return hpt_error_set(HPT_ERR_USAGE,
                             "--seq-len %d exceeds max_position_embeddings = %d of model '%s'",
                             o->seq_len, r->cfg.max_position_embeddings, o->model);
    if ((st = hpt_backend_get(o->backend, be)) || (st = open_data(r, o)) ||
        (st = checkpoint_dir(r, o)))
        return st;
    if (r->root && o->export_path && (st = hpt_check_output_file("--export", o->export_path)))
        return st;
    return HPT_OK;
}

/* Setup, part 3 (after the resume probe): run files, model, optimizer. */
static hpt_status setup_model(run_state *r, const hpt_train_opts *o, const hpt_backend *be)
{
    hpt_status st;
    if ((st = check_epoch(r, o)) || (st = check_eval(r, o)))
        return st;
    if (r->root && o->run_dir && (st = write_run_files(r, o)))
        return st;
    if (r->resume_from < 0) /* a fresh start: no samples of an earlier run left behind */
        tidy_samples(r, o, -1);
    if (o->log_samples && o->run_dir && r->comm.tp_rank == 0 && r->comm.pp_rank == 0) {
        char path[4096];
        if ((st = make_dirs(o->run_dir))) /* rank 0 may not have created it yet */
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
    hpt_model_opts mo = {.comm = &r->comm, .recompute = o->recompute,
                         .nslots = pipeline_slots(r, o), .l0 = r->l0, .l1 = r->l1,
                         .skip_init = r->resume_from >= 0};
    if ((st = hpt_model_init_opts(&r->model, &r->cfg, be, &mo, o->batch, o->seq_len, o->seed)) ||
        (st = setup_pipeline(r, mo.nslots)))
        return st;
    hi = r->model.nparams;
    if (o->zero1 && (st = setup_zero1(r, &lo, &hi)))
        return st;
    if ((st = hpt_optim_init(&r->opt, &r->model, &oo, lo, hi)))
        return st;
    size_t n = (size_t)o->batch * o->seq_len;
    r->inputs = malloc(sizeof(int32_t) * n);
    r->targets = malloc(sizeof(int32_t) * n);
    if (!r->inputs || !r->targets)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory for the batch buffers");
    return HPT_OK;
}

static hpt_ckpt_state ckpt_state(run_state *r)
{
    return (hpt_ckpt_state){.comm = &r->comm, .model = &r->model, .opt = &r->opt,
                            .shard_counts = r->shard_counts};
}

/* After a checkpoint of step `step` has loaded: cut the per-step logs this
 * rank writes back to that step (rows of steps that will run again). */
static void retrim_logs(run_state *r, const hpt_train_opts *o, int64_t step)
{
    char path[4096];
    tidy_samples(r, o, step);
    if (r->log) {
        snprintf(path, sizeof path, "%s/log.tsv", o->run_dir);
        fclose(r->log);
        trim_rows(path, (int)step);
        r->log = fopen(path, "a");
    }
    if (r->samples) {
        snprintf(path, sizeof path, "%s/samples.%d.tsv", o->run_dir, r->comm.dp_rank);
        fclose(r->samples);
        trim_rows(path, (int)step);
        r->samples = fopen(path, "a");
    }
}

/* Load the probed checkpoint; with --resume auto fall back to older ones
 * when a tensor is damaged — only to one of the same model, sequence
 * length and global batch (the run was set up for the probed one).
 * Collective. */
static hpt_status load_resume(run_state *r, const hpt_train_opts *o, hpt_ckpt_meta *meta)
{
    MPI_Comm world = r->comm.comms[HPT_GROUP_WORLD];
    int64_t *steps = malloc(sizeof(int64_t) * HPT_CKPT_MAX_CANDIDATES);
    double t0 = now_s();
    if (!steps)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    int n = hpt_checkpoint_candidates(r->ckpt_dir, world, steps, HPT_CKPT_MAX_CANDIDATES), i = 0;
    while (i < n && steps[i] > meta->step) /* newer ones failed the probe */
        i++;
    hpt_ckpt_state cs = ckpt_state(r);
    hpt_status st = hpt_error_set(HPT_ERR_DATA, "step %lld is gone", (long long)meta->step);
    for (int first = i; i < n; i++) {
        hpt_ckpt_meta mi = *meta;
        if (i > first) {
            char what[300] = "", diff[256];
            hpt_status perr;
            mi.format_version = 0;
            if ((st = hpt_checkpoint_meta(r->ckpt_dir, steps[i], world, &mi))) {
                if (mi.format_version > HPT_CKPT_VERSION)
                    break;
                fall_back(r, o, st); /* (strict stopped at the first failure) */
                continue;
            }
            int d = meta_differs(r, &mi, meta->seq_len, diff, sizeof diff, &perr);
            if (d)
                snprintf(what, sizeof what, "%s%s%s",
                         d < 0 ? "an unreadable model config (" : d == 1 ? "another model: " : "",
                         diff, d < 0 ? ")" : "");
            else if (mi.global_batch != meta->global_batch)
                snprintf(what, sizeof what, "a global batch of %lld sequences, not %lld",
                         (long long)mi.global_batch, (long long)meta->global_batch);
            if (what[0]) {
                st = hpt_error_set(HPT_ERR_DATA, "the previous checkpoint, step %lld, has %s: not "
                                   "falling back to it", (long long)steps[i], what);
                break;
            }
        }
        if (!(st = hpt_checkpoint_load(r->ckpt_dir, steps[i], &cs))) {
            *meta = mi;
            break;
        }
        hpt_status e = fall_back(r, o, st);
        if (e) {
            free(steps);
            return e;
        }
    }
    /* the unloadable ones newer than the step loaded: out of the way of
     * later resumes and of --keep (renamed, not deleted) */
    for (int j = 0; !st && r->root && j < n && steps[j] > meta->step; j++) {
        if (hpt_checkpoint_move_aside(r->ckpt_dir, steps[j]))
            fprintf(stderr, "hpt-train: warning: %s\n", hpt_error_msg());
        else
            fprintf(stderr, "hpt-train: moved the unloadable %s/step_%08lld aside to "
                    "step_%08lld.unloadable\n", r->ckpt_dir, (long long)steps[j],
                    (long long)steps[j]);
    }
    free(steps);
    if (st)
        return hpt_error_set(st, "%s: no loadable checkpoint (%s)", r->ckpt_dir, hpt_error_msg());
    retrim_logs(r, o, meta->step); /* only now: a failed load leaves the logs as they were */
    r->ckpt_load_s = now_s() - t0;
    r->cursor = meta->samples;
    r->start_step = (int)meta->step;
    r->resume_from = meta->step;
    r->opt.t = (int)meta->adam_t;
    r->skipped_total = (int)meta->skipped_total;
    r->consecutive = (int)meta->consecutive_skips;
    if (r->root)
        fprintf(stderr, "hpt-train: resumed from %s/step_%08lld (written by TP %d x PP %d x DP %d%s) "
                "in %.3f s\n", r->ckpt_dir, (long long)meta->step, meta->tp, meta->pp, meta->dp,
                meta->zero1 ? " ZeRO-1" : "", now_s() - t0);
    return HPT_OK;
}

/* The training state to store with the tensors. */
static void fill_meta(run_state *r, const hpt_train_opts *o, int step, hpt_ckpt_meta *m)
{
    memset(m, 0, sizeof *m);
    m->format_version = HPT_CKPT_VERSION;
    snprintf(m->hpt_version, sizeof m->hpt_version, "%s", PACKAGE_VERSION);
    FILE *f = fmemopen(m->config_json, sizeof m->config_json - 1, "w");
    if (f) {
        hpt_config_write(&r->cfg, f);
        fclose(f);
    }
    m->step = step;
    m->samples = r->cursor;
    m->adam_t = r->opt.t;
    m->skipped_total = r->skipped_total;
    m->consecutive_skips = r->consecutive;
    m->global_batch = (int64_t)o->batch * o->grad_accum * r->comm.dp;
    m->seq_len = o->seq_len;
    m->micro_batch = o->batch;
    m->tp = r->comm.tp;
    m->pp = r->comm.pp;
    m->dp = r->comm.dp;
    m->zero1 = o->zero1;
    m->seed = o->seed;
}

static hpt_status save_checkpoint(run_state *r, const hpt_train_opts *o, int step, FILE *out)
{
    hpt_ckpt_meta meta;
    fill_meta(r, o, step, &meta);
    hpt_ckpt_state cs = ckpt_state(r);
    double secs = 0;
    int64_t bytes = 0;
    hpt_status st = hpt_checkpoint_save(r->ckpt_dir, &cs, &meta, o->keep, &secs, &bytes);
    if (!st && r->root) {
        fprintf(out, "step %d: checkpoint %s/step_%08d (%.1f MiB in %.2f s, %.0f MiB/s)\n", step,
                r->ckpt_dir, step, bytes / 1048576.0, secs, secs > 0 ? bytes / 1048576.0 / secs : 0);
        fflush(out);
    }
    if (!st)
        hpt_metrics_event(r->metrics, step, 0, "checkpoint_save",
                          "%s/step_%08d: %lld bytes in %.3f s", r->ckpt_dir, step,
                          (long long)bytes, secs);
    return st;
}

/* ------------------------------------------------------------ pipeline */

/* Seconds spent in communication calls so far, all groups. */
static double comm_seconds(const run_state *r)
{
    double s = 0;
    for (int g = 0; g < HPT_GROUP_COUNT; g++)
        s += r->comm.counters[g].seconds;
    return s;
}


static size_t act_elems(const run_state *r)
{
    return (size_t)r->model.B * r->model.T * r->cfg.hidden_size;
}

/* Forward of micro-batch i (global positions from `first`) through this
 * stage: receive the previous stage's output, run, send to the next.
 * Returns the stage's loss sum (non-zero on the last stage only). */
static double pipe_forward(run_state *r, const hpt_train_opts *o, hpt_loader *ld, int64_t first,
                           int i, int tag, float grad_scale, int train)
{
    hpt_comm *c = &r->comm;
    int k = i % r->model.nslots;
    double t0 = now_s();
    hpt_loader_batch(ld, first, o->batch, r->inputs, r->targets);
    double t1 = now_s();
    if (r->fwd_busy[k]) { /* the slot's previous output must have left */
        c->be->wait(c, &r->fwd_req[k]);
        r->fwd_busy[k] = 0;
    }
    if (!r->model.first)
        c->be->recv_f32(c, HPT_GROUP_PP, hpt_model_stage_input(&r->model, k), act_elems(r),
                        c->pp_rank - 1, tag);
    double t2 = now_s();
    if (train && i == 0 && o->fault_slow_rank == c->world_rank) /* test: a straggler */
        nanosleep(&(struct timespec){(time_t)(o->fault_slow_ms / 1e3),
                                     (long)(fmod(o->fault_slow_ms, 1e3) * 1e6)}, NULL);
    double c2 = comm_seconds(r);
    double loss = hpt_model_stage_forward(&r->model, k, r->inputs, r->targets, grad_scale, train);
    if (train) { /* compute only: the TP all-reduces inside are communication */
        r->t_data += t1 - t0;
        r->t_wait += t2 - t1;
        r->t_fwd += now_s() - t2 - (comm_seconds(r) - c2);
    }
    if (!r->model.last) {
        c->be->isend_f32(c, HPT_GROUP_PP, hpt_model_stage_output(&r->model, k), act_elems(r),
                         c->pp_rank + 1, tag, &r->fwd_req[k]);
        r->fwd_busy[k] = 1;
    }
    return loss;
}

/* Backward of micro-batch i: receive dL/d(output) from the next stage, run,
 * send dL/d(input) to the previous stage. */
static void pipe_backward(run_state *r, int i, int tag)
{
    hpt_comm *c = &r->comm;
    int k = i % r->model.nslots;
    double t0 = now_s();
    if (!r->model.last)
        c->be->recv_f32(c, HPT_GROUP_PP, r->model.dx, act_elems(r), c->pp_rank + 1, tag);
    double t1 = now_s(), c1 = comm_seconds(r);
    hpt_model_stage_backward(&r->model, k);
    r->t_wait += t1 - t0;
    r->t_bwd += now_s() - t1 - (comm_seconds(r) - c1); /* compute only */
    if (!r->model.first) {
        float *buf = r->grad_send + (size_t)k * act_elems(r);
        if (r->bwd_busy[k])
            c->be->wait(c, &r->bwd_req[k]);
        r->model.be->copy(buf, r->model.dx, sizeof(float) * act_elems(r));
        c->be->isend_f32(c, HPT_GROUP_PP, buf, act_elems(r), c->pp_rank - 1, tag, &r->bwd_req[k]);
        r->bwd_busy[k] = 1;
    }
}

/* Complete every pending pipeline send. */
static void pipe_drain(run_state *r)
{
    for (int k = 0; k < r->model.nslots; k++) {
        if (r->fwd_busy[k])
            r->comm.be->wait(&r->comm, &r->fwd_req[k]);
        if (r->bwd_busy[k])
            r->comm.be->wait(&r->comm, &r->bwd_req[k]);
        r->fwd_busy[k] = r->bwd_busy[k] = 0;
    }
}

/* Sum a loss over the stages (only the last has it) and the DP replicas. */
static double reduce_loss(run_state *r, double sum)
{
    if (r->comm.pp > 1)
        r->comm.be->allreduce_sum_f64(&r->comm, HPT_GROUP_PP, &sum, 1);
    if (r->comm.dp > 1)
        r->comm.be->allreduce_sum_f64(&r->comm, HPT_GROUP_DP, &sum, 1);
    return sum;
}

/* Mean validation loss over eval_batches global batches (B x accum x DP
 * sequences each) taken in order from the start of the validation shards,
 * wrapping around; sequences are split over micro-batches and DP ranks as
 * in training, so the result does not depend on the layout. */
/* A stop signal during validation, agreed at validation batch boundaries.
 * On several ranks each batch starts a nonblocking all-reduce (max) of the
 * local flag and the next boundary reads it, so no rank waits on it while
 * the batch runs; every rank sees the same answer at the same batch. */
typedef struct {
    MPI_Request req;
    int mine, any;
} stop_poll;

/* At the start of validation batch i: 1 when a stop signal reached some
 * rank (at batch i - 1 on several ranks, at once on one). Collective
 * (nonblocking) on several ranks: call it at every batch, then
 * stop_poll_end(). */
static int stop_poll_at(run_state *r, stop_poll *p, int i)
{
    if (r->comm.world_size == 1)
        return stop_signal != 0;
    if (i > 0) {
        MPI_Wait(&p->req, MPI_STATUS_IGNORE);
        if (p->any)
            return 1;
    }
    p->mine = stop_signal != 0;
    MPI_Iallreduce(&p->mine, &p->any, 1, MPI_INT, MPI_MAX, r->comm.comms[HPT_GROUP_WORLD],
                   &p->req);
    return 0;
}

static void stop_poll_end(stop_poll *p)
{
    if (p->req != MPI_REQUEST_NULL)
        MPI_Wait(&p->req, MPI_STATUS_IGNORE);
}

static double evaluate(run_state *r, const hpt_train_opts *o)
{
    double sum = 0.0;
    int D = r->comm.dp, M = o->grad_accum, done = 0;
    int64_t S = hpt_loader_num_samples(r->val), G = (int64_t)o->batch * M * D;
    int poll = r->ckpt_dir[0] && o->save_signals; /* the stop signals are caught */
    stop_poll p = {.req = MPI_REQUEST_NULL};
    for (; done < o->eval_batches && !(poll && stop_poll_at(r, &p, done)); done++)
        for (int k = 0; k < M; k++) {
            int64_t pos = done * G + ((int64_t)k * D + r->comm.dp_rank) * o->batch;
            sum += pipe_forward(r, o, r->val, pos % S, k, k, 0.0f, 0);
        }
    stop_poll_end(&p);
    pipe_drain(r);
    r->val_stopped = done < o->eval_batches;
    sum = reduce_loss(r, sum);
    return r->val_stopped ? NAN : sum / ((double)o->eval_batches * G * o->seq_len);
}

/* grad_ready callback: start the DP all-reduce of a finished range. */
static void bucket_start(void *ctx, size_t offset, size_t count)
{
    run_state *r = ctx;
    HPT_CHECK(r->nbuckets < MAX_BUCKETS);
    if (r->metrics) /* this replica's own gradient, before the sum over DP */
        r->local_sumsq += hpt_model_grad_sumsq(&r->model, r->model.grads + offset, offset,
                                               offset + count);
    r->comm.be->iallreduce_sum_f32(&r->comm, HPT_GROUP_DP, r->model.grads + offset, count,
                                   &r->buckets[r->nbuckets++]);
}

/* Tied embeddings across stages: the first stage's embedding and the last
 * stage's copy get the sum of both gradients, so they stay identical. */
static void tie_grads(run_state *r)
{
    if (r->comm.pp == 1 || !r->cfg.tie_word_embeddings || !(r->model.first || r->model.last))
        return;
    const hpt_tensor *t = hpt_model_tensor(&r->model, HPT_TENSOR_EMBED, -1);
    r->comm.be->allreduce_sum_f32(&r->comm, HPT_GROUP_EMBED, r->model.grads + t->offset,
                                  (size_t)(t->rows * t->cols));
}

/* Forward+backward over the grad_accum micro-batches of one step on this
 * rank. Micro-batch k of DP rank d holds global positions
 * cursor + (k*DP + d)*B ... + B-1, so the DP ranks together consume the
 * same B*accum*DP samples, in the same global order, as one rank would.
 * Pipeline schedule (Narayanan et al. 2021, "Efficient Large-Scale
 * Language Model Training on GPU Clusters", section 2.2): 1F1B runs
 * PP - stage - 1 warm-up forwards, then alternates one forward and one
 * backward, then drains the backwards; GPipe runs all forwards, then all
 * backwards. Gradients are scaled by 1/(tokens of the global batch) and
 * summed over DP during the last backward (except with ZeRO-1, where the
 * reduce-scatter is in grad_norm). Returns the mean loss per target token
 * of the global batch. */
static double accumulate(run_state *r, const hpt_train_opts *o)
{
    int D = r->comm.dp, d = r->comm.dp_rank, M = o->grad_accum;
    int P = r->comm.pp, s = r->comm.pp_rank;
    double tokens = (double)M * o->batch * o->seq_len * D;
    float scale = (float)(1.0 / tokens);
    int warm = o->gpipe ? M : (P - s - 1 < M ? P - s - 1 : M);
    double sum = 0.0;
    hpt_model_zero_grad(&r->model);
    if (r->poison) /* test: this rank's own gradients turn non-finite */
        r->model.be->scale(r->model.grads, NAN, r->model.nparams);
    r->nbuckets = 0;
    r->local_sumsq = 0;
#define FWD(i) sum += pipe_forward(r, o, r->train, r->cursor + ((int64_t)(i) * D + d) * o->batch, \
                                   (i), (i), scale, 1)
    for (int i = 0; r->samples && i < M; i++) /* the samples this replica trains on */
        for (int j = 0; j < o->batch; j++) {
            int64_t pos = r->cursor + ((int64_t)i * D + d) * o->batch + j;
            fprintf(r->samples, "%d\t%lld\t%lld\n", r->step, (long long)pos,
                    (long long)hpt_loader_sample_at(r->train, pos));
        }
    if (r->samples) /* like log.tsv: a killed run keeps every started step's rows */
        fflush(r->samples);
#define BWD(i)                                                                          \
    do {                                                                                \
        if ((i) + 1 == M && D > 1 && !o->zero1) {                                       \
            r->model.grad_ready = bucket_start;                                         \
            r->model.grad_ready_ctx = r;                                                \
        }                                                                               \
        pipe_backward(r, (i), M + (i));                                                 \
        r->model.grad_ready = NULL;                                                     \
    } while (0)
    for (int i = 0; i < warm; i++)
        FWD(i);
    for (int j = 0; j < M - warm; j++) {
        FWD(warm + j);
        BWD(j);
    }
    for (int j = M - warm; j < M; j++)
        BWD(j);
#undef FWD
#undef BWD
    pipe_drain(r);
    r->cursor += (int64_t)M * o->batch * D;
    for (int i = 0; i < r->nbuckets; i++)
        r->comm.be->wait(&r->comm, &r->buckets[i]);
    tie_grads(r);
    r->local_loss = sum;
    return reduce_loss(r, sum) / tokens;
}

/* Global gradient L2 norm, each parameter counted once (TP-replicated
 * tensors on one TP rank, shards summed over TP and, with ZeRO-1, over
 * DP). With ZeRO-1 the gradients are first reduce-scattered into this
 * rank's shard. */
static double grad_norm(run_state *r, const hpt_train_opts *o)
{
    double ss;
    if (r->metrics && o->zero1 && r->comm.dp > 1) /* pre-reduction, for the noise scale */
        r->local_sumsq = hpt_model_grad_sumsq(&r->model, r->model.grads, 0, r->model.nparams);
    if (o->zero1) {
        r->comm.be->reduce_scatter_sum_f32(&r->comm, HPT_GROUP_DP, r->model.grads,
                                           r->grad_shard, r->shard_counts);
        ss = hpt_model_grad_sumsq(&r->model, r->grad_shard, r->opt.lo, r->opt.hi);
        if (r->comm.dp == 1)
            r->local_sumsq = ss;
        r->comm.be->allreduce_sum_f64(&r->comm, HPT_GROUP_DP, &ss, 1);
    } else {
        ss = hpt_model_grad_sumsq(&r->model, r->model.grads, 0, r->model.nparams);
        if (r->comm.dp == 1)
            r->local_sumsq = ss;
    }
    if (r->comm.tp * r->comm.pp > 1) /* shards of TP and stages of PP */
        r->comm.be->allreduce_sum_f64(&r->comm, HPT_GROUP_MP, &ss, 1);
    return sqrt(ss);
}

static void update(run_state *r, const hpt_train_opts *o, float lr, double norm)
{
    float clip = hpt_clip_coef(&r->opt.o, norm);
    if (!o->zero1) {
        hpt_optim_step(&r->opt, &r->model, r->model.grads, lr, clip);
        return;
    }
    hpt_optim_step(&r->opt, &r->model, r->grad_shard, lr, clip);
    r->comm.be->allgather_inplace_f32(&r->comm, HPT_GROUP_DP, r->model.params, r->shard_counts);
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
 * next step (and a save) overrun --max-runtime? One all-reduce, so every
 * rank agrees. */
static int should_stop(run_state *r, const hpt_train_opts *o, double t_start, double step_s,
                       double save_s)
{
    int stop = stop_signal != 0;
    if (o->max_runtime > 0 && now_s() - t_start + 1.5 * step_s + 2 * save_s + 1 > o->max_runtime)
        stop = 2;
    if (r->comm.world_size > 1)
        MPI_Allreduce(MPI_IN_PLACE, &stop, 1, MPI_INT, MPI_MAX, r->comm.comms[HPT_GROUP_WORLD]);
    return stop;
}

/* ------------------------------------------------------------ metrics */

/* A skipped (non-finite) step: find the lowest world rank whose own loss
 * or pre-reduction gradient was non-finite (one all-reduce; every rank
 * takes this branch together) and record it as an event. */
static void skipped_step_event(run_state *r, int step, double loss, double norm, FILE *out)
{
    if (!r->metrics)
        return;
    int own = !isfinite(r->local_sumsq) || (r->model.last && !isfinite(r->local_loss));
    int first = own ? r->comm.world_rank : r->comm.world_size;
    if (r->comm.world_size > 1)
        MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, r->comm.comms[HPT_GROUP_WORLD]);
    if (!r->root)
        return;
    int tp = r->comm.tp, dp = r->comm.dp;
    if (first < r->comm.world_size)
        hpt_metrics_event(r->metrics, step, first, "skipped_step",
                          "non-finite loss %g / gradient norm %g: step skipped, no update; first "
                          "seen on rank %d (TP %d, DP %d, PP %d)",
                          loss, norm, first, first % tp, (first / tp) % dp, first / (tp * dp));
    if (first < r->comm.world_size)
        fprintf(out, "hpt-train: anomaly at step %d: skipped_step: non-finite values first seen "
                "on rank %d\n", step, first);
    else
        hpt_metrics_event(r->metrics, step, -1, "skipped_step",
                          "non-finite loss %g / gradient norm %g: step skipped, no update; no "
                          "rank's own values were non-finite before the reductions",
                          loss, norm);
}

/* This step's global and per-rank record (metrics.h). t0, t_acc, t1:
 * start of the step, end of forward/backward, end of the optimizer. */
static void record_metrics(run_state *r, const hpt_train_opts *o, int step, double t0,
                           double t_acc, double t1, double loss, double val, float lr, double norm,
                           int skip)
{
    static const int gmap[][2] = {{HPT_GROUP_TP, HPT_MR_COMM_TP}, {HPT_GROUP_PP, HPT_MR_COMM_PP},
                                  {HPT_GROUP_DP, HPT_MR_COMM_DP}, {HPT_GROUP_MP, HPT_MR_COMM_MP},
                                  {HPT_GROUP_EMBED, HPT_MR_COMM_EMBED}};
    double tok_rank = (double)o->grad_accum * o->batch * o->seq_len;
    hpt_metrics_step s = {.step = step + 1, .loss = loss, .val_loss = val, .lr = lr,
                          .grad_norm = norm, .skipped = skip,
                          .clip_coef = skip ? NAN : hpt_clip_coef(&r->opt.o, norm),
                          .tokens = tok_rank * r->comm.dp, .step_time = t1 - t0};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s.wall_time = ts.tv_sec + 1e-9 * ts.tv_nsec;
    hpt_metrics_rank m;
    double comm = 0, *v = m.v;
    for (size_t i = 0; i < sizeof gmap / sizeof gmap[0]; i++) {
        v[gmap[i][1]] = r->step_ctr[gmap[i][0]].seconds;
        v[gmap[i][1] + (HPT_MR_BYTES_TP - HPT_MR_COMM_TP)] = (double)r->step_ctr[gmap[i][0]].bytes;
    }
    for (int g = 0; g < HPT_GROUP_COUNT; g++)
        comm += r->step_ctr[g].seconds;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    v[HPT_MR_STEP_TIME] = t1 - t0;
    v[HPT_MR_FORWARD] = r->t_fwd;
    v[HPT_MR_BACKWARD] = r->t_bwd;
    v[HPT_MR_OPTIMIZER] = (t1 - t_acc) - (comm_seconds(r) - r->comm_s_acc);
    v[HPT_MR_DATA] = r->t_data;
    v[HPT_MR_PIPE_WAIT] = r->t_wait;
    v[HPT_MR_CHECKPOINT] = r->ckpt_save_s;
    r->ckpt_save_s = 0;
    v[HPT_MR_TOKENS] = tok_rank;
    v[HPT_MR_LOSS] = r->model.last ? r->local_loss / tok_rank : NAN;
    v[HPT_MR_GRAD_SUMSQ] = r->local_sumsq;
    v[HPT_MR_PEAK_RSS] = ru.ru_maxrss * 1024.0;
    v[HPT_MR_DEVICE_MEM] = NAN; /* the CPU backend has no device memory */
    v[HPT_MR_BUSY] = (t1 - t0) - comm;
    v[HPT_MR_NONFINITE] = !isfinite(r->local_sumsq) || (r->model.last && !isfinite(r->local_loss));
    if (v[HPT_MR_OPTIMIZER] < 0)
        v[HPT_MR_OPTIMIZER] = 0;
    hpt_metrics_record(r->metrics, &s, &m);
}

/* Default peak FLOP/s of one rank for MFU: the SGEMM peak measured on the
 * reference 2-core machine (docs/PERFORMANCE.md) shared by the ranks of a
 * node. --peak-flops overrides it (e.g. 989e12 for an H100's dense bf16). */
#define HPT_CPU_NODE_PEAK_FLOPS 233e9

/* "dir/base" with dir resolved (symbolic links, ..), for comparing output
 * paths; the file itself need not exist. */
static void resolved(const char *path, char *out, size_t n)
{
    char dir[4096], real[4096];
    const char *slash = strrchr(path, '/');
    hpt_path_dir(path, dir, sizeof dir);
    if (!realpath(dir, real))
        snprintf(real, sizeof real, "%s", dir);
    snprintf(out, n, "%s/%s", real, slash ? slash + 1 : path);
}

/* The metrics file must not be another output of the run. Same verdict on
 * every rank (no communication). */
static hpt_status check_metrics_path(const char *path, const hpt_train_opts *o)
{
    char m[8500], other[8500], p[4300];
    resolved(path, m, sizeof m);
    static const char *const run_files[] = {"config.json", "log.tsv", "comm.tsv"};
    for (size_t i = 0; o->run_dir && i < sizeof run_files / sizeof run_files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", o->run_dir, run_files[i]);
        resolved(p, other, sizeof other);
        if (!strcmp(m, other))
            return hpt_error_set(HPT_ERR_USAGE, "--metrics %s: is the run directory's %s", path,
                                 run_files[i]);
    }
    if (o->export_path) {
        resolved(o->export_path, other, sizeof other);
        if (!strcmp(m, other))
            return hpt_error_set(HPT_ERR_USAGE, "--metrics %s: same file as --export", path);
    }
    return HPT_OK;
}

static hpt_status open_metrics(run_state *r, const hpt_train_opts *o, const hpt_ckpt_meta *meta)
{
    char path[4096];
    if (o->metrics && !strcmp(o->metrics, "none"))
        return HPT_OK;
    if (o->metrics)
        snprintf(path, sizeof path, "%s", o->metrics);
    else if (o->run_dir)
        snprintf(path, sizeof path, "%s/metrics.h5", o->run_dir);
    else
        return HPT_OK;
    int W = r->comm.world_size;
    int *dp_rank = malloc(sizeof(int) * (size_t)W);
    char cfg[8192] = "";
    FILE *f = fmemopen(cfg, sizeof cfg - 1, "w");
    if (f) {
        hpt_config_write(&r->cfg, f);
        fclose(f);
    }
    if (!dp_rank)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory (metrics)");
    for (int w = 0; w < W; w++)
        dp_rank[w] = (w / r->comm.tp) % r->comm.dp;
    hpt_metrics_info info = {
        .world = W, .tp = r->comm.tp, .pp = r->comm.pp, .dp = r->comm.dp, .zero1 = o->zero1,
        .grad_accum = o->grad_accum, .micro_batch = o->batch, .seq_len = o->seq_len,
        .first_step = r->start_step, .resumed_from = r->resume_from,
        .flops_per_token = hpt_model_flops_per_token(&r->cfg, o->seq_len),
        .peak_flops_per_rank = o->peak_flops > 0 ? o->peak_flops
                                                 : HPT_CPU_NODE_PEAK_FLOPS / r->comm.node_size,
        .flop_formula = "per token: 6*N_matmul + 12*L*T*C (PaLM, Chowdhery et al. 2022, appendix "
                        "B); N_matmul = weights used in matrix products incl. the LM head",
        .model_config = cfg, .dp_rank = dp_rank, .slow_factor = o->slow_factor,
        .spike_factor = o->spike_factor};
    hpt_status st = check_metrics_path(path, o);
    if (!st)
        st = hpt_metrics_open(&r->metrics, r->comm.comms[HPT_GROUP_WORLD], path,
                              o->metrics_interval < o->steps ? o->metrics_interval : o->steps,
                              &info);
    free(dp_rank);
    if (st || !r->root)
        return st;
    hpt_metrics *m = r->metrics;
    hpt_metrics_event(m, r->start_step, 0, "run_start",
                      "TP %d x PP %d x DP %d%s on %d ranks, micro-batch %d x grad-accum %d, "
                      "%d steps",
                      r->comm.tp, r->comm.pp, r->comm.dp, o->zero1 ? " ZeRO-1" : "", W, o->batch,
                      o->grad_accum, o->steps);
    if (r->resume_from >= 0) {
        hpt_metrics_event(m, r->resume_from, 0, "checkpoint_load",
                          "step %lld loaded in %.2f s", (long long)r->resume_from, r->ckpt_load_s);
        hpt_metrics_event(m, r->resume_from, 0, "resume", "resumed from step %lld",
                          (long long)r->resume_from);
        if (meta->tp != r->comm.tp || meta->pp != r->comm.pp || meta->dp != r->comm.dp ||
            meta->zero1 != o->zero1)
            hpt_metrics_event(m, r->resume_from, 0, "layout_change",
                              "checkpoint written by TP %d x PP %d x DP %d%s, re-sharded to TP %d "
                              "x PP %d x DP %d%s (grad-accum %d)",
                              meta->tp, meta->pp, meta->dp, meta->zero1 ? " ZeRO-1" : "",
                              r->comm.tp, r->comm.pp, r->comm.dp, o->zero1 ? " ZeRO-1" : "",
                              o->grad_accum);
    }
    hpt_metrics_write_events(m); /* a run killed before its first flush keeps them */
    return HPT_OK;
}

static hpt_status train_loop(run_state *r, const hpt_train_opts *o, FILE *out)
{
    int consecutive = r->consecutive, skipped_total = r->skipped_total;
    double t_start = now_s(), val = NAN, step_s = 0, save_s = 0;
    for (int step = r->start_step; step < o->steps; step++) {
        double t0 = now_s();
        hpt_comm_counter before[HPT_GROUP_COUNT];
        memcpy(before, r->comm.counters, sizeof before);
        r->t_fwd = r->t_bwd = r->t_data = r->t_wait = 0;
        int poison = in_list(o->nan_steps, step + 1);
        r->poison = poison && o->fault_nan_rank == r->comm.world_rank;
        r->step = step + 1;
        double loss = accumulate(r, o);
        double t_acc = now_s();
        r->comm_s_acc = comm_seconds(r);
        if (poison && o->fault_nan_rank < 0)
            r->model.be->scale(r->model.grads, NAN, 1);
        double norm = grad_norm(r, o);
        float lr = hpt_lr_at(&r->opt.o, step);
        /* loss and norm are reduced, so every rank takes the same branch */
        int skip = !isfinite(loss) || !isfinite(norm), diverged = 0;
        if (skip) {
            skipped_step_event(r, step + 1, loss, norm, out);
            skipped_total++;
            diverged = ++consecutive >= o->max_skips;
        } else {
            consecutive = 0;
            update(r, o, lr, norm);
        }
        double t1 = now_s();
        for (int g = 0; g < HPT_GROUP_COUNT; g++) {
            r->step_ctr[g].calls = r->comm.counters[g].calls - before[g].calls;
            r->step_ctr[g].bytes = r->comm.counters[g].bytes - before[g].bytes;
            r->step_ctr[g].seconds = r->comm.counters[g].seconds - before[g].seconds;
            r->train_ctr[g].calls += r->comm.counters[g].calls - before[g].calls;
            r->train_ctr[g].bytes += r->comm.counters[g].bytes - before[g].bytes;
            r->train_ctr[g].seconds += r->comm.counters[g].seconds - before[g].seconds;
        }
        r->train_steps++;
        if (!o->quiet && r->root)
            print_step(out, o, r->comm.dp, step, loss, lr, norm, t1 - t0,
                       (t1 - t_start) * (step + 1) / (step + 1 - r->start_step), skip);
        step_s = t1 - t0;
        if (diverged) {
            if (r->metrics) { /* the step that stopped the run is logged too */
                record_metrics(r, o, step, t0, t_acc, t1, loss, NAN, lr, norm, skip);
                hpt_metrics_flush(r->metrics, r->root ? out : NULL);
            }
            return hpt_error_set(HPT_ERR_DIVERGED,
                                 "%d consecutive steps with a non-finite loss or gradient norm "
                                 "(last at step %d; %d skipped in all): stopping. Lower --lr or "
                                 "check the data",
                                 consecutive, step + 1, skipped_total);
        }
        int last = step + 1 == o->steps;
        val = NAN;
        if (r->val && (last || (o->eval_interval > 0 && (step + 1) % o->eval_interval == 0))) {
            val = evaluate(r, o);
            if (r->root && r->val_stopped)
                fprintf(out, "step %d: validation stopped by a stop signal\n", step + 1);
            else if (r->root)
                fprintf(out, "step %d: val loss %.4f\n", step + 1, val);
            fflush(out);
        }
        if (r->log)
        {
            fprintf(r->log, "%d\t%.17g\t%.9g\t%.17g\t%.17g\t%d\n", step + 1, loss, lr, norm, val,
                    skip);
            fflush(r->log); /* a killed run keeps every finished step */
        }
        r->skipped_total = skipped_total;
        r->consecutive = consecutive;
        int stop = r->ckpt_dir[0] ? should_stop(r, o, t_start, step_s, save_s) : 0;
        if (stop == 1)
            hpt_metrics_event(r->metrics, step + 1, 0, "signal",
                              "stop signal received (%s): checkpoint and exit 75",
                              stop_signal ? strsignal(stop_signal) : "on another rank");
        if (o->stop_at == step + 1)
            stop = 3;
        int save = r->ckpt_dir[0] && (stop || (o->save_every > 0 && (step + 1) % o->save_every == 0) ||
                                      (last && o->save_every > 0));
        if (r->metrics) {
            /* rows reach the file before a checkpoint commits, so a run killed
             * after the commit never loses the rows of the steps it saved */
            record_metrics(r, o, step, t0, t_acc, t1, loss, val, lr, norm, skip);
            if (hpt_metrics_due(r->metrics) || save || (stop && !last))
                hpt_metrics_flush(r->metrics, r->root ? out : NULL);
        }
        if (save) {
            double ts = now_s();
            hpt_status st = save_checkpoint(r, o, step + 1, out);
            save_s = now_s() - ts;
            r->ckpt_save_s = save_s; /* recorded with the next step */
            if (st)
                return st;
            hpt_metrics_write_events(r->metrics); /* rank 0, no communication */
        }
        if (stop && !last)
            return hpt_error_set(HPT_REQUEUE,
                                 "checkpointed step %d after %s; exiting with status 75 (requeue "
                                 "me); resume with the same --run-dir/--checkpoint-dir",
                                 step + 1, stop == 2 ? "--max-runtime" : stop == 3 ? "--stop-at"
                                                                         : "a stop signal");
    }
    if (r->root) {
        fprintf(out, "done: %d steps, %d skipped, %.1f s", o->steps, skipped_total,
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
    return HPT_OK;
}

/* Global (unsharded) values of tensor t, gathered over TP into `full`
 * (g_rows x g_cols, host) on every rank of the TP group. scratch: host,
 * TP x local elements. Collective over TP. */
static void gather_tensor(run_state *r, const hpt_tensor *t, float *local, float *scratch,
                          float *full)
{
    size_t n = (size_t)(t->rows * t->cols);
    r->model.be->download(local, r->model.params + t->offset, sizeof(float) * n);
    if (t->split == 0) {
        memcpy(full, local, sizeof(float) * n);
        return;
    }
    r->comm.be->allgather_f32(&r->comm, HPT_GROUP_TP, local, scratch, n);
    for (int p = 0; p < r->comm.tp; p++)
        for (int64_t i = 0; i < t->rows; i++) {
            int64_t gr = t->split == 1 ? p * t->rows + i : i;
            int64_t gc = t->split == 2 ? p * t->cols : 0;
            if (gr < t->g_rows)
                memcpy(full + gr * t->g_cols + gc, scratch + p * n + i * t->cols,
                       sizeof(float) * t->cols);
        }
}

/* The pipeline stage that owns logical tensor (kind, layer). */
static int owner_stage(const run_state *r, hpt_tensor_kind kind, int layer)
{
    if (kind == HPT_TENSOR_EMBED)
        return 0;
    if (kind == HPT_TENSOR_FINAL_NORM || kind == HPT_TENSOR_LM_HEAD)
        return r->comm.pp - 1;
    return r->layer_stage[layer];
}

/* Write the final weights with Hugging Face names (world rank 0): each
 * tensor is gathered over TP on its stage and sent to rank 0 from the
 * stage's first rank. Collective. */
static hpt_status export_weights(run_state *r, const char *path)
{
    hpt_comm *c = &r->comm;
    hid_t f = -1;
    hpt_status st = r->root ? hpt_h5_create(path, &f) : HPT_OK;
    const hpt_config *cfg = &r->cfg;
    size_t C = cfg->hidden_size, big = (size_t)cfg->vocab_size + c->tp;
    size_t most = C * (big > (size_t)cfg->intermediate_size ? big : (size_t)cfg->intermediate_size);
    most = most > C * C ? most : C * C;
    float *local = malloc(sizeof(float) * most), *scratch = malloc(sizeof(float) * most * c->tp);
    float *full = malloc(sizeof(float) * most);
    if (!local || !scratch || !full)
        HPT_FATAL("out of memory exporting weights");
    int L = cfg->num_hidden_layers, per_layer = HPT_TENSOR_DOWN - HPT_TENSOR_ATTN_NORM + 1;
    for (int g = -1; g <= L; g++) { /* -1: embedding, 0..L-1: layers, L: tail */
        for (int j = 0; j < (g >= 0 && g < L ? per_layer : 2); j++) {
            hpt_tensor_kind kind = g < 0 ? (j ? HPT_TENSOR_KIND_COUNT : HPT_TENSOR_EMBED)
                                   : g == L ? (j ? HPT_TENSOR_LM_HEAD : HPT_TENSOR_FINAL_NORM)
                                            : (hpt_tensor_kind)(HPT_TENSOR_ATTN_NORM + j);
            if (kind == HPT_TENSOR_KIND_COUNT ||
                (kind == HPT_TENSOR_LM_HEAD && cfg->tie_word_embeddings))
                continue;
            int layer = g >= 0 && g < L ? g : -1, owner = owner_stage(r, kind, layer);
            const hpt_tensor *t = NULL;
            if (c->pp_rank == owner) {
                t = hpt_model_tensor(&r->model, kind, layer);
                HPT_CHECK(t && !t->dup);
                gather_tensor(r, t, local, scratch, full);
            }
            /* name and shape travel with the data to rank 0 */
            struct { char name[96]; int64_t rows, cols; } hdr = {{0}, 0, 0};
            if (t) {
                snprintf(hdr.name, sizeof hdr.name, "%s", t->name);
                hdr.rows = t->g_rows;
                hdr.cols = t->g_cols;
            }
            int src = owner * c->tp * c->dp; /* world rank (tp 0, dp 0) of the owner stage */
            if (owner != 0 && c->world_rank == src) {
                MPI_Send(&hdr, sizeof hdr, MPI_BYTE, 0, 1, c->comms[HPT_GROUP_WORLD]);
                MPI_Send(full, (int)(hdr.rows * hdr.cols), MPI_FLOAT, 0, 2, c->comms[HPT_GROUP_WORLD]);
            }
            if (owner != 0 && r->root) {
                MPI_Recv(&hdr, sizeof hdr, MPI_BYTE, src, 1, c->comms[HPT_GROUP_WORLD], MPI_STATUS_IGNORE);
                MPI_Recv(full, (int)(hdr.rows * hdr.cols), MPI_FLOAT, src, 2,
                         c->comms[HPT_GROUP_WORLD], MPI_STATUS_IGNORE);
            }
            hsize_t dims[2] = {(hsize_t)hdr.rows, (hsize_t)hdr.cols};
            if (r->root && !st)
                st = hpt_h5_write_array(f, hdr.name, H5T_NATIVE_FLOAT, hdr.cols > 1 ? 2 : 1, dims,
                                        full);
        }
    }
    free(local);
    free(scratch);
    free(full);
    if (f >= 0 && H5Fclose(f) < 0 && !st)
        st = hpt_error_set(HPT_ERR_IO, "%s: closing the HDF5 file failed", path);
    return st;
}

/* Replicated tensors (norm weights) must stay bitwise identical across the
 * TP ranks; compare a hash of their bytes over TP. Collective over TP.
 * Errors: HPT_ERR_INTERNAL naming the first tensor that differs. */
/* FNV-1a of n bytes. */
static uint64_t hash_bytes(const void *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t k = 0; k < n; k++)
        h = (h ^ ((const unsigned char *)p)[k]) * 0x100000001b3ull;
    return h;
}

/* Whether a 64-bit value is the same on every rank of communicator c. */
static int same_everywhere(MPI_Comm c, uint64_t h)
{
    uint64_t lo, hi;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, c);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, c);
    return lo == hi;
}

/* The two copies of a tied embedding (first and last stage) must be
 * bitwise identical. Collective over the first and last stages. */
static hpt_status check_tied_copies(run_state *r)
{
    if (r->comm.pp == 1 || !r->cfg.tie_word_embeddings || !(r->model.first || r->model.last))
        return HPT_OK;
    const hpt_tensor *t = hpt_model_tensor(&r->model, HPT_TENSOR_EMBED, -1);
    size_t n = (size_t)(t->rows * t->cols);
    float *host = malloc(sizeof(float) * n);
    if (!host)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    r->model.be->download(host, r->model.params + t->offset, sizeof(float) * n);
    int same = same_everywhere(r->comm.comms[HPT_GROUP_EMBED], hash_bytes(host, sizeof(float) * n));
    free(host);
    return same ? HPT_OK
                : hpt_error_set(HPT_ERR_INTERNAL, "the tied embedding differs between the first and "
                                                  "the last pipeline stage");
}

static hpt_status check_replicas(run_state *r)
{
    hpt_status st = check_tied_copies(r);
    if (st || r->comm.tp == 1)
        return st;
    float *host = malloc(sizeof(float) * (size_t)r->cfg.hidden_size);
    if (!host)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    for (int i = 0; i < r->model.ntensors; i++) {
        const hpt_tensor *t = &r->model.tensors[i];
        if (t->split != 0)
            continue;
        size_t n = (size_t)(t->rows * t->cols);
        HPT_CHECK(n <= (size_t)r->cfg.hidden_size);
        r->model.be->download(host, r->model.params + t->offset, sizeof(float) * n);
        if (!same_everywhere(r->comm.comms[HPT_GROUP_TP], hash_bytes(host, sizeof(float) * n)) &&
            !st)
            st = hpt_error_set(HPT_ERR_INTERNAL,
                               "replicated tensor %s differs across the tensor-parallel ranks",
                               t->name);
    }
    free(host);
    return st;
}

static const char *const group_names[HPT_GROUP_COUNT] = {"world", "tp", "dp", "pp", "mp", "embed"};

/* Per-rank communication of the training steps, gathered to rank 0:
 * printed as a per-group summary and, with --run-dir, written to
 * RUN_DIR/comm.tsv (rank, group, calls, bytes, seconds per step, peak RSS).
 * Collective. */
static void comm_stats(run_state *r, const hpt_train_opts *o, FILE *out)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int W = r->comm.world_size, G = HPT_GROUP_COUNT, steps = r->train_steps ? r->train_steps : 1;
    double mine[HPT_GROUP_COUNT * 3 + 1], *all = r->root ? malloc(sizeof mine * W) : NULL;
    for (int g = 0; g < G; g++) {
        mine[3 * g] = (double)r->train_ctr[g].calls / steps;
        mine[3 * g + 1] = (double)r->train_ctr[g].bytes / steps;
        mine[3 * g + 2] = r->train_ctr[g].seconds / steps;
    }
    mine[3 * G] = ru.ru_maxrss / 1024.0; /* MiB */
    MPI_Gather(mine, 3 * G + 1, MPI_DOUBLE, all, 3 * G + 1, MPI_DOUBLE, 0,
               r->comm.comms[HPT_GROUP_WORLD]);
    if (!r->root)
        return;
    FILE *tsv = NULL;
    if (o->run_dir && open_in_run_dir(o->run_dir, "comm.tsv", &tsv) == HPT_OK)
        fprintf(tsv, "rank\tgroup\tcalls_per_step\tbytes_per_step\tseconds_per_step\tpeak_rss_mib\n");
    fprintf(out, "communication per training step (per rank, min..max over %d ranks):\n", W);
    for (int g = 1; g < G; g++) {
        double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {0, 0, 0};
        for (int w = 0; w < W; w++)
            for (int k = 0; k < 3; k++) {
                double v = all[w * (3 * G + 1) + 3 * g + k];
                lo[k] = v < lo[k] ? v : lo[k];
                hi[k] = v > hi[k] ? v : hi[k];
            }
        for (int w = 0; tsv && w < W; w++)
            fprintf(tsv, "%d\t%s\t%.17g\t%.17g\t%.6g\t%.1f\n", w, group_names[g],
                    all[w * (3 * G + 1) + 3 * g], all[w * (3 * G + 1) + 3 * g + 1],
                    all[w * (3 * G + 1) + 3 * g + 2], all[w * (3 * G + 1) + 3 * G]);
        if (hi[0] > 0)
            fprintf(out, "  %-5s %6.0f..%-6.0f calls  %10.0f..%-10.0f bytes  %8.4f..%-8.4f s\n",
                    group_names[g], lo[0], hi[0], lo[1], hi[1], lo[2], hi[2]);
    }
    double rlo = INFINITY, rhi = 0;
    for (int w = 0; w < W; w++) {
        double v = all[w * (3 * G + 1) + 3 * G];
        rlo = v < rlo ? v : rlo;
        rhi = v > rhi ? v : rhi;
    }
    fprintf(out, "peak RSS per rank: %.1f..%.1f MiB\n", rlo, rhi);
    if (tsv)
        fclose(tsv);
    free(all);
}

static void print_banner(run_state *r, const hpt_train_opts *o, FILE *out)
{
    fprintf(out,
            "hpt-train: model %s (%.2f M parameters, %d layers, hidden %d, heads %d/%d kv, "
            "vocab %d%s), backend %s\n"
            "hpt-train: layout TP %d x PP %d x DP %d%s on %d ranks%s%s; %.1f MiB of activations "
            "per rank\n"
            "hpt-train: %lld training samples of %d tokens; micro-batch %d x grad-accum %d x DP "
            "%d = %lld tokens/step; %d steps\n",
            o->model, hpt_config_num_params(&r->cfg) / 1e6, r->cfg.num_hidden_layers,
            r->cfg.hidden_size, r->cfg.num_attention_heads, r->cfg.num_key_value_heads,
            r->cfg.vocab_size, r->cfg.tie_word_embeddings ? ", tied" : "", o->backend, r->comm.tp,
            r->comm.pp, r->comm.dp, o->zero1 ? " (ZeRO-1)" : "", r->comm.world_size,
            o->recompute ? ", activation recomputation" : "",
            r->comm.pp > 1 ? (o->gpipe ? ", GPipe" : ", 1F1B") : "", r->model.act_bytes / 1048576.0,
            (long long)hpt_loader_num_samples(r->train), o->seq_len, o->batch, o->grad_accum,
            r->comm.dp, (long long)o->batch * o->grad_accum * o->seq_len * r->comm.dp, o->steps);
    fflush(out);
}

/* Layout checks that need no communication: every rank reaches the same
 * verdict, so no rank is left waiting in a collective. */
static hpt_status check_layout(MPI_Comm comm, const hpt_train_opts *o, int *dp)
{
    int world;
    MPI_Comm_size(comm, &world);
    hpt_status st = hpt_grid_check(world, o->tp, o->pp, o->dp, dp);
    if (st)
        return st;
    /* test faults that could not take effect would make a test pass vacuously */
    if (o->fault_nan_rank != -1 && (o->fault_nan_rank < 0 || o->fault_nan_rank >= world))
        return hpt_error_set(HPT_ERR_USAGE, "--fault-nan-rank %d: not a rank of this %d-rank job",
                             o->fault_nan_rank, world);
    if (o->fault_nan_rank >= 0 && !o->nan_steps)
        return hpt_error_set(HPT_ERR_USAGE, "--fault-nan-rank needs --fault-nan-steps");
    if (o->fault_slow_rank != -1 && (o->fault_slow_rank < 0 || o->fault_slow_rank >= world))
        return hpt_error_set(HPT_ERR_USAGE, "--fault-slow-rank %d: not a rank of this %d-rank job",
                             o->fault_slow_rank, world);
    if (o->fault_slow_ms != 0 && o->fault_slow_rank < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--fault-slow-ms needs --fault-slow-rank");
    return HPT_OK;
}

hpt_status hpt_train_run(MPI_Comm comm, FILE *out, const hpt_train_opts *opts)
{
    int dp;
    hpt_status st = check_layout(comm, opts, &dp);
    if (st)
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
    if (o->save_signals && (st = install_signals(o, o->run_dir || o->ckpt_dir)))
        return st; /* same verdict on every rank: no collective has started */
    hpt_comm_init(&r.comm, comm, o->tp, o->pp, dp, stderr);
    r.root = r.comm.world_rank == 0;
    /* each phase ends in an agreement, so no rank enters a collective that
     * another rank skipped after an error */
    st = hpt_comm_agree(comm, setup_local(&r, o, &be));
    if (!st)
        st = probe_resume(&r, o, &meta);
    if (!st)
        st = hpt_comm_agree(comm, setup_model(&r, o, be));
    if (!st && r.resume_from >= 0)
        st = load_resume(&r, o, &meta);
    if (!st)
        st = open_metrics(&r, o, &meta);
    if (!st) {
        if (r.root)
            print_banner(&r, o, out);
        st = train_loop(&r, o, out);
        hpt_metrics_event(r.metrics, r.start_step + r.train_steps, 0, "run_end", "%s",
                          st == HPT_OK ? "done" : hpt_error_msg());
        hpt_metrics_close(r.metrics, 1, r.root ? out : NULL); /* every exit of the loop is agreed */
        r.metrics = NULL;
    }
    if (!st)
        st = hpt_comm_agree(comm, check_replicas(&r));
    if (!st && o->comm_stats)
        comm_stats(&r, o, out);
    if (!st && o->export_path)
        st = hpt_comm_agree(comm, export_weights(&r, o->export_path));
    run_free(&r);
    return st;
}
