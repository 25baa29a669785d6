/* train.c — options, setup, the step loop and its records (log.tsv,
 * metrics, communication summary); see train.h. The pipeline schedule is
 * in train_pipeline.c, checkpoints and resume in train_ckpt.c, the weight
 * export and the replica checks in train_export.c, the metrics file and
 * --comm-stats in train_metrics.c (shared state: train_state.h). */
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
#include "cli.h"
#include "train_state.h"
#include "watchdog.h"

void hpt_train_opts_default(hpt_train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->model = "small";
    o->data = "data/gcide";
    o->backend = "cpu";
    o->comm = "auto";
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
    o->eval_batches_default = 1;
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
    o->collective_timeout = -1;
    o->fault_stall_rank = -1;
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
    if (o->sequence_parallel && o->tp > 1 && (o->batch * o->seq_len) % o->tp)
        return hpt_error_set(HPT_ERR_USAGE, "--sequence-parallel: a micro-batch of --batch %d x "
                             "--seq-len %d = %d tokens does not split into --tp %d equal parts "
                             "(choose them so that TP divides batch x seq-len)", o->batch,
                             o->seq_len, o->batch * o->seq_len, o->tp);
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
    if (o->export_path && !*o->export_path)
        return hpt_error_set(HPT_ERR_USAGE, "--export '': expected a file name");
    if (o->stop_at < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--stop-at %d: must be >= 1 (a step number; 0 = never)",
                             o->stop_at);
    if (o->stop_at && !o->run_dir && !o->ckpt_dir)
        return hpt_error_set(HPT_ERR_USAGE, "--stop-at needs --run-dir or --checkpoint-dir");
    if (o->max_runtime > 0 && !o->run_dir && !o->ckpt_dir) /* it stops with a checkpoint */
        return hpt_error_set(HPT_ERR_USAGE, "--max-runtime needs --run-dir or --checkpoint-dir "
                             "(it checkpoints before it stops)");
    if (!o->comm || (strcmp(o->comm, "mpi") && strcmp(o->comm, "nccl") && strcmp(o->comm, "auto")))
        return hpt_error_set(HPT_ERR_USAGE, "--comm %s: unknown communication backend (mpi, nccl "
                             "or auto)", o->comm ? o->comm : "(null)");
    if (!strcmp(o->comm, "nccl") && !strcmp(o->backend, "cpu"))
        return hpt_error_set(HPT_ERR_USAGE, "--comm nccl: NCCL moves GPU buffers; --backend cpu keeps "
                             "its buffers in host memory (use --comm mpi, or --backend cuda)");
    if (o->async_save && !o->run_dir && !o->ckpt_dir)
        return hpt_error_set(HPT_ERR_USAGE, "--async-save needs --run-dir or --checkpoint-dir "
                             "(it writes checkpoints)");
    if (o->save_every < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--save-every %d: must be >= 0 (0 = only on a stop "
                             "signal and at --max-runtime/--stop-at)", o->save_every);
    if (o->keep < 1)
        return hpt_error_set(HPT_ERR_USAGE, "--keep %d: must be >= 1", o->keep);
    if (!(o->max_runtime >= 0))
        return hpt_error_set(HPT_ERR_USAGE, "--max-runtime %g: must be >= 0 seconds (0 = none)",
                             o->max_runtime);
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
hpt_status open_in_run_dir(const char *dir, const char *name, FILE **f)
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

/* Set by SIGUSR1/SIGTERM: checkpoint at the next step boundary. */
volatile sig_atomic_t train_stop_signal;

static void on_stop_signal(int sig) { train_stop_signal = sig; }

static const struct {
    const char *name;
    int sig;
} signal_names[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"INT", SIGINT},
                    {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"XCPU", SIGXCPU}};

/* Parse "USR1,TERM" into a signal set. Errors: HPT_ERR_USAGE naming the
 * unknown signal and the accepted ones, or an empty list ("", ","). */
static hpt_status parse_signals(const char *list, sigset_t *set)
{
    sigemptyset(set);
    if (!list[strspn(list, ",")])
        return hpt_error_set(HPT_ERR_USAGE, "--signals '%s': names no signal (give at least one, "
                             "e.g. USR1,TERM; --no-signal-save keeps the default actions)", list);
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
    hpt_watchdog_stop(r->watchdog);
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

/* A fresh start in a run directory whose log.tsv has rows (an earlier run
 * without a checkpoint to resume from, or --resume none): that log is kept
 * as log.tsv.N (the first free N), with a note saying `why` the run starts
 * afresh, not truncated. Errors: HPT_ERR_IO. */
static hpt_status keep_earlier_log(const char *path, const char *why)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return HPT_OK;
    long long rows = -1; /* the header is not a row */
    int c, last = '\n';
    while ((c = getc(f)) != EOF) {
        if (last == '\n')
            rows++;
        last = c;
    }
    fclose(f);
    if (rows <= 0)
        return HPT_OK;
    char kept[4200];
    for (int n = 1;; n++) {
        struct stat sb;
        snprintf(kept, sizeof kept, "%s.%d", path, n);
        if (lstat(kept, &sb) != 0 && errno == ENOENT)
            break;
        if (n == 9999)
            return hpt_error_set(HPT_ERR_IO, "%s: cannot keep the earlier log: %s.1 to .9999 "
                                 "exist", path, path);
    }
    if (rename(path, kept))
        return hpt_error_set(HPT_ERR_IO, "%s: cannot keep the earlier log as %s: %s", path, kept,
                             strerror(errno));
    fprintf(stderr, "hpt-train: note: %s held an earlier run's %lld step%s and this run starts "
            "at step 0 (%s): the earlier log is kept as %s\n", path, rows, rows == 1 ? "" : "s",
            why, kept);
    return HPT_OK;
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
    if ((st = keep_earlier_log(path, o->resume == 0 ? "--resume none"
                                                    : "no checkpoint to resume from")) ||
        (st = open_in_run_dir(o->run_dir, "log.tsv", &r->log)))
        return st;
    fprintf(r->log, "step\tloss\tlr\tgrad_norm\tval_loss\tskipped\n");
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

/* --export FILE, checked before any step (hpt_check_output_file). Its directory
 * may be the --run-dir that this run has not created yet (write_run_files
 * creates it and checks that it is writable). Errors: HPT_ERR_IO naming FILE. */
static hpt_status check_export(const hpt_train_opts *o)
{
    char dir[4096], run[4096];
    struct stat sb;
    hpt_path_dir(o->export_path, dir, sizeof dir);
    if (o->run_dir && snprintf(run, sizeof run, "%s", o->run_dir) < (int)sizeof run) {
        for (size_t n = strlen(run); n > 1 && run[n - 1] == '/'; n--)
            run[n - 1] = 0;
        if (!strcmp(dir, run) && stat(run, &sb) != 0)
            return HPT_OK;
    }
    hpt_status st = hpt_check_output_file("--export", o->export_path);
    if (st)
        return st;
    if (hpt_ckpt_file_is_checkpoint(o->export_path))
        return hpt_error_set(HPT_ERR_USAGE, "--export %s: is an hpt checkpoint: the export "
                             "(weights only) would replace it; give another file name",
                             o->export_path);
    /* The export is written to PATH.tmp and renamed (io/h5out.h): create
     * and remove that name now, so a place no file can be created in
     * (root's access() says yes to /proc, a read-only mount) is refused
     * before training, not after it. An existing PATH.tmp (a crash's) is
     * overwritten later anyway. */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", o->export_path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 && errno != EEXIST)
        return hpt_error_set(HPT_ERR_IO, "--export %s: cannot create %s: %s", o->export_path, tmp,
                             strerror(errno));
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    return HPT_OK;
}

static void abort_nccl(void *comm) { hpt_comm_nccl_abort(comm); }

/* --comm: the communication backend for the compute backend `be`
 * (collective over the world: the NCCL set-up agrees on its result). A
 * backend with device memory (is_device) gets NCCL (auto, when built with
 * it) or MPI behind host staging (lib/comm_stage.c); a host backend MPI. */
static hpt_status choose_comm(run_state *r, const hpt_train_opts *o, const hpt_backend *be)
{
    const char *c = o->comm;
    int device = be->is_device != NULL;
#ifdef HAVE_NCCL
    int have_nccl = 1;
#else
    int have_nccl = 0;
#endif
    if (!strcmp(c, "auto")) {
        c = device && have_nccl ? "nccl" : "mpi";
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
    if (r->root && o->export_path && (st = check_export(o)))
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
                         .sequence_parallel = o->sequence_parallel,
                         .nslots = pipeline_slots(r, o), .l0 = r->l0, .l1 = r->l1,
                         .skip_init = r->resume_from >= 0 || o->init_from};
    if ((st = hpt_model_init_opts(&r->model, &r->cfg, be, &mo, o->batch, o->seq_len, o->seed)) ||
        (st = setup_pipeline(r, mo.nslots)))
        return st;
    if (o->init_from && (st = hpt_init_from(&r->model, o->init_from, r->resume_from,
                                            r->root ? stderr : NULL)))
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

/* Mean validation loss over eval_batches global batches (B x accum x DP
 * sequences each) taken in order from the start of the validation shards,
 * wrapping around; sequences are split over micro-batches and DP ranks as
 * in training, so the result does not depend on the layout. */
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
    /* --async-save: the save in flight must have its copy of the weights
     * and moments before they change (a training stall, if any) */
    r->ckpt_save_s += hpt_ckpt_async_snapshot_wait(r->async);
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
    s->t0 = now_s();
    memcpy(before, r->comm.counters, sizeof before);
    r->t_fwd = r->t_bwd = r->t_data = r->t_wait = 0;
    int poison = in_list(o->nan_steps, step + 1);
    r->poison = poison && o->fault_nan_rank == r->comm.world_rank;
    r->step = step + 1;
    s->loss = pipe_accumulate(r, o);
    s->t_acc = now_s();
    r->comm_s_acc = comm_seconds(r);
    if (poison && o->fault_nan_rank < 0)
        r->model.be->scale(r->model.grads, NAN, 1);
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
    count_step_comm(r, before);
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
    double val = pipe_evaluate(r, o);
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
        if (o->fault_stall_step == step + 1 && o->fault_stall_rank == r->comm.world_rank &&
            !o->fault_stall_boundary)
            for (;;) /* test: a stalled rank, before the step's first collective */
                sleep(3600);
        train_step(r, o, step, out, &s);
        if (r->comm.fr)
            hpt_flight_step_end(r->comm.fr);
        hpt_watchdog_step(r->watchdog, s.t1 - s.t0);
        if (!o->quiet && r->root)
            print_step(out, o, r->comm.dp, step, s.loss, s.lr, s.norm, s.t1 - s.t0,
                       (s.t1 - t_start) * (step + 1) / (step + 1 - r->start_step), s.skip);
        if (s.diverged)
            return stop_diverged(r, o, step, out, &s);
        s.val = maybe_validate(r, o, step, out);
        log_row(r, step, &s);
        if (o->fault_stall_boundary && o->fault_stall_step == step + 1 &&
            o->fault_stall_rank == r->comm.world_rank)
            raise(SIGSTOP); /* test: a frozen rank, the others in the stop agreement */
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
    return HPT_OK;
}

static void print_banner(run_state *r, const hpt_train_opts *o, FILE *out)
{
    fprintf(out,
            "hpt-train: model %s (%.2f M parameters, %d layers, hidden %d, heads %d/%d kv, "
            "vocab %d%s), backend %s%s%s%s, comm %s\n"
            "hpt-train: layout TP %d x PP %d x DP %d%s on %d ranks%s%s%s; %.1f MiB of activations "
            "per rank\n"
            "hpt-train: %lld training samples of %d tokens; micro-batch %d x grad-accum %d x DP "
            "%d = %lld tokens/step; %d steps\n",
            o->model, hpt_config_num_params(&r->cfg) / 1e6, r->cfg.num_hidden_layers,
            r->cfg.hidden_size, r->cfg.num_attention_heads, r->cfg.num_key_value_heads,
            r->cfg.vocab_size, r->cfg.tie_word_embeddings ? ", tied" : "", o->backend,
            r->model.be->describe ? " (" : "", r->model.be->describe ? r->model.be->describe() : "",
            r->model.be->describe ? ")" : "", r->comm.stage ? "mpi+host-staging" : (r->comm.inner ? r->comm.inner : r->comm.be)->name,
            r->comm.tp,
            r->comm.pp, r->comm.dp, o->zero1 ? " (ZeRO-1)" : "", r->comm.world_size,
            o->recompute == HPT_RECOMPUTE_SELECTIVE ? ", selective activation recomputation"
            : o->recompute ? ", full activation recomputation" : "",
            r->model.sp ? ", sequence parallel" : "",
            r->comm.pp > 1 ? (o->gpipe ? ", GPipe" : ", 1F1B") : "", r->model.act_bytes / 1048576.0,
            (long long)hpt_loader_num_samples(r->train), o->seq_len, o->batch, o->grad_accum,
            r->comm.dp, (long long)o->batch * o->grad_accum * o->seq_len * r->comm.dp, o->steps);
    fflush(out);
}

/* Layout checks that need no communication: every rank reaches the same
 * verdict, so no rank is left waiting in a collective. */
/* The options as lines in hpt-train's own words ("--lr 0.0006", "--zero1
 * (given)"), every one that the ranks must share, into buf[n] (n may be
 * 0: nothing written). Returns the length the whole text needs. */
static size_t opts_lines(const hpt_train_opts *o, char *buf, size_t n)
{
    size_t at = 0;
    char g[40];
#define L(...)                                                                                 \
    do {                                                                                       \
        int k_ = snprintf(at < n ? buf + at : NULL, at < n ? n - at : 0, __VA_ARGS__);         \
        at += k_ > 0 ? (size_t)k_ : 0;                                                         \
    } while (0)
#define S(name, v) L("--" name " %s\n", (v) ? (v) : "(not given)")
#define I(name, v) L("--" name " %lld\n", (long long)(v))
#define B(name, v) L("--" name " %s\n", (v) ? "(given)" : "(not given)")
#define D(name, v) L("--" name " %s\n", hpt_cli_format_g((double)(v), 0, g, sizeof g))
#define F(name, v) L("--" name " %s\n", hpt_cli_format_g((double)(v), 1, g, sizeof g))
    S("model", o->model); S("data", o->data); S("val-data", o->val_data);
    S("run-dir", o->run_dir); S("backend", o->backend);
    S("precision", hpt_precision_name(o->precision)); S("comm", o->comm);
    I("batch", o->batch); I("seq-len", o->seq_len); I("grad-accum", o->grad_accum);
    I("steps", o->steps); F("lr", o->optim.lr); F("min-lr", o->optim.min_lr);
    I("warmup", o->optim.warmup); F("beta1", o->optim.beta1); F("beta2", o->optim.beta2);
    F("adam-eps", o->optim.eps); F("weight-decay", o->optim.weight_decay);
    F("clip", o->optim.max_norm); I("seed", o->seed); I("eval-interval", o->eval_interval);
    L("--eval-batches %d%s\n", o->eval_batches, o->eval_batches_default ? " (the default)" : "");
    I("max-skips", o->max_skips);
    L("%s\n", o->tie_embeddings < 0 ? "--tie-embeddings/--untie-embeddings (not given)"
              : o->tie_embeddings ? "--tie-embeddings (given)" : "--untie-embeddings (given)");
    S("fault-nan-steps", o->nan_steps); S("export", o->export_path);
    S("init-from", o->init_from); I("tp", o->tp); I("pp", o->pp); I("dp", o->dp);
    B("zero1", o->zero1);
    S("recompute", o->recompute == 0 ? "none" : o->recompute == 1 ? "full" : "selective");
    B("sequence-parallel", o->sequence_parallel);
    S("pp-schedule", o->gpipe ? "gpipe" : "1f1b"); S("pp-split", o->pp_split);
    B("comm-stats", o->comm_stats); S("checkpoint-dir", o->ckpt_dir);
    I("save-every", o->save_every); I("keep", o->keep); B("async-save", o->async_save);
    S("resume", o->resume == 0 ? "none" : o->resume == 1 ? "auto" : "strict");
    D("max-runtime", o->max_runtime); B("no-signal-save", !o->save_signals);
    S("signals", o->signals); B("log-samples", o->log_samples); I("stop-at", o->stop_at);
    S("metrics", o->metrics); I("metrics-interval", o->metrics_interval);
    D("peak-flops", o->peak_flops); D("slow-rank-factor", o->slow_factor);
    D("spike-factor", o->spike_factor); I("fault-nan-rank", o->fault_nan_rank);
    I("fault-slow-rank", o->fault_slow_rank); D("fault-slow-ms", o->fault_slow_ms);
    for (int i = 0; i < o->nalerts; i++)
        L("--alert %s\n", o->alerts[i].text);
    D("collective-timeout", o->collective_timeout); I("fault-stall-rank", o->fault_stall_rank);
    I("fault-stall-step", o->fault_stall_step);
    S("fault-stall-at", o->fault_stall_boundary ? "boundary" : "step");
#undef L
#undef S
#undef I
#undef B
#undef D
#undef F
    return at;
}

/* Every rank must have been given the same options (a launcher that builds
 * them per node, an MPMD command line): otherwise DP replicas train apart
 * silently (another --lr), or ranks hang or crash in a collective (another
 * --steps, --seq-len). Compares a hash over the world (FNV-1a 64 of
 * opts_lines) before anything else is collective; on a difference the
 * lowest differing rank sends its lines and rank 0 names the first option
 * that differs. Collective over comm; the same status everywhere. Errors:
 * HPT_ERR_USAGE (HPT_ERR_INTERNAL: out of memory, agreed). */
static hpt_status check_same_options(MPI_Comm comm, const hpt_train_opts *o)
{
    size_t len = opts_lines(o, NULL, 0);
    char *mine = calloc(1, len + 1);
    int rank, ok = mine != NULL, all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (!all_ok) {
        free(mine);
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory comparing the ranks' options");
    }
    opts_lines(o, mine, len + 1);
    uint64_t h = 1469598103934665603ull, lo, hi, h0;
    for (const char *p = mine; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    MPI_Comm_rank(comm, &rank);
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, comm);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, comm);
    if (lo == hi) {
        free(mine);
        return HPT_OK;
    }
    h0 = h;
    MPI_Bcast(&h0, 1, MPI_UINT64_T, 0, comm);
    int me = h != h0 ? rank : INT_MAX, bad;
    MPI_Allreduce(&me, &bad, 1, MPI_INT, MPI_MIN, comm); /* never 0, never INT_MAX */
    char msg[1024] = "";
    if (rank == bad)
        MPI_Send(mine, (int)(len + 1), MPI_CHAR, 0, 0, comm);
    if (rank == 0) {
        MPI_Status ms;
        int count = 0;
        MPI_Probe(bad, 0, comm, &ms);
        MPI_Get_count(&ms, MPI_CHAR, &count);
        char *theirs = calloc(1, (size_t)count + 1);
        MPI_Recv(theirs ? theirs : msg, theirs ? count : 0, MPI_CHAR, bad, 0, comm,
                 MPI_STATUS_IGNORE);
        const char *a = "", *b = "", *p = mine, *q = theirs ? theirs : "";
        while (*p && *q) { /* the first line that differs */
            size_t lp = strcspn(p, "\n"), lq = strcspn(q, "\n");
            if (lp != lq || memcmp(p, q, lp)) {
                a = p, b = q;
                break;
            }
            p += lp + (p[lp] == '\n');
            q += lq + (q[lq] == '\n');
        }
        snprintf(msg, sizeof msg, "rank %d was given other options than rank 0 (every rank must "
                 "run the same hpt-train command): %.*s on rank 0, %.*s on rank %d", bad,
                 (int)strcspn(a, "\n"), a, (int)strcspn(b, "\n"), b, bad);
        free(theirs);
    }
    MPI_Bcast(msg, sizeof msg, MPI_CHAR, 0, comm);
    free(mine);
    return hpt_error_set(HPT_ERR_USAGE, "%s", msg);
}

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
    if (o->fault_stall_rank != -1 && (o->fault_stall_rank < 0 || o->fault_stall_rank >= world))
        return hpt_error_set(HPT_ERR_USAGE, "--fault-stall-rank %d: not a rank of this %d-rank job",
                             o->fault_stall_rank, world);
    if ((o->fault_stall_rank >= 0) != (o->fault_stall_step != 0) || o->fault_stall_step < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--fault-stall-rank and --fault-stall-step (>= 1) go "
                             "together");
    if (o->fault_stall_boundary && o->fault_stall_rank < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--fault-stall-at boundary needs --fault-stall-rank "
                             "and --fault-stall-step");
    return HPT_OK;
}

hpt_status hpt_train_run(MPI_Comm comm, FILE *out, const hpt_train_opts *opts)
{
    int dp;
    hpt_status st = check_same_options(comm, opts);
    if (st || (st = check_layout(comm, opts, &dp)))
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
    if (!st) /* collective; agrees itself */
        st = hpt_comm_agree(comm, choose_comm(&r, o, be));
    if (!st)
        st = probe_resume(&r, o, &meta);
    if (!st)
        st = hpt_comm_agree(comm, setup_model(&r, o, be));
    if (!st && r.resume_from >= 0)
        st = load_resume(&r, o, &meta);
    char hang_prev[1024] = ""; /* a previous hang's summary (lib/watchdog.h) */
    if (!st && o->run_dir && o->collective_timeout != 0)
        st = hpt_comm_agree(comm, r.root ? hpt_watchdog_prepare(o->run_dir, hang_prev,
                                                                sizeof hang_prev) : HPT_OK);
    if (!st)
        st = open_metrics(&r, o, &meta);
    if (!st && hang_prev[0]) {
        const char *p = strstr(hang_prev, "suspect: rank ");
        hpt_metrics_event(r.metrics, r.start_step, p ? atoi(p + 14) : 0, "hang",
                          "the previous run hung: %s", hang_prev);
    }
    if (!st)
        st = hpt_comm_agree(comm, hpt_watchdog_start(&r.watchdog, &r.comm, o->run_dir,
                                                     o->collective_timeout));
    if (!st && r.comm.nccl) /* a hang ends NCCL's kernels before MPI_Abort */
        hpt_watchdog_on_abort(r.watchdog, abort_nccl, &r.comm);
    if (!st)
        st = hpt_comm_agree(comm, setup_async_save(&r, o));
    if (!st) {
        if (r.root && o->sequence_parallel && r.comm.tp == 1)
            fprintf(stderr, "hpt-train: warning: --sequence-parallel splits the tokens over the "
                    "tensor-parallel ranks; with --tp 1 there is nothing to split and it does "
                    "nothing\n");
        if (r.root)
            print_banner(&r, o, out);
        st = train_loop(&r, o, out);
        finish_async_save(&r, r.start_step + r.train_steps, out); /* an exit mid-save (agreed) */
        hpt_watchdog_stop(r.watchdog);
        r.watchdog = NULL;
        if (r.root && o->run_dir && o->collective_timeout != 0)
            hpt_watchdog_tidy(o->run_dir); /* the empty RUN_DIR/hang prepare made */
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
