/* checkpoint.c — sharded HDF5 checkpoints: collective save with atomic
 * commit, layout-independent load; see checkpoint.h and io/ckpt.h. */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define NAME_MAX_LEN 160

/* ------------------------------------------------------ the tensor list */

/* Logical tensors in Hugging Face order: embedding, layers, final norm,
 * LM head (absent when tied). Fills kinds/layers; returns the count. */
static int global_tensors(const hpt_config *c, hpt_tensor_kind *kinds, int *layers)
{
    int n = 0;
    kinds[n] = HPT_TENSOR_EMBED, layers[n++] = -1;
    for (int l = 0; l < c->num_hidden_layers; l++)
        for (int k = HPT_TENSOR_ATTN_NORM; k <= HPT_TENSOR_DOWN; k++)
            kinds[n] = (hpt_tensor_kind)k, layers[n++] = l;
    kinds[n] = HPT_TENSOR_FINAL_NORM, layers[n++] = -1;
    if (!c->tie_word_embeddings)
        kinds[n] = HPT_TENSOR_LM_HEAD, layers[n++] = -1;
    return n;
}

/* ---------------------------------------------------------- selections */

/* File and memory selections of local tensor t (NULL: select nothing).
 * Vocabulary padding rows are never part of the selection. */
static void select_slab(const hpt_tensor *t, hid_t fspace, hid_t mspace)
{
    if (!t) {
        H5Sselect_none(fspace);
        H5Sselect_none(mspace);
        return;
    }
    int64_t valid = t->g_rows - t->row0;
    valid = valid < 0 ? 0 : valid > t->rows ? t->rows : valid;
    if (valid == 0) {
        H5Sselect_none(fspace);
        H5Sselect_none(mspace);
        return;
    }
    hsize_t fstart[2] = {(hsize_t)t->row0, (hsize_t)t->col0};
    hsize_t count[2] = {(hsize_t)valid, (hsize_t)t->cols};
    hsize_t mstart[2] = {0, 0};
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, fstart, NULL, count, NULL);
    H5Sselect_hyperslab(mspace, H5S_SELECT_SET, mstart, NULL, count, NULL);
}

static int rank_of(int64_t cols) { return cols > 1 ? 2 : 1; }

/* Largest divisor of n that is <= cap (>= 1). */
static hsize_t divisor_at_most(int64_t n, int64_t cap)
{
    if (cap < 1)
        cap = 1;
    for (int64_t d = cap < n ? cap : n; d > 1; d--)
        if (n % d == 0)
            return (hsize_t)d;
    return 1;
}

/* Chunks follow the writing layout's shards so no chunk is shared by two
 * writers; about 1 MiB each. */
static hid_t chunked_dcpl(const hpt_model *m, hpt_tensor_kind kind, int64_t g_rows, int64_t g_cols)
{
    int split_rows = kind == HPT_TENSOR_EMBED || kind == HPT_TENSOR_LM_HEAD ||
                     kind == HPT_TENSOR_Q || kind == HPT_TENSOR_K || kind == HPT_TENSOR_V ||
                     kind == HPT_TENSOR_GATE || kind == HPT_TENSOR_UP;
    int split_cols = kind == HPT_TENSOR_O || kind == HPT_TENSOR_DOWN;
    int64_t local_rows = split_rows ? (g_rows + m->tp - 1) / m->tp : g_rows;
    int64_t local_cols = split_cols ? g_cols / m->tp : g_cols;
    hsize_t chunk[2];
    if (g_cols > 1) {
        chunk[1] = (hsize_t)local_cols;
        chunk[0] = divisor_at_most(local_rows, 262144 / local_cols);
    } else {
        chunk[0] = (hsize_t)(g_rows < 65536 ? g_rows : 65536);
    }
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, rank_of(g_cols), chunk);
    H5Pset_fletcher32(dcpl);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    return dcpl;
}

/* ------------------------------------------------------------- helpers */

static hid_t open_parallel(const char *path, MPI_Comm comm, int create)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
    H5Pset_all_coll_metadata_ops(fapl, 1);
    H5Pset_coll_metadata_write(fapl, 1);
    hid_t f = create ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)
                     : H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    return f;
}

static hpt_status fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return hpt_error_set(HPT_ERR_IO, "%s: cannot open for fsync: %s", path, strerror(errno));
    int err = fsync(fd);
    close(fd);
    return err ? hpt_error_set(HPT_ERR_IO, "%s: fsync failed: %s", path, strerror(errno)) : HPT_OK;
}

/* rm -r of a checkpoint directory (files inside, then the directory). */
static void remove_dir(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        char f[4096];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(f, sizeof f, "%s/%s", path, e->d_name);
                unlink(f);
            }
        closedir(d);
    }
    rmdir(path);
}

static hpt_status mkdir_p(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++)
        if (*p == '/' || !*p) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0777) && errno != EEXIST)
                return hpt_error_set(HPT_ERR_IO, "%s: cannot create directory: %s", buf,
                                     strerror(errno));
            if (!(*p = c))
                break;
        }
    return HPT_OK;
}

hpt_status hpt_checkpoint_clean(const char *dir, MPI_Comm world)
{
    int rank;
    MPI_Comm_rank(world, &rank);
    hpt_status st = HPT_OK;
    if (rank == 0) {
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            size_t n = strlen(e->d_name);
            if (!strncmp(e->d_name, "step_", 5) && n > 4 && !strcmp(e->d_name + n - 4, ".tmp")) {
                char p[4096];
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                fprintf(stderr, "hpt: removing stale incomplete checkpoint %s\n", p);
                remove_dir(p);
            } else if (!strcmp(e->d_name, "latest.tmp")) { /* a crash before its rename */
                char p[4096];
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                unlink(p);
            }
        }
        if (d)
            closedir(d);
    }
    return hpt_comm_agree(world, st);
}

/* ------------------------------------------------------------------ save */

/* Full local AdamW moments (first, second), each nparams elements: the
 * optimizer state itself, or with ZeRO-1 gathered over DP into `full`. */
static void gather_moments(const hpt_ckpt_state *s, float *full, float **m1, float **m2)
{
    hpt_model *m = s->model;
    hpt_optim *o = s->opt;
    size_t n = m->nparams, own = o->hi - o->lo;
    if (!s->shard_counts) {
        *m1 = o->state;
        *m2 = o->state + n;
        return;
    }
    for (int k = 0; k < 2; k++) {
        float *dst = full + k * n;
        m->be->copy(dst + o->lo, o->state + k * own, sizeof(float) * own);
        s->comm->be->allgather_inplace_f32(s->comm, HPT_GROUP_DP, dst, s->shard_counts);
    }
    *m1 = full;
    *m2 = full + n;
}

/* Create dataset `group/name` and write this rank's part of `block` (a
 * device block in the parameter layout) for local tensor t (NULL: none).
 * Collective. */
static int write_tensor(hid_t file, const char *path, const hpt_model *m, hpt_tensor_kind kind,
                        int layer, const hpt_tensor *t, const float *block, float *host,
                        hid_t dxpl)
{
    int64_t gr, gc;
    hpt_tensor_global_shape(&m->cfg, kind, &gr, &gc);
    hsize_t dims[2] = {(hsize_t)gr, (hsize_t)gc};
    hid_t fspace = H5Screate_simple(rank_of(gc), dims, NULL);
    hsize_t mdims[2] = {t ? (hsize_t)t->rows : 1, t ? (hsize_t)t->cols : 1};
    hid_t mspace = H5Screate_simple(rank_of(gc), mdims, NULL);
    hid_t dcpl = chunked_dcpl(m, kind, gr, gc), lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t ds = H5Dcreate2(file, path, H5T_NATIVE_FLOAT, fspace, lcpl, dcpl, H5P_DEFAULT);
    int err = ds < 0;
    if (!err) {
        int32_t l = layer;
        hid_t sp = H5Screate(H5S_SCALAR);
        hid_t a = H5Acreate2(ds, "layer", H5T_NATIVE_INT32, sp, H5P_DEFAULT, H5P_DEFAULT);
        err = a < 0 || H5Awrite(a, H5T_NATIVE_INT32, &l) < 0;
        if (a >= 0)
            H5Aclose(a);
        H5Sclose(sp);
    }
    if (t)
        m->be->download(host, block + t->offset, sizeof(float) * (size_t)(t->rows * t->cols));
    select_slab(t, fspace, mspace);
    if (!err)
        err = H5Dwrite(ds, H5T_NATIVE_FLOAT, mspace, fspace, dxpl, host) < 0;
    if (ds >= 0)
        H5Dclose(ds);
    H5Pclose(dcpl);
    H5Pclose(lcpl);
    H5Sclose(mspace);
    H5Sclose(fspace);
    return err;
}

/* Write every logical tensor: parameters and both moments. The writer of
 * a piece is the first DP replica, and for a TP-replicated tensor the
 * first TP rank; everybody else takes part with an empty selection. */
static hpt_status write_all(hid_t file, const hpt_ckpt_state *s, float *host)
{
    hpt_model *m = s->model;
    hpt_comm *c = s->comm;
    float *full = NULL, *m1, *m2;
    if (s->shard_counts && !(full = m->be->alloc(2 * sizeof(float) * m->nparams)))
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory gathering the ZeRO-1 state");
    gather_moments(s, full, &m1, &m2);
    int n = 3 + m->cfg.num_hidden_layers * 9, layers[n];
    hpt_tensor_kind kinds[n];
    n = global_tensors(&m->cfg, kinds, layers);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    int err = 0;
    for (int i = 0; i < n && !err; i++) {
        const hpt_tensor *t = hpt_model_tensor(m, kinds[i], layers[i]); /* NULL: not on this stage */
        if (t && (t->dup || c->dp_rank != 0 || (t->split == 0 && c->tp_rank != 0)))
            t = NULL;
        char name[NAME_MAX_LEN], path[NAME_MAX_LEN + 32];
        hpt_tensor_name(kinds[i], layers[i], name, sizeof name);
        const char *groups[3] = {"model", "optim/exp_avg", "optim/exp_avg_sq"};
        const float *blocks[3] = {m->params, m1, m2};
        for (int g = 0; g < 3 && !err; g++) {
            snprintf(path, sizeof path, "/%s/%s", groups[g], name);
            err = write_tensor(file, path, m, kinds[i], layers[i], t, blocks[g], host, dxpl);
            if (err)
                hpt_error_set(HPT_ERR_IO, "checkpoint: writing %s failed", path);
        }
    }
    H5Pclose(dxpl);
    m->be->free(full);
    return err ? HPT_ERR_IO : HPT_OK;
}

/* Rank 0: fsync, rename the directory, fsync DIR, move `latest`. */
static hpt_status commit(const char *dir, const char *tmpdir, const char *final, const char *file,
                         const char *name)
{
    hpt_status st;
    char latest[4096], ltmp[4096];
    if ((st = fsync_path(file)) || (st = fsync_path(tmpdir)))
        return st;
    remove_dir(final); /* a same-step checkpoint from before a fallback */
    if (rename(tmpdir, final))
        return hpt_error_set(HPT_ERR_IO, "%s: rename to %s failed: %s", tmpdir, final,
                             strerror(errno));
    if ((st = fsync_path(dir)))
        return st;
    snprintf(latest, sizeof latest, "%s/latest", dir);
    snprintf(ltmp, sizeof ltmp, "%s/latest.tmp", dir);
    FILE *f = fopen(ltmp, "w");
    if (!f || fprintf(f, "%s\n", name) < 0 || fflush(f) || fsync(fileno(f)) || fclose(f)) {
        if (f)
            fclose(f);
        return hpt_error_set(HPT_ERR_IO, "%s: cannot write: %s", ltmp, strerror(errno));
    }
    if (rename(ltmp, latest))
        return hpt_error_set(HPT_ERR_IO, "%s: rename failed: %s", latest, strerror(errno));
    return fsync_path(dir);
}

/* Rank 0: keep the newest `keep` checkpoints. */
static void prune(const char *dir, int keep)
{
    int64_t steps[4096];
    int n = hpt_ckpt_list(dir, steps, 4096);
    for (int i = keep; i < n; i++) {
        char name[32], p[4096];
        hpt_ckpt_dirname(steps[i], name);
        snprintf(p, sizeof p, "%s/%s", dir, name);
        remove_dir(p);
    }
}

/* Bytes a checkpoint of this model takes: weights and two moments of every
 * logical tensor, plus 2 % for metadata and checksums. */
static double checkpoint_bytes(const hpt_config *c)
{
    int n = 3 + c->num_hidden_layers * 9, layers[n];
    hpt_tensor_kind kinds[n];
    n = global_tensors(c, kinds, layers);
    double total = 0;
    for (int i = 0; i < n; i++) {
        int64_t r, k;
        hpt_tensor_global_shape(c, kinds[i], &r, &k);
        total += 3.0 * 4.0 * (double)r * (double)k;
    }
    return total * 1.02 + 65536;
}

/* Refuse before writing when the file system cannot hold the checkpoint:
 * a write that fails half-way leaves HDF5 unable to close the file. */
static hpt_status check_space(const char *dir, const hpt_config *c)
{
    struct statvfs v;
    double need = checkpoint_bytes(c);
    if (statvfs(dir, &v))
        return HPT_OK; /* cannot tell: let the write report it */
    double avail = (double)v.f_bavail * (double)v.f_frsize;
    if (avail < need)
        return hpt_error_set(HPT_ERR_IO,
                             "%s: not enough space for a checkpoint: need %.1f MiB, %.1f MiB free "
                             "(disk full?); the previous checkpoint is kept",
                             dir, need / 1048576.0, avail / 1048576.0);
    return HPT_OK;
}

hpt_status hpt_checkpoint_save(const char *dir, const hpt_ckpt_state *s, const hpt_ckpt_meta *meta,
                               int keep, double *seconds, int64_t *bytes)
{
    MPI_Comm world = s->comm->comms[HPT_GROUP_WORLD];
    double t0 = MPI_Wtime();
    char name[32], tmpdir[4096], final[4096], file[8192];
    hpt_ckpt_dirname(meta->step, name);
    snprintf(tmpdir, sizeof tmpdir, "%s/%s.tmp", dir, name);
    snprintf(final, sizeof final, "%s/%s", dir, name);
    snprintf(file, sizeof file, "%s/%s", tmpdir, HPT_CKPT_FILE);
    hpt_status st = HPT_OK;
    if (s->comm->world_rank == 0) {
        st = mkdir_p(dir);
        if (!st) {
            remove_dir(tmpdir);
            st = check_space(dir, &s->model->cfg);
        }
        if (!st) {
            if (mkdir(tmpdir, 0777))
                st = hpt_error_set(HPT_ERR_IO, "%s: cannot create: %s", tmpdir, strerror(errno));
        }
    }
    if ((st = hpt_comm_agree(world, st)))
        return st;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = open_parallel(file, world, 1);
    st = f < 0 ? hpt_error_set(HPT_ERR_IO, "%s: cannot create the checkpoint file", file) : HPT_OK;
    if ((st = hpt_comm_agree(world, st)))
        return st;
    size_t most = 0;
    for (int i = 0; i < s->model->ntensors; i++) {
        size_t k = (size_t)(s->model->tensors[i].rows * s->model->tensors[i].cols);
        most = k > most ? k : most;
    }
    float *host = malloc(sizeof(float) * (most ? most : 1));
    st = host ? hpt_ckpt_write_meta(f, meta) : hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    if (!st)
        st = write_all(f, s, host);
    free(host);
    if (H5Fclose(f) < 0 && !st)
        st = hpt_error_set(HPT_ERR_IO, "%s: closing the checkpoint failed (disk full?)", file);
    else if (st)
        H5Fclose(f); /* a failed first close may leave the handle open */
    if ((st = hpt_comm_agree(world, st))) {
        if (s->comm->world_rank == 0)
            remove_dir(tmpdir);
        return st;
    }
    if (s->comm->world_rank == 0) {
        st = commit(dir, tmpdir, final, file, name);
        if (!st)
            prune(dir, keep);
    }
    st = hpt_comm_agree(world, st);
    struct stat sb;
    snprintf(file, sizeof file, "%s/%s", final, HPT_CKPT_FILE);
    if (bytes)
        *bytes = stat(file, &sb) ? 0 : (int64_t)sb.st_size;
    if (seconds)
        *seconds = MPI_Wtime() - t0;
    return st;
}

/* ------------------------------------------------------------------ load */

int hpt_checkpoint_candidates(const char *dir, MPI_Comm world, int64_t *steps, int max)
{
    /* The directory rename is the commit point, so every step_NNNNNNNN is
     * complete; the newest wins even when a crash hit before `latest` was
     * moved to it (then `latest` names the previous one). */
    int rank, n = 0;
    MPI_Comm_rank(world, &rank);
    if (rank == 0)
        n = hpt_ckpt_list(dir, steps, max);
    MPI_Bcast(&n, 1, MPI_INT, 0, world);
    MPI_Bcast(steps, n, MPI_INT64_T, 0, world);
    return n;
}

static void file_of(const char *dir, int64_t step, char *buf, size_t n)
{
    char name[32];
    hpt_ckpt_dirname(step, name);
    snprintf(buf, n, "%s/%s/%s", dir, name, HPT_CKPT_FILE);
}

hpt_status hpt_checkpoint_meta(const char *dir, int64_t step, MPI_Comm world, hpt_ckpt_meta *meta)
{
    char file[8192];
    file_of(dir, step, file, sizeof file);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = open_parallel(file, world, 0);
    hpt_status st = f < 0 ? hpt_error_set(HPT_ERR_DATA, "%s: cannot open (truncated or not HDF5)", file)
                          : hpt_ckpt_read_meta(f, file, meta);
    if (f >= 0)
        H5Fclose(f);
    return hpt_comm_agree(world, st);
}

/* Read this rank's part of dataset `path` into `block` at local tensor t
 * (independent I/O: a damaged chunk fails only the ranks that read it and
 * cannot leave the others waiting). */
static int read_tensor(hid_t file, const char *path, const hpt_model *m, const hpt_tensor *t,
                       float *block, float *host)
{
    hid_t ds = H5Dopen2(file, path, H5P_DEFAULT);
    if (ds < 0)
        return 1;
    hid_t fspace = H5Dget_space(ds);
    int ok = H5Sget_simple_extent_ndims(fspace) == rank_of(t->g_cols);
    hsize_t dims[2] = {0, 0};
    H5Sget_simple_extent_dims(fspace, dims, NULL);
    ok = ok && dims[0] == (hsize_t)t->g_rows && (t->g_cols == 1 || dims[1] == (hsize_t)t->g_cols);
    hsize_t mdims[2] = {(hsize_t)t->rows, (hsize_t)t->cols};
    hid_t mspace = H5Screate_simple(rank_of(t->g_cols), mdims, NULL);
    size_t n = (size_t)(t->rows * t->cols);
    memset(host, 0, sizeof(float) * n); /* vocabulary padding stays zero */
    if (ok) {
        select_slab(t, fspace, mspace);
        ok = H5Dread(ds, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, host) >= 0;
    }
    if (ok)
        m->be->upload(block + t->offset, host, sizeof(float) * n);
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Dclose(ds);
    return !ok;
}

hpt_status hpt_checkpoint_load(const char *dir, int64_t step, const hpt_ckpt_state *s)
{
    MPI_Comm world = s->comm->comms[HPT_GROUP_WORLD];
    hpt_model *m = s->model;
    hpt_optim *o = s->opt;
    char file[8192];
    file_of(dir, step, file, sizeof file);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = open_parallel(file, world, 0);
    hpt_status st = f < 0 ? hpt_error_set(HPT_ERR_DATA, "%s: cannot open", file) : HPT_OK;
    if ((st = hpt_comm_agree(world, st)))
        return st;
    size_t n = m->nparams, most = 0;
    for (int i = 0; i < m->ntensors; i++) {
        size_t k = (size_t)(m->tensors[i].rows * m->tensors[i].cols);
        most = k > most ? k : most;
    }
    float *host = malloc(sizeof(float) * (most ? most : 1));
    float *moments = m->be->alloc(2 * sizeof(float) * n); /* full local m, v */
    if (!host || !moments)
        st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory loading the checkpoint");
    const char *groups[3] = {"model", "optim/exp_avg", "optim/exp_avg_sq"};
    float *blocks[3] = {m->params, moments, moments ? moments + n : NULL};
    for (int i = 0; i < m->ntensors && !st; i++) {
        const hpt_tensor *t = &m->tensors[i];
        for (int g = 0; g < 3 && !st; g++) {
            char path[NAME_MAX_LEN + 32];
            snprintf(path, sizeof path, "/%s/%s", groups[g], t->name);
            if (read_tensor(f, path, m, t, blocks[g], host))
                st = hpt_error_set(HPT_ERR_DATA,
                                   "%s: tensor %s is damaged or missing (checksum or shape)", file,
                                   path);
        }
    }
    if (!st) { /* keep this rank's range of the moments */
        size_t own = o->hi - o->lo;
        m->be->copy(o->state, moments + o->lo, sizeof(float) * own);
        m->be->copy(o->state + own, moments + n + o->lo, sizeof(float) * own);
    }
    free(host);
    m->be->free(moments);
    H5Fclose(f);
    return hpt_comm_agree(world, st);
}
