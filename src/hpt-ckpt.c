/* hpt-ckpt — list, verify, describe and export hpt checkpoints (format in
 * io/ckpt.h and docs/CHECKPOINT.md).
 *
 * Reads with serial HDF5 and the default driver, so it runs as a plain
 * process; under mpiexec rank 0 does the work and every rank exits with its
 * status. HDF5's own error stack printing is off: every problem is reported
 * once, naming the file and the dataset.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "config.h"
#include "error.h"
#include "h5out.h"
#include "h5util.h"
#include "hpt_config.h"
#include "model.h"

#define BLOCK_ELEMS ((hsize_t)1 << 22) /* floats per read: 16 MiB            */
#define MAX_TENSORS 100000             /* more links than this: not ours     */

/* The three groups that hold one dataset per tensor, in this order. */
static const char *const groups[3] = {"/model", "/optim/exp_avg", "/optim/exp_avg_sq"};

static void usage(FILE *f)
{
    fputs("usage: hpt-ckpt list [--verify] DIR\n"
          "       hpt-ckpt verify PATH|DIR\n"
          "       hpt-ckpt info PATH\n"
          "       hpt-ckpt export PATH OUT.h5\n"
          "\n"
          "Inspect the checkpoints hpt-train writes (docs/CHECKPOINT.md). DIR is a run's\n"
          "checkpoints directory (RUN/checkpoints; RUN itself is accepted too). PATH is one\n"
          "checkpoint: a step_NNNNNNNN directory or its checkpoint.h5; for info and export a\n"
          "DIR stands for its newest complete checkpoint (the one a resume starts from).\n"
          "\n"
          "commands:\n"
          "  list DIR        one line per checkpoint, newest first: step, layout\n"
          "                  (tp x pp x dp, ZeRO-1), size in MiB, samples consumed and status:\n"
          "                  complete, incomplete (a step_NNNNNNNN.tmp left by an interrupted\n"
          "                  save), unreadable, or with --verify damaged (first bad dataset);\n"
          "                  marks the one 'latest' names and says when 'latest' is missing\n"
          "                  or names a missing checkpoint\n"
          "    --verify      also read every dataset of every checkpoint (as verify does)\n"
          "  verify PATH|DIR read every dataset fully (checks the CRC32C of every tile, or\n"
          "                  in format 1 files each chunk's Fletcher32), check that every\n"
          "                  /model tensor has\n"
          "                  /optim/exp_avg and /optim/exp_avg_sq of its shape, that the\n"
          "                  tensors are those config_json describes, and the root\n"
          "                  attributes; prints 'ok' or one line per bad dataset. A DIR\n"
          "                  verifies each complete checkpoint in it\n"
          "  info PATH       the root attributes, the model config and a table of the\n"
          "                  tensors (name, shape, dtype, layer)\n"
          "  export PATH OUT.h5\n"
          "                  consolidated weights: every /model/NAME as /NAME in OUT.h5\n"
          "                  (Hugging Face names, contiguous float32 arrays) with the root\n"
          "                  attribute config_json; written to OUT.h5.tmp, synced, renamed\n"
          "\n"
          "options:\n"
          "  -h, --help      print this help and exit\n"
          "  --version       print the hpt version and exit\n"
          "\n"
          "exit status: 0 ok, 2 usage error, 3 damaged, incomplete or not a checkpoint\n"
          "(including an unknown format version), 5 I/O error (unreadable path, OUT not\n"
          "writable).\n",
          f);
}

/* ------------------------------------------------------------ small helpers */

/* Join "a/b" into buf (PATH_MAX bytes). Errors: HPT_ERR_USAGE when too long. */
static hpt_status join(char *buf, const char *a, const char *b)
{
    if (snprintf(buf, PATH_MAX, "%s/%s", a, b) >= PATH_MAX)
        return hpt_error_set(HPT_ERR_USAGE, "%s/%s: path too long", a, b);
    return HPT_OK;
}

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

/* Status for a path that stat/opendir refused: a missing path is a data
 * error (3), anything else (permissions, ...) an I/O error (5). */
static hpt_status path_error(const char *path, int err)
{
    if (err == ENOENT || err == ENOTDIR)
        return hpt_error_set(HPT_ERR_DATA, "%s: no such file or directory", path);
    return hpt_error_set(HPT_ERR_IO, "%s: %s", path, strerror(err));
}

/* Bytes in the regular files directly under `dir`. */
static long long dir_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    long long total = 0;
    struct dirent *e;
    char p[PATH_MAX];
    struct stat sb;
    while (d && (e = readdir(d)))
        if (!join(p, dir, e->d_name) && lstat(p, &sb) == 0 && S_ISREG(sb.st_mode))
            total += (long long)sb.st_size;
    if (d)
        closedir(d);
    return total;
}

/* ------------------------------------------------------------- HDF5 helpers */

/* Set by open_ckpt: the open file is format 2 or later, so every dataset
 * must carry CRC32C tiles (hpt-ckpt reads one checkpoint at a time). */
static int crc_required;

/* Open checkpoint file `path` read-only. Errors: HPT_ERR_DATA for a missing
 * file or one HDF5 cannot open (not HDF5, truncated), HPT_ERR_IO when the
 * file is not readable. */
static hpt_status open_file(const char *path, hid_t *f)
{
    struct stat sb;
    if (stat(path, &sb))
        return path_error(path, errno);
    if (!S_ISREG(sb.st_mode))
        return hpt_error_set(HPT_ERR_DATA, "%s: not a regular file", path);
    if (access(path, R_OK))
        return hpt_error_set(HPT_ERR_IO, "%s: %s", path, strerror(errno));
    *f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (*f < 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: not a readable HDF5 file, or truncated (%s)", path,
                             hpt_h5_cause());
    return HPT_OK;
}

/* Open and check the root attributes of checkpoint file `path`. On success
 * the caller closes *f. Errors: as open_file and hpt_ckpt_read_meta. */
static hpt_status open_ckpt(const char *path, hid_t *f, hpt_ckpt_meta *meta)
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

typedef struct {
    int rank;        /* 1 or 2                                */
    hsize_t dims[2]; /* dims[1] == 1 when rank is 1           */
} shape;

static int shape_eq(const shape *a, const shape *b)
{
    return a->rank == b->rank && a->dims[0] == b->dims[0] && a->dims[1] == b->dims[1];
}

/* "(8192, 64)" or "(64)". Returns buf. */
static const char *shape_str(const shape *s, char *buf, size_t n)
{
    if (s->rank == 2)
        snprintf(buf, n, "(%llu, %llu)", (unsigned long long)s->dims[0],
                 (unsigned long long)s->dims[1]);
    else
        snprintf(buf, n, "(%llu)", (unsigned long long)s->dims[0]);
    return buf;
}

/* Shape of dataset ds. -1 unless it is a 1-D or 2-D simple dataspace. */
static int get_shape(hid_t ds, shape *s)
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
static const char *dtype_str(hid_t ds, char *buf, size_t n)
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
static int get_layer(hid_t ds, int32_t *layer)
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
static hid_t open_dataset(hid_t file, const char *path, char *why, size_t n)
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

static void free_names(char **names, int n)
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

/* Why the last group_names returned -2 (HDF5's innermost message). */
static char group_why[256];

/* Names of the links in group `gpath`, in natural order: *names is a malloc'd
 * array of malloc'd strings (free with free_names). Returns the count, -1
 * when the group is missing or not a group, -2 when its links cannot be
 * read (damaged metadata, implausibly many links; group_why says why).
 * Walks the links in native order with H5Literate, which follows the
 * group's own index: HDF5 1.10.8's by-index calls (H5Lget_name_by_idx)
 * build a sorted link table first and, on damaged metadata, free
 * uninitialised entries of it (HDFGroup/hdf5#581). */
static int group_names(hid_t file, const char *gpath, char ***names)
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
        snprintf(group_why, sizeof group_why, "%s", l.n >= MAX_TENSORS ? "more than 100000 links"
                                                                      : hpt_h5_cause());
    H5Gclose(g);
    if (rc < 0) {
        free_names(l.v, l.n);
        return -2;
    }
    if (l.n > 1)
        qsort(l.v, (size_t)l.n, sizeof *l.v, natural_cmp);
    *names = l.v;
    return l.n;
}

/* Index of `name` in names[0..n), or -1. */
static int find_name(char **names, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return i;
    return -1;
}

/* Called with each block read by read_blocks: `cnt` rows (or elements) at
 * row `row0`. Returns 0 to go on, -1 to stop (why set). */
typedef int (*block_sink)(void *ctx, hsize_t row0, const hsize_t *cnt, int rank,
                          const float *buf, char *why, size_t n);

/* Read all of float32 dataset ds, BLOCK_ELEMS at a time (whole tiles),
 * into host floats, checking each block: the CRC32C of its tiles (format
 * 2) or, done by HDF5 on the way, each chunk's Fletcher32 (format 1);
 * hand each block to sink (may be NULL). 0 ok; -1 with the reason in why. */
static int read_blocks(hid_t ds, block_sink sink, void *ctx, char *why, size_t n)
{
    shape s;
    char dt[32];
    if (get_shape(ds, &s))
        return snprintf(why, n, "not a 1-D or 2-D array"), -1;
    if (strcmp(dtype_str(ds, dt, sizeof dt), "float32"))
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

/* ------------------------------------------------------------------ verify */

typedef struct {
    const char *path; /* checkpoint file, for messages                 */
    FILE *out;        /* findings, one per line; NULL: count only       */
    int nbad;         /* findings so far                                */
    char first[256];  /* dataset (or attribute) of the first finding    */
} verify_ctx;

static void finding(verify_ctx *v, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record one problem with `what` (a dataset path or an attribute). */
static void finding(verify_ctx *v, const char *what, const char *fmt, ...)
{
    va_list ap;
    if (!v->nbad++)
        snprintf(v->first, sizeof v->first, "%s", what);
    if (!v->out)
        return;
    fprintf(v->out, "%s: %s: ", v->path, what);
    va_start(ap, fmt);
    vfprintf(v->out, fmt, ap);
    va_end(ap);
    fputc('\n', v->out);
}

/* msg without its leading "origin: ", which the finding names already. */
static const char *strip_origin(const char *msg, const char *origin)
{
    size_t n = strlen(origin);
    return !strncmp(msg, origin, n) && !strncmp(msg + n, ": ", 2) ? msg + n + 2 : msg;
}

/* Values of the root attributes that no save could have written. */
static void check_meta_values(verify_ctx *v, const hpt_ckpt_meta *m)
{
    const struct {
        const char *name;
        long long value, min;
    } f[] = {
        {"step", m->step, 0},           {"samples", m->samples, 0},
        {"adam_t", m->adam_t, 0},       {"skipped_total", m->skipped_total, 0},
        {"consecutive_skips", m->consecutive_skips, 0},
        {"global_batch", m->global_batch, 1}, {"seq_len", m->seq_len, 1},
        {"micro_batch", m->micro_batch, 1},   {"tp", m->tp, 1},
        {"pp", m->pp, 1},               {"dp", m->dp, 1},
        {"zero1", m->zero1, 0},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].value < f[i].min)
            finding(v, f[i].name, "attribute is %lld, must be >= %lld", f[i].value, f[i].min);
    if (m->zero1 > 1)
        finding(v, "zero1", "attribute is %d, must be 0 or 1", (int)m->zero1);
}

/* Name and global shape of tensor (kind, layer) under config c. */
static void expected_tensor(const hpt_config *c, hpt_tensor_kind kind, int layer, char *name,
                            size_t n, shape *s)
{
    int64_t rows, cols;
    hpt_tensor_name(kind, layer, name, n);
    hpt_tensor_global_shape(c, kind, &rows, &cols);
    s->rank = cols > 1 ? 2 : 1; /* vectors (the norm weights) are 1-D, as in lib/checkpoint.c */
    s->dims[0] = (hsize_t)rows;
    s->dims[1] = (hsize_t)cols;
}

/* /model/<name> has shape `want` and attribute layer == `layer`. */
static void check_expected(verify_ctx *v, hid_t file, const char *name, const shape *want,
                           int layer)
{
    char path[256], why[300], a[64], b[64];
    shape got;
    int32_t l;
    snprintf(path, sizeof path, "/model/%s", name);
    hid_t ds = open_dataset(file, path, why, sizeof why);
    if (ds < 0) {
        finding(v, path, "%s (config_json implies this tensor)", why);
        return;
    }
    if (get_shape(ds, &got) || !shape_eq(&got, want))
        finding(v, path, "shape %s, config_json implies %s",
                got.rank == 1 || got.rank == 2 ? shape_str(&got, a, sizeof a) : "not 1-D or 2-D",
                shape_str(want, b, sizeof b));
    if (get_layer(ds, &l))
        finding(v, path, "attribute layer missing or not an integer");
    else if (l != layer)
        finding(v, path, "attribute layer = %d, expected %d", (int)l, layer);
    H5Dclose(ds);
}

/* The /model tensors are exactly those config `c` implies, with their
 * global shapes and layer indices (names are hpt_tensor_name's). */
static void check_against_config(verify_ctx *v, hid_t file, const hpt_config *c, char **names,
                                 int n)
{
    char name[128], path[256];
    shape s;
    int L = c->num_hidden_layers, i;
    char *matched = calloc((size_t)n + 1, 1);
    if (!matched)
        HPT_FATAL("out of memory checking %s", v->path);
    for (int g = -1; g <= L; g++) { /* -1: embedding, 0..L-1: layers, L: the tail */
        int first = g < 0 ? HPT_TENSOR_EMBED : g == L ? HPT_TENSOR_FINAL_NORM : HPT_TENSOR_ATTN_NORM;
        int last = g < 0 ? HPT_TENSOR_EMBED
                   : g == L ? (c->tie_word_embeddings ? HPT_TENSOR_FINAL_NORM : HPT_TENSOR_LM_HEAD)
                            : HPT_TENSOR_DOWN;
        for (int k = first; k <= last; k++) {
            int layer = g >= 0 && g < L ? g : -1;
            expected_tensor(c, (hpt_tensor_kind)k, layer, name, sizeof name, &s);
            check_expected(v, file, name, &s, layer);
            if ((i = find_name(names, n, name)) >= 0)
                matched[i] = 1;
        }
    }
    for (i = 0; i < n; i++)
        if (!matched[i]) {
            snprintf(path, sizeof path, "/model/%s", names[i]);
            finding(v, path, "unexpected tensor (not in the model config_json describes)");
        }
    free(matched);
}

/* Open dataset `path`, check its shape against `want` (when not NULL) and
 * read it fully. Records a finding on any problem; *got is its shape. */
static void check_dataset(verify_ctx *v, hid_t file, const char *path, const shape *want,
                          shape *got)
{
    char why[400], a[64], b[64];
    hid_t ds = open_dataset(file, path, why, sizeof why);
    got->rank = 0;
    if (ds < 0) {
        finding(v, path, "%s", why);
        return;
    }
    if (get_shape(ds, got)) {
        got->rank = 0; /* nothing to compare the optimizer moments with */
        finding(v, path, "not a 1-D or 2-D array");
    } else if (want && want->rank && !shape_eq(got, want))
        finding(v, path, "shape %s differs from /model's %s", shape_str(got, a, sizeof a),
                shape_str(want, b, sizeof b));
    else if (read_blocks(ds, NULL, NULL, why, sizeof why))
        finding(v, path, "damaged: %s", why);
    H5Dclose(ds);
}

/* The finding for group_names' result n on group gpath, if any. */
static void group_finding(verify_ctx *v, const char *gpath, int n)
{
    if (n == -1)
        finding(v, gpath, "group missing");
    else if (n == -2)
        finding(v, gpath, "links unreadable (damaged metadata): %s", group_why);
}

/* Read every /model tensor and its two optimizer moments fully; datasets
 * in the optimizer groups without a /model tensor are findings too. */
static void check_data(verify_ctx *v, hid_t file, char **names, int n)
{
    char path[512];
    shape s, o;
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "/model/%s", names[i]);
        check_dataset(v, file, path, NULL, &s);
        for (int g = 1; g < 3; g++) {
            snprintf(path, sizeof path, "%s/%s", groups[g], names[i]);
            check_dataset(v, file, path, &s, &o);
        }
    }
    for (int g = 1; g < 3; g++) {
        char **extra;
        int m = group_names(file, groups[g], &extra);
        group_finding(v, groups[g], m);
        for (int i = 0; i < m; i++)
            if (find_name(names, n, extra[i]) < 0) {
                snprintf(path, sizeof path, "%s/%s", groups[g], extra[i]);
                finding(v, path, "no matching /model tensor");
            }
        free_names(extra, m);
    }
}

/* The /model tensors against config_json (check_against_config); returns
 * the /model names as group_names does (the caller frees them). */
static int check_structure(verify_ctx *v, hid_t f, const hpt_ckpt_meta *meta, char ***names)
{
    hpt_config cfg;
    int n = group_names(f, groups[0], names);
    group_finding(v, groups[0], n);
    if (hpt_config_parse(meta->config_json, "config_json", &cfg))
        finding(v, "config_json", "%s", strip_origin(hpt_error_msg(), "config_json"));
    else if (n >= 0)
        check_against_config(v, f, &cfg, *names, n);
    return n;
}

/* Verify checkpoint file `path`: root attributes, tensor set against
 * config_json, every dataset read fully. Problems go to v (see
 * verify_ctx). Errors (returned, nothing recorded): the file cannot be
 * opened or its root attributes are not a known checkpoint format. */
static hpt_status verify_file(const char *path, verify_ctx *v)
{
    hid_t f;
    hpt_ckpt_meta meta;
    char **names;
    hpt_status st = open_ckpt(path, &f, &meta);
    if (st)
        return st;
    check_meta_values(v, &meta);
    int n = check_structure(v, f, &meta, &names);
    check_data(v, f, names, n < 0 ? 0 : n);
    free_names(names, n);
    H5Fclose(f);
    return HPT_OK;
}

/* ------------------------------------------------------ checkpoint directory */

/* A run directory stands for its checkpoints/ subdirectory. out: PATH_MAX. */
static void ckpt_dir_of(const char *path, char *out)
{
    char sub[PATH_MAX], probe[PATH_MAX];
    snprintf(out, PATH_MAX, "%s", path);
    if (join(sub, path, "checkpoints") || !is_dir(sub) || join(probe, path, "latest"))
        return;
    if (access(probe, F_OK) && !join(probe, path, HPT_CKPT_FILE) && access(probe, F_OK))
        snprintf(out, PATH_MAX, "%s", sub);
}

/* DIR/latest: 0 with the step directory name in name (32 bytes), -1 when
 * the file is missing, -2 when it does not hold a step_NNNNNNNN name (the
 * text, trimmed, is still in name). */
static int read_latest(const char *dir, char *name)
{
    char p[PATH_MAX], canon[32];
    name[0] = 0;
    if (join(p, dir, "latest"))
        return -1;
    FILE *f = fopen(p, "r");
    if (!f)
        return -1;
    size_t n = fread(name, 1, 31, f);
    fclose(f);
    name[n] = 0;
    while (n && isspace((unsigned char)name[n - 1]))
        name[--n] = 0;
    char *end;
    long long s = strncmp(name, "step_", 5) || !isdigit((unsigned char)name[5])
                      ? -1 : strtoll(name + 5, &end, 10);
    if (s < 0)
        return -2;
    hpt_ckpt_dirname(s, canon);
    return strcmp(canon, name) ? -2 : 0;
}

typedef struct {
    int64_t step;
    int tmp;       /* 1: step_NNNNNNNN.tmp, an unfinished save */
    char name[64]; /* directory name                           */
} entry;

static int entry_cmp(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? 1 : -1;
    return x->tmp - y->tmp;
}

/* Checkpoints under dir, newest first: the complete ones (as the trainer
 * sees them, hpt_ckpt_list) and the step_*.tmp leftovers. *out is malloc'd.
 * Errors: the directory cannot be read. */
static hpt_status scan_dir(const char *dir, entry **out, int *count)
{
    DIR *d = opendir(dir);
    if (!d)
        return path_error(dir, errno);
    int cap = 1024, n = 0;
    int64_t *steps = malloc(sizeof(int64_t) * (size_t)cap);
    entry *e = malloc(sizeof(entry) * (size_t)cap * 2);
    if (!steps || !e)
        HPT_FATAL("out of memory listing %s", dir);
    int nc = hpt_ckpt_list(dir, steps, cap);
    for (int i = 0; i < nc; i++, n++) {
        e[n].step = steps[i];
        e[n].tmp = 0;
        hpt_ckpt_dirname(steps[i], e[n].name);
    }
    struct dirent *de;
    while ((de = readdir(d)) && n < 2 * cap) {
        char *end;
        if (strncmp(de->d_name, "step_", 5) || !isdigit((unsigned char)de->d_name[5]))
            continue;
        long long s = strtoll(de->d_name + 5, &end, 10);
        if (strcmp(end, ".tmp") || strlen(de->d_name) >= sizeof e[n].name)
            continue;
        e[n].step = s;
        e[n].tmp = 1;
        memcpy(e[n].name, de->d_name, strlen(de->d_name) + 1); /* length checked above */
        n++;
    }
    closedir(d);
    free(steps);
    qsort(e, (size_t)n, sizeof *e, entry_cmp);
    *out = e;
    *count = n;
    return HPT_OK;
}

/* -------------------------------------------------------------------- list */

typedef struct {
    char layout[24], zero1[8], samples[24]; /* "-" when not known        */
    char status[320];                       /* complete, damaged (...), ... */
    char note[1200];                        /* printed under the table     */
    int bad;                                /* unreadable or damaged       */
} list_row;

/* The row for checkpoint directory e under dir: the root attributes, and
 * with `verify` the result of verify_file. */
static void list_row_fill(const char *dir, const entry *e, int verify, list_row *r)
{
    char p[PATH_MAX], file[PATH_MAX];
    hpt_ckpt_meta m;
    hid_t f;
    memset(r, 0, sizeof *r);
    snprintf(r->layout, sizeof r->layout, "-");
    snprintf(r->zero1, sizeof r->zero1, "-");
    snprintf(r->samples, sizeof r->samples, "-");
    if (e->tmp) {
        snprintf(r->status, sizeof r->status, "incomplete (%s)", e->name);
        return;
    }
    if (join(p, dir, e->name) || join(file, p, HPT_CKPT_FILE) || open_ckpt(file, &f, &m)) {
        snprintf(r->status, sizeof r->status, "unreadable");
        snprintf(r->note, sizeof r->note, "%s", hpt_error_msg());
        r->bad = 1;
        return;
    }
    H5Fclose(f);
    snprintf(r->layout, sizeof r->layout, "%dx%dx%d", (int)m.tp, (int)m.pp, (int)m.dp);
    snprintf(r->zero1, sizeof r->zero1, "%s", m.zero1 ? "yes" : "no");
    snprintf(r->samples, sizeof r->samples, "%lld", (long long)m.samples);
    verify_ctx v = {file, NULL, 0, ""};
    if (verify && verify_file(file, &v)) /* opened a moment ago: a race, or out of memory */
        snprintf(v.first, sizeof v.first, "%s", hpt_error_msg()), v.nbad = 1;
    r->bad = v.nbad > 0;
    snprintf(r->status, sizeof r->status, v.nbad ? "damaged (%s)" : "complete", v.first);
}

/* Print the notes about DIR/latest, which only informs: a resume takes
 * the newest complete checkpoint. Returns the name latest holds ("" if
 * none) in latest (32 bytes). */
static void latest_notes(const char *dir, const entry *e, int n, char *latest, FILE *out)
{
    int rc = read_latest(dir, latest), found = 0, newest = -1;
    for (int i = 0; i < n; i++) {
        found |= rc == 0 && !e[i].tmp && !strcmp(e[i].name, latest);
        newest = newest < 0 && !e[i].tmp ? i : newest;
    }
    if (rc == -1)
        fprintf(out, "latest: missing (no %s/latest file)\n", dir);
    else if (rc == -2)
        fprintf(out, "latest: malformed ('%s', expected step_NNNNNNNN)\n", latest);
    else if (!found)
        fprintf(out, "latest: names %s, which does not exist\n", latest);
    if (newest >= 0 && (rc || strcmp(e[newest].name, latest)))
        fprintf(out, "resume: tries %s first (the newest complete checkpoint)\n", e[newest].name);
    if (rc)
        latest[0] = 0;
}

static hpt_status cmd_list(const char *path, int verify, FILE *out)
{
    char dir[PATH_MAX], latest[32], p[PATH_MAX];
    entry *e;
    int n, bad = 0;
    ckpt_dir_of(path, dir);
    hpt_status st = scan_dir(dir, &e, &n);
    if (st)
        return st;
    list_row *rows = calloc((size_t)n + 1, sizeof *rows);
    if (!rows)
        HPT_FATAL("out of memory listing %s", dir);
    read_latest(dir, latest);
    fprintf(out, "checkpoints in %s%s\n", dir, verify ? " (data verified)" : "");
    if (n)
        fprintf(out, "%10s  %-10s %-5s %10s %12s  %s\n", "STEP", "TPxPPxDP", "ZERO1", "MiB",
                "SAMPLES", "STATUS");
    else
        fprintf(out, "no checkpoints\n");
    for (int i = 0; i < n; i++) {
        list_row *r = &rows[i];
        list_row_fill(dir, &e[i], verify, r);
        bad |= r->bad;
        join(p, dir, e[i].name);
        fprintf(out, "%10lld  %-10s %-5s %10.1f %12s  %s%s\n", (long long)e[i].step, r->layout,
                r->zero1, dir_bytes(p) / 1048576.0, r->samples, r->status,
                !e[i].tmp && !strcmp(e[i].name, latest) ? "  <- latest" : "");
    }
    for (int i = 0; i < n; i++)
        if (rows[i].note[0])
            fprintf(out, "note: %s\n", rows[i].note);
    latest_notes(dir, e, n, latest, out);
    free(rows);
    free(e);
    if (verify && bad)
        return hpt_error_set(HPT_ERR_DATA, "%s: some checkpoints are damaged or unreadable", dir);
    return HPT_OK;
}

/* ------------------------------------------------------------------ verify */

/* verify one file: "PATH: ok" or the findings. */
static hpt_status verify_one(const char *file, FILE *out)
{
    verify_ctx v = {file, out, 0, ""};
    hpt_status st = verify_file(file, &v);
    if (st)
        return st;
    if (v.nbad)
        return hpt_error_set(HPT_ERR_DATA, "%s: damaged or invalid (%d problem%s)", file, v.nbad,
                             v.nbad == 1 ? "" : "s");
    fprintf(out, "%s: ok\n", file);
    return HPT_OK;
}

/* verify each complete checkpoint in checkpoints directory `dir`. */
static hpt_status verify_dir(const char *dir, FILE *out)
{
    char p[PATH_MAX], file[PATH_MAX];
    entry *e;
    int n, bad = 0, ncomplete = 0;
    hpt_status st = scan_dir(dir, &e, &n);
    if (st)
        return st;
    for (int i = 0; i < n; i++) {
        join(p, dir, e[i].name);
        if (e[i].tmp) {
            fprintf(out, "%s: incomplete (an unfinished save; not verified)\n", p);
            continue;
        }
        ncomplete++;
        if (join(file, p, HPT_CKPT_FILE) || (st = verify_one(file, out))) {
            fprintf(out, "%s\n", hpt_error_msg());
            bad++;
        }
    }
    free(e);
    if (!ncomplete)
        return hpt_error_set(HPT_ERR_DATA, "%s: no complete checkpoint (step_NNNNNNNN/%s)", dir,
                             HPT_CKPT_FILE);
    if (bad)
        return hpt_error_set(HPT_ERR_DATA, "%s: %d of %d checkpoints damaged or unreadable", dir,
                             bad, ncomplete);
    return HPT_OK;
}

static hpt_status cmd_verify(const char *path, FILE *out)
{
    char dir[PATH_MAX], file[PATH_MAX];
    struct stat sb;
    if (stat(path, &sb))
        return path_error(path, errno);
    if (!S_ISDIR(sb.st_mode))
        return verify_one(path, out);
    if (!join(file, path, HPT_CKPT_FILE) && is_file(file))
        return verify_one(file, out);
    ckpt_dir_of(path, dir);
    return verify_dir(dir, out);
}

/* The checkpoint file PATH designates: PATH (a file), PATH/checkpoint.h5
 * (a step directory), or in a checkpoints (or run) directory the newest
 * complete checkpoint — the one a resume tries first. file: PATH_MAX
 * bytes. Errors: HPT_ERR_DATA. */
static hpt_status resolve_file(const char *path, char *file)
{
    char dir[PATH_MAX], name[32], p[PATH_MAX];
    int64_t newest;
    struct stat sb;
    if (stat(path, &sb))
        return path_error(path, errno);
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(file, PATH_MAX, "%s", path);
        return HPT_OK;
    }
    hpt_status st = join(file, path, HPT_CKPT_FILE);
    if (st || is_file(file))
        return st;
    ckpt_dir_of(path, dir);
    if (hpt_ckpt_list(dir, &newest, 1) < 1)
        return hpt_error_set(HPT_ERR_DATA, "%s: not a checkpoint (no %s) and no complete "
                             "step_NNNNNNNN checkpoint in it", path, HPT_CKPT_FILE);
    hpt_ckpt_dirname(newest, name);
    if ((st = join(p, dir, name)) || (st = join(file, p, HPT_CKPT_FILE)))
        return st;
    return HPT_OK;
}

/* -------------------------------------------------------------------- info */

static void info_meta(const char *file, const hpt_ckpt_meta *m, FILE *out)
{
    fprintf(out, "checkpoint     %s\n", file);
    fprintf(out, "format         %s version %d, written by hpt %s\n", HPT_CKPT_FORMAT,
            (int)m->format_version, m->hpt_version);
    fprintf(out, "step           %lld\n", (long long)m->step);
    fprintf(out, "samples        %lld (sequences consumed in the global data order)\n",
            (long long)m->samples);
    fprintf(out, "optimizer      AdamW, t = %lld\n", (long long)m->adam_t);
    fprintf(out, "skipped steps  %lld in total, %lld consecutive at the end\n",
            (long long)m->skipped_total, (long long)m->consecutive_skips);
    fprintf(out, "seed           %llu\n", (unsigned long long)m->seed);
    fprintf(out, "batch          %lld sequences of %d tokens per step, micro-batch %d\n",
            (long long)m->global_batch, (int)m->seq_len, (int)m->micro_batch);
    fprintf(out, "layout         tp %d x pp %d x dp %d, ZeRO-1 %s\n", (int)m->tp, (int)m->pp,
            (int)m->dp, m->zero1 ? "on" : "off");
}

static void info_model(const char *file, const hpt_ckpt_meta *m, FILE *out)
{
    hpt_config c;
    char origin[PATH_MAX + 16];
    snprintf(origin, sizeof origin, "%s: config_json", file);
    if (hpt_config_parse(m->config_json, origin, &c)) {
        fprintf(out, "model          config_json invalid: %s\n", hpt_error_msg());
        return;
    }
    fprintf(out,
            "model          hidden %d, intermediate %d, layers %d, heads %d (kv %d), vocab %d,\n"
            "               max positions %d, rms_norm_eps %g, rope_theta %g, %s embeddings;\n"
            "               %.2f M parameters\n",
            c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_attention_heads,
            c.num_key_value_heads, c.vocab_size, c.max_position_embeddings, c.rms_norm_eps,
            c.rope_theta, c.tie_word_embeddings ? "tied" : "untied",
            hpt_config_num_params(&c) / 1e6);
}

/* The table of /model tensors: name, shape, dtype, layer. */
static void info_tensors(hid_t f, FILE *out)
{
    char **names[3], sh[64], dt[32], lay[16], why[300], path[512];
    int n[3], w = 4;
    for (int g = 0; g < 3; g++)
        if ((n[g] = group_names(f, groups[g], &names[g])) == -2)
            fprintf(out, "%s: links unreadable (damaged metadata): %s\n", groups[g], group_why);
    fprintf(out, "tensors        %d in /model, %d in /optim/exp_avg, %d in /optim/exp_avg_sq\n\n",
            n[0] < 0 ? 0 : n[0], n[1] < 0 ? 0 : n[1], n[2] < 0 ? 0 : n[2]);
    for (int i = 0; i < n[0]; i++)
        w = (int)strlen(names[0][i]) > w ? (int)strlen(names[0][i]) : w;
    if (n[0] > 0)
        fprintf(out, "%-*s  %-14s %-8s %5s\n", w, "NAME", "SHAPE", "DTYPE", "LAYER");
    for (int i = 0; i < n[0]; i++) {
        shape s;
        int32_t l;
        snprintf(path, sizeof path, "/model/%s", names[0][i]);
        hid_t ds = open_dataset(f, path, why, sizeof why);
        if (ds < 0) {
            fprintf(out, "%-*s  %s\n", w, names[0][i], why);
            continue;
        }
        snprintf(lay, sizeof lay, "-");
        if (!get_layer(ds, &l))
            snprintf(lay, sizeof lay, "%d", (int)l);
        fprintf(out, "%-*s  %-14s %-8s %5s\n", w, names[0][i],
                get_shape(ds, &s) ? "?" : shape_str(&s, sh, sizeof sh), dtype_str(ds, dt, sizeof dt),
                lay);
        H5Dclose(ds);
    }
    for (int g = 0; g < 3; g++)
        free_names(names[g], n[g]);
}

static hpt_status cmd_info(const char *path, FILE *out)
{
    char file[PATH_MAX];
    hid_t f;
    hpt_ckpt_meta m;
    hpt_status st = resolve_file(path, file);
    if (st || (st = open_ckpt(file, &f, &m)))
        return st;
    info_meta(file, &m, out);
    info_model(file, &m, out);
    info_tensors(f, out);
    H5Fclose(f);
    return HPT_OK;
}

/* ------------------------------------------------------------------ export */

/* A scalar fixed-length string attribute, as io/ckpt.c writes them. */
static int put_str_attr(hid_t obj, const char *name, const char *s)
{
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
    H5Tset_size(t, strlen(s) + 1);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    int err = a < 0 || H5Awrite(a, t, s) < 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    return err;
}

typedef struct {
    hid_t dst; /* output dataset, same shape as the source */
} copy_ctx;

static int write_block(void *ctx, hsize_t row0, const hsize_t *cnt, int rank, const float *buf,
                       char *why, size_t n)
{
    hid_t dst = ((copy_ctx *)ctx)->dst, fsp = H5Dget_space(dst);
    hid_t msp = H5Screate_simple(rank, cnt, NULL);
    hsize_t off[2] = {row0, 0};
    int err = fsp < 0 || H5Sselect_hyperslab(fsp, H5S_SELECT_SET, off, NULL, cnt, NULL) < 0 ||
              H5Dwrite(dst, H5T_NATIVE_FLOAT, msp, fsp, H5P_DEFAULT, buf) < 0;
    if (err)
        snprintf(why, n, "write failed: %s", hpt_h5_cause_line());
    H5Sclose(msp);
    if (fsp >= 0)
        H5Sclose(fsp);
    return err ? -1 : 0;
}

/* Copy /model/<name> of src to /<name> of dst (contiguous float32).
 * Errors: HPT_ERR_DATA for a damaged source, HPT_ERR_IO for a failed
 * write (the reason says which). */
static hpt_status copy_tensor(hid_t src, hid_t dst, const char *file, const char *out_path,
                              const char *name)
{
    char path[512], why[400];
    shape s;
    snprintf(path, sizeof path, "/model/%s", name);
    hid_t in = open_dataset(src, path, why, sizeof why);
    if (in < 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: %s: %s", file, path, why);
    if (get_shape(in, &s)) {
        H5Dclose(in);
        return hpt_error_set(HPT_ERR_DATA, "%s: %s: not a 1-D or 2-D array", file, path);
    }
    hid_t sp = H5Screate_simple(s.rank, s.dims, NULL);
    copy_ctx c = {H5Dcreate2(dst, name, H5T_NATIVE_FLOAT, sp, H5P_DEFAULT, H5P_DEFAULT,
                             H5P_DEFAULT)};
    H5Sclose(sp);
    hpt_status st = HPT_OK;
    if (c.dst < 0)
        st = hpt_error_set(HPT_ERR_IO, "%s: cannot create dataset %s: %s", out_path, name,
                           hpt_h5_cause_line());
    else if (read_blocks(in, write_block, &c, why, sizeof why))
        st = hpt_error_set(strncmp(why, "write failed", 12) ? HPT_ERR_DATA : HPT_ERR_IO,
                           "%s: %s: %s", strncmp(why, "write failed", 12) ? file : out_path,
                           strncmp(why, "write failed", 12) ? path : name, why);
    if (c.dst >= 0)
        H5Dclose(c.dst);
    H5Dclose(in);
    return st;
}

/* Write every /model tensor of src and config_json to out_path (through
 * OUT.tmp, hpt_h5_out); the tensors must be those config_json describes. */
static hpt_status export_into(hid_t src, const char *file, const hpt_ckpt_meta *m,
                              const char *out_path, int *count)
{
    char **names;
    hpt_h5_out o;
    verify_ctx v = {file, NULL, 0, ""};
    int n = check_structure(&v, src, m, &names);
    if (v.nbad) {
        free_names(names, n);
        return hpt_error_set(HPT_ERR_DATA, "%s: %s: not the tensors config_json describes (%d "
                             "problem%s; see hpt-ckpt verify)", file, v.first, v.nbad,
                             v.nbad == 1 ? "" : "s");
    }
    hpt_status st = hpt_h5_out_create(out_path, &o);
    if (st) {
        free_names(names, n);
        return st;
    }
    if (put_str_attr(o.file, "config_json", m->config_json))
        st = hpt_error_set(HPT_ERR_IO, "%s: cannot write attribute config_json: %s", o.tmp,
                           hpt_h5_cause_line());
    for (int i = 0; i < n && !st; i++)
        st = copy_tensor(src, o.file, file, o.tmp, names[i]);
    free_names(names, n);
    *count = n;
    return hpt_h5_out_finish(&o, st);
}

static hpt_status cmd_export(const char *path, const char *out_path, FILE *out)
{
    char file[PATH_MAX];
    hid_t f;
    hpt_ckpt_meta m;
    int n = 0;
    if (is_dir(out_path))
        return hpt_error_set(HPT_ERR_IO, "%s: is a directory", out_path);
    hpt_status st = resolve_file(path, file);
    if (st || (st = open_ckpt(file, &f, &m)))
        return st;
    st = export_into(f, file, &m, out_path, &n);
    H5Fclose(f);
    if (st)
        return st;
    fprintf(out, "exported %d tensors of step %lld from %s to %s\n", n, (long long)m.step, file,
            out_path);
    return HPT_OK;
}

/* ------------------------------------------------------------------- main */

typedef struct {
    const char *cmd;   /* list, verify, info, export        */
    const char *arg[2];
    int nargs, verify, help, version;
} cli;

static const struct {
    const char *name;
    int nargs;
} commands[] = {{"list", 1}, {"verify", 1}, {"info", 1}, {"export", 2}};

/* Parse argv into *c. Errors: HPT_ERR_USAGE. */
static hpt_status parse_args(int argc, char **argv, cli *c)
{
    int want = -1, opts = 1;
    memset(c, 0, sizeof *c);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (opts && (!strcmp(a, "-h") || !strcmp(a, "--help")))
            c->help = 1;
        else if (opts && !strcmp(a, "--version"))
            c->version = 1;
        else if (opts && !strcmp(a, "--verify") && c->cmd && !strcmp(c->cmd, "list"))
            c->verify = 1;
        else if (opts && !strcmp(a, "--"))
            opts = 0;
        else if (opts && a[0] == '-' && a[1])
            return hpt_error_set(HPT_ERR_USAGE, "%s: unknown option%s (see --help)", a,
                                 c->cmd ? " for this command" : "");
        else if (!c->cmd) {
            for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
                if (!strcmp(a, commands[k].name))
                    want = commands[k].nargs;
            if (want < 0)
                return hpt_error_set(HPT_ERR_USAGE,
                                     "unknown command '%s' (list, verify, info, export; see --help)", a);
            c->cmd = a;
        } else if (c->nargs < want)
            c->arg[c->nargs++] = a;
        else
            return hpt_error_set(HPT_ERR_USAGE, "unexpected argument '%s' (see --help)", a);
    }
    if (c->help || c->version)
        return HPT_OK;
    if (!c->cmd)
        return hpt_error_set(HPT_ERR_USAGE, "a command is required: list, verify, info or export "
                                            "(see --help)");
    if (c->nargs < want)
        return hpt_error_set(HPT_ERR_USAGE, "%s needs %s (see --help)", c->cmd,
                             want == 2 ? "PATH and OUT.h5" : "a path");
    return HPT_OK;
}

static hpt_status run(int argc, char **argv, FILE *out)
{
    cli c;
    hpt_status st = parse_args(argc, argv, &c);
    if (st)
        return st;
    if (c.help) {
        usage(out);
        return HPT_OK;
    }
    if (c.version) {
        fprintf(out, "hpt-ckpt (hpt) %s; reads checkpoint format version %d\n", PACKAGE_VERSION,
                HPT_CKPT_VERSION);
        return HPT_OK;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our messages, not HDF5's error stack */
    if (!strcmp(c.cmd, "list"))
        return cmd_list(c.arg[0], c.verify, out);
    if (!strcmp(c.cmd, "verify"))
        return cmd_verify(c.arg[0], out);
    if (!strcmp(c.cmd, "info"))
        return cmd_info(c.arg[0], out);
    return cmd_export(c.arg[0], c.arg[1], out);
}

int main(int argc, char **argv)
{
    int rank, code = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        hpt_status st = run(argc, argv, stdout);
        fflush(stdout);
        if (st)
            fprintf(stderr, "hpt-ckpt: %s\n", hpt_error_msg());
        code = hpt_status_exit_code(st);
    }
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return code;
}
