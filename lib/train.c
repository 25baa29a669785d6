/* train.c — the training loop; see train.h. */
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "data.h"

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
    const hpt_optim_opts *p = &o->optim;
    if (!(p->lr > 0) || !isfinite(p->lr))
        return hpt_error_set(HPT_ERR_USAGE, "--lr %g: must be > 0", p->lr);
    if (!(p->min_lr >= 0) || p->min_lr > p->lr)
        return hpt_error_set(HPT_ERR_USAGE, "--min-lr %g: must be in [0, --lr %g]", p->min_lr,
                             p->lr);
    if (p->warmup < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--warmup %d: must be >= 0", p->warmup);
    if (o->eval_interval < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--eval-interval %d: must be >= 0", o->eval_interval);
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

typedef struct {
    hpt_config cfg;
    hpt_model model;
    hpt_optim opt;
    hpt_loader *train, *val;
    int32_t *inputs, *targets; /* host (B,T) */
    FILE *log;                 /* RUN_DIR/log.tsv or NULL */
    int64_t cursor;            /* samples consumed in the global order */
} run_state;

static void run_free(run_state *r)
{
    hpt_model_free(&r->model);
    hpt_optim_free(&r->opt);
    hpt_loader_close(r->train);
    hpt_loader_close(r->val);
    free(r->inputs);
    free(r->targets);
    if (r->log)
        fclose(r->log);
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
    if (!val && is_dir)
        val = o->data;
    if (val && (st = hpt_loader_open(&r->val, val, is_dir && !o->val_data ? "val" : NULL,
                                     o->seq_len, r->cfg.vocab_size, o->seed, 0)))
        return st;
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
    if ((st = open_in_run_dir(o->run_dir, "log.tsv", &r->log)))
        return st;
    fprintf(r->log, "step\tloss\tlr\tgrad_norm\tval_loss\tskipped\n");
    return HPT_OK;
}

static hpt_status setup(run_state *r, const hpt_train_opts *o)
{
    hpt_status st;
    const hpt_backend *be;
    if ((st = hpt_train_opts_validate(o)) || (st = hpt_config_resolve(o->model, &r->cfg)))
        return st;
    if (o->tie_embeddings >= 0)
        r->cfg.tie_word_embeddings = o->tie_embeddings;
    if (o->seq_len > r->cfg.max_position_embeddings)
        return hpt_error_set(HPT_ERR_USAGE,
                             "--seq-len %d exceeds max_position_embeddings = %d of model '%s'",
                             o->seq_len, r->cfg.max_position_embeddings, o->model);
    if ((st = hpt_backend_get(o->backend, &be)) || (st = open_data(r, o)))
        return st;
    if (o->run_dir && (st = write_run_files(r, o)))
        return st;
    hpt_optim_opts oo = o->optim;
    oo.total_steps = o->steps;
    if ((st = hpt_model_init(&r->model, &r->cfg, be, o->batch, o->seq_len, o->seed)) ||
        (st = hpt_optim_init(&r->opt, &r->model, &oo)))
        return st;
    size_t n = (size_t)o->batch * o->seq_len;
    r->inputs = malloc(sizeof(int32_t) * n);
    r->targets = malloc(sizeof(int32_t) * n);
    if (!r->inputs || !r->targets)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory for the batch buffers");
    return HPT_OK;
}

/* Mean validation loss over eval_batches micro-batches taken in order from
 * the start of the validation shards (wrapping around). */
static double evaluate(run_state *r, const hpt_train_opts *o)
{
    double sum = 0.0;
    int64_t S = hpt_loader_num_samples(r->val);
    for (int i = 0; i < o->eval_batches; i++) {
        hpt_loader_batch(r->val, ((int64_t)i * o->batch) % S, o->batch, r->inputs, r->targets);
        sum += hpt_model_forward(&r->model, r->inputs, r->targets, 0.0f, 0);
    }
    return sum / ((double)o->eval_batches * o->batch * o->seq_len);
}

/* Forward+backward over the grad_accum micro-batches of one step; returns
 * the mean loss per target token. */
static double accumulate(run_state *r, const hpt_train_opts *o)
{
    double tokens = (double)o->grad_accum * o->batch * o->seq_len, sum = 0.0;
    hpt_model_zero_grad(&r->model);
    for (int k = 0; k < o->grad_accum; k++) {
        hpt_loader_batch(r->train, r->cursor, o->batch, r->inputs, r->targets);
        r->cursor += o->batch;
        sum += hpt_model_forward(&r->model, r->inputs, r->targets, (float)(1.0 / tokens), 1);
        hpt_model_backward(&r->model);
    }
    return sum / tokens;
}

static void print_step(FILE *out, const hpt_train_opts *o, int step, double loss, float lr,
                       double norm, double dt, double elapsed, int skipped)
{
    double tok = (double)o->grad_accum * o->batch * o->seq_len;
    char eta[32];
    format_eta(eta, sizeof eta, elapsed / (step + 1) * (o->steps - step - 1));
    fprintf(out,
            "step %*d/%d | loss %.4f | lr %.2e | grad norm %.4f | %.0f tok/s | %.1f ms/step | "
            "ETA %s%s\n",
            (int)snprintf(NULL, 0, "%d", o->steps), step + 1, o->steps, loss, lr, norm, tok / dt,
            dt * 1e3, eta, skipped ? " | SKIPPED (non-finite)" : "");
    fflush(out);
}

static hpt_status train_loop(run_state *r, const hpt_train_opts *o, FILE *out)
{
    int consecutive = 0, skipped_total = 0;
    double t_start = now_s(), val = NAN;
    for (int step = 0; step < o->steps; step++) {
        double t0 = now_s();
        double loss = accumulate(r, o);
        if (in_list(o->nan_steps, step + 1))
            r->model.be->scale(r->model.grads, NAN, 1);
        double norm = hpt_grad_norm(&r->model);
        float lr = hpt_lr_at(&r->opt.o, step);
        int skip = !isfinite(loss) || !isfinite(norm);
        if (skip) {
            skipped_total++;
            if (++consecutive >= o->max_skips)
                return hpt_error_set(HPT_ERR_DIVERGED,
                                     "%d consecutive steps with a non-finite loss or gradient norm "
                                     "(last at step %d; %d skipped in all): stopping. Lower --lr or "
                                     "check the data",
                                     consecutive, step + 1, skipped_total);
        } else {
            consecutive = 0;
            hpt_optim_step(&r->opt, &r->model, lr, hpt_clip_coef(&r->opt.o, norm));
        }
        double t1 = now_s();
        if (!o->quiet)
            print_step(out, o, step, loss, lr, norm, t1 - t0, t1 - t_start, skip);
        int last = step + 1 == o->steps;
        val = NAN;
        if (r->val && (last || (o->eval_interval > 0 && (step + 1) % o->eval_interval == 0))) {
            val = evaluate(r, o);
            fprintf(out, "step %d: val loss %.4f\n", step + 1, val);
            fflush(out);
        }
        if (r->log)
            fprintf(r->log, "%d\t%.17g\t%.9g\t%.17g\t%.17g\t%d\n", step + 1, loss, lr, norm, val,
                    skip);
    }
    fprintf(out, "done: %d steps, %d skipped, %.1f s%s", o->steps, skipped_total,
            now_s() - t_start, "");
    if (r->val)
        fprintf(out, ", final val loss %.4f", val);
    fprintf(out, "\n");
    return HPT_OK;
}

hpt_status hpt_train_run(MPI_Comm comm, FILE *out, const hpt_train_opts *o)
{
    int size;
    MPI_Comm_size(comm, &size);
    if (size != 1)
        return hpt_error_set(HPT_ERR_USAGE,
                             "hpt-train runs on one rank in this release (got %d ranks); "
                             "tensor/pipeline/data parallel layouts are not implemented yet",
                             size);
    run_state r;
    memset(&r, 0, sizeof r);
    hpt_status st = setup(&r, o);
    if (!st) {
        fprintf(out,
                "hpt-train: model %s (%.2f M parameters, %d layers, hidden %d, heads %d/%d kv, "
                "vocab %d%s), backend %s\n"
                "hpt-train: %lld training samples of %d tokens; micro-batch %d x grad-accum %d = "
                "%d tokens/step; %d steps\n",
                o->model, hpt_config_num_params(&r.cfg) / 1e6, r.cfg.num_hidden_layers,
                r.cfg.hidden_size, r.cfg.num_attention_heads, r.cfg.num_key_value_heads,
                r.cfg.vocab_size, r.cfg.tie_word_embeddings ? ", tied" : "", o->backend,
                (long long)hpt_loader_num_samples(r.train), o->seq_len, o->batch, o->grad_accum,
                o->batch * o->grad_accum * o->seq_len, o->steps);
        fflush(out);
        st = train_loop(&r, o, out);
    }
    run_free(&r);
    return st;
}
