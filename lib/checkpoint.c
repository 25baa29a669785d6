/* checkpoint.c — sharded HDF5 checkpoints: collective save with atomic
 * commit, pruning, stale-file cleanup; see checkpoint.h and io/ckpt.h (the
 * load is in checkpoint_load.c). */
#define _GNU_SOURCE /* fallocate */
#include "checkpoint.h"
#include "checkpoint_impl.h"
#include "h5util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

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

/* Checksum tiles follow the writing layout's shards so no tile has two
 * writers: a TP shard's columns, and rows in blocks of about 1 MiB — that
 * divide the shard's rows when TP splits the rows, else any (the last
 * block clipped: a prime vocabulary would otherwise get one-row tiles). */
static void tile_shape(const hpt_model *m, hpt_tensor_kind kind, int64_t g_rows, int64_t g_cols,
                       hpt_ckpt_tiles *t)
{
    int split_rows = kind == HPT_TENSOR_EMBED || kind == HPT_TENSOR_LM_HEAD ||
                     kind == HPT_TENSOR_Q || kind == HPT_TENSOR_K || kind == HPT_TENSOR_V ||
                     kind == HPT_TENSOR_GATE || kind == HPT_TENSOR_UP;
    int split_cols = kind == HPT_TENSOR_O || kind == HPT_TENSOR_DOWN;
    int64_t local_rows = split_rows ? (g_rows + m->tp - 1) / m->tp : g_rows;
    int64_t local_cols = split_cols ? g_cols / m->tp : g_cols;
    int64_t want = 262144 / local_cols > 1 ? 262144 / local_cols : 1;
    if (g_cols > 1)
        hpt_ckpt_tiles_init(t, g_rows, g_cols,
                            split_rows && m->tp > 1 ? (int64_t)divisor_at_most(local_rows, want)
                                                    : (want < g_rows ? want : g_rows),
                            local_cols);
    else
        hpt_ckpt_tiles_init(t, g_rows, 1, g_rows < 262144 ? g_rows : 262144, 1);
}

/* Contiguous storage allocated when the dataset is created, never filled:
 * after the creation phase the data writes change no metadata. */
static hid_t contiguous_dcpl(void)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(dcpl, H5D_CONTIGUOUS);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    return dcpl;
}

/* ------------------------------------------------------------- helpers */

static const char *h5_cause(char *buf);
/* Why the last hpt_checkpoint_open_parallel of this thread failed. */
static _Thread_local char open_why[400];

hid_t hpt_checkpoint_open_parallel(const char *path, MPI_Comm comm, int create)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    MPI_Info info;
    MPI_Info_create(&info);
    /* Two-phase collective buffering for every collective write: ROMIO
     * then agrees on a write error across ranks (its shortcut for
     * non-interleaved accesses returns a local error to one rank only, and
     * HDF5's error path then skips a collective: a hang). */
    MPI_Info_set(info, "romio_cb_write", "enable");
    /* No data sieving for independent writes: its read-modify-write takes
     * a file lock that a write failing half-way can leave held (a later
     * writer then waits forever). hpt's independent writes are whole
     * contiguous slabs anyway. */
    MPI_Info_set(info, "romio_ds_write", "disable");
    H5Pset_fapl_mpio(fapl, comm, info);
    MPI_Info_free(&info);
    H5Pset_all_coll_metadata_ops(fapl, 1);
    /* Metadata (object headers, attributes, group indexes) together in
     * 1 MiB blocks at the start of the file, not between the tensors: the
     * collective metadata writes cover a small range. */
    H5Pset_meta_block_size(fapl, 1 << 20);
    H5Pset_coll_metadata_write(fapl, 1);
    /* HDF5 1.8 object headers: attributes over 64 KiB (the CRC32C list of
     * a tensor whose TP shard has a prime number of rows, e.g. a vocabulary
     * of 32003 at TP 8: one-row tiles) go to dense storage */
    if (create)
        H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST);
    hid_t f = create ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)
                     : H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (f < 0) /* before H5Pclose clears HDF5's error stack */
        h5_cause(open_why);
    H5Pclose(fapl);
    return f;
}

const char *hpt_checkpoint_open_cause(void) { return open_why[0] ? open_why : "HDF5 error"; }

hpt_status hpt_checkpoint_fsync(const char *path)
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

/* 1 when `name` is a removal's leftover in a checkpoints directory: a
 * .step_NNNNNNNN.pruning directory (remove_checkpoint renamed it, a kill
 * came before it was gone) or an empty step_NNNNNNNN directory (earlier hpt
 * versions unlinked checkpoint.h5 in place, then rmdir'd). */
static int removal_leftover(const char *dir, const char *name)
{
    size_t n = strlen(name);
    if (!strncmp(name, ".step_", 6) && n > 8 && !strcmp(name + n - 8, ".pruning"))
        return 1;
    if (strncmp(name, "step_", 5) || strchr(name, '.'))
        return 0;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    DIR *d = opendir(p);
    struct dirent *e;
    int entries = 0;
    while (d && (e = readdir(d)))
        entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return d && !entries;
}

/* Rank 0: delete what interrupted removals left under dir (see
 * removal_leftover); readers already ignore it. */
static void clear_leftovers(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[4096];
    while (d && (e = readdir(d)))
        if (removal_leftover(dir, e->d_name)) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            remove_dir(p);
        }
    if (d)
        closedir(d);
}

/* Rank 0: remove checkpoint directory dir/name so that no kill leaves a
 * half-removed checkpoint under a step_NNNNNNNN name: rename it to
 * dir/.NAME.pruning (no reader lists that), fsync dir, then delete it. A
 * kill leaves either the whole checkpoint or the .pruning leftover,
 * cleared by the next prune or start (clear_leftovers). */
static void remove_checkpoint(const char *dir, const char *name)
{
    char from[4096], aside[4200];
    snprintf(from, sizeof from, "%s/%s", dir, name);
    snprintf(aside, sizeof aside, "%s/.%s.pruning", dir, name);
    remove_dir(aside); /* an earlier leftover of the same step */
    if (rename(from, aside)) {
        if (errno != ENOENT)
            fprintf(stderr, "hpt: warning: cannot remove %s: %s\n", from, strerror(errno));
        return;
    }
    if (hpt_checkpoint_fsync(dir))
        fprintf(stderr, "hpt: warning: %s\n", hpt_error_msg());
    remove_dir(aside);
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
        clear_leftovers(dir);
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

/* One dataset of a save, in the same order on every rank. */
typedef struct {
    char path[HPT_CKPT_NAME_MAX + 32];
    hpt_tensor_kind kind;
    int layer;
    const float *block;  /* the device block holding it here (params, m, v)  */
    const hpt_tensor *t; /* this rank writes t's slab; NULL: empty selection */
    const hpt_tensor *c; /* this rank computes the tiles' CRCs; or NULL      */
    hpt_ckpt_tiles tiles;
    size_t crc0;         /* its first tile in the save's CRC array           */
    int collective;      /* written with collective transfer (all ranks)     */
    hid_t ds;
} save_item;

/* The datasets of a save: every logical tensor in /model and both moment
 * groups. A piece (dataset, stage, TP shard) is written by one DP replica
 * — the replicas hold the same values — and for a TP-replicated tensor by
 * the first TP rank. The DP replicas split their pieces: in file order (the
 * order of creation), the pieces this rank's (stage, TP rank) writes are
 * cut into DP runs of about equal bytes, run r written by DP rank r, so all
 * replicas write at the same time and each writes 1/DP of its stage's
 * bytes (with PP = 1 each run is one contiguous part of the file). The
 * CRCs of a piece are computed by the next DP replica (without DP by the
 * writer), before it writes its own run. Transfer: collective (two-phase)
 * for the column-split tensors under TP, whose shards interleave row by
 * row in the file; raw writes for all others, where each writer's slab is
 * one contiguous byte range (no per-tensor synchronisation of all ranks).
 * Returns the count; *ntiles the CRCs; *mine the bytes this rank writes
 * (raw and collective). */
static int save_items(const hpt_ckpt_state *s, const float *m1, const float *m2, save_item *it,
                      size_t *ntiles, double *mine)
{
    hpt_model *m = s->model;
    hpt_comm *c = s->comm;
    int n = 3 + m->cfg.num_hidden_layers * 9, layers[n];
    hpt_tensor_kind kinds[n];
    n = global_tensors(&m->cfg, kinds, layers);
    const char *groups[3] = {"model", "optim/exp_avg", "optim/exp_avg_sq"};
    const float *blocks[3] = {m->params, m1, m2};
    const hpt_tensor *held[n];
    double total = 0, done = 0;
    for (int i = 0; i < n; i++) { /* the pieces of this (stage, TP rank) */
        const hpt_tensor *t = hpt_model_tensor(m, kinds[i], layers[i]); /* NULL: other stage */
        held[i] = t && !(t->dup || (t->split == 0 && c->tp_rank != 0)) ? t : NULL;
        total += held[i] ? 3.0 * (double)hpt_tensor_real_rows(held[i]) * (double)held[i]->cols : 0;
    }
    int k = 0;
    *ntiles = 0;
    *mine = 0;
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < n; i++, k++) {
            save_item *x = &it[k];
            char name[HPT_CKPT_NAME_MAX];
            hpt_tensor_name(kinds[i], layers[i], name, sizeof name);
            snprintf(x->path, sizeof x->path, "/%s/%s", groups[g], name);
            x->kind = kinds[i], x->layer = layers[i], x->block = blocks[g], x->ds = -1;
            const hpt_tensor *t = held[i];
            double bytes = t ? (double)hpt_tensor_real_rows(t) * (double)t->cols : 0;
            int w = total > 0 ? (int)((done + bytes / 2) * c->dp / total) : 0;
            w = w < c->dp ? w : c->dp - 1;
            done += bytes;
            x->t = t && c->dp_rank == w ? t : NULL;
            x->c = t && c->dp_rank == (w + 1) % c->dp ? t : NULL;
            *mine += x->t ? 4.0 * bytes : 0;
            x->collective = m->tp > 1 && (kinds[i] == HPT_TENSOR_O || kinds[i] == HPT_TENSOR_DOWN);
            int64_t gr, gc;
            hpt_tensor_global_shape(&m->cfg, kinds[i], &gr, &gc);
            tile_shape(m, kinds[i], gr, gc, &x->tiles);
            x->crc0 = *ntiles;
            *ntiles += (size_t)(x->tiles.nr * x->tiles.nc);
        }
    return k;
}

/* Host pointer to local tensor t of a device block: the block itself on the
 * CPU backend (its device memory is host memory), else a copy in scratch. */
static const float *host_view(const hpt_model *m, const float *block, const hpt_tensor *t,
                              float *scratch)
{
    if (!strcmp(m->be->name, "cpu"))
        return block + t->offset;
    m->be->download(scratch, block + t->offset, sizeof(float) * (size_t)(t->rows * t->cols));
    return scratch;
}

/* The innermost HDF5/MPI error description (e.g. MPI-IO's "No space left
 * on device"), one line. */
static const char *h5_cause(char *buf)
{
    snprintf(buf, 400, "%s", hpt_h5_cause());
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\t')
            *p = ' ';
    /* ROMIO: "... error stack: ADIOI_GEN_WRITECONTIG(80): Other I/O error
     * No space left on device'": keep the system's reason */
    const char *key = "Other I/O error ", *r = NULL;
    for (const char *p = strstr(buf, key); p; p = strstr(p + 1, key))
        r = p + strlen(key);
    if (r && *r) {
        memmove(buf, r, strlen(r) + 1);
        size_t n = strlen(buf);
        while (n && (buf[n - 1] == '\'' || buf[n - 1] == ' '))
            buf[--n] = 0;
        strcat(buf, " (MPI-IO)");
    }
    return buf[0] ? buf : "HDF5 error";
}

/* Phase 1 (collective): create every dataset with its storage allocated,
 * its "layer" attribute and zero CRCs. Returns 0 or -1 (message set). */
static int create_all(hid_t file, const hpt_model *m, save_item *it, int n)
{
    hid_t dcpl = contiguous_dcpl(), lcpl = H5Pcreate(H5P_LINK_CREATE), sp = H5Screate(H5S_SCALAR);
    H5Pset_create_intermediate_group(lcpl, 1);
    int err = 0;
    char why[400];
    for (int i = 0; i < n && !err; i++) {
        int64_t gr, gc;
        hpt_tensor_global_shape(&m->cfg, it[i].kind, &gr, &gc);
        hsize_t dims[2] = {(hsize_t)gr, (hsize_t)gc};
        hid_t fspace = H5Screate_simple(hpt_checkpoint_rank_of(gc), dims, NULL);
        it[i].ds = H5Dcreate2(file, it[i].path, H5T_IEEE_F32LE, fspace, lcpl, dcpl, H5P_DEFAULT);
        H5Sclose(fspace);
        int32_t l = it[i].layer;
        hid_t a = it[i].ds < 0 ? -1 : H5Acreate2(it[i].ds, "layer", H5T_STD_I32LE, sp,
                                                 H5P_DEFAULT, H5P_DEFAULT);
        err = a < 0 || H5Awrite(a, H5T_NATIVE_INT32, &l) < 0 ||
              hpt_ckpt_put_crc(it[i].ds, &it[i].tiles, NULL);
        if (a >= 0)
            H5Aclose(a);
        if (err)
            hpt_error_set(HPT_ERR_IO, "creating dataset %s failed: %s", it[i].path, h5_cause(why));
    }
    H5Sclose(sp);
    H5Pclose(lcpl);
    H5Pclose(dcpl);
    return err ? -1 : 0;
}

/* Wait until every rank of `world` has arrived, sleeping 0.2 ms between
 * polls instead of spinning: while one rank writes or fsyncs, the others
 * (MPICH busy-polls in its collectives) would take the CPU time the file
 * system needs, on machines with fewer cores than ranks. */
static void quiet_barrier(MPI_Comm world)
{
    MPI_Request rq;
    int done = 0;
    struct timespec ts = {0, 200000};
    MPI_Ibarrier(world, &rq);
    for (MPI_Test(&rq, &done, MPI_STATUS_IGNORE); !done; MPI_Test(&rq, &done, MPI_STATUS_IGNORE))
        nanosleep(&ts, NULL);
}

/* HPT_CKPT_PROFILE=1: rank 0 prints the seconds of each phase of a save
 * to stderr (bench/ckpt.sh). */
static double prof[8];
enum {
    PROF_CREATE, PROF_FLUSH, PROF_CRC, PROF_WRITE, PROF_SYNC, PROF_CRCATTR, PROF_CLOSE, PROF_COMMIT
};

static void prof_mark(int phase, double *t)
{
    double now = MPI_Wtime();
    prof[phase] += now - *t;
    *t = now;
}

/* Direct I/O for the data (O_DIRECT: from the process's memory to the
 * disk, no page cache): the bytes go to the disk once, the file's pages
 * do not fill the page cache of a training node, and the fsync at the
 * commit finds (almost) nothing to do — cf. DeepSpeed FastPersist (Wang et
 * al. 2024). HPT_CKPT_DIRECT=0 writes through the page cache instead.
 * O_DIRECT needs aligned offsets, lengths and memory: the aligned middle of
 * each slab goes through an aligned bounce buffer, its unaligned head and
 * tail (at most DIO_ALIGN - 1 bytes each) through a buffered descriptor. */
#define DIO_ALIGN 4096
#define DIO_BOUNCE ((size_t)8 << 20)

typedef struct {
    int dfd, bfd;   /* O_DIRECT (-1 when not available) and buffered   */
    char *bounce;   /* DIO_BOUNCE bytes, DIO_ALIGN-aligned             */
} raw_writer;

static int direct_wanted(void)
{
    const char *e = getenv("HPT_CKPT_DIRECT");
    return !e || strcmp(e, "0");
}

/* Open `file` for raw data writes; -1 (errno set) when it cannot be opened
 * at all. A file system without O_DIRECT (tmpfs on older kernels) gets
 * buffered writes. */
static int raw_open(raw_writer *w, const char *file)
{
    w->bfd = open(file, O_WRONLY);
    w->dfd = -1;
    w->bounce = NULL;
    if (w->bfd < 0)
        return -1;
    if (direct_wanted() && !posix_memalign((void **)&w->bounce, DIO_ALIGN, DIO_BOUNCE))
        w->dfd = open(file, O_WRONLY | O_DIRECT);
    return 0;
}

static void raw_close(raw_writer *w)
{
    if (w->dfd >= 0)
        close(w->dfd);
    if (w->bfd >= 0)
        close(w->bfd);
    free(w->bounce);
    w->dfd = w->bfd = -1;
    w->bounce = NULL;
}

/* pwrite all n bytes, retrying short writes and EINTR. 0 or errno. */
static int pwrite_all(int fd, const char *p, size_t n, uint64_t off)
{
    while (n > 0) {
        ssize_t k = pwrite(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? errno : EIO;
        p += k, n -= (size_t)k, off += (uint64_t)k;
    }
    return 0;
}

/* Write n bytes from src at file offset off. 0 or errno. A direct write
 * refused with EINVAL (a file system that accepts O_DIRECT at open but
 * not these writes) turns direct I/O off for the rest of the save. */
static int raw_write(raw_writer *w, const char *src, uint64_t off, uint64_t n)
{
    uint64_t a = (off + DIO_ALIGN - 1) / DIO_ALIGN * DIO_ALIGN, b = (off + n) / DIO_ALIGN * DIO_ALIGN;
    if (w->dfd < 0 || b <= a)
        return pwrite_all(w->bfd, src, n, off);
    int err = pwrite_all(w->bfd, src, a - off, off);
    for (uint64_t x = a; x < b && !err; x += DIO_BOUNCE) {
        size_t len = b - x < DIO_BOUNCE ? (size_t)(b - x) : DIO_BOUNCE;
        memcpy(w->bounce, src + (x - off), len);
        err = pwrite_all(w->dfd, w->bounce, len, x);
        if (err == EINVAL) {
            close(w->dfd);
            w->dfd = -1;
            err = pwrite_all(w->bfd, src + (x - off), b - x, x);
            break;
        }
    }
    return err ? err : pwrite_all(w->bfd, src + (b - off), off + n - b, b);
}

/* Phase 2: CRCs of the tiles this rank computes into crc (zero
 * elsewhere), then the data: every rank takes part in the collective
 * writes (through HDF5 and MPI-IO), writers alone make the independent
 * ones — each writer's slab of a dataset is whole rows, one contiguous
 * byte range at the dataset's file offset (contiguous layout, allocated
 * when created), written with raw_write. A failed write does not stop the
 * loop, so every rank makes the same collective calls. Returns 0 or -1
 * (message set for the first failure). */
static int write_all(const char *file, const hpt_model *m, save_item *it, int n, uint32_t *crc,
                     float *scratch)
{
    double t = MPI_Wtime();
    hid_t coll = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(coll, H5FD_MPIO_COLLECTIVE);
    for (int i = 0; i < n; i++) /* this rank's checksums first (none on a writer with DP > 1) */
        if (it[i].c) {
            const hpt_tensor *t = it[i].c;
            const float *p = host_view(m, it[i].block, t, scratch);
            hpt_ckpt_tiles_crc(&it[i].tiles, p, t->cols, t->row0, hpt_tensor_real_rows(t), t->col0, t->cols,
                               crc + it[i].crc0);
        }
    prof_mark(PROF_CRC, &t);
    int err = 0, writer = 0;
    char why[400];
    for (int i = 0; i < n && !writer; i++)
        writer = it[i].t && !it[i].collective;
    raw_writer w = {-1, -1, NULL};
    if (writer && raw_open(&w, file)) {
        err = 1;
        hpt_error_set(HPT_ERR_IO, "%s: cannot open for writing: %s", file, strerror(errno));
    }
    for (int i = 0; i < n; i++) {
        const hpt_tensor *t = it[i].t;
        if (!t && !it[i].collective)
            continue; /* independent: writers only */
        int64_t gr, gc;
        hpt_tensor_global_shape(&m->cfg, it[i].kind, &gr, &gc);
        const float *p = t ? host_view(m, it[i].block, t, scratch) : scratch;
        if (!it[i].collective) {
            haddr_t at = H5Dget_offset(it[i].ds);
            int e = at == HADDR_UNDEF ? EIO
                    : err               ? 0
                                        : raw_write(&w, (const char *)p,
                                                    (uint64_t)at + sizeof(float) * (uint64_t)t->row0 *
                                                                       (uint64_t)gc,
                                                    sizeof(float) * (uint64_t)hpt_tensor_real_rows(t) *
                                                        (uint64_t)gc);
            if (e && !err) {
                err = 1;
                hpt_error_set(HPT_ERR_IO, "writing %s failed: %s", it[i].path,
                              at == HADDR_UNDEF ? "no contiguous storage" : strerror(e));
            }
            continue;
        }
        hsize_t dims[2] = {(hsize_t)gr, (hsize_t)gc};
        hsize_t mdims[2] = {t ? (hsize_t)t->rows : 1, t ? (hsize_t)t->cols : 1};
        hid_t fspace = H5Screate_simple(hpt_checkpoint_rank_of(gc), dims, NULL);
        hid_t mspace = H5Screate_simple(hpt_checkpoint_rank_of(gc), mdims, NULL);
        select_slab(t, fspace, mspace);
        if (H5Dwrite(it[i].ds, H5T_NATIVE_FLOAT, mspace, fspace, coll, p) < 0 && !err) {
            err = 1;
            hpt_error_set(HPT_ERR_IO, "writing %s failed: %s", it[i].path, h5_cause(why));
        }
        H5Sclose(mspace);
        H5Sclose(fspace);
    }
    raw_close(&w);
    H5Pclose(coll);
    prof_mark(PROF_WRITE, &t);
    return err ? -1 : 0;
}

/* After phase 2, every rank that wrote data: fdatasync the file, so the
 * writers flush their parts to disk at the same time and rank 0's fsync
 * at the commit finds little left. Returns 0 or -1 (message set). */
static int sync_own(const char *file, const save_item *it, int n)
{
    int wrote = 0;
    for (int i = 0; i < n && !wrote; i++)
        wrote = it[i].t != NULL;
    if (!wrote)
        return 0;
    int fd = open(file, O_WRONLY);
    if (fd < 0 || fdatasync(fd)) {
        hpt_error_set(HPT_ERR_IO, "%s: flushing the data to disk failed: %s", file,
                      strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

/* Phase 3 (collective): every rank's CRCs combined (each tile has one
 * author), written over the zeros. Same-size attribute values: no new
 * file space. */
static int write_crcs(const hpt_ckpt_state *s, save_item *it, int n, uint32_t *crc,
                      size_t ntiles)
{
    MPI_Allreduce(MPI_IN_PLACE, crc, (int)ntiles, MPI_UINT32_T, MPI_BOR,
                  s->comm->comms[HPT_GROUP_WORLD]);
    char why[400];
    for (int i = 0; i < n; i++)
        if (hpt_ckpt_put_crc(it[i].ds, &it[i].tiles, crc + it[i].crc0)) {
            hpt_error_set(HPT_ERR_IO, "writing the checksums of %s failed: %s", it[i].path,
                          h5_cause(why));
            return -1;
        }
    return 0;
}

/* Rank 0: fsync, rename the directory, fsync DIR, move `latest`. */
static hpt_status commit(const char *dir, const char *tmpdir, const char *final, const char *file,
                         const char *name)
{
    hpt_status st;
    char latest[4096], ltmp[4096];
    if ((st = hpt_checkpoint_fsync(file)) || (st = hpt_checkpoint_fsync(tmpdir)))
        return st;
    remove_checkpoint(dir, name); /* a same-step checkpoint from before a fallback */
    if (rename(tmpdir, final))
        return hpt_error_set(HPT_ERR_IO, "%s: rename to %s failed: %s", tmpdir, final,
                             strerror(errno));
    if ((st = hpt_checkpoint_fsync(dir)))
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
    return hpt_checkpoint_fsync(dir);
}

/* Rank 0: keep the newest `keep` checkpoints up to step `saved` (the one
 * just written, always kept); anything newer than it is not ours to judge
 * (a resume moves unloadable ones aside) and is left alone. Each removal
 * renames the checkpoint aside first (remove_checkpoint); leftovers of
 * earlier interrupted removals go first. */
static void prune(const char *dir, int keep, int64_t saved)
{
    clear_leftovers(dir);
    int64_t *steps = malloc(sizeof(int64_t) * HPT_CKPT_MAX_CANDIDATES);
    int n = steps ? hpt_ckpt_list(dir, steps, HPT_CKPT_MAX_CANDIDATES) : 0, kept = 0;
    for (int i = 0; i < n; i++) { /* newest first */
        if (steps[i] > saved)
            continue;
        if (steps[i] == saved || kept < keep) {
            kept++;
            continue;
        }
        char name[32];
        hpt_ckpt_dirname(steps[i], name);
        remove_checkpoint(dir, name);
    }
    free(steps);
}

/* Bytes a checkpoint of this model takes at most: weights and two moments
 * of every logical tensor, plus 4 KiB of metadata per dataset rounded up
 * to the 1 MiB metadata blocks, plus 1 MiB (superblock, groups, small
 * datasets). */
static double checkpoint_bytes(const hpt_config *c)
{
    int n = 3 + c->num_hidden_layers * 9, layers[n];
    hpt_tensor_kind kinds[n];
    n = global_tensors(c, kinds, layers);
    double total = 0, mib = 1048576.0;
    for (int i = 0; i < n; i++) {
        int64_t r, k;
        hpt_tensor_global_shape(c, kinds[i], &r, &k);
        total += 3.0 * 4.0 * (double)r * (double)k;
    }
    return total + ceil(3.0 * n * 4096.0 / mib) * mib + mib;
}

/* HPT_CKPT_TEST_SKIP_RESERVE=1 (testing only): skip the free-space and
 * file-size-limit checks and the reservation, so that a full disk or a
 * `ulimit -f` hits the data writes themselves (tests/ckpt-disk-full-mid.sh). */
static int skip_reserve(void)
{
    const char *e = getenv("HPT_CKPT_TEST_SKIP_RESERVE");
    return e && *e && strcmp(e, "0");
}

/* Refuse before writing when the file system cannot hold the checkpoint
 * (rank 0) — an early, cheap version of the reservation below. */
static hpt_status check_space(const char *dir, const hpt_config *c)
{
    struct statvfs v;
    double need = checkpoint_bytes(c);
    if (skip_reserve() || statvfs(dir, &v))
        return HPT_OK; /* cannot tell: the reservation will */
    double avail = (double)v.f_bavail * (double)v.f_frsize;
    if (avail < need)
        return hpt_error_set(HPT_ERR_IO,
                             "%s: not enough space for a checkpoint: need %.1f MiB, %.1f MiB free "
                             "(disk full?); existing checkpoints are untouched",
                             dir, need / 1048576.0, avail / 1048576.0);
    return HPT_OK;
}

/* A file-size limit (ulimit -f) below `need` bytes would fail the writes
 * with EFBIG half-way (every rank checks its own: any may write). */
static hpt_status check_fsize_limit(const char *what, double need)
{
    struct rlimit rl;
    if (skip_reserve() || getrlimit(RLIMIT_FSIZE, &rl) || rl.rlim_cur == RLIM_INFINITY ||
        (double)rl.rlim_cur >= need)
        return HPT_OK;
    return hpt_error_set(HPT_ERR_IO,
                         "%s: the file size limit (ulimit -f) of %.1f MiB is below the "
                         "checkpoint's %.1f MiB (File too large); existing checkpoints are untouched",
                         what, (double)rl.rlim_cur / 1048576.0, need / 1048576.0);
}

/* Rank 0, before HDF5 opens the file: allocate `need` bytes of blocks for
 * it without changing its size (fallocate KEEP_SIZE, so HDF5's create does
 * not truncate them away), so that neither the metadata nor the data
 * writes can run out of space half-way — a full disk (ENOSPC, EDQUOT)
 * fails here, before anything is written; a failed write after HDF5 has
 * metadata in memory cannot be undone cleanly (its close fails, and HDF5
 * 1.10 then crashes at exit). A file system without fallocate is skipped
 * (check_space has looked at the free space). */
static hpt_status reserve(const char *file, double need)
{
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0)
        return hpt_error_set(HPT_ERR_IO, "%s: cannot create: %s", file, strerror(errno));
    int err = skip_reserve() || !fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)need) ? 0 : errno;
    close(fd);
    if (!err || err == EOPNOTSUPP || err == ENOSYS)
        return HPT_OK;
    return hpt_error_set(HPT_ERR_IO,
                         "%s: cannot reserve %.1f MiB for the checkpoint: %s (disk full?); "
                         "existing checkpoints are untouched",
                         file, need / 1048576.0, strerror(err));
}

/* Rank 0, after the file is complete: free the reserved blocks past its
 * end (not needed; ignored where unsupported). */
static void unreserve(const char *file, double need)
{
    struct stat sb;
    int fd = open(file, O_WRONLY);
    if (fd >= 0 && !fstat(fd, &sb) && (double)sb.st_size < need)
        (void)!fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, sb.st_size,
                         (off_t)need - sb.st_size);
    if (fd >= 0)
        close(fd);
}

/* Create and write the checkpoint file (collective; its blocks are
 * reserved): phase 1 creates all datasets and flushes the metadata, phase
 * 2 writes the data, phase 3 the checksums. A failure in phase 2 leaves no
 * metadata to write, so the file still closes cleanly; every phase ends
 * in an agreement, so all ranks stop at the same point. */
static hpt_status write_file(const char *file, const hpt_ckpt_state *s, const hpt_ckpt_meta *meta)
{
    MPI_Comm world = s->comm->comms[HPT_GROUP_WORLD];
    hpt_model *m = s->model;
    char why[400];
    hid_t f = hpt_checkpoint_open_parallel(file, world, 1);
    hpt_status st = f < 0 ? hpt_error_set(HPT_ERR_IO, "%s: cannot create the checkpoint file: %s",
                                          file, hpt_checkpoint_open_cause())
                          : HPT_OK;
    if ((st = hpt_comm_agree(world, st)))
        return st;
    size_t most = 1, ntiles;
    for (int i = 0; i < m->ntensors; i++) {
        size_t k = (size_t)(m->tensors[i].rows * m->tensors[i].cols);
        most = k > most ? k : most;
    }
    float *full = NULL, *m1, *m2, *scratch = malloc(sizeof(float) * most);
    int n = 3 * (3 + m->cfg.num_hidden_layers * 9);
    save_item *it = calloc((size_t)n, sizeof *it);
    if (s->shard_counts && !(full = m->be->alloc(2 * sizeof(float) * m->nparams)))
        HPT_FATAL("out of memory gathering the ZeRO-1 state");
    if (!scratch || !it)
        HPT_FATAL("out of memory saving a checkpoint");
    gather_moments(s, full, &m1, &m2);
    double mine;
    n = save_items(s, m1, m2, it, &ntiles, &mine);
    if (getenv("HPT_CKPT_PROFILE"))
        fprintf(stderr, "hpt: checkpoint rank %d (pp %d, tp %d, dp %d) writes %.0f bytes\n",
                s->comm->world_rank, s->comm->pp_rank, s->comm->tp_rank, s->comm->dp_rank, mine);
    uint32_t *crc = calloc(ntiles, sizeof(uint32_t));
    if (!crc)
        HPT_FATAL("out of memory saving a checkpoint");
    double t = MPI_Wtime();
    st = hpt_ckpt_write_meta(f, meta);
    if (!st && create_all(f, m, it, n))
        st = HPT_ERR_IO;
    prof_mark(PROF_CREATE, &t);
    if (!st && H5Fflush(f, H5F_SCOPE_GLOBAL) < 0)
        st = hpt_error_set(HPT_ERR_IO, "writing the metadata failed: %s", h5_cause(why));
    st = hpt_comm_agree(world, st);
    prof_mark(PROF_FLUSH, &t);
    if (!st && write_all(file, m, it, n, crc, scratch))
        st = HPT_ERR_IO;
    t = MPI_Wtime();
    if (!st && sync_own(file, it, n))
        st = HPT_ERR_IO;
    prof_mark(PROF_SYNC, &t);
    quiet_barrier(world);
    t = MPI_Wtime();
    if (!(st = hpt_comm_agree(world, st)) && write_crcs(s, it, n, crc, ntiles))
        st = HPT_ERR_IO;
    prof_mark(PROF_CRCATTR, &t);
    for (int i = 0; i < n; i++)
        if (it[i].ds >= 0)
            H5Dclose(it[i].ds);
    if (H5Fclose(f) < 0 && !st)
        st = hpt_error_set(HPT_ERR_IO, "closing the file failed: %s", h5_cause(why));
    prof_mark(PROF_CLOSE, &t);
    free(crc);
    free(it);
    free(scratch);
    m->be->free(full);
    return hpt_comm_agree(world, st);
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
    double need = checkpoint_bytes(&s->model->cfg);
    hpt_status st = check_fsize_limit(dir, need);
    if (!st && s->comm->world_rank == 0) {
        st = mkdir_p(dir);
        if (!st) {
            remove_dir(tmpdir);
            st = check_space(dir, &s->model->cfg);
        }
        if (!st && mkdir(tmpdir, 0777))
            st = hpt_error_set(HPT_ERR_IO, "%s: cannot create: %s", tmpdir, strerror(errno));
        if (!st)
            st = reserve(file, need);
        if (st)
            remove_dir(tmpdir);
    }
    if ((st = hpt_comm_agree(world, st)))
        return st;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if ((st = write_file(file, s, meta))) {
        if (s->comm->world_rank == 0)
            remove_dir(tmpdir);
        return hpt_error_set(st, "%s: saving the checkpoint failed: %s; removed %s, existing "
                             "checkpoints are untouched", file, hpt_error_msg(), tmpdir);
    }
    double t = MPI_Wtime();
    if (s->comm->world_rank == 0) {
        unreserve(file, need);
        st = commit(dir, tmpdir, final, file, name);
        if (!st)
            prune(dir, keep, meta->step);
    }
    quiet_barrier(world);
    st = hpt_comm_agree(world, st);
    prof_mark(PROF_COMMIT, &t);
    if (getenv("HPT_CKPT_PROFILE") && s->comm->world_rank == 0)
        fprintf(stderr, "hpt: checkpoint save phases (s): prepare+reserve %.3f create %.3f "
                "flush %.3f crc %.3f write %.3f sync %.3f crc-attrs %.3f close %.3f commit %.3f\n",
                t - t0 - prof[PROF_CREATE] - prof[PROF_FLUSH] - prof[PROF_CRC] - prof[PROF_WRITE] -
                    prof[PROF_SYNC] - prof[PROF_CRCATTR] - prof[PROF_CLOSE] - prof[PROF_COMMIT],
                prof[PROF_CREATE], prof[PROF_FLUSH], prof[PROF_CRC], prof[PROF_WRITE],
                prof[PROF_SYNC], prof[PROF_CRCATTR], prof[PROF_CLOSE], prof[PROF_COMMIT]);
    memset(prof, 0, sizeof prof);
    struct stat sb;
    snprintf(file, sizeof file, "%s/%s", final, HPT_CKPT_FILE);
    if (bytes)
        *bytes = stat(file, &sb) ? 0 : (int64_t)sb.st_size;
    if (seconds)
        *seconds = MPI_Wtime() - t0;
    return st;
}
