/* train_export.c — whole-model views across ranks: the final weights gathered
 * over TP and PP and written with Hugging Face names (HDF5, or safetensors
 * through io/safetensors_write.h), and the checks that replicated tensors
 * stayed bitwise identical. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsutil.h"
#include "h5out.h"
#include "safetensors_write.h"
#include "train_export.h"
#include "train_zero3.h"
#include "weights.h"

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

/* The logical tensors in export order (embedding, layers, final norm, LM
 * head unless tied) with their global shapes; *list malloc'd. */
static hpt_status export_tensor_list(const hpt_config *cfg, hpt_st_out_tensor **list, int *n)
{
    int L = cfg->num_hidden_layers, per = HPT_TENSOR_DOWN - HPT_TENSOR_ATTN_NORM + 1, k = 0;
    hpt_st_out_tensor *t = calloc((size_t)(L * per + 3), sizeof *t);
    if (!t)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory listing the export's tensors");
    for (int g = -1; g <= L; g++) /* -1: embedding, 0..L-1: layers, L: tail */
        for (int j = 0; j < (g >= 0 && g < L ? per : g < 0 ? 1 : 2); j++) {
            hpt_tensor_kind kind = g < 0 ? HPT_TENSOR_EMBED
                                   : g == L ? (j ? HPT_TENSOR_LM_HEAD : HPT_TENSOR_FINAL_NORM)
                                            : (hpt_tensor_kind)(HPT_TENSOR_ATTN_NORM + j);
            if (kind == HPT_TENSOR_LM_HEAD && cfg->tie_word_embeddings)
                continue;
            hpt_tensor_name(kind, g >= 0 && g < L ? g : -1, t[k].name, sizeof t[k].name);
            hpt_tensor_global_shape(cfg, kind, &t[k].rows, &t[k].cols);
            t[k].ndim = t[k].cols > 1 ? 2 : 1;
            k++;
        }
    *list = t;
    *n = k;
    return HPT_OK;
}

/* Start a safetensors export of the final weights (rank 0): the tensor
 * list of the config, --export-dtype, --export-shard-size, config.json.
 * On error *w may hold files to remove: hpt_st_writer_finish it. */
static hpt_status st_export_open(const run_state *r, const hpt_train_opts *o, const char *path,
                                 hpt_st_writer **w)
{
    hpt_st_out_tensor *list = NULL;
    int n = 0;
    char config[8192];
    hpt_status st = export_tensor_list(&r->cfg, &list, &n);
    if (!st)
        st = hpt_config_format(&r->cfg, o->export_bf16 ? "bfloat16" : "float32", config,
                               sizeof config);
    if (!st)
        st = hpt_st_writer_open(w, path, list, n, o->export_bf16 ? HPT_ST_OUT_BF16 : HPT_ST_OUT_F32,
                                o->export_shard_size ? o->export_shard_size : HPT_ST_SHARD_DEFAULT,
                                config);
    free(list);
    return st;
}

hpt_status export_check_opts(const hpt_train_opts *o)
{
    const char *opt = o->export_dtype_given ? "--export-dtype" : "--export-shard-size";
    if (!o->export_dtype_given && !o->export_shard_size)
        return HPT_OK;
    if (!o->export_path)
        return hpt_error_set(HPT_ERR_USAGE, "%s needs --export FILE.safetensors", opt);
    if (!hpt_st_out_is_safetensors(o->export_path))
        return hpt_error_set(HPT_ERR_USAGE, "%s applies to safetensors exports: --export %s is "
                             "HDF5 (float32, one file); name it FILE.safetensors", opt,
                             o->export_path);
    return HPT_OK;
}

hpt_status export_check_st_path(const hpt_train_opts *o, const char *run_dir)
{
    if (!hpt_st_out_is_safetensors(o->export_path))
        return HPT_OK;
    char dir[4096], cfg[4200], run[4096];
    hpt_path_dir(o->export_path, dir, sizeof dir);
    if (run_dir && snprintf(run, sizeof run, "%s", run_dir) < (int)sizeof run) {
        for (size_t n = strlen(run); n > 1 && run[n - 1] == '/'; n--)
            run[n - 1] = 0;
        struct stat a, b;
        if (!strcmp(dir, run) || (!stat(dir, &a) && !stat(run, &b) && a.st_dev == b.st_dev &&
                                  a.st_ino == b.st_ino))
            return hpt_error_set(HPT_ERR_USAGE, "--export %s: its config.json would replace the "
                                 "run directory's %s/config.json; export into another "
                                 "directory", o->export_path, run);
    }
    hpt_status st = hpt_check_output_file("--export", o->export_path); /* OUT first */
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    return st ? st : hpt_check_output_file("--export (its config.json)", cfg);
}

/* Write the final weights with Hugging Face names and the root attribute
 * config_json (the model config, as hpt-ckpt export writes it) on world
 * rank 0: each tensor is gathered over TP on its stage and sent to rank 0
 * from the stage's first rank. Collective. */
hpt_status export_weights(run_state *r, const hpt_train_opts *o)
{
    const char *path = o->export_path;
    hpt_comm *c = &r->comm;
    hpt_h5_out out = {.file = -1}; /* written to PATH.tmp, renamed over PATH at the end */
    hpt_st_writer *sw = NULL;      /* or safetensors (the extension decides) */
    int is_st = hpt_st_out_is_safetensors(path);
    hpt_status st = !r->root ? HPT_OK
                    : is_st  ? st_export_open(r, o, path, &sw)
                             : hpt_h5_out_create(path, &out);
    hid_t f = out.file;
    const hpt_config *cfg = &r->cfg;
    if (r->root && !st && !is_st) { /* the config, as hpt-ckpt export writes it: self-contained */
        char json[8192] = {0};
        FILE *mf = fmemopen(json, sizeof json - 1, "w");
        int bad = !mf || hpt_config_write(cfg, mf) != HPT_OK;
        if (mf)
            bad |= fclose(mf) != 0;
        if (bad || hpt_h5_put_str_attr(f, "config_json", json))
            st = hpt_error_set(HPT_ERR_IO, "%s: cannot write attribute config_json: %s", out.tmp,
                               bad ? "config too long" : hpt_h5_cause_line());
    }
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
            /* world rank (tp 0, cp 0, dp 0) of the owner stage */
            int src = owner * c->tp * (c->cp > 1 ? c->cp : 1) * c->dp;
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
            if (r->root && !st && sw) /* in the order st_export_open listed */
                st = hpt_st_writer_write(sw, full, (size_t)(hdr.rows * hdr.cols));
            else if (r->root && !st && !is_st)
                st = hpt_h5_write_array(f, hdr.name, H5T_NATIVE_FLOAT, hdr.cols > 1 ? 2 : 1, dims,
                                        full);
        }
    }
    free(local);
    free(scratch);
    free(full);
    if (f >= 0)
        st = hpt_h5_out_finish(&out, st);
    if (r->root && is_st)
        st = hpt_st_writer_finish(sw, st, NULL);
    return st;
}

/* FNV-1a of n bytes. */
static uint64_t hash_bytes(const void *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t k = 0; k < n; k++)
        h = (h ^ ((const unsigned char *)p)[k]) * 0x100000001b3ull;
    return h;
}

/* Whether a 64-bit value is the same on every rank of communicator c.
 * Watched collectives (lib/comm.h): the hang watchdog still runs. */
static int same_everywhere(MPI_Comm c, uint64_t h)
{
    uint64_t lo, hi;
    hpt_comm_watch w = hpt_comm_watch_begin(c, HPT_FLIGHT_ALLREDUCE, sizeof h);
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, c);
    hpt_comm_watch_end(w);
    w = hpt_comm_watch_begin(c, HPT_FLIGHT_ALLREDUCE, sizeof h);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, c);
    hpt_comm_watch_end(w);
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
    zero3_hold(r, t->offset); /* ZeRO-3: its unit gathered, then dropped */
    r->model.be->download(host, r->model.params + t->offset, sizeof(float) * n);
    zero3_drop_all(r);
    int same = same_everywhere(r->comm.comms[HPT_GROUP_EMBED], hash_bytes(host, sizeof(float) * n));
    free(host);
    return same ? HPT_OK
                : hpt_error_set(HPT_ERR_INTERNAL, "the tied embedding differs between the first and "
                                                  "the last pipeline stage");
}

/* The tied copies (check_tied_copies) and the replicated tensors (norm
 * weights) must stay bitwise identical across the TP ranks; compare a hash
 * of their bytes over TP. Collective over TP. Errors: HPT_ERR_INTERNAL
 * naming the first tensor that differs. */
hpt_status check_replicas(run_state *r)
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
        zero3_hold(r, t->offset);
        r->model.be->download(host, r->model.params + t->offset, sizeof(float) * n);
        zero3_drop_all(r);
        if (!same_everywhere(r->comm.comms[HPT_GROUP_TP], hash_bytes(host, sizeof(float) * n)) &&
            !st)
            st = hpt_error_set(HPT_ERR_INTERNAL,
                               "replicated tensor %s differs across the tensor-parallel ranks",
                               t->name);
    }
    free(host);
    return st;
}
