/* ckpt_read.c — serial reading of one hpt checkpoint for inspection; see
 * ckpt_read.h. */
#include "ckpt_read.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5util.h"

#define BLOCK_ELEMS ((hsize_t)1 << 22) /* floats per read: 16 MiB            */
#define MAX_TENSORS 100000             /* more links than this: not ours     */

const char *const hpt_ckpt_groups[3] = {"/model", "/optim/exp_avg", "/optim/exp_avg_sq"};

/* ------------------------------------------------------------ small helpers */

/* Join "a/b" into buf (PATH_MAX bytes). Errors: HPT_ERR_USAGE when too long. */
hpt_status hpt_ckpt_join(char *buf, const char *a, const char *b)
{
    if (snprintf(buf, PATH_MAX, "%s/%s", a, b) >= PATH_MAX)
        return hpt_error_set(HPT_ERR_USAGE, "%s/%s: path too long", a, b);
    return HPT_OK;
}

int hpt_ckpt_is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int hpt_ckpt_is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Status for a path that stat/opendir refused: a missing path is a data
 * error (3), anything else (permissions, ...) an I/O error (5). */
hpt_status hpt_ckpt_path_error(const char *path, int err)
{
    if (err == ENOENT || err == ENOTDIR)
        return hpt_error_set(HPT_ERR_DATA, "%s: no such file or directory", path);
    return hpt_error_set(HPT_ERR_IO, "%s: %s", path, strerror(err));
}

/* ------------------------------------------------------------- HDF5 helpers */

/* Set by hpt_ckpt_open: the open file is format 2 or later, so every dataset
 * must carry CRC32C tiles (hpt-ckpt reads one checkpoint at a time). */
static int crc_required;

/* Open checkpoint file `path` read-only. Errors: HPT_ERR_DATA for a missing
 * file or one HDF5 cannot open (not HDF5, truncated), HPT_ERR_IO when the
 * file is not readable or its file system has no locks (hpt_h5_lock_error). */
static hpt_status open_file(const char *path, hid_t *f)
{
    struct stat sb;
    if (stat(path, &sb))
        return hpt_ckpt_path_error(path, errno);
    if (!S_ISREG(sb.st_mode))
        return hpt_error_set(HPT_ERR_DATA, "%s: not a regular file", path);
    if (access(path, R_OK))
        return hpt_error_set(HPT_ERR_IO, "%s: %s", path, strerror(errno));
    *f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (*f < 0) {
        const char *cause = hpt_h5_cause();
        hpt_status st = hpt_h5_lock_error("", path, cause);
        return st ? st : hpt_error_set(HPT_ERR_DATA, "%s: not a readable HDF5 file, or truncated "
                                       "(%s)", path, cause);
    }
    return HPT_OK;
}

/* Open and check the root attributes of checkpoint file `path`. On success
 * the caller closes *f. Errors: as open_file and hpt_ckpt_read_meta. */
hpt_status hpt_ckpt_open(const char *path, hid_t *f, hpt_ckpt_meta *meta)
{
    hpt_status st = open_file(path, f);
    if (st)
        return st;
    if ((st = hpt_ckpt_read_meta(*f, path, meta))) {
        H5Fclose(*f);
        *f = -1;
    }
    crc_required = !st && meta->format_version >= 2;
    return st;
}

int hpt_ckpt_newest_readable(const char *dir, int64_t *step, char *file, char *skipped,
                             size_t n)
{
    enum { MAX = 4096 };
    int64_t *steps = malloc(sizeof(int64_t) * MAX);
    int count = steps ? hpt_ckpt_list(dir, steps, MAX) : 0, found = 0;
    char first[1024] = "";
    skipped[0] = 0;
    for (int i = 0; i < count && !found; i++) {
        char name[32], p[PATH_MAX];
        hpt_ckpt_meta m;
        hid_t f;
        hpt_ckpt_dirname(steps[i], name);
        m.format_version = 0;
        if (hpt_ckpt_join(p, dir, name) || hpt_ckpt_join(file, p, HPT_CKPT_FILE) ||
            hpt_ckpt_open(file, &f, &m)) {
            if (m.format_version > HPT_CKPT_VERSION) { /* a newer hpt's: never go past it */
                free(steps);
                return -2;
            }
            if (strstr(hpt_error_msg(), HPT_H5_NOLOCK_TEXT)) { /* the older ones would fail alike */
                free(steps);
                return -3;
            }
            if (!first[0]) {
                snprintf(first, sizeof first, "%s", hpt_error_msg());
                snprintf(skipped, n, "%s (%s)", name, first);
            }
            continue;
        }
        H5Fclose(f);
        *step = steps[i];
        found = 1;
    }
    free(steps);
    if (found && skipped[0]) { /* the whole note, for the caller to print */
        char name[32], why[1200];
        hpt_ckpt_dirname(*step, name);
        snprintf(why, sizeof why, "%s", skipped);
        snprintf(skipped, n, "skipped the newer %s: using %s, the checkpoint a resume starts "
                 "from", why, name);
    }
    if (found)
        return 1;
    if (first[0]) {
        hpt_error_set(HPT_ERR_DATA, "%s", first);
        return -1;
    }
    return 0;
}

int hpt_ckpt_file_is_checkpoint(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) || !S_ISREG(sb.st_mode))
        return 0;
    /* by its place: .../step_NNNNNNNN[.tmp|.unloadable]/checkpoint.h5, even
     * when damaged past reading */
    char dir[PATH_MAX];
    const char *base = strrchr(path, '/');
    if (base && !strcmp(base + 1, HPT_CKPT_FILE)) {
        snprintf(dir, sizeof dir, "%.*s", (int)(base - path), path);
        const char *d = strrchr(dir, '/');
        if (!strncmp(d ? d + 1 : dir, "step_", 5))
            return 1;
    }
    if (!hpt_h5_has_signature(path))
        return 0;
    hid_t f;
    H5E_BEGIN_TRY { f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT); }
    H5E_END_TRY;
    if (f < 0)
        return 0;
    char *fmt;
    H5E_BEGIN_TRY { fmt = hpt_h5_read_str_attr(f, "format"); }
    H5E_END_TRY;
    int yes = fmt && !strcmp(fmt, HPT_CKPT_FORMAT);
    free(fmt);
    H5Fclose(f);
    return yes;
}

int hpt_ckpt_shape_eq(const hpt_ckpt_shape *a, const hpt_ckpt_shape *b)
{
    return a->rank == b->rank && a->dims[0] == b->dims[0] && a->dims[1] == b->dims[1];
}

/* "(8192, 64)" or "(64)". Returns buf. */
const char *hpt_ckpt_shape_str(const hpt_ckpt_shape *s, char *buf, size_t n)
{
    if (s->rank == 2)
        snprintf(buf, n, "(%llu, %llu)", (unsigned long long)s->dims[0],
                 (unsigned long long)s->dims[1]);
    else
        snprintf(buf, n, "(%llu)", (unsigned long long)s->dims[0]);
    return buf;
}

/* Shape of dataset ds. -1 unless it is a 1-D or 2-D simple dataspace. */
int hpt_ckpt_get_shape(hid_t ds, hpt_ckpt_shape *s)
{
    hid_t sp = H5Dget_space(ds);
    int r = sp < 0 ? -1 : H5Sget_simple_extent_ndims(sp);
    s->rank = r;
    s->dims[0] = s->dims[1] = 1;
    if (r == 1 || r == 2)
        H5Sget_simple_extent_dims(sp, s->dims, NULL);
    if (sp >= 0)
        H5Sclose(sp);
    return r == 1 || r == 2 ? 0 : -1;
}

/* "float32", "float64", "int32", ... for dataset ds's element type. */
const char *hpt_ckpt_dtype_str(hid_t ds, char *buf, size_t n)
{
    hid_t t = H5Dget_type(ds);
    H5T_class_t c = t < 0 ? H5T_NO_CLASS : H5Tget_class(t);
    size_t bits = t < 0 ? 0 : 8 * H5Tget_size(t);
    if (c == H5T_FLOAT)
        snprintf(buf, n, "float%zu", bits);
    else if (c == H5T_INTEGER)
        snprintf(buf, n, "%sint%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "u" : "", bits);
    else
        snprintf(buf, n, "%s", c == H5T_STRING ? "string" : "other");
    if (t >= 0)
        H5Tclose(t);
    return buf;
}

/* The int32 scalar attribute "layer" of ds; 0 ok, -1 missing or not one
 * integer. */
int hpt_ckpt_get_layer(hid_t ds, int32_t *layer)
{
    if (H5Aexists(ds, "layer") <= 0)
        return -1;
    hid_t a = H5Aopen(ds, "layer", H5P_DEFAULT), sp = a < 0 ? -1 : H5Aget_space(a);
    hid_t t = a < 0 ? -1 : H5Aget_type(a);
    int ok = sp >= 0 && H5Sget_simple_extent_npoints(sp) == 1 && H5Tget_class(t) == H5T_INTEGER &&
             H5Aread(a, H5T_NATIVE_INT32, layer) >= 0;
    if (t >= 0)
        H5Tclose(t);
    if (sp >= 0)
        H5Sclose(sp);
    if (a >= 0)
        H5Aclose(a);
    return ok ? 0 : -1;
}

/* Open `path` if it is a hard link to a dataset; otherwise return -1 with
 * the reason ("missing", "not a dataset") in why. */
hid_t hpt_ckpt_open_dataset(hid_t file, const char *path, char *why, size_t n)
{
    H5L_info_t li;
    if (H5Lexists(file, path, H5P_DEFAULT) <= 0) {
        snprintf(why, n, "missing");
        return -1;
    }
    if (H5Lget_info(file, path, &li, H5P_DEFAULT) < 0 || li.type != H5L_TYPE_HARD) {
        snprintf(why, n, "not a dataset (a soft or external link)");
        return -1;
    }
    hid_t o = H5Oopen(file, path, H5P_DEFAULT);
    if (o < 0) {
        snprintf(why, n, "cannot open: %s", hpt_h5_cause());
        return -1;
    }
    if (H5Iget_type(o) != H5I_DATASET) {
        H5Oclose(o);
        snprintf(why, n, "not a dataset");
        return -1;
    }
    return o;
}

/* Compare names with digit runs as numbers ("layers.2." < "layers.10."). */
static int natural_cmp(const void *pa, const void *pb)
{
    const char *a = *(char *const *)pa, *b = *(char *const *)pb;
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            char *ea, *eb;
            unsigned long long x = strtoull(a, &ea, 10), y = strtoull(b, &eb, 10);
            if (x != y)
                return x < y ? -1 : 1;
            a = ea;
            b = eb;
        } else if (*a != *b) {
            return (unsigned char)*a - (unsigned char)*b;
        } else {
            a++;
            b++;
        }
    }
    return (unsigned char)*a - (unsigned char)*b;
}

void hpt_ckpt_names_free(char **names, int n)
{
    for (int i = 0; i < n && names; i++)
        free(names[i]);
    free(names);
}

typedef struct {
    char **v;   /* names so far (malloc'd array of malloc'd strings) */
    int n, cap; /* count, allocated                                  */
} name_list;

/* H5Literate callback: append the link's name. Stops (-1) on a name
 * longer than 4 KiB, too many links or no memory. */
static herr_t collect_name(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    (void)g;
    (void)info;
    name_list *l = data;
    if (strlen(name) > 4096 || l->n >= MAX_TENSORS)
        return -1;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        char **bigger = realloc(l->v, sizeof *bigger * (size_t)cap);
        if (!bigger)
            return -1;
        l->v = bigger;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(name)))
        return -1;
    l->n++;
    return 0;
}

/* Why the last hpt_ckpt_names returned -2 (HDF5's innermost message). */
static char group_why[256];

const char *hpt_ckpt_names_why(void) { return group_why; }

/* Names of the links in group `gpath`, in natural order: *names is a malloc'd
 * array of malloc'd strings (free with hpt_ckpt_names_free). Returns the count, -1
 * when the group is missing or not a group, -2 when its links cannot be
 * read (damaged metadata, implausibly many links; hpt_ckpt_names_why() says why).
 * Walks the links in native order with H5Literate, which follows the
 * group's own index: HDF5 1.10.8's by-index calls (H5Lget_name_by_idx)
 * build a sorted link table first and, on damaged metadata, free
 * uninitialised entries of it (HDFGroup/hdf5#581). */
int hpt_ckpt_names(hid_t file, const char *gpath, char ***names)
{
    name_list l = {NULL, 0, 0};
    hsize_t idx = 0;
    *names = NULL;
    if (H5Lexists(file, gpath + 1, H5P_DEFAULT) <= 0)
        return -1;
    hid_t g = H5Gopen2(file, gpath, H5P_DEFAULT);
    if (g < 0)
        return -1;
    herr_t rc = H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, collect_name, &l);
    if (rc < 0)
        snprintf(group_why, sizeof group_why, "%s",
                 l.n >= MAX_TENSORS ? "more than 100000 links" : hpt_h5_cause());
    H5Gclose(g);
    if (rc < 0) {
        hpt_ckpt_names_free(l.v, l.n);
        return -2;
    }
    if (l.n > 1)
        qsort(l.v, (size_t)l.n, sizeof *l.v, natural_cmp);
    *names = l.v;
    return l.n;
}

/* Index of `name` in names[0..n), or -1. */
int hpt_ckpt_names_find(char **names, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return i;
    return -1;
}

/* Read all of float32 dataset ds, BLOCK_ELEMS at a time (whole tiles),
 * into host floats, checking each block: the CRC32C of its tiles (format
 * 2) or, done by HDF5 on the way, each chunk's Fletcher32 (format 1);
 * hand each block to sink (may be NULL). 0 ok; -1 with the reason in why. */
int hpt_ckpt_read_blocks(hid_t ds, hpt_ckpt_block_sink sink, void *ctx, char *why, size_t n)
{
    hpt_ckpt_shape s;
    char dt[32];
    if (hpt_ckpt_get_shape(ds, &s))
        return snprintf(why, n, "not a 1-D or 2-D array"), -1;
    if (strcmp(hpt_ckpt_dtype_str(ds, dt, sizeof dt), "float32"))
        return snprintf(why, n, "element type %s, expected float32", dt), -1;
    hsize_t rows = s.dims[0], cols = s.dims[1];
    if (!rows || !cols)
        return 0; /* nothing to read (the shape checks report it) */
    if (cols > BLOCK_ELEMS * 64 || (cols && rows > ((hsize_t)1 << 50) / cols))
        return snprintf(why, n, "implausible shape"), -1;
    hsize_t need = rows * cols * sizeof(float), have = H5Dget_storage_size(ds);
    if (have < need) /* chunks never written: the save did not finish */
        return snprintf(why, n, "only %llu of %llu bytes stored (not fully written)",
                        (unsigned long long)have, (unsigned long long)need), -1;
    hpt_ckpt_tiles tl;
    uint32_t *crc = NULL;
    if ((crc_required || H5Aexists(ds, "crc32c") > 0) &&
        hpt_ckpt_get_crc(ds, (int64_t)rows, (int64_t)cols, &tl, &crc))
        return snprintf(why, n, "CRC32C attributes crc_tile/crc32c missing or malformed"), -1;
    hsize_t step = cols >= BLOCK_ELEMS ? 1 : BLOCK_ELEMS / cols;
    if (crc) /* whole tiles: a multiple of the tile rows */
        step = step < (hsize_t)tl.tr ? (hsize_t)tl.tr : step / (hsize_t)tl.tr * (hsize_t)tl.tr;
    step = step < rows ? step : rows;
    float *buf = malloc(sizeof(float) * step * cols);
    hid_t fsp = H5Dget_space(ds);
    int rc = buf && fsp >= 0 ? 0 : (snprintf(why, n, "out of memory (%llu floats)",
                                             (unsigned long long)(step * cols)), -1);
    for (hsize_t r = 0; r < rows && !rc; r += step) {
        hsize_t off[2] = {r, 0}, cnt[2] = {rows - r < step ? rows - r : step, cols};
        hid_t msp = H5Screate_simple(s.rank, cnt, NULL);
        int64_t bad = 0;
        int got = crc ? hpt_ckpt_read_checked(ds, H5P_DEFAULT, &tl, crc, (int64_t)r,
                                              (int64_t)cnt[0], 0, (int64_t)cols, buf, &bad)
                      : H5Sselect_hyperslab(fsp, H5S_SELECT_SET, off, NULL, cnt, NULL) < 0 ||
                                H5Dread(ds, H5T_NATIVE_FLOAT, msp, fsp, H5P_DEFAULT, buf) < 0
                            ? -1 : 0;
        if (got == -1)
            rc = (snprintf(why, n, "read failed in rows %llu..%llu: %s", (unsigned long long)r,
                           (unsigned long long)(r + cnt[0] - 1), hpt_h5_cause()), -1);
        else if (got == -2) {
            int64_t i = bad / tl.nc, j = bad % tl.nc;
            int64_t r1 = (i + 1) * tl.tr < tl.rows ? (i + 1) * tl.tr : tl.rows;
            int64_t c1 = (j + 1) * tl.tc < tl.cols ? (j + 1) * tl.tc : tl.cols;
            rc = (snprintf(why, n, "CRC32C mismatch in tile (%lld, %lld): rows %lld..%lld, "
                           "columns %lld..%lld", (long long)i, (long long)j,
                           (long long)(i * tl.tr), (long long)(r1 - 1), (long long)(j * tl.tc),
                           (long long)(c1 - 1)), -1);
        } else if (sink)
            rc = sink(ctx, r, cnt, s.rank, buf, why, n);
        H5Sclose(msp);
    }
    if (fsp >= 0)
        H5Sclose(fsp);
    free(buf);
    free(crc);
    return rc;
}
