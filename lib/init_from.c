/* init_from.c — parameters from an HDF5 export or safetensors; see
 * init_from.h. */
#include "init_from.h"

#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "h5util.h"
#include "safetensors.h"

/* Where the weights come from: an HDF5 export or a safetensors set. */
typedef struct {
    char path[4096];
    hid_t h5;       /* >= 0: HDF5 export                   */
    hpt_st_set st;  /* otherwise: safetensors file or index */
} source;

/* A tensor as the source holds it. */
typedef struct {
    int found, ndim;
    int64_t dims[HPT_ST_MAX_DIMS];
    hid_t ds;                   /* HDF5: the open dataset     */
    const hpt_st_file *file;    /* safetensors: its file      */
    const hpt_st_tensor *t;     /*              and tensor    */
} src_tensor;

/* ------------------------------------------------------------ opening */

/* A directory: its index, else its single file. Errors: HPT_ERR_DATA when a
 * directory holds neither (naming a checkpoint when it is one). */
static hpt_status resolve_dir(const char *path, char *out, size_t n)
{
    struct stat sb;
    snprintf(out, n, "%s", path);
    if (stat(path, &sb) || !S_ISDIR(sb.st_mode))
        return HPT_OK;
    snprintf(out, n, "%s/model.safetensors.index.json", path);
    if (!stat(out, &sb))
        return HPT_OK;
    snprintf(out, n, "%s/model.safetensors", path);
    if (!stat(out, &sb))
        return HPT_OK;
    static const char *const ckpt[] = {"checkpoint.h5", "latest", "checkpoints"};
    for (size_t i = 0; i < sizeof ckpt / sizeof ckpt[0]; i++) {
        snprintf(out, n, "%s/%s", path, ckpt[i]);
        if (!stat(out, &sb))
            return hpt_error_set(HPT_ERR_DATA, "--init-from %s: a checkpoint or run directory, not "
                                 "weights: continue it with --run-dir/--checkpoint-dir, or "
                                 "write its weights with hpt-ckpt export %s OUT.h5 and give OUT.h5",
                                 path, path);
    }
    return hpt_error_set(HPT_ERR_DATA, "--init-from %s: a directory with neither "
                         "model.safetensors.index.json nor model.safetensors", path);
}

static hpt_status source_open(source *s, const char *path)
{
    memset(s, 0, sizeof *s);
    s->h5 = -1;
    hpt_status st = resolve_dir(path, s->path, sizeof s->path);
    if (st)
        return st;
    struct stat sb;
    if (stat(s->path, &sb))
        return hpt_error_set(HPT_ERR_DATA, "--init-from %s: cannot open: %s", s->path,
                             strerror(errno));
    if (!S_ISREG(sb.st_mode)) /* a FIFO would block the first read */
        return hpt_error_set(HPT_ERR_DATA, "--init-from %s: not a regular file", s->path);
    if (!hpt_h5_has_signature(s->path))
        return hpt_st_set_open(s->path, &s->st);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if ((s->h5 = H5Fopen(s->path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0) {
        const char *cause = hpt_h5_cause();
        hpt_status st = hpt_h5_lock_error("--init-from ", s->path, cause);
        return st ? st : hpt_error_set(HPT_ERR_DATA, "--init-from %s: cannot open the HDF5 file: "
                                       "%s", s->path, cause);
    }
    if (H5Lexists(s->h5, "model", H5P_DEFAULT) > 0 && H5Lexists(s->h5, "optim", H5P_DEFAULT) > 0)
        return hpt_error_set(HPT_ERR_DATA, "--init-from %s: an hpt checkpoint, not an export: "
                             "write its weights with hpt-ckpt export %s OUT.h5 and give OUT.h5",
                             s->path, s->path);
    return HPT_OK;
}

static void source_close(source *s)
{
    if (s->h5 >= 0)
        H5Fclose(s->h5);
    else
        hpt_st_set_close(&s->st);
    s->h5 = -1;
}

/* Look tensor `name` up. Errors: HPT_ERR_DATA (a shard that does not
 * validate; an HDF5 object that is not a float dataset). */
static hpt_status source_find(source *s, const char *name, src_tensor *x)
{
    memset(x, 0, sizeof *x);
    x->ds = -1;
    if (s->h5 < 0) {
        hpt_status st = hpt_st_set_find(&s->st, name, &x->file, &x->t);
        if (st || !x->t)
            return st;
        x->found = 1, x->ndim = x->t->ndim;
        memcpy(x->dims, x->t->shape, sizeof x->dims);
        return HPT_OK;
    }
    if (H5Lexists(s->h5, name, H5P_DEFAULT) <= 0)
        return HPT_OK;
    hid_t ds = H5Dopen2(s->h5, name, H5P_DEFAULT), type = ds >= 0 ? H5Dget_type(ds) : -1;
    hid_t space = ds >= 0 ? H5Dget_space(ds) : -1;
    int ndim = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t d[HPT_ST_MAX_DIMS] = {0};
    int ok = type >= 0 && H5Tget_class(type) == H5T_FLOAT && ndim >= 0 &&
             ndim <= HPT_ST_MAX_DIMS && H5Sget_simple_extent_dims(space, d, NULL) >= 0;
    if (type >= 0)
        H5Tclose(type);
    if (space >= 0)
        H5Sclose(space);
    if (!ok) {
        if (ds >= 0)
            H5Dclose(ds);
        return hpt_error_set(HPT_ERR_DATA, "--init-from %s: tensor %s is not a floating-point "
                             "dataset (%s)", s->path, name,
                             ds < 0 ? hpt_h5_cause() : "type or shape");
    }
    x->found = 1, x->ndim = ndim, x->ds = ds;
    for (int i = 0; i < ndim; i++)
        x->dims[i] = (int64_t)d[i];
    return HPT_OK;
}

static void source_release(src_tensor *x)
{
    if (x->ds >= 0)
        H5Dclose(x->ds);
    x->ds = -1;
}

/* Read rows [r0, r0 + nr) x cols [c0, c0 + nc) of a 1-D (one column) or
 * 2-D tensor into dst (nr x nc, row-major). */
static hpt_status source_read(source *s, const char *name, const src_tensor *x, int64_t r0,
                              int64_t nr, int64_t c0, int64_t nc, float *dst)
{
    if (nr <= 0 || nc <= 0)
        return HPT_OK;
    if (s->h5 < 0)
        return hpt_st_read_block(x->file, x->t, r0, nr, c0, nc, dst);
    hsize_t start[2] = {(hsize_t)r0, (hsize_t)c0}, count[2] = {(hsize_t)nr, (hsize_t)nc};
    hid_t fspace = H5Dget_space(x->ds), mspace = H5Screate_simple(x->ndim, count, NULL);
    int ok = fspace >= 0 && mspace >= 0 &&
             H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
             H5Dread(x->ds, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, dst) >= 0;
    const char *cause = ok ? "" : hpt_h5_cause();
    if (mspace >= 0)
        H5Sclose(mspace);
    if (fspace >= 0)
        H5Sclose(fspace);
    return ok ? HPT_OK
              : hpt_error_set(HPT_ERR_DATA, "--init-from %s: tensor %s: read failed: %s", s->path,
                              name, cause);
}

/* ------------------------------------------------------------ checks */

static void shape_str(int ndim, const int64_t *d, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)d[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

/* The source's shape must be the tensor's global one. */
static hpt_status check_shape(const source *s, const hpt_tensor *t, const src_tensor *x)
{
    int ndim = t->g_cols > 1 ? 2 : 1;
    int64_t want[2] = {t->g_rows, t->g_cols};
    if (x->ndim == ndim && x->dims[0] == want[0] && (ndim == 1 || x->dims[1] == want[1]))
        return HPT_OK;
    char have[160], need[64];
    shape_str(x->ndim, x->dims, have, sizeof have);
    shape_str(ndim, want, need, sizeof need);
    return hpt_error_set(HPT_ERR_DATA, "--init-from %s: tensor %s has shape %s, the config "
                         "(--model) needs %s", s->path, t->name, have, need);
}

/* The first tensor name of a layer >= L, if any (malloc'd). */
typedef struct {
    int L;
    char *bad;
} layer_check;

static void check_name(layer_check *c, const char *name)
{
    int layer;
    if (!c->bad && sscanf(name, "model.layers.%d.", &layer) == 1 && layer >= c->L)
        c->bad = strdup(name);
}

static herr_t h5_name_cb(hid_t g, const char *name, const H5L_info_t *info, void *ctx)
{
    (void)g, (void)info;
    check_name(ctx, name);
    return 0;
}

/* A tensor of a layer the config does not have means another model. */
static hpt_status check_layers(source *s, int L)
{
    layer_check c = {L, NULL};
    if (s->h5 >= 0)
        H5Literate(s->h5, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, h5_name_cb, &c);
    else
        for (int i = 0; i < s->st.nnames; i++)
            check_name(&c, s->st.names[i]);
    if (!c.bad)
        return HPT_OK;
    hpt_status st = hpt_error_set(HPT_ERR_DATA, "--init-from %s: tensor %s is of a layer beyond "
                                  "the config's num_hidden_layers = %d (--model)", s->path, c.bad,
                                  L);
    free(c.bad);
    return st;
}

/* The source's tensor names, one at a time (HDF5: the root's links). */
typedef struct {
    char **names; /* malloc'd strings */
    int n, cap;
} name_list;

static herr_t h5_collect_cb(hid_t g, const char *name, const H5L_info_t *info, void *ctx)
{
    (void)g, (void)info;
    name_list *l = ctx;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        char **p = realloc(l->names, sizeof *p * (size_t)cap);
        if (!p)
            return -1;
        l->names = p, l->cap = cap;
    }
    return (l->names[l->n] = strdup(name)) ? (l->n++, 0) : -1;
}

/* Compare two NUL-terminated names stored in place (known_names' rows). */
static int cmp_inline(const void *a, const void *b) { return strcmp(a, b); }

/* Every tensor name the config has, sorted (malloc'd array of n
 * fixed-size names; lm_head.weight included even when tied: a tied model
 * ignores it with a note). */
static char (*known_names(const hpt_config *c, int *n))[96]
{
    int L = c->num_hidden_layers, per = HPT_TENSOR_DOWN - HPT_TENSOR_ATTN_NORM + 1, k = 0;
    char(*v)[96] = malloc(sizeof *v * (size_t)(L * per + 3));
    if (!v)
        return NULL;
    hpt_tensor_name(HPT_TENSOR_EMBED, -1, v[k++], sizeof *v);
    for (int l = 0; l < L; l++)
        for (int j = 0; j < per; j++)
            hpt_tensor_name((hpt_tensor_kind)(HPT_TENSOR_ATTN_NORM + j), l, v[k++], sizeof *v);
    hpt_tensor_name(HPT_TENSOR_FINAL_NORM, -1, v[k++], sizeof *v);
    hpt_tensor_name(HPT_TENSOR_LM_HEAD, -1, v[k++], sizeof *v);
    qsort(v, (size_t)k, sizeof *v, cmp_inline);
    *n = k;
    return v;
}

/* A buffer that Hugging Face Llama files may hold and that is not a
 * parameter (RoPE's inverse frequencies, computed from rope_theta). */
static int harmless_buffer(const char *name)
{
    size_t n = strlen(name), k = strlen("rotary_emb.inv_freq");
    return n >= k && !strcmp(name + n - k, "rotary_emb.inv_freq");
}

/* Every tensor of the source must be one of the model's: an extra one
 * (an attention bias, a tensor of another architecture) means another
 * model, which would train as this one without a word. Harmless buffers
 * (harmless_buffer) are skipped, with a note to `note`. Errors:
 * HPT_ERR_DATA naming the first unknown tensor and how many there are. */
static hpt_status check_unknown(source *s, const hpt_config *c, FILE *note)
{
    name_list h5 = {0};
    char **names = s->st.names;
    int n = s->st.nnames, nk = 0, unknown = 0, skipped = 0;
    if (s->h5 >= 0) {
        H5Literate(s->h5, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, h5_collect_cb, &h5);
        names = h5.names, n = h5.n;
    }
    char(*known)[96] = known_names(c, &nk);
    const char *first = NULL, *skip = NULL;
    for (int i = 0; known && i < n; i++) {
        if (bsearch(names[i], known, (size_t)nk, sizeof *known,
                    cmp_inline))
            continue;
        if (harmless_buffer(names[i]))
            skipped++, skip = skip ? skip : names[i];
        else
            unknown++, first = first ? first : names[i];
    }
    hpt_status st = HPT_OK;
    if (!known)
        st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory reading --init-from %s", s->path);
    else if (unknown)
        st = hpt_error_set(HPT_ERR_DATA, "--init-from %s: tensor %s is not one of the model's "
                           "(%d such tensor%s; hpt's Llama has no biases and only the tensors "
                           "of --model's config: a file with more holds another model)", s->path,
                           first, unknown, unknown == 1 ? "" : "s");
    else if (skipped && note)
        fprintf(note, "hpt-train: note: --init-from %s: %d buffer%s such as %s not read (RoPE's "
                "inverse frequencies follow from rope_theta)\n", s->path, skipped,
                skipped == 1 ? "" : "s", skip);
    for (int i = 0; i < h5.n; i++)
        free(h5.names[i]);
    free(h5.names);
    free(known);
    return st;
}

static herr_t h5_first_cb(hid_t g, const char *name, const H5L_info_t *info, void *ctx)
{
    (void)g, (void)info;
    snprintf(ctx, 128, "%s", name);
    return 1; /* stop at the first */
}

/* A hint for a missing tensor: one name the source does have, so a file
 * of another naming scheme ("transformer.h.0...", no "model." prefix)
 * shows itself. Empty when the source has no tensors. */
static void name_hint(source *s, char *buf, size_t n)
{
    char first[128] = "";
    if (s->h5 >= 0)
        H5Literate(s->h5, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, h5_first_cb, first);
    else if (s->st.nnames > 0)
        snprintf(first, sizeof first, "%s", s->st.names[0]);
    if (first[0])
        snprintf(buf, n, " (the file has e.g. '%s'; hpt reads Hugging Face Llama names such as "
                 "model.embed_tokens.weight)", first);
    else
        snprintf(buf, n, " (the file holds no tensors)");
}

/* ------------------------------------------------------------ loading */

/* This rank's slice of t (real x t->cols at buf) must be finite: a NaN or
 * an infinity in the initial weights makes every step's loss non-finite
 * (each update skipped, the run stopped by --max-skips). Errors:
 * HPT_ERR_DATA naming the tensor and the first bad element's global index. */
static hpt_status check_finite(const source *s, const hpt_tensor *t, const float *buf,
                               int64_t real)
{
    for (int64_t i = 0; i < real * t->cols; i++) {
        if (isfinite(buf[i]))
            continue;
        int64_t r = t->row0 + i / t->cols, c = t->col0 + i % t->cols;
        char at[64];
        if (t->g_cols > 1)
            snprintf(at, sizeof at, "[%lld, %lld]", (long long)r, (long long)c);
        else
            snprintf(at, sizeof at, "[%lld]", (long long)r);
        return hpt_error_set(HPT_ERR_DATA, "--init-from %s: tensor %s: element %s is %s (initial "
                             "weights must be finite)", s->path, t->name, at,
                             isnan(buf[i]) ? "NaN" : buf[i] > 0 ? "+inf" : "-inf");
    }
    return HPT_OK;
}

/* Read this rank's slice of t into host buffer buf (t->rows x t->cols) and
 * upload it into the parameter block. */
static hpt_status load_tensor(source *s, hpt_model *m, const hpt_tensor *t, float *buf)
{
    src_tensor x;
    hpt_status st = source_find(s, t->name, &x);
    char hint[384] = "";
    if (!st && !x.found && t->kind != HPT_TENSOR_LM_HEAD)
        name_hint(s, hint, sizeof hint);
    if (!st && !x.found)
        st = hpt_error_set(HPT_ERR_DATA, "--init-from %s: tensor %s is missing%s", s->path,
                           t->name, t->kind == HPT_TENSOR_LM_HEAD
                                        ? " (the model is untied: --tie-embeddings uses the "
                                          "embedding instead)" : hint);
    if (!st)
        st = check_shape(s, t, &x);
    int64_t real = hpt_tensor_real_rows(t);
    if (!st)
        st = source_read(s, t->name, &x, t->row0, real, t->col0, t->cols, buf);
    source_release(&x);
    if (!st)
        st = check_finite(s, t, buf, real);
    if (st)
        return st;
    memset(buf + real * t->cols, 0, sizeof(float) * (size_t)((t->rows - real) * t->cols));
    m->be->upload(m->params + t->offset, buf, sizeof(float) * (size_t)(t->rows * t->cols));
    return HPT_OK;
}

/* A tied model ignores the source's separate head: say so. */
static void note_ignored_head(source *s, const hpt_model *m, FILE *note)
{
    src_tensor x;
    if (!note || !m->cfg.tie_word_embeddings || source_find(s, "lm_head.weight", &x))
        return;
    if (x.found)
        fprintf(note, "hpt-train: note: --init-from %s: the model ties the LM head to the "
                "embedding: lm_head.weight is not used (--untie-embeddings keeps it)\n", s->path);
    source_release(&x);
}

hpt_status hpt_init_from(hpt_model *m, const char *path, int64_t resume_step, FILE *note)
{
    if (resume_step >= 0) {
        if (note)
            fprintf(note, "hpt-train: note: resuming the checkpoint of step %lld: --init-from %s "
                    "is not read\n", (long long)resume_step, path);
        return HPT_OK;
    }
    size_t most = 1;
    for (int i = 0; i < m->ntensors; i++) {
        size_t k = (size_t)(m->tensors[i].rows * m->tensors[i].cols);
        most = k > most ? k : most;
    }
    source s;
    hpt_status st = source_open(&s, path);
    float *buf = st ? NULL : malloc(sizeof(float) * most);
    if (!st && !buf)
        st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory reading --init-from %s", path);
    if (!st)
        st = check_layers(&s, m->cfg.num_hidden_layers);
    for (int i = 0; i < m->ntensors && !st; i++)
        st = load_tensor(&s, m, &m->tensors[i], buf);
    if (!st) /* after the loads: a missing tensor's message shows another naming scheme */
        st = check_unknown(&s, &m->cfg, note);
    if (!st)
        note_ignored_head(&s, m, note);
    free(buf);
    if (s.h5 >= 0 || s.st.nshards)
        source_close(&s);
    if (st && strncmp(hpt_error_msg(), "--init-from ", 12)) { /* io/'s messages name the file */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", hpt_error_msg());
        st = hpt_error_set(st, "--init-from %s", msg);
    }
    return st;
}
