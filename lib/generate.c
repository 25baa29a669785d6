/* generate.c — weights loading, key/value-cache inference and sampling;
 * see generate.h. */
#include "generate.h"

#include <errno.h>
#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "ckpt_read.h"
#include "h5util.h"
#include "philox.h"
#include "spm.h"

/* ------------------------------------------------------------- paths */

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* A path stat refused: missing is a data error (3), anything else (a
 * permission) an I/O error (5) — as hpt-ckpt. */
static hpt_status path_error(const char *what, const char *path, int err)
{
    if (err == ENOENT || err == ENOTDIR)
        return hpt_error_set(HPT_ERR_DATA, "%s %s: no such file or directory", what, path);
    return hpt_error_set(HPT_ERR_IO, "%s %s: %s", what, path, strerror(err));
}

static hpt_status join(char *out, const char *dir, const char *name)
{
    if (snprintf(out, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX)
        return hpt_error_set(HPT_ERR_USAGE, "%s/%s: path too long", dir, name);
    return HPT_OK;
}

/* The weights file for `path`: a file as is; a directory's checkpoint.h5;
 * else the newest complete checkpoint of the directory or of its
 * checkpoints/ subdirectory (a run directory). */
static hpt_status resolve_file(const char *path, char *file)
{
    char dir[PATH_MAX], p[PATH_MAX];
    int64_t newest;
    struct stat sb;
    if (stat(path, &sb))
        return path_error("weights", path, errno);
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(file, PATH_MAX, "%s", path);
        return HPT_OK;
    }
    hpt_status st = join(file, path, HPT_CKPT_FILE);
    if (st || is_file(file))
        return st;
    if ((st = join(dir, path, "checkpoints")))
        return st;
    if (!is_dir(dir))
        snprintf(dir, sizeof dir, "%s", path);
    char skipped[1200];
    int found = hpt_ckpt_newest_readable(dir, &newest, file, skipped, sizeof skipped);
    if (found == -2) /* a newer format's: its message as it is */
        return HPT_ERR_DATA;
    if (found == -3) /* not read (no file locks): its message as it is */
        return HPT_ERR_IO;
    if (found < 0)
        return hpt_error_set(HPT_ERR_DATA, "weights %s: no complete checkpoint in %s opens: %s",
                             path, dir, hpt_error_msg());
    if (!found) { /* say where weights may be instead */
        int model_h5 = join(p, path, "model.h5") == HPT_OK && is_file(p);
        return hpt_error_set(HPT_ERR_DATA, "weights %s: a directory without %s and without a "
                             "complete step_NNNNNNNN checkpoint in %s%s%s%s", path, HPT_CKPT_FILE,
                             dir, model_h5 ? ": to use its export, give " : "",
                             model_h5 ? p : "",
                             model_h5 ? "" : " (hpt-train checkpoints with --save-every N or on a "
                                             "stop signal; or give an --export file)");
    }
    if (skipped[0])
        fprintf(stderr, "hpt-generate: note: %s\n", skipped);
    return HPT_OK;
}

/* ------------------------------------------------------ weights loading */

/* Open `file` read-only with the default (serial) driver. */
static hpt_status open_h5(const char *file, hid_t *f)
{
    struct stat sb;
    if (stat(file, &sb))
        return path_error("weights", file, errno);
    if (!S_ISREG(sb.st_mode))
        return hpt_error_set(HPT_ERR_DATA, "weights %s: not a regular file", file);
    if (access(file, R_OK))
        return hpt_error_set(HPT_ERR_IO, "weights %s: %s", file, strerror(errno));
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our messages, not HDF5's error stack */
    *f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (*f < 0) {
        const char *cause = hpt_h5_cause();
        hpt_status st = hpt_h5_lock_error("weights ", file, cause);
        return st ? st : hpt_error_set(HPT_ERR_DATA, "weights %s: not a readable HDF5 file, or "
                                       "truncated (%s)", file, cause);
    }
    return HPT_OK;
}

/* The model config: from the file's config_json (`json`, may be NULL) and
 * --model (`spec`, may be NULL); both must agree when both are there. */
static hpt_status resolve_config(const char *file, const char *json, const char *spec,
                                 hpt_config *cfg)
{
    char origin[PATH_MAX + 32], diff[256];
    hpt_config other;
    hpt_status st;
    if (!json && !spec)
        return hpt_error_set(HPT_ERR_USAGE, "weights %s: the file carries no model config "
                             "(attribute config_json, absent from exports of older hpt-train "
                             "versions and other tools): "
                             "give --model PRESET|CONFIG.json", file);
    if (spec && (st = hpt_config_resolve(spec, &other)))
        return st;
    if (!json) {
        *cfg = other;
        return HPT_OK;
    }
    snprintf(origin, sizeof origin, "%s (config_json)", file);
    if ((st = hpt_config_parse(json, origin, cfg)))
        return hpt_error_set(HPT_ERR_DATA, "%s", hpt_error_msg());
    if (spec && hpt_config_diff(&other, cfg, diff, sizeof diff))
        return hpt_error_set(HPT_ERR_USAGE, "--model %s does not match the config of %s: %s",
                             spec, file, diff);
    return HPT_OK;
}

/* Read dataset `name` (global shape rows x cols; cols = 1 for a vector)
 * into buf, checking its shape and, when `crc` is set, its CRC32C tiles. */
static hpt_status read_tensor(hid_t f, const char *file, const char *name, int64_t rows,
                              int64_t cols, int crc, float *buf)
{
    hid_t ds = H5Lexists(f, name, H5P_DEFAULT) > 0 ? H5Dopen2(f, name, H5P_DEFAULT) : -1;
    if (ds < 0)
        return hpt_error_set(HPT_ERR_DATA, "weights %s: dataset %s missing (not weights of this "
                             "model?)", file, name);
    hsize_t dims[2] = {0, 0};
    hid_t sp = H5Dget_space(ds);
    int rank = sp < 0 ? -1 : H5Sget_simple_extent_dims(sp, dims, NULL);
    if (sp >= 0)
        H5Sclose(sp);
    int want = cols > 1 ? 2 : 1;
    if (rank != want || (int64_t)dims[0] != rows || (want == 2 && (int64_t)dims[1] != cols)) {
        H5Dclose(ds);
        char shape[64];
        if (want == 2)
            snprintf(shape, sizeof shape, "(%lld, %lld)", (long long)rows, (long long)cols);
        else
            snprintf(shape, sizeof shape, "(%lld)", (long long)rows);
        return hpt_error_set(HPT_ERR_DATA, "weights %s: dataset %s: not of shape %s, which the "
                             "model config gives it", file, name, shape);
    }
    hpt_status st = HPT_OK;
    hpt_ckpt_tiles t;
    uint32_t *sums = NULL;
    int64_t bad = -1;
    if (crc && hpt_ckpt_get_crc(ds, rows, cols, &t, &sums))
        st = hpt_error_set(HPT_ERR_DATA, "weights %s: dataset %s: checksum attributes missing or "
                           "damaged", file, name);
    else if (crc) {
        int rc = hpt_ckpt_read_checked(ds, H5P_DEFAULT, &t, sums, 0, rows, 0, cols, buf, &bad);
        if (rc == -1)
            st = hpt_error_set(HPT_ERR_DATA, "weights %s: dataset %s: read failed (%s)", file, name,
                               hpt_h5_cause());
        else if (rc == -2)
            st = hpt_error_set(HPT_ERR_DATA, "weights %s: dataset %s: CRC32C mismatch in tile %lld "
                               "(damaged checkpoint)", file, name, (long long)bad);
    } else if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        st = hpt_error_set(HPT_ERR_DATA, "weights %s: dataset %s: read failed (%s)", file, name,
                           hpt_h5_cause());
    free(sums);
    H5Dclose(ds);
    return st;
}

/* Fill m's parameters from the tensors under `group` ("/model" or ""). */
static hpt_status read_params(hid_t f, const char *file, const char *group, int crc,
                              hpt_model *m)
{
    float *host = calloc(m->nparams, sizeof(float));
    if (!host)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory: %zu bytes for the weights",
                             sizeof(float) * m->nparams);
    hpt_status st = HPT_OK;
    for (int i = 0; i < m->ntensors && !st; i++) {
        const hpt_tensor *t = &m->tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%s/%s", group, t->name);
        st = read_tensor(f, file, name, t->g_rows, t->g_cols, crc, host + t->offset);
    }
    if (!st)
        m->be->upload(m->params, host, sizeof(float) * m->nparams);
    free(host);
    return st;
}

hpt_status hpt_gen_load(const char *path, hpt_gen_source kind, const char *model_spec,
                        const hpt_backend *be, hpt_model *m, char *file)
{
    hid_t f = -1;
    hpt_ckpt_meta *meta = calloc(1, sizeof *meta);
    char *json = NULL;
    memset(m, 0, sizeof *m);
    if (!meta)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    hpt_status st = resolve_file(path, file);
    if (!st)
        st = open_h5(file, &f);
    int is_ckpt = !st && H5Aexists(f, "format") > 0;
    if (!st && (is_ckpt || kind == HPT_GEN_SOURCE_CHECKPOINT)) {
        if ((st = hpt_ckpt_read_meta(f, file, meta)))
            st = hpt_error_set(st, "weights %s", hpt_error_msg());
        else if (kind == HPT_GEN_SOURCE_EXPORT)
            st = hpt_error_set(HPT_ERR_USAGE, "--export %s: a checkpoint, not an export (give it "
                               "with --checkpoint or as the path)", file);
        else
            json = strdup(meta->config_json);
    } else if (!st)
        json = hpt_h5_read_str_attr(f, "config_json");
    hpt_config cfg;
    if (!st)
        st = resolve_config(file, json, model_spec, &cfg);
    hpt_model_opts mo = {.skip_init = 1};
    if (!st)
        st = hpt_model_init_opts(m, &cfg, be, &mo, 1, 1, 0);
    if (!st)
        st = read_params(f, file, is_ckpt ? "/model" : "", is_ckpt && meta->format_version >= 2,
                         m);
    if (st)
        hpt_model_free(m);
    if (f >= 0)
        H5Fclose(f);
    free(json);
    free(meta);
    return st;
}

/* ---------------------------------------------------- key/value cache */

hpt_status hpt_gen_init(hpt_gen_state *g, const hpt_model *m, int ctx)
{
    const hpt_config *c = &m->cfg;
    memset(g, 0, sizeof *g);
    if (!m->be->rope_at || !m->be->attention_cached)
        return hpt_error_set(HPT_ERR_USAGE, "backend %s cannot generate (no key/value-cache "
                             "kernels)", m->be->name);
    if (ctx < 1 || ctx > c->max_position_embeddings)
        return hpt_error_set(HPT_ERR_USAGE, "context %d: must be in [1, max_position_embeddings "
                             "= %d]", ctx, c->max_position_embeddings);
    size_t C = c->hidden_size, hd = hpt_config_head_dim(c);
    size_t QD = c->num_attention_heads * hd, KD = c->num_key_value_heads * hd;
    size_t I = c->intermediate_size, L = c->num_hidden_layers, T = ctx;
    size_t sizes[] = {L * T * KD, L * T * KD, T * C, T * C, T * QD, T * QD, T * C,
                      T * C, T * I, T * I, T * I, T, c->vocab_size, T};
    void *ptrs[14];
    size_t a = m->act_elem; /* activations in the model's act dtype, the rest float */
    size_t elem[] = {a, a, 4, a, a, a, 4, 4, a, a, a, 4, 4, 4};
    size_t n = sizeof sizes / sizeof sizes[0], total = 0;
    for (size_t i = 0; i < n; i++)
        total += (sizes[i] * elem[i] + 63) & ~(size_t)63; /* 64-byte aligned pieces */
    g->block = m->be->alloc(total);
    if (!g->block)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory: %.1f MiB for a key/value cache of "
                             "%d positions", total / 1048576.0, ctx);
    for (size_t i = 0, off = 0; i < n; i++) {
        ptrs[i] = (char *)g->block + off;
        off += (sizes[i] * elem[i] + 63) & ~(size_t)63;
    }
    g->kcache = ptrs[0];
    g->vcache = ptrs[1];
    g->x = ptrs[2];
    g->ln = ptrs[3];
    g->q = ptrs[4];
    g->att = ptrs[5];
    g->tmp = ptrs[6];
    g->xmid = ptrs[7];
    g->gate = ptrs[8];
    g->up = ptrs[9];
    g->h = ptrs[10];
    g->rstd = ptrs[11];
    g->logits = ptrs[12];
    g->tokens = ptrs[13];
    g->m = m;
    g->ctx = ctx;
    return HPT_OK;
}

void hpt_gen_free(hpt_gen_state *g)
{
    if (g && g->m)
        g->m->be->free(g->block);
    if (g)
        memset(g, 0, sizeof *g);
}

#define W(kind, l) hpt_model_ptr(m, m->params, (kind), (l))

/* One layer over n positions from p0: x (n,C) updated in place. Shapes as
 * layer_forward in model.c; k and v are computed straight into the cache
 * rows p0 .. p0+n-1 of layer l. */
static void layer_step(hpt_gen_state *g, hpt_model *m, int l, int n, int p0)
{
    const hpt_backend *be = m->be;
    const hpt_config *c = &m->cfg;
    int C = c->hidden_size, I = c->intermediate_size, hd = hpt_config_head_dim(c);
    int H = c->num_attention_heads, KV = c->num_key_value_heads;
    size_t KD = (size_t)KV * hd, ae = m->act_elem; /* cache rows: act dtype */
    char *kc = (char *)g->kcache + (size_t)l * g->ctx * KD * ae;
    char *vc = (char *)g->vcache + (size_t)l * g->ctx * KD * ae;
    char *knew = kc + (size_t)p0 * KD * ae, *vnew = vc + (size_t)p0 * KD * ae;
    hpt_dtype act = m->act, f32 = HPT_DTYPE_F32;
    be->rmsnorm_forward(g->ln, g->rstd, g->x, W(HPT_TENSOR_ATTN_NORM, l), n, C, c->rms_norm_eps);
    be->matmul_forward(g->q, act, g->ln, W(HPT_TENSOR_Q, l), n, C, H * hd);
    be->matmul_forward(knew, act, g->ln, W(HPT_TENSOR_K, l), n, C, KV * hd);
    be->matmul_forward(vnew, act, g->ln, W(HPT_TENSOR_V, l), n, C, KV * hd);
    be->rope_at(g->q, n, H, hd, c->rope_theta, p0);
    be->rope_at(knew, n, KV, hd, c->rope_theta, p0);
    be->attention_cached(g->att, g->q, kc, vc, n, p0, H, KV, hd);
    be->matmul_forward(g->tmp, f32, g->att, W(HPT_TENSOR_O, l), n, H * hd, C);
    be->add(g->xmid, g->x, g->tmp, (size_t)n * C);
    be->rmsnorm_forward(g->ln, g->rstd, g->xmid, W(HPT_TENSOR_MLP_NORM, l), n, C,
                        c->rms_norm_eps);
    be->matmul_forward(g->gate, act, g->ln, W(HPT_TENSOR_GATE, l), n, C, I);
    be->matmul_forward(g->up, act, g->ln, W(HPT_TENSOR_UP, l), n, C, I);
    be->swiglu_forward(g->h, g->gate, g->up, (size_t)n * I);
    be->matmul_forward(g->tmp, f32, g->h, W(HPT_TENSOR_DOWN, l), n, I, C);
    be->add(g->x, g->xmid, g->tmp, (size_t)n * C);
}

hpt_status hpt_gen_step(hpt_gen_state *g, const int32_t *tokens, int n, float *logits)
{
    hpt_model *m = (hpt_model *)g->m;
    const hpt_backend *be = m->be;
    const hpt_config *c = &m->cfg;
    int C = c->hidden_size, V = c->vocab_size, p0 = g->pos;
    if (n < 1 || p0 + n > g->ctx)
        return hpt_error_set(HPT_ERR_USAGE, "%d tokens at position %d do not fit a context of %d",
                             n, p0, g->ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return hpt_error_set(HPT_ERR_DATA, "token %d at position %d: outside the vocabulary "
                                 "[0, %d)", tokens[i], p0 + i, V);
    be->upload(g->tokens, tokens, sizeof(int32_t) * n);
    be->embedding_forward(g->x, g->tokens, W(HPT_TENSOR_EMBED, -1), n, C, 0, V);
    for (int l = 0; l < c->num_hidden_layers; l++)
        layer_step(g, m, l, n, p0);
    /* only the last position's next-token distribution is needed */
    be->rmsnorm_forward(g->ln, g->rstd, g->x + (size_t)(n - 1) * C, W(HPT_TENSOR_FINAL_NORM, -1),
                        1, C, c->rms_norm_eps);
    be->matmul_forward(g->logits, HPT_DTYPE_F32, g->ln, W(HPT_TENSOR_LM_HEAD, -1), 1, C, V);
    be->download(logits, g->logits, sizeof(float) * V);
    g->pos += n;
    return HPT_OK;
}

/* ----------------------------------------------------------- sampling */

void hpt_sample_opts_default(hpt_sample_opts *o)
{
    o->temperature = 1.0f;
    o->top_k = 0;
    o->top_p = 1.0f;
    o->seed = 1234;
}

hpt_status hpt_sample_opts_check(const hpt_sample_opts *o)
{
    if (!(o->temperature >= 0.0f) || !isfinite(o->temperature))
        return hpt_error_set(HPT_ERR_USAGE, "--temperature %g: must be >= 0 (0 = greedy)",
                             o->temperature);
    if (o->top_k < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--top-k %d: must be >= 0 (0 = all tokens)", o->top_k);
    if (!(o->top_p > 0.0f && o->top_p <= 1.0f))
        return hpt_error_set(HPT_ERR_USAGE, "--top-p %g: must be in (0, 1] (1 = all tokens)",
                             o->top_p);
    return HPT_OK;
}

typedef struct {
    double p;
    int i;
} prob_idx;

/* Decreasing probability, then increasing index: a total order. */
static int by_prob(const void *a, const void *b)
{
    const prob_idx *x = a, *y = b;
    if (x->p != y->p)
        return x->p < y->p ? 1 : -1;
    return (x->i > y->i) - (x->i < y->i);
}

int32_t hpt_sample(const float *logits, int V, const hpt_sample_opts *o, uint64_t draw)
{
    int best = 0;
    for (int i = 1; i < V; i++)
        best = logits[i] > logits[best] ? i : best;
    if (o->temperature == 0.0f)
        return best;
    prob_idx *pi = malloc(sizeof *pi * (size_t)V);
    if (!pi)
        HPT_FATAL("out of memory sampling over %d tokens", V);
    double mx = logits[best], total = 0.0;
    for (int i = 0; i < V; i++) {
        pi[i].p = exp(((double)logits[i] - mx) / o->temperature);
        pi[i].i = i;
    }
    qsort(pi, (size_t)V, sizeof *pi, by_prob);
    int keep = o->top_k > 0 && o->top_k < V ? o->top_k : V;
    for (int i = 0; i < keep; i++)
        total += pi[i].p;
    double cum = 0.0, mass = 0.0;
    int n = 0;
    while (n < keep && (n == 0 || cum < o->top_p * total)) /* nucleus: smallest prefix >= p */
        cum += pi[n++].p;
    for (int i = 0; i < n; i++)
        mass += pi[i].p;
    uint64_t r = hpt_philox_u64(o->seed, hpt_hash_str("hpt-generate sample"), draw);
    double u = (double)(r >> 11) * 0x1.0p-53 * mass;
    int32_t tok = pi[n - 1].i;
    cum = 0.0;
    for (int i = 0; i < n; i++) {
        cum += pi[i].p;
        if (u < cum) {
            tok = pi[i].i;
            break;
        }
    }
    free(pi);
    return tok;
}

/* ------------------------------------------------------------ generate */

/* The tokenizer to load: --tokenizer (a file, or a directory holding
 * tokenizer.model), else tokenizer.model in the weights file's directory or
 * one of its two parents (step directory, checkpoints directory, run
 * directory). hpt-train does not record its data directory, so a run's
 * tokenizer is found only when copied there. */
static hpt_status find_tokenizer(const char *given, const char *file, char *out)
{
    if (given) {
        if (is_dir(given))
            return join(out, given, "tokenizer.model");
        snprintf(out, PATH_MAX, "%s", given);
        return HPT_OK;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", file);
    for (int up = 0; up < 3; up++) {
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir)
            *slash = '\0';
        else if (slash) /* under "/" */
            dir[1] = '\0';
        else
            snprintf(dir, sizeof dir, ".");
        if (join(out, dir, "tokenizer.model") == HPT_OK && is_file(out))
            return HPT_OK;
        if (!strcmp(dir, "/") || !strcmp(dir, "."))
            break;
    }
    return hpt_error_set(HPT_ERR_USAGE, "no tokenizer.model next to %s or in its run directory "
                         "(hpt-train does not record its data directory): give --tokenizer with "
                         "the corpus directory hpt-data wrote, or its tokenizer.model", file);
}

/* Load the tokenizer and check that its ids are the model's. */
static hpt_status load_tokenizer(const char *path, const hpt_config *cfg, hpt_spm **sp)
{
    char err[1024];
    hpt_spm_status s = hpt_spm_load(path, sp, err, sizeof err);
    if (s == HPT_SPM_ERR_NOMEM)
        return hpt_error_set(HPT_ERR_INTERNAL, "tokenizer %s: out of memory", path);
    if (s)
        return hpt_error_set(HPT_ERR_DATA, "tokenizer %s", err);
    int v = hpt_spm_vocab_size(*sp);
    if (v > cfg->vocab_size)
        return hpt_error_set(HPT_ERR_DATA, "tokenizer %s: %d pieces, more than the model's "
                             "vocab_size = %d (not the tokenizer it was trained with)", path, v,
                             cfg->vocab_size);
    return HPT_OK;
}

/* [eos] + encode(prompt) into ids; the prompt must give at least one token
 * and fit the context. */
static hpt_status encode_prompt(const hpt_spm *sp, const char *prompt, int ctx,
                                hpt_spm_ids *ids)
{
    char err[1024];
    int eos = hpt_spm_eos_id(sp);
    if (eos >= 0 && hpt_spm_ids_push(ids, eos))
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory encoding the prompt");
    size_t before = ids->n;
    hpt_spm_status s = hpt_spm_encode(sp, prompt, strlen(prompt), ids, err, sizeof err);
    if (s)
        return hpt_error_set(s == HPT_SPM_ERR_NOMEM ? HPT_ERR_INTERNAL : HPT_ERR_USAGE,
                             "--prompt: %s", err);
    if (ids->n == before)
        return hpt_error_set(HPT_ERR_USAGE, "--prompt '%s' encodes to no token: give some text",
                             prompt);
    if (ids->n > (size_t)ctx)
        return hpt_error_set(HPT_ERR_USAGE, "--prompt: %zu tokens%s, more than the model's "
                             "context (max_position_embeddings = %d)", ids->n,
                             eos >= 0 ? " with the leading eos" : "", ctx);
    return HPT_OK;
}

static void print_ids(FILE *out, const char *label, const int32_t *ids, size_t n)
{
    fputs(label, out);
    for (size_t i = 0; i < n; i++)
        fprintf(out, " %d", ids[i]);
    fputc('\n', out);
}

/* log softmax(logits[0..V))[tok], in double. */
static double log_prob(const float *logits, int V, int32_t tok)
{
    double mx = logits[0], sum = 0.0;
    for (int i = 1; i < V; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    for (int i = 0; i < V; i++)
        sum += exp((double)logits[i] - mx);
    return (double)logits[tok] - mx - log(sum);
}

/* Prefill the prompt, then sample into *gen; lp[t] (max_new_tokens
 * doubles) receives the log-probability of token t under the model. */
static hpt_status sample_loop(const hpt_generate_opts *o, hpt_model *m, const hpt_spm *sp,
                              const hpt_spm_ids *prompt, hpt_spm_ids *gen, double *lp)
{
    const hpt_config *c = &m->cfg;
    int want = (int)prompt->n + o->max_new_tokens;
    int ctx = want < c->max_position_embeddings ? want : c->max_position_embeddings;
    int eos = hpt_spm_eos_id(sp), V = hpt_spm_vocab_size(sp); /* only ids the tokenizer decodes */
    hpt_gen_state g;
    float *logits = malloc(sizeof(float) * c->vocab_size);
    hpt_status st = logits ? hpt_gen_init(&g, m, ctx)
                           : hpt_error_set(HPT_ERR_INTERNAL, "out of memory for the logits");
    if (!st && o->max_new_tokens > 0)
        st = hpt_gen_step(&g, prompt->ids, (int)prompt->n, logits);
    for (int t = 0; !st && t < o->max_new_tokens; t++) {
        int32_t tok = hpt_sample(logits, V, &o->sample, (uint64_t)t);
        lp[t] = log_prob(logits, V, tok);
        if (hpt_spm_ids_push(gen, tok))
            st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
        if (st || (tok == eos && !o->ignore_eos) || t + 1 == o->max_new_tokens)
            break;
        if (g.pos == g.ctx) {
            fprintf(stderr, "hpt-generate: note: stopped after %d new tokens: the context "
                    "(max_position_embeddings = %d) is full\n", t + 1, g.ctx);
            break;
        }
        st = hpt_gen_step(&g, &tok, 1, logits);
    }
    if (logits)
        hpt_gen_free(&g);
    free(logits);
    return st;
}

/* Print the prompt and its continuation (without a final eos). */
static hpt_status print_text(const hpt_spm *sp, const hpt_spm_ids *prompt,
                             const hpt_spm_ids *gen, FILE *out)
{
    int eos = hpt_spm_eos_id(sp);
    size_t np = prompt->n, ng = gen->n, skip = eos >= 0 ? 1 : 0;
    if (ng && gen->ids[ng - 1] == eos)
        ng--;
    int32_t *all = malloc(sizeof(int32_t) * (np + ng + 1));
    char *text = NULL, err[1024];
    if (!all)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    memcpy(all, prompt->ids + skip, sizeof(int32_t) * (np - skip));
    memcpy(all + np - skip, gen->ids, sizeof(int32_t) * ng);
    hpt_spm_status s = hpt_spm_decode(sp, all, np - skip + ng, &text, err, sizeof err);
    free(all);
    if (s)
        return hpt_error_set(HPT_ERR_INTERNAL, "decoding the output: %s", err);
    fprintf(out, "%s\n", text);
    free(text);
    return HPT_OK;
}

hpt_status hpt_generate(const hpt_generate_opts *o, FILE *out)
{
    hpt_status st = hpt_sample_opts_check(&o->sample);
    if (st)
        return st;
    if (o->max_new_tokens < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--max-new-tokens %d: must be >= 0",
                             o->max_new_tokens);
    if (!o->prompt)
        return hpt_error_set(HPT_ERR_USAGE, "--prompt TEXT is required");
    const hpt_backend *be;
    hpt_model m;
    hpt_spm *sp = NULL;
    hpt_spm_ids prompt = {0}, gen = {0};
    char *file = malloc(PATH_MAX), *tok = malloc(PATH_MAX);
    double *lp = malloc(sizeof(double) * ((size_t)o->max_new_tokens + 1));
    if (!file || !tok || !lp)
        st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    if (!st)
        st = hpt_backend_get("cpu", &be);
    if (!st)
        st = hpt_gen_load(o->path, o->kind, o->model, be, &m, file);
    if (st) {
        free(file);
        free(tok);
        free(lp);
        return st;
    }
    if (!(st = find_tokenizer(o->tokenizer, file, tok)) &&
        !(st = load_tokenizer(tok, &m.cfg, &sp)) &&
        !(st = encode_prompt(sp, o->prompt, m.cfg.max_position_embeddings, &prompt)))
        st = sample_loop(o, &m, sp, &prompt, &gen, lp);
    if (!st && o->print_ids) {
        print_ids(out, "prompt:", prompt.ids, prompt.n);
        print_ids(out, "generated:", gen.ids, gen.n);
        fputs("logprob:", out);
        for (size_t i = 0; i < gen.n; i++)
            fprintf(out, " %.6f", lp[i]);
        fputc('\n', out);
    } else if (!st)
        st = print_text(sp, &prompt, &gen, out);
    free(prompt.ids);
    free(gen.ids);
    hpt_spm_free(sp);
    hpt_model_free(&m);
    free(file);
    free(tok);
    free(lp);
    return st;
}
