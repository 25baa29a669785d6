/* checkpoint_load.c — layout-independent checkpoint load (every rank
 * reads its own hyperslabs), the resume probe's candidates and metadata,
 * moving unloadable checkpoints aside; see checkpoint.h. */
#define _GNU_SOURCE /* posix_fadvise */
#include "checkpoint.h"
#include "checkpoint_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ load */

hpt_status hpt_checkpoint_move_aside(const char *dir, int64_t step)
{
    char name[32], from[4096], to[4200];
    hpt_ckpt_dirname(step, name);
    snprintf(from, sizeof from, "%s/%s", dir, name);
    for (int k = 0; k < 1000; k++) {
        struct stat sb;
        snprintf(to, sizeof to, k ? "%s.unloadable.%d" : "%s.unloadable", from, k);
        if (stat(to, &sb) && errno == ENOENT) {
            if (rename(from, to))
                return hpt_error_set(HPT_ERR_IO, "%s: cannot move aside: %s", from, strerror(errno));
            hpt_fsync_path(dir);
            return HPT_OK;
        }
    }
    return hpt_error_set(HPT_ERR_IO, "%s: cannot move aside: too many earlier copies", from);
}

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

/* 1 when path is a regular file (not a FIFO, whose open would block, a
 * directory or a device): agreed over world. */
static int regular_file(const char *path, MPI_Comm world)
{
    struct stat sb;
    int ok = !stat(path, &sb) && S_ISREG(sb.st_mode), all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, world);
    return all;
}

hpt_status hpt_checkpoint_meta(const char *dir, int64_t step, MPI_Comm world, hpt_ckpt_meta *meta)
{
    char file[8192];
    file_of(dir, step, file, sizeof file);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (!regular_file(file, world))
        return hpt_error_set(HPT_ERR_DATA, "%s: missing or not a regular file", file);
    hid_t f = hpt_checkpoint_open_parallel(file, world, 0);
    hpt_status st = f < 0 ? hpt_error_set(HPT_ERR_DATA, "%s: cannot open (truncated or not HDF5: %s)",
                                          file, hpt_checkpoint_open_cause())
                          : hpt_ckpt_read_meta(f, file, meta);
    if (f >= 0)
        H5Fclose(f);
    return hpt_comm_agree(world, st);
}

/* Check the dataset's shape against local tensor t. */
static int shape_ok(hid_t ds, const hpt_tensor *t)
{
    hid_t fspace = H5Dget_space(ds);
    hsize_t dims[2] = {0, 0};
    int ok = fspace >= 0 && H5Sget_simple_extent_ndims(fspace) == hpt_checkpoint_rank_of(t->g_cols) &&
             H5Sget_simple_extent_dims(fspace, dims, NULL) >= 0 && dims[0] == (hsize_t)t->g_rows &&
             (t->g_cols == 1 || dims[1] == (hsize_t)t->g_cols);
    if (fspace >= 0)
        H5Sclose(fspace);
    return ok;
}

/* Format 1: HDF5 checks the Fletcher32 checksums of the chunks it reads.
 * Reads local rows [ra, rb) of t's slab (rb <= hpt_tensor_real_rows(t)) into dst
 * ((rb - ra) x t->cols, row-major). */
static int read_rows_v1(hid_t ds, const hpt_tensor *t, int64_t ra, int64_t rb, float *dst)
{
    hsize_t fstart[2] = {(hsize_t)(t->row0 + ra), (hsize_t)t->col0};
    hsize_t count[2] = {(hsize_t)(rb - ra), (hsize_t)t->cols};
    hid_t fspace = H5Dget_space(ds), mspace = H5Screate_simple(hpt_checkpoint_rank_of(t->g_cols), count, NULL);
    int ok = fspace >= 0 && mspace >= 0 &&
             H5Sselect_hyperslab(fspace, H5S_SELECT_SET, fstart, NULL, count, NULL) >= 0 &&
             H5Dread(ds, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, dst) >= 0;
    if (mspace >= 0)
        H5Sclose(mspace);
    if (fspace >= 0)
        H5Sclose(fspace);
    return ok;
}

/* Format 2: the same, reading the tiles that cover the rows and checking
 * their CRC32C. When the rows are whole tiles (the writer's TP split) they
 * are read in place, in one read; otherwise one band of tile rows (tr x the
 * covered columns) at a time through *scratch (grown as needed; the caller
 * frees it), of which the slab's part is copied into dst. */
static int read_rows_v2(hid_t ds, const hpt_tensor *t, const hpt_ckpt_tiles *tiles,
                        const uint32_t *crc, int64_t ra, int64_t rb, float *dst, float **scratch,
                        size_t *scratch_n)
{
    hpt_ckpt_tiles tl = *tiles;
    int64_t g0 = t->row0 + ra, g1 = t->row0 + rb;
    int64_t r0 = g0, r1 = g1, c0 = t->col0, c1 = t->col0 + t->cols, bad;
    hpt_ckpt_tiles_cover(&tl, &r0, &r1, &c0, &c1);
    int ok = 1;
    if (r0 == g0 && r1 == g1 && c0 == t->col0 && c1 == c0 + t->cols) {
        return r1 <= r0 ||
               !hpt_ckpt_read_checked(ds, H5P_DEFAULT, &tl, crc, r0, r1 - r0, c0, c1 - c0, dst,
                                      &bad);
    }
    int64_t step = hpt_ckpt_band_rows(&tl, c1 - c0);
    size_t band = (size_t)((step < r1 - r0 ? step : r1 - r0) * (c1 - c0));
    if (band > *scratch_n) {
        free(*scratch);
        *scratch_n = 0;
        if (!(*scratch = malloc(sizeof(float) * band)))
            ok = 0;
        else
            *scratch_n = band;
    }
    for (int64_t a = r0; a < r1 && ok; a += step) {
        int64_t b = a + step < r1 ? a + step : r1;
        ok = !hpt_ckpt_read_checked(ds, H5P_DEFAULT, &tl, crc, a, b - a, c0, c1 - c0, *scratch,
                                    &bad);
        int64_t lo = a > g0 ? a : g0, hi = b < g1 ? b : g1;
        for (int64_t r = lo; r < hi && ok; r++)
            memcpy(dst + (r - g0) * t->cols, *scratch + (r - a) * (c1 - c0) + (t->col0 - c0),
                   sizeof(float) * (size_t)t->cols);
    }
    return ok;
}

/* What one rank reads of one dataset: the elements [a, b) of local tensor
 * t (row-major, relative to the tensor's start), to the device address
 * dst. The model's weights: the whole tensor; the AdamW moments: the part
 * inside the optimizer's range [lo, hi) (all of it without ZeRO-1, the
 * rank's shard with it), so a ZeRO-1 rank reads only its shard. */
typedef struct {
    hid_t ds;
    const hpt_tensor *t;
    int64_t a, b;
    float *dst;
    uint64_t at; /* the dataset's file offset (bytes; 0 when chunked) */
    int order;   /* position in tensor order (ties in `at`)            */
    hpt_ckpt_tiles tiles; /* format 2: the checksum grid and its CRCs     */
    uint32_t *crc;
    char path[HPT_CKPT_NAME_MAX + 32];
} load_item;

/* File bytes an item's read covers: its whole rows. */
static void item_range(const load_item *it, uint64_t *at, uint64_t *len)
{
    const hpt_tensor *t = it->t;
    int64_t ra = it->a / t->cols, rb = (it->b + t->cols - 1) / t->cols, v = hpt_tensor_real_rows(t);
    rb = rb < v ? rb : v;
    ra = ra < rb ? ra : rb;
    *at = it->at + sizeof(float) * (uint64_t)(t->row0 + ra) * (uint64_t)t->g_cols;
    *len = sizeof(float) * (uint64_t)(rb - ra) * (uint64_t)t->g_cols;
}

static uint64_t item_bytes(const load_item *it)
{
    uint64_t a, len;
    item_range(it, &a, &len);
    return len;
}

#define PREFETCH_BYTES ((uint64_t)64 << 20)

static int cmp_at(const void *x, const void *y)
{
    const load_item *a = x, *b = y;
    return a->at != b->at ? (a->at < b->at ? -1 : 1) : a->order - b->order;
}

static hpt_status damaged(const char *file, const char *path)
{
    return hpt_error_set(HPT_ERR_DATA, "%s: tensor %s is damaged or missing (checksum or shape)",
                         file, path);
}

typedef struct {
    int version, cpu;
    float *host;         /* one local tensor (rows x cols), non-CPU backends */
    float *rows;         /* whole rows around a partial range              */
    float *scratch;      /* one band of tiles (read_rows_v2)                */
    size_t rows_n, scratch_n;
} load_bufs;

/* Read one item: whole local rows [a / cols, ceil(b / cols)) clipped to the
 * real rows, in place when [a, b) is whole rows on the CPU backend, else
 * through a host buffer; vocabulary padding rows read as zero. Returns 1
 * on success, 0 on a damaged, missing or misshapen dataset. */
static int read_item(const hpt_model *m, const load_item *it, load_bufs *lb)
{
    const hpt_tensor *t = it->t;
    int64_t cols = t->cols, ra = it->a / cols, rb = (it->b + cols - 1) / cols;
    int64_t valid = hpt_tensor_real_rows(t), va = ra < valid ? ra : valid, vb = rb < valid ? rb : valid;
    int whole = it->a % cols == 0 && it->b % cols == 0;
    float *buf;
    size_t n = (size_t)((rb - ra) * cols);
    if (whole && lb->cpu)
        buf = it->dst;
    else if (!lb->cpu && whole)
        buf = lb->host;
    else {
        if (n > lb->rows_n) {
            free(lb->rows);
            lb->rows_n = 0;
            if (!(lb->rows = malloc(sizeof(float) * n)))
                return 0;
            lb->rows_n = n;
        }
        buf = lb->rows;
    }
    /* rows [va, vb) are real, [pad, rb) vocabulary padding (zero); va = ra
     * unless the range starts inside the padding (then nothing is read) */
    int64_t pad = ra > valid ? ra : valid;
    if (pad < rb)
        memset(buf + (pad - ra) * cols, 0, sizeof(float) * (size_t)((rb - pad) * cols));
    int ok = vb <= va || (lb->version == 1 ? read_rows_v1(it->ds, t, va, vb, buf)
                                           : read_rows_v2(it->ds, t, &it->tiles, it->crc, va, vb, buf,
                                                          &lb->scratch, &lb->scratch_n));
    if (!ok)
        return 0;
    const float *src = buf + (it->a - ra * cols);
    size_t bytes = sizeof(float) * (size_t)(it->b - it->a);
    if (lb->cpu) {
        if (buf != it->dst)
            memcpy(it->dst, src, bytes);
    } else
        m->be->upload(it->dst, src, bytes);
    return 1;
}

/* Open dataset path and check its shape against t; -1 if either fails. */
static hid_t open_checked(hid_t file, const char *path, const hpt_tensor *t)
{
    hid_t ds = H5Dopen2(file, path, H5P_DEFAULT);
    if (ds >= 0 && !shape_ok(ds, t)) {
        H5Dclose(ds);
        ds = -1;
    }
    return ds;
}

/* Open DIR/step's file and read its root attributes (collective; the same
 * status everywhere). On success the caller closes *f. Errors:
 * HPT_ERR_DATA. */
static hpt_status load_open(const char *file, MPI_Comm world, hid_t *f, hpt_ckpt_meta *meta)
{
    *f = -1;
    if (!regular_file(file, world))
        return hpt_error_set(HPT_ERR_DATA, "%s: missing or not a regular file", file);
    *f = hpt_checkpoint_open_parallel(file, world, 0);
    hpt_status st = *f < 0 ? hpt_error_set(HPT_ERR_DATA, "%s: cannot open: %s", file,
                                           hpt_checkpoint_open_cause())
                           : hpt_ckpt_read_meta(*f, file, meta);
    if ((st = hpt_comm_agree(world, st)) && *f >= 0) {
        H5Fclose(*f);
        *f = -1;
    }
    return st;
}

/* Open every dataset this rank reads — its tensors' weights and the part
 * of both moments inside its optimizer range [lo, hi) — with shapes and
 * checksums checked: all metadata before any data, so that the data reads
 * are then one forward pass. Appends to items (3 * ntensors room), *n
 * their count (opened ones, also on error: the caller closes them).
 * Errors: HPT_ERR_DATA naming the damaged dataset. */
static hpt_status load_plan(hid_t f, const char *file, const hpt_ckpt_state *s, int version,
                            load_item *items, int *n)
{
    const hpt_model *m = s->model;
    const hpt_optim *o = s->opt;
    size_t own = o->hi - o->lo;
    const char *groups[3] = {"model", "optim/exp_avg", "optim/exp_avg_sq"};
    hpt_status st = HPT_OK;
    for (int i = 0; i < m->ntensors && !st; i++) {
        const hpt_tensor *t = &m->tensors[i];
        int64_t size = t->rows * t->cols, off = (int64_t)t->offset;
        for (int g = 0; g < 3 && !st; g++) {
            load_item it = {.t = t, .a = 0, .b = size, .dst = m->params + off};
            if (g > 0) { /* the part of the tensor inside [lo, hi) */
                int64_t a = off > (int64_t)o->lo ? off : (int64_t)o->lo;
                int64_t b = off + size < (int64_t)o->hi ? off + size : (int64_t)o->hi;
                if (a >= b)
                    continue;
                it.a = a - off, it.b = b - off;
                it.dst = o->state + (size_t)(g - 1) * own + (size_t)(a - (int64_t)o->lo);
            }
            snprintf(it.path, sizeof it.path, "/%s/%s", groups[g], t->name);
            if ((it.ds = open_checked(f, it.path, t)) < 0 ||
                (version >= 2 && hpt_ckpt_get_crc(it.ds, t->g_rows, t->g_cols, &it.tiles,
                                                  &it.crc))) {
                if (it.ds >= 0)
                    H5Dclose(it.ds);
                st = damaged(file, it.path);
            } else {
                haddr_t at = H5Dget_offset(it.ds);
                it.at = at == HADDR_UNDEF ? 0 : at;
                it.order = *n;
                items[(*n)++] = it;
            }
        }
    }
    return st;
}

/* Read items[0..n) (sorted by file offset) into the model and optimizer.
 * Asks the kernel for the next PREFETCH_BYTES of the items (WILLNEED) as
 * the reads go, so the disk streams whatever the kernel's read-ahead
 * heuristics make of the pattern (without it, cold-cache loads on one rank
 * on the development VM often waited for the disk at every read: `small`,
 * 1 MiB reads: 0.31-0.45 s against 0.09-0.10 s with it, dd 0.07-0.08 s;
 * bench/ckpt-1g.json, 8 MiB reads: 0.77-1.27 s against 0.39-0.65 s, dd
 * 0.34 s). Contiguous datasets only. Errors: HPT_ERR_DATA (a read or
 * checksum failed), naming the dataset. */
static hpt_status load_read(const char *file, const hpt_model *m, load_item *items, int n,
                            load_bufs *lb)
{
    hpt_status st = HPT_OK;
    int fd = open(file, O_RDONLY), ahead = 0;
    uint64_t window = 0; /* bytes asked for and not yet read */
    for (int i = 0; i < n && !st; i++) {
        for (; fd >= 0 && ahead < n && window < PREFETCH_BYTES && items[ahead].at; ahead++) {
            uint64_t at, len;
            item_range(&items[ahead], &at, &len);
            if (len) /* (0 would mean "to the end of the file") */
                posix_fadvise(fd, (off_t)at, (off_t)len, POSIX_FADV_WILLNEED);
            window += len;
        }
        if (!read_item(m, &items[i], lb))
            st = damaged(file, items[i].path);
        window -= i < ahead ? item_bytes(&items[i]) : 0;
    }
    if (fd >= 0)
        close(fd);
    return st;
}

hpt_status hpt_checkpoint_load(const char *dir, int64_t step, const hpt_ckpt_state *s)
{
    MPI_Comm world = s->comm->comms[HPT_GROUP_WORLD];
    hpt_model *m = s->model;
    char file[8192];
    hid_t f;
    hpt_ckpt_meta meta;
    file_of(dir, step, file, sizeof file);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    double t0 = MPI_Wtime(), t1, t2;
    hpt_status st = load_open(file, world, &f, &meta);
    if (st)
        return st;
    t1 = MPI_Wtime();
    size_t most = 1;
    for (int i = 0; i < m->ntensors; i++) {
        size_t k = (size_t)(m->tensors[i].rows * m->tensors[i].cols);
        most = k > most ? k : most;
    }
    load_bufs lb = {.version = meta.format_version, .cpu = !strcmp(m->be->name, "cpu")};
    if (!lb.cpu && !(lb.host = malloc(sizeof(float) * most)))
        st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory loading the checkpoint");
    load_item *items = calloc((size_t)(3 * m->ntensors), sizeof *items);
    int n = 0;
    if (!items)
        st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory loading the checkpoint");
    if (!st)
        st = load_plan(f, file, s, lb.version, items, &n);
    /* in file order: one forward pass, which the kernel's read-ahead
     * follows (format 1's chunked datasets have no single offset: kept in
     * tensor order) */
    if (!st) {
        qsort(items, (size_t)n, sizeof *items, cmp_at);
        st = load_read(file, m, items, n, &lb);
    }
    for (int i = 0; i < n; i++) {
        H5Dclose(items[i].ds);
        free(items[i].crc);
    }
    free(items);
    free(lb.host);
    free(lb.rows);
    free(lb.scratch);
    H5Fclose(f);
    t2 = MPI_Wtime();
    st = hpt_comm_agree(world, st);
    if (getenv("HPT_CKPT_PROFILE") && s->comm->world_rank == 0)
        fprintf(stderr, "hpt: checkpoint load phases (s): open %.4f read %.4f agree %.4f\n",
                t1 - t0, t2 - t1, MPI_Wtime() - t2);
    return st;
}
