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
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
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
    if (hpt_fsync_path(dir))
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
 * optimizer state itself, or with ZeRO gathered over the shard group
 * (HPT_GROUP_DPS: DP, or HSDP's group) into `full`. */
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
        s->comm->be->allgather_inplace_f32(s->comm, HPT_GROUP_DPS, dst, s->shard_counts);
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
    int64_t gcols;       /* the dataset's columns                            */
    hid_t ds;
    haddr_t at;          /* its data's file offset (after phase 1)           */
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
            /* writers spread over the weight replicas (CP x DP; a grid
             * built without groups, hpt-plan's model of it: DP) */
            int R = c->group_size[HPT_GROUP_DP] > 0 ? c->group_size[HPT_GROUP_DP] : c->dp;
            int me = c->group_size[HPT_GROUP_DP] > 0 ? c->group_rank[HPT_GROUP_DP] : c->dp_rank;
            int w = total > 0 ? (int)((done + bytes / 2) * R / total) : 0;
            w = w < R ? w : R - 1;
            done += bytes;
            x->t = t && me == w ? t : NULL;
            x->c = t && me == (w + 1) % R ? t : NULL;
            *mine += x->t ? 4.0 * bytes : 0;
            x->collective = m->tp > 1 && (kinds[i] == HPT_TENSOR_O || kinds[i] == HPT_TENSOR_DOWN);
            int64_t gr, gc;
            hpt_tensor_global_shape(&m->cfg, kinds[i], &gr, &gc);
            tile_shape(m, kinds[i], gr, gc, &x->tiles);
            x->gcols = gc;
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
    hpt_comm_watch w = hpt_comm_watch_begin(world, HPT_FLIGHT_BARRIER, 0);
    MPI_Ibarrier(world, &rq);
    for (MPI_Test(&rq, &done, MPI_STATUS_IGNORE); !done; MPI_Test(&rq, &done, MPI_STATUS_IGNORE))
        nanosleep(&ts, NULL);
    hpt_comm_watch_end(w);
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

hpt_status hpt_ckpt_check_env(void)
{
    const char *e = getenv("HPT_CKPT_DIRECT");
    if (!e || !*e || !strcmp(e, "0") || !strcmp(e, "1")) /* empty: as unset */
        return HPT_OK;
    return hpt_error_set(HPT_ERR_USAGE, "HPT_CKPT_DIRECT=%s: expected 1 (checkpoint data written "
                         "with direct I/O, the default) or 0 (through the page cache)", e);
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
    hpt_comm_watch w = hpt_comm_watch_begin(s->comm->comms[HPT_GROUP_WORLD], HPT_FLIGHT_ALLREDUCE,
                                            sizeof *crc * ntiles);
    MPI_Allreduce(MPI_IN_PLACE, crc, (int)ntiles, MPI_UINT32_T, MPI_BOR,
                  s->comm->comms[HPT_GROUP_WORLD]);
    hpt_comm_watch_end(w);
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
    char latest[4096], line[64];
    if ((st = hpt_fsync_path(file)))
        return st;
    remove_checkpoint(dir, name); /* a same-step checkpoint from before a fallback */
    if ((st = hpt_file_commit(tmpdir, final))) /* fsync, rename, fsync DIR */
        return st;
    snprintf(latest, sizeof latest, "%s/latest", dir);
    snprintf(line, sizeof line, "%s\n", name);
    return hpt_file_write_durable(latest, line, strlen(line)); /* latest.tmp, renamed */
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
 * `ulimit -f` hits the data writes themselves (tests/ckpt/ckpt-disk-full-mid.sh). */
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

/* One save between its start and its commit: names, the open file and its
 * datasets, the CRC array. */
typedef struct {
    char name[32], tmpdir[4096], final[4096], file[8192];
    const char *dir;
    int64_t step;
    int keep;
    double need; /* bytes reserved (checkpoint_bytes)          */
    double t0;   /* MPI_Wtime at the start                     */
    hid_t f;     /* -1: not open                                */
    save_item *it;
    int n;
    uint32_t *crc;
    size_t ntiles;
} save_job;

/* Names, limits, DIR/step_N.tmp created and its file's blocks reserved
 * (rank 0), agreed. Errors: HPT_ERR_IO (nothing left behind). */
static hpt_status job_prepare(save_job *j, const char *dir, const hpt_ckpt_state *s,
                              const hpt_ckpt_meta *meta, int keep)
{
    MPI_Comm world = s->comm->comms[HPT_GROUP_WORLD];
    memset(j, 0, sizeof *j);
    j->f = -1;
    j->t0 = MPI_Wtime();
    j->dir = dir;
    j->step = meta->step;
    j->keep = keep;
    hpt_ckpt_dirname(meta->step, j->name);
    snprintf(j->tmpdir, sizeof j->tmpdir, "%s/%s.tmp", dir, j->name);
    snprintf(j->final, sizeof j->final, "%s/%s", dir, j->name);
    snprintf(j->file, sizeof j->file, "%s/%s", j->tmpdir, HPT_CKPT_FILE);
    j->need = checkpoint_bytes(&s->model->cfg);
    hpt_status st = check_fsize_limit(dir, j->need);
    if (!st && s->comm->world_rank == 0) {
        st = mkdir_p(dir);
        if (!st) {
            remove_dir(j->tmpdir);
            st = check_space(dir, &s->model->cfg);
        }
        if (!st && mkdir(j->tmpdir, 0777))
            st = hpt_error_set(HPT_ERR_IO, "%s: cannot create: %s", j->tmpdir, strerror(errno));
        if (!st)
            st = reserve(j->file, j->need);
        if (st)
            remove_dir(j->tmpdir);
    }
    if ((st = hpt_comm_agree(world, st)))
        return st;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return HPT_OK;
}

/* Phase 1 (collective): create the file, every dataset (storage allocated,
 * zero CRCs) and the metadata, flushed; j->it[i].at is each dataset's data
 * offset. m1, m2: the full local moments (gather_moments). Returns the
 * agreed status; j->f < 0 when the file could not be created (nothing to
 * close), else job_close must follow. */
static hpt_status job_create(save_job *j, const hpt_ckpt_state *s, const hpt_ckpt_meta *meta,
                             const float *m1, const float *m2)
{
    MPI_Comm world = s->comm->comms[HPT_GROUP_WORLD];
    hpt_model *m = s->model;
    char why[400];
    j->f = hpt_checkpoint_open_parallel(j->file, world, 1);
    hpt_status st = j->f < 0 ? hpt_error_set(HPT_ERR_IO, "%s: cannot create the checkpoint "
                                             "file: %s", j->file, hpt_checkpoint_open_cause())
                             : HPT_OK;
    if ((st = hpt_comm_agree(world, st))) {
        if (j->f >= 0)
            H5Fclose(j->f);
        j->f = -1;
        return st;
    }
    j->it = calloc((size_t)(3 * (3 + m->cfg.num_hidden_layers * 9)), sizeof *j->it);
    if (!j->it)
        HPT_FATAL("out of memory saving a checkpoint");
    double mine;
    j->n = save_items(s, m1, m2, j->it, &j->ntiles, &mine);
    if (getenv("HPT_CKPT_PROFILE"))
        fprintf(stderr, "hpt: checkpoint rank %d (pp %d, tp %d, dp %d) writes %.0f bytes\n",
                s->comm->world_rank, s->comm->pp_rank, s->comm->tp_rank, s->comm->dp_rank, mine);
    if (!(j->crc = calloc(j->ntiles ? j->ntiles : 1, sizeof(uint32_t))))
        HPT_FATAL("out of memory saving a checkpoint");
    double t = MPI_Wtime();
    st = hpt_ckpt_write_meta(j->f, meta);
    if (!st && create_all(j->f, m, j->it, j->n))
        st = HPT_ERR_IO;
    prof_mark(PROF_CREATE, &t);
    if (!st && H5Fflush(j->f, H5F_SCOPE_GLOBAL) < 0)
        st = hpt_error_set(HPT_ERR_IO, "writing the metadata failed: %s", h5_cause(why));
    for (int i = 0; i < j->n; i++)
        j->it[i].at = j->it[i].ds < 0 ? HADDR_UNDEF : H5Dget_offset(j->it[i].ds);
    st = hpt_comm_agree(world, st);
    prof_mark(PROF_FLUSH, &t);
    return st;
}

/* Phase 3 and the close (collective), after every rank's data writes
 * (status st, this rank's): agree, combine and write the CRCs, close the
 * datasets and the file, free the job's arrays. Returns the agreed
 * status. */
static hpt_status job_close(save_job *j, const hpt_ckpt_state *s, hpt_status st)
{
    MPI_Comm world = s->comm->comms[HPT_GROUP_WORLD];
    char why[400];
    double t = MPI_Wtime();
    if (!(st = hpt_comm_agree(world, st)) && write_crcs(s, j->it, j->n, j->crc, j->ntiles))
        st = HPT_ERR_IO;
    prof_mark(PROF_CRCATTR, &t);
    for (int i = 0; i < j->n; i++)
        if (j->it[i].ds >= 0)
            H5Dclose(j->it[i].ds);
    if (s->fault_stop) /* test: frozen between HDF5's collectives (--fault-stall-at save) */
        raise(SIGSTOP);
    if (H5Fclose(j->f) < 0 && !st)
        st = hpt_error_set(HPT_ERR_IO, "closing the file failed: %s", h5_cause(why));
    j->f = -1;
    prof_mark(PROF_CLOSE, &t);
    free(j->crc);
    free(j->it);
    j->crc = NULL, j->it = NULL;
    return hpt_comm_agree(world, st);
}

/* A failed save (status st, agreed): rank 0 removes the .tmp directory;
 * the message says so. Returns st. */
static hpt_status job_fail(const save_job *j, const hpt_ckpt_state *s, hpt_status st)
{
    if (s->comm->world_rank == 0)
        remove_dir(j->tmpdir);
    return hpt_error_set(st, "%s: saving the checkpoint failed: %s; removed %s, existing "
                         "checkpoints are untouched", j->file, hpt_error_msg(), j->tmpdir);
}

/* The commit (collective; the file is complete and closed on every rank):
 * rank 0 fsyncs, renames, moves `latest` and prunes. *bytes: the file's
 * size. Returns the agreed status. */
static hpt_status job_commit(const save_job *j, const hpt_ckpt_state *s, int64_t *bytes)
{
    MPI_Comm world = s->comm->comms[HPT_GROUP_WORLD];
    hpt_status st = HPT_OK;
    double t = MPI_Wtime();
    if (s->comm->world_rank == 0) {
        unreserve(j->file, j->need);
        st = commit(j->dir, j->tmpdir, j->final, j->file, j->name);
        if (!st)
            prune(j->dir, j->keep, j->step);
    }
    quiet_barrier(world);
    st = hpt_comm_agree(world, st);
    prof_mark(PROF_COMMIT, &t);
    if (getenv("HPT_CKPT_PROFILE") && s->comm->world_rank == 0)
        fprintf(stderr, "hpt: checkpoint save phases (s): prepare+reserve %.3f create %.3f "
                "flush %.3f crc %.3f write %.3f sync %.3f crc-attrs %.3f close %.3f commit %.3f\n",
                t - j->t0 - prof[PROF_CREATE] - prof[PROF_FLUSH] - prof[PROF_CRC] -
                    prof[PROF_WRITE] - prof[PROF_SYNC] - prof[PROF_CRCATTR] - prof[PROF_CLOSE] -
                    prof[PROF_COMMIT],
                prof[PROF_CREATE], prof[PROF_FLUSH], prof[PROF_CRC], prof[PROF_WRITE],
                prof[PROF_SYNC], prof[PROF_CRCATTR], prof[PROF_CLOSE], prof[PROF_COMMIT]);
    memset(prof, 0, sizeof prof);
    struct stat sb;
    char file[8192];
    snprintf(file, sizeof file, "%s/%s", j->final, HPT_CKPT_FILE);
    if (bytes)
        *bytes = st || stat(file, &sb) ? 0 : (int64_t)sb.st_size;
    return st;
}

/* Create and write the checkpoint file synchronously (collective; its
 * blocks are reserved): phase 1 creates all datasets and flushes the
 * metadata, phase 2 writes the data, phase 3 the checksums. A failure in
 * phase 2 leaves no metadata to write, so the file still closes cleanly;
 * every phase ends in an agreement, so all ranks stop at the same point. */
static hpt_status write_file(save_job *j, const hpt_ckpt_state *s, const hpt_ckpt_meta *meta)
{
    MPI_Comm world = s->comm->comms[HPT_GROUP_WORLD];
    hpt_model *m = s->model;
    float *full = NULL, *m1, *m2;
    if (s->shard_counts && !(full = m->be->alloc(2 * sizeof(float) * m->nparams)))
        HPT_FATAL("out of memory gathering the ZeRO-1 state");
    gather_moments(s, full, &m1, &m2);
    hpt_status st = job_create(j, s, meta, m1, m2);
    if (j->f < 0) {
        m->be->free(full);
        return st;
    }
    size_t most = 1;
    for (int i = 0; i < m->ntensors; i++) {
        size_t k = (size_t)(m->tensors[i].rows * m->tensors[i].cols);
        most = k > most ? k : most;
    }
    float *scratch = malloc(sizeof(float) * most);
    if (!scratch)
        HPT_FATAL("out of memory saving a checkpoint");
    if (!st && write_all(j->file, m, j->it, j->n, j->crc, scratch))
        st = HPT_ERR_IO;
    double t = MPI_Wtime();
    if (!st && sync_own(j->file, j->it, j->n))
        st = HPT_ERR_IO;
    prof_mark(PROF_SYNC, &t);
    quiet_barrier(world);
    st = job_close(j, s, st);
    free(scratch);
    m->be->free(full);
    return st;
}

hpt_status hpt_checkpoint_save(const char *dir, const hpt_ckpt_state *s, const hpt_ckpt_meta *meta,
                               int keep, double *seconds, int64_t *bytes)
{
    save_job j;
    hpt_status st = job_prepare(&j, dir, s, meta, keep);
    if (st)
        return st;
    if ((st = write_file(&j, s, meta)))
        return job_fail(&j, s, st);
    st = job_commit(&j, s, bytes);
    if (seconds)
        *seconds = MPI_Wtime() - j.t0;
    return st;
}

/* ------------------------------------------------- asynchronous save */

/* The asynchronous save (docs/CHECKPOINT.md, "Asynchronous saves"): the
 * training thread does every HDF5 and MPI call — phase 1 (create) and the
 * snapshot at the step boundary, phase 3 (CRC attributes, close) and the
 * commit at a later one — and a writer thread per rank does only POSIX
 * I/O from the staging buffer: the CRCs of its tiles, the data at the
 * dataset offsets fixed in phase 1 (direct I/O as a synchronous save;
 * the TP column slabs row by row), fdatasync. So MPI needs no more than
 * MPI_THREAD_FUNNELED and HDF5 no thread safety. */
struct hpt_ckpt_async {
    float *stage;         /* staging buffer (DIO_ALIGN-aligned), reused   */
    const hpt_backend *pin_be; /* the backend that pinned stage, or NULL */
    size_t cap;           /* its size in floats                           */
    size_t *off;          /* per item: its slab's first float in stage,
                           * SIZE_MAX when this rank neither writes nor
                           * checksums it                                 */
    const float **src;    /* per item: the slab in the live state (host
                           * memory), copied by the writer; NULL: copied
                           * at the snapshot, or none                     */
    float *full;          /* ZeRO-1: the gathered moments, until copied   */
    const hpt_backend *be; /* whose free() full needs                     */
    save_job job;         /* the save in flight                           */
    int inflight;
    pthread_t th;
    int threaded;         /* th was started (else written inline)          */
    pthread_mutex_t mu;   /* guards copied                                */
    pthread_cond_t cv;    /* signalled when copied becomes 1              */
    int copied;           /* the writer has copied the slabs into stage   */
    atomic_int written;   /* the writer is done (its outcome below)       */
    int err;              /* errno of the writer's first failure, or 0    */
    char msg[9000];       /* its message                                  */
    double snapshot_s, write_s, copy_s, copy_wait_s;
};

hpt_ckpt_async *hpt_ckpt_async_new(void)
{
    hpt_ckpt_async *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->job.f = -1;
    a->copied = 1;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    return a;
}

void hpt_ckpt_async_free(hpt_ckpt_async *a)
{
    if (!a)
        return;
    if (a->inflight && a->threaded)
        pthread_join(a->th, NULL);
    if (a->full)
        a->be->free(a->full);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    if (a->pin_be)
        a->pin_be->host_unpin(a->stage);
    free(a->stage);
    free(a->off);
    free(a->src);
    free(a);
}

int64_t hpt_ckpt_async_inflight(const hpt_ckpt_async *a)
{
    return a && a->inflight ? a->job.step : -1;
}

int hpt_ckpt_async_written(hpt_ckpt_async *a)
{
    return !a || !a->inflight || atomic_load(&a->written);
}

/* Floats of local tensor t's slab this rank stages (rows past the
 * vocabulary's end are not part of it). */
static size_t slab_floats(const hpt_tensor *t)
{
    return (size_t)hpt_tensor_real_rows(t) * (size_t)t->cols;
}

/* Bytes the staging buffer of this rank takes: the slabs it writes or
 * checksums (each once). */
size_t hpt_ckpt_async_staging_bytes(const hpt_ckpt_state *s)
{
    hpt_model *m = s->model;
    int n = 3 * (3 + m->cfg.num_hidden_layers * 9);
    save_item *it = calloc((size_t)n, sizeof *it);
    if (!it)
        HPT_FATAL("out of memory saving a checkpoint");
    size_t ntiles, total = 0;
    double mine;
    n = save_items(s, m->params, m->params, it, &ntiles, &mine);
    for (int i = 0; i < n; i++)
        if (it[i].t || it[i].c)
            total += slab_floats(it[i].t ? it[i].t : it[i].c);
    free(it);
    return total * sizeof(float);
}

/* Make the staging buffer hold `need` floats: allocated and touched (its
 * pages faulted in now, not during a snapshot) when it is smaller, and
 * pinned through `be` when the backend has device memory (be->host_pin:
 * CUDA page-locks it, so the snapshot's downloads run at DMA speed; when
 * pinning is refused, e.g. by the locked-memory limit, the buffer stays
 * pageable and works as well, only slower). Errors: HPT_ERR_IO (out of
 * memory; local). */
static hpt_status stage_grow(hpt_ckpt_async *a, size_t need, const hpt_backend *be)
{
    if (need <= a->cap)
        return HPT_OK;
    if (a->pin_be)
        a->pin_be->host_unpin(a->stage);
    a->pin_be = NULL;
    free(a->stage);
    a->stage = NULL;
    a->cap = 0;
    if (posix_memalign((void **)&a->stage, DIO_ALIGN, need * sizeof(float) + DIO_ALIGN))
        return hpt_error_set(HPT_ERR_IO, "out of memory for the checkpoint staging buffer "
                             "(%.1f MiB, --async-save)", need * 4.0 / 1048576.0);
    memset(a->stage, 0, need * sizeof(float));
    a->cap = need;
    if (be && be->is_device && be->host_pin && be->host_unpin &&
        be->host_pin(a->stage, need * sizeof(float)) == 0)
        a->pin_be = be;
    return HPT_OK;
}

hpt_status hpt_ckpt_async_reserve(hpt_ckpt_async *a, const hpt_ckpt_state *s)
{
    return stage_grow(a, hpt_ckpt_async_staging_bytes(s) / sizeof(float), s->model->be);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The snapshot: give every slab this rank writes or checksums its place
 * in the staging buffer. Device memory (the GPU backend) is copied there
 * now, through the backend; host memory (the CPU backend) is left for the
 * writer thread to copy (a->src), overlapped with the next step's forward
 * and backward passes, which only read the weights — the optimizer step
 * waits for it (hpt_ckpt_async_snapshot_wait). Errors: HPT_ERR_IO (out of
 * memory; local). */
static hpt_status stage_plan(hpt_ckpt_async *a, const hpt_ckpt_state *s)
{
    save_job *j = &a->job;
    hpt_model *m = s->model;
    size_t need = 0;
    for (int i = 0; i < j->n; i++)
        if (j->it[i].t || j->it[i].c)
            need += slab_floats(j->it[i].t ? j->it[i].t : j->it[i].c);
    hpt_status st = stage_grow(a, need, m->be);
    if (st)
        return st;
    free(a->off);
    free(a->src);
    a->off = malloc(sizeof(size_t) * (size_t)(j->n ? j->n : 1));
    a->src = calloc((size_t)(j->n ? j->n : 1), sizeof *a->src);
    if (!a->off || !a->src)
        return hpt_error_set(HPT_ERR_IO, "out of memory saving a checkpoint");
    int host = m->be->is_device == NULL; /* all of the backend's memory is host memory */
    size_t at = 0;
    for (int i = 0; i < j->n; i++) {
        const hpt_tensor *t = j->it[i].t ? j->it[i].t : j->it[i].c;
        a->off[i] = SIZE_MAX;
        if (!t)
            continue;
        a->off[i] = at;
        if (host)
            a->src[i] = j->it[i].block + t->offset;
        else
            m->be->download(a->stage + at, j->it[i].block + t->offset,
                            sizeof(float) * slab_floats(t));
        at += slab_floats(t);
        j->it[i].block = NULL; /* only a->src may point into the state now */
    }
    return HPT_OK;
}

/* The writer's first task: copy the slabs left in host memory (a->src)
 * into the staging buffer, then tell the training thread. */
static void stage_copy_host(hpt_ckpt_async *a)
{
    double t0 = mono_s();
    for (int i = 0; i < a->job.n; i++)
        if (a->src[i]) {
            const hpt_tensor *t = a->job.it[i].t ? a->job.it[i].t : a->job.it[i].c;
            memcpy(a->stage + a->off[i], a->src[i], sizeof(float) * slab_floats(t));
            a->src[i] = NULL;
        }
    a->copy_s = mono_s() - t0;
    pthread_mutex_lock(&a->mu);
    a->copied = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

double hpt_ckpt_async_snapshot_wait(hpt_ckpt_async *a)
{
    if (!a || !a->inflight)
        return 0;
    double t0 = mono_s();
    pthread_mutex_lock(&a->mu);
    while (!a->copied)
        pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
    if (a->full) { /* ZeRO-1's gathered moments are in the staging buffer now */
        a->be->free(a->full);
        a->full = NULL;
    }
    double w = mono_s() - t0;
    a->copy_wait_s += w;
    return w;
}

/* The writer's first failure: errno e writing `what`. */
static void writer_fail(hpt_ckpt_async *a, int e, const char *what)
{
    if (a->err)
        return;
    char buf[128];
    a->err = e ? e : EIO;
    snprintf(a->msg, sizeof a->msg, "writing %s failed: %s", what,
             strerror_r(a->err, buf, sizeof buf));
}

/* Write staged item i: a whole-rows slab as one byte range (raw_write), a
 * TP column slab (collective in a synchronous save) row by row. */
static void writer_item(hpt_ckpt_async *a, raw_writer *w, const save_item *x, const float *p)
{
    const hpt_tensor *t = x->t;
    uint64_t gc = (uint64_t)x->gcols, rows = (uint64_t)hpt_tensor_real_rows(t);
    if (x->at == HADDR_UNDEF) {
        writer_fail(a, EIO, x->path);
        return;
    }
    int e = 0;
    if (!x->collective)
        e = raw_write(w, (const char *)p, (uint64_t)x->at + 4u * (uint64_t)t->row0 * gc,
                      4u * rows * gc);
    else
        for (uint64_t r = 0; r < rows && !e; r++)
            e = pwrite_all(w->bfd, (const char *)(p + r * (uint64_t)t->cols),
                           4u * (uint64_t)t->cols,
                           (uint64_t)x->at + 4u * (((uint64_t)t->row0 + r) * gc +
                                                   (uint64_t)t->col0));
    if (e)
        writer_fail(a, e, x->path);
}

/* HPT_TEST_SLOW_WRITE_MS=N, HPT_TEST_SLOW_COPY_MS=N (testing only, the
 * variable `name`): the writer sleeps N ms before it writes (so tests can
 * see training go on during a save), or before it copies the state into
 * the staging buffer (so a test sees the optimizer step wait for the
 * copy: without that wait the checkpoint would hold the next step's
 * weights). */
static void test_sleep(const char *name)
{
    const char *e = getenv(name);
    long ms = e ? strtol(e, NULL, 10) : 0;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    if (ms > 0)
        nanosleep(&ts, NULL);
}

/* The writer thread (POSIX calls only; no MPI, no HDF5): the CRCs of the
 * tiles this rank checksums, the slabs it writes, fdatasync. */
static void *writer_main(void *arg)
{
    hpt_ckpt_async *a = arg;
    save_job *j = &a->job;
    double t0 = mono_s();
    test_sleep("HPT_TEST_SLOW_COPY_MS");
    stage_copy_host(a);
    test_sleep("HPT_TEST_SLOW_WRITE_MS");
    int writer = 0;
    for (int i = 0; i < j->n; i++) {
        const save_item *x = &j->it[i];
        writer |= x->t != NULL;
        if (x->c)
            hpt_ckpt_tiles_crc(&x->tiles, a->stage + a->off[i], x->c->cols, x->c->row0,
                               hpt_tensor_real_rows(x->c), x->c->col0, x->c->cols,
                               j->crc + x->crc0);
    }
    raw_writer w = {-1, -1, NULL};
    if (writer && raw_open(&w, j->file))
        writer_fail(a, errno, j->file);
    for (int i = 0; i < j->n && writer && !a->err; i++)
        if (j->it[i].t)
            writer_item(a, &w, &j->it[i], a->stage + a->off[i]);
    if (writer && !a->err && w.bfd >= 0 && fdatasync(w.bfd)) {
        char buf[128];
        a->err = errno ? errno : EIO;
        snprintf(a->msg, sizeof a->msg, "%s: flushing the data to disk failed: %s", j->file,
                 strerror_r(a->err, buf, sizeof buf));
    }
    raw_close(&w);
    a->write_s = mono_s() - t0;
    atomic_store(&a->written, 1);
    return NULL;
}

hpt_status hpt_ckpt_async_start(hpt_ckpt_async *a, const char *dir, const hpt_ckpt_state *s,
                                const hpt_ckpt_meta *meta, int keep)
{
    if (a->inflight)
        return hpt_error_set(HPT_ERR_INTERNAL, "a checkpoint save is already in flight "
                             "(step %lld)", (long long)a->job.step);
    MPI_Comm world = s->comm->comms[HPT_GROUP_WORLD];
    hpt_model *m = s->model;
    save_job *j = &a->job;
    hpt_status st = job_prepare(j, dir, s, meta, keep);
    if (st)
        return st;
    float *full = NULL, *m1, *m2;
    double t1 = MPI_Wtime();
    if (s->shard_counts && !(full = m->be->alloc(2 * sizeof(float) * m->nparams)))
        HPT_FATAL("out of memory gathering the ZeRO-1 state");
    gather_moments(s, full, &m1, &m2);
    double t2 = MPI_Wtime();
    st = job_create(j, s, meta, m1, m2);
    double t3 = MPI_Wtime();
    if (j->f >= 0 && !st)
        st = hpt_comm_agree(world, stage_plan(a, s));
    if (getenv("HPT_CKPT_PROFILE") && s->comm->world_rank == 0)
        fprintf(stderr, "hpt: async snapshot (s): prepare+reserve %.3f gather %.3f create+flush "
                "%.3f plan/device copy %.3f\n", t1 - j->t0, t2 - t1, t3 - t2, MPI_Wtime() - t3);
    if (st) {
        m->be->free(full);
        if (j->f >= 0)
            st = job_close(j, s, st);
        return job_fail(j, s, st);
    }
    a->be = m->be;
    a->full = full; /* host memory: freed once the writer has copied it (snapshot_wait) */
    if (full && m->be->is_device) { /* device memory: copied already, free it now */
        m->be->free(full);
        a->full = NULL;
    }
    a->err = 0;
    a->msg[0] = 0;
    a->write_s = a->copy_s = a->copy_wait_s = 0;
    a->copied = 0;
    atomic_store(&a->written, 0);
    a->inflight = 1;
    /* no thread (resource limits): copy and write now, as a synchronous save would */
    a->threaded = !pthread_create(&a->th, NULL, writer_main, a);
    if (!a->threaded)
        writer_main(a);
    a->snapshot_s = MPI_Wtime() - j->t0;
    return HPT_OK;
}

hpt_status hpt_ckpt_async_finish(hpt_ckpt_async *a, const hpt_ckpt_state *s,
                                 hpt_ckpt_async_info *info)
{
    memset(info, 0, sizeof *info);
    info->step = -1;
    if (!a || !a->inflight)
        return HPT_OK;
    save_job *j = &a->job;
    double t = MPI_Wtime();
    if (a->threaded)
        pthread_join(a->th, NULL);
    a->threaded = 0;
    info->wait_s = MPI_Wtime() - t;
    hpt_ckpt_async_snapshot_wait(a); /* copied (joined): frees ZeRO-1's gather buffer */
    info->copy_s = a->copy_s;
    info->copy_wait_s = a->copy_wait_s;
    hpt_status st = a->err ? hpt_error_set(HPT_ERR_IO, "%s", a->msg) : HPT_OK;
    a->inflight = 0;
    info->step = j->step;
    info->snapshot_s = a->snapshot_s;
    info->write_s = a->write_s;
    if ((st = job_close(j, s, st)))
        return job_fail(j, s, st);
    st = job_commit(j, s, &info->bytes);
    info->total_s = MPI_Wtime() - j->t0;
    return st;
}
