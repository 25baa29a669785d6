/* ckpt.c — checkpoint metadata (root attributes), names and listing; see
 * ckpt.h. Tensor I/O is in lib/checkpoint.c. */
#include "ckpt.h"

#include <dirent.h>
#include <nmmintrin.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int put_attr(hid_t obj, const char *name, hid_t type, const void *v)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    int err = a < 0 || H5Awrite(a, type, v) < 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    return err;
}

static int put_str(hid_t obj, const char *name, const char *s)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(s) + 1);
    int err = put_attr(obj, name, t, s);
    H5Tclose(t);
    return err;
}

/* 1 when attribute `a` holds exactly one element (a scalar or a 1-element
 * array): anything else would overrun the caller's one-value buffer. */
static int attr_is_single(hid_t a)
{
    hid_t sp = H5Aget_space(a);
    hssize_t n = sp < 0 ? -1 : H5Sget_simple_extent_npoints(sp);
    if (sp >= 0)
        H5Sclose(sp);
    return n == 1;
}

static int get_attr(hid_t obj, const char *name, hid_t type, void *v)
{
    if (H5Aexists(obj, name) <= 0)
        return 1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    int err = a < 0 || !attr_is_single(a) || H5Aread(a, type, v) < 0;
    if (a >= 0)
        H5Aclose(a);
    return err;
}

/* Read a variable-length string attribute (h5py's default) into buf. */
static int get_vlen_str(hid_t a, hid_t ft, char *buf, size_t n)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    char *s = NULL;
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5Tget_cset(ft)); /* HDF5 does not convert ASCII <-> UTF-8 */
    int err = H5Aread(a, t, &s) < 0 || !s || strlen(s) >= n;
    if (!err)
        memcpy(buf, s, strlen(s) + 1);
    if (s)
        H5free_memory(s);
    H5Tclose(t);
    return err;
}

static int get_str(hid_t obj, const char *name, char *buf, size_t n)
{
    if (H5Aexists(obj, name) <= 0)
        return 1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT), ft = H5Aget_type(a);
    size_t sz = H5Tget_size(ft);
    int err = a < 0 || H5Tget_class(ft) != H5T_STRING || !attr_is_single(a);
    memset(buf, 0, n);
    if (!err && H5Tis_variable_str(ft) > 0)
        err = get_vlen_str(a, ft, buf, n);
    else if (!err && sz >= n)
        err = 1;
    else if (!err) {
        hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, sz);
        err = H5Aread(a, t, buf) < 0;
        H5Tclose(t);
    }
    if (ft >= 0)
        H5Tclose(ft);
    if (a >= 0)
        H5Aclose(a);
    return err;
}

typedef struct {
    const char *name;
    int is64;
    size_t off;
} field;

static const field fields[] = {
    {"format_version", 0, offsetof(hpt_ckpt_meta, format_version)},
    {"step", 1, offsetof(hpt_ckpt_meta, step)},
    {"samples", 1, offsetof(hpt_ckpt_meta, samples)},
    {"adam_t", 1, offsetof(hpt_ckpt_meta, adam_t)},
    {"skipped_total", 1, offsetof(hpt_ckpt_meta, skipped_total)},
    {"consecutive_skips", 1, offsetof(hpt_ckpt_meta, consecutive_skips)},
    {"global_batch", 1, offsetof(hpt_ckpt_meta, global_batch)},
    {"seed", 1, offsetof(hpt_ckpt_meta, seed)},
    {"seq_len", 0, offsetof(hpt_ckpt_meta, seq_len)},
    {"micro_batch", 0, offsetof(hpt_ckpt_meta, micro_batch)},
    {"tp", 0, offsetof(hpt_ckpt_meta, tp)},
    {"pp", 0, offsetof(hpt_ckpt_meta, pp)},
    {"dp", 0, offsetof(hpt_ckpt_meta, dp)},
    {"zero1", 0, offsetof(hpt_ckpt_meta, zero1)},
};

hpt_status hpt_ckpt_write_meta(hid_t file, const hpt_ckpt_meta *meta)
{
    int err = put_str(file, "format", HPT_CKPT_FORMAT) || put_str(file, "hpt_version", meta->hpt_version) ||
              put_str(file, "config_json", meta->config_json);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0] && !err; i++)
        err = put_attr(file, fields[i].name, fields[i].is64 ? H5T_NATIVE_INT64 : H5T_NATIVE_INT32,
                       (const char *)meta + fields[i].off);
    if (!err && meta->sequence_parallel >= 0)
        err = put_attr(file, "sequence_parallel", H5T_NATIVE_INT32, &meta->sequence_parallel);
    if (!err && meta->recompute >= 0)
        err = put_attr(file, "recompute", H5T_NATIVE_INT32, &meta->recompute);
    if (!err && meta->cp > 0)
        err = put_attr(file, "cp", H5T_NATIVE_INT32, &meta->cp);
    if (!err && meta->optimizer[0])
        err = put_str(file, "optimizer", meta->optimizer);
    return err ? hpt_error_set(HPT_ERR_IO, "checkpoint: cannot write the root attributes") : HPT_OK;
}

hpt_status hpt_ckpt_read_meta(hid_t file, const char *path, hpt_ckpt_meta *meta)
{
    char fmt[64] = "";
    memset(meta, 0, sizeof *meta);
    if (get_str(file, "format", fmt, sizeof fmt) || strcmp(fmt, HPT_CKPT_FORMAT)) {
        int is_export = !fmt[0] && H5Lexists(file, "model.embed_tokens.weight", H5P_DEFAULT) > 0;
        return hpt_error_set(HPT_ERR_DATA, "%s: not an hpt checkpoint (attribute format = '%s', "
                             "expected '%s')%s", path, fmt, HPT_CKPT_FORMAT,
                             is_export ? ": an export (weights only: hpt-train --export, hpt-ckpt "
                                         "export), which hpt-generate and --init-from read" : "");
    }
    if (get_attr(file, "format_version", H5T_NATIVE_INT32, &meta->format_version))
        return hpt_error_set(HPT_ERR_DATA, "%s: attribute format_version missing", path);
    if (meta->format_version < HPT_CKPT_VERSION_MIN || meta->format_version > HPT_CKPT_VERSION)
        return hpt_error_set(HPT_ERR_DATA,
                             "%s: unknown checkpoint format version %d (this hpt reads %d to %d)",
                             path, meta->format_version, HPT_CKPT_VERSION_MIN, HPT_CKPT_VERSION);
    if (get_str(file, "hpt_version", meta->hpt_version, sizeof meta->hpt_version) ||
        get_str(file, "config_json", meta->config_json, sizeof meta->config_json))
        return hpt_error_set(HPT_ERR_DATA, "%s: attribute hpt_version or config_json missing, not "
                             "a string, or too long (at most %zu and %zu bytes)", path,
                             sizeof meta->hpt_version - 1, sizeof meta->config_json - 1);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (get_attr(file, fields[i].name, fields[i].is64 ? H5T_NATIVE_INT64 : H5T_NATIVE_INT32,
                     (char *)meta + fields[i].off))
            return hpt_error_set(HPT_ERR_DATA, "%s: attribute %s missing or unreadable", path,
                                 fields[i].name);
    /* optional (newer writers): -1 = not recorded */
    if (get_attr(file, "sequence_parallel", H5T_NATIVE_INT32, &meta->sequence_parallel))
        meta->sequence_parallel = -1;
    if (get_attr(file, "recompute", H5T_NATIVE_INT32, &meta->recompute))
        meta->recompute = -1;
    if (get_attr(file, "cp", H5T_NATIVE_INT32, &meta->cp) || meta->cp < 1)
        meta->cp = 1; /* not recorded: written before CP was, or without CP */
    if (get_str(file, "optimizer", meta->optimizer, sizeof meta->optimizer))
        meta->optimizer[0] = 0;
    return HPT_OK;
}

void hpt_ckpt_dirname(int64_t step, char *buf) { snprintf(buf, 32, "step_%08lld", (long long)step); }

static int cmp_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* 1 when dir/name is a directory with no entries: what an interrupted
 * removal leaves (earlier hpt unlinked checkpoint.h5, then rmdir'd the step
 * directory when pruning; a kill in between left it empty). */
static int empty_dir(const char *dir, const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    DIR *d = opendir(p);
    if (!d)
        return 0;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n == 0;
}

int hpt_ckpt_list(const char *dir, int64_t *steps, int max)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0, cap = 64;
    int64_t *all = malloc(sizeof(int64_t) * cap);
    struct dirent *e;
    while (all && (e = readdir(d))) {
        char *end;
        if (strncmp(e->d_name, "step_", 5))
            continue;
        long long s = strtoll(e->d_name + 5, &end, 10);
        if (end != e->d_name + 13 || *end) /* "step_" + 8 digits, no ".tmp" */
            continue;
        if (empty_dir(dir, e->d_name)) /* a half-removed checkpoint: never loadable */
            continue;
        if (n == cap) {
            int64_t *bigger = realloc(all, sizeof(int64_t) * (cap *= 2));
            if (!bigger)
                break;
            all = bigger;
        }
        all[n++] = s;
    }
    closedir(d);
    if (!all)
        return 0;
    qsort(all, (size_t)n, sizeof *all, cmp_desc);
    n = n < max ? n : max;
    memcpy(steps, all, sizeof(int64_t) * (size_t)n);
    free(all);
    return n;
}

/* ------------------------------------------------------------- CRC32C */

static uint32_t crc_table[8][256];

static void crc_table_init(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1; /* reflected Castagnoli */
        crc_table[0][b] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int b = 0; b < 256; b++)
            crc_table[t][b] = (crc_table[t - 1][b] >> 8) ^ crc_table[0][crc_table[t - 1][b] & 0xff];
}

/* Slicing-by-8 on the raw (not inverted) register. */
static uint32_t crc_sw(uint32_t c, const unsigned char *p, size_t n)
{
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c;
        c = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
            crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
            crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
            crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
    }
    while (n--)
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return c;
}

/* Combining CRCs (the method of zlib's crc32_combine, M. Adler): running
 * the register over n zero bytes multiplies it by x^(8n) modulo the
 * polynomial, so crc(A || B) = (crc(A) * x^(8|B|) mod P) ^ crc(B) for the
 * inverted-register CRCs used here. Polynomials are reflected: bit 31 is
 * x^0. */
#define CRC_POLY 0x82F63B78u

/* a * b mod P. */
static uint32_t gf2_mulmod(uint32_t a, uint32_t b)
{
    uint32_t prod = 0;
    for (uint32_t bit = 1u << 31; bit; bit >>= 1) {
        if (a & bit)
            prod ^= b;
        b = b & 1 ? (b >> 1) ^ CRC_POLY : b >> 1; /* b *= x */
    }
    return prod;
}

static uint32_t x2k[64]; /* x2k[k] = x^(2^k) mod P */

static void x2k_init(void)
{
    x2k[0] = 1u << 30; /* x^1 */
    for (int k = 1; k < 64; k++)
        x2k[k] = gf2_mulmod(x2k[k - 1], x2k[k - 1]);
}

/* x^(8n) mod P: the operator that moves a CRC past n bytes. */
static uint32_t shift_op(uint64_t n)
{
    uint32_t op = 1u << 31; /* x^0 */
    for (int k = 3; n; n >>= 1, k++)
        if (n & 1)
            op = gf2_mulmod(x2k[k], op);
    return op;
}

/* The SSE4.2 crc32 instruction computes exactly this polynomial; it has a
 * latency of three cycles and a throughput of one per cycle, so a long
 * buffer is cut in three runs whose registers advance together, combined
 * at the end (Intel, "Fast CRC Computation for iSCSI Polynomial Using
 * CRC32 Instruction", 2011). c: the raw register. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw1(uint32_t c, const unsigned char *p,
                                                          size_t n)
{
    uint64_t c64 = c;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = _mm_crc32_u64(c64, w);
    }
    c = (uint32_t)c64;
    while (n--)
        c = _mm_crc32_u8(c, *p++);
    return c;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const unsigned char *p,
                                                         size_t n)
{
    if (n < 3 * 4096)
        return crc_hw1(c, p, n);
    size_t run = n / 3 / 8 * 8; /* three runs of `run` bytes, then the rest */
    const unsigned char *q = p + run, *r = q + run;
    uint64_t a = c, b = 0xFFFFFFFFu, d = 0xFFFFFFFFu; /* runs 2, 3: fresh CRCs */
    for (size_t i = 0; i < run; i += 8) {
        uint64_t wa, wb, wd;
        memcpy(&wa, p + i, 8);
        memcpy(&wb, q + i, 8);
        memcpy(&wd, r + i, 8);
        a = _mm_crc32_u64(a, wa);
        b = _mm_crc32_u64(b, wb);
        d = _mm_crc32_u64(d, wd);
    }
    uint32_t op = shift_op(run);
    /* inverted CRCs: crc(A||B) = mul(crc(A), op) ^ crc(B) */
    uint32_t x = gf2_mulmod(op, ~(uint32_t)a) ^ ~(uint32_t)b;
    x = gf2_mulmod(op, x) ^ ~(uint32_t)d;
    return crc_hw1(~x, r + run, n - 3 * run);
}

uint32_t hpt_crc32c(uint32_t crc, const void *buf, size_t n)
{
    static int mode; /* 0 unknown, 1 software, 2 SSE4.2 */
    if (!mode) {
        __builtin_cpu_init();
        crc_table_init();
        x2k_init();
        mode = __builtin_cpu_supports("sse4.2") ? 2 : 1;
    }
    uint32_t c = ~crc;
    c = mode == 2 ? crc_hw(c, buf, n) : crc_sw(c, buf, n);
    return ~c;
}

/* -------------------------------------------------------------- tiles */

void hpt_ckpt_tiles_init(hpt_ckpt_tiles *t, int64_t rows, int64_t cols, int64_t tr, int64_t tc)
{
    t->rows = rows, t->cols = cols;
    t->tr = tr < 1 ? 1 : tr, t->tc = tc < 1 ? 1 : tc;
    t->nr = (rows + t->tr - 1) / t->tr, t->nc = (cols + t->tc - 1) / t->tc;
}

/* CRC32C of an h x w block at p (row stride ld elements), row by row. */
static uint32_t block_crc(const float *p, int64_t ld, int64_t h, int64_t w)
{
    if (w == ld) /* whole rows: one contiguous run */
        return hpt_crc32c(0, p, sizeof(float) * (size_t)(h * w));
    uint32_t x = 0;
    for (int64_t r = 0; r < h; r++, p += ld)
        x = hpt_crc32c(x, p, sizeof(float) * (size_t)w);
    return x;
}

void hpt_ckpt_tiles_crc(const hpt_ckpt_tiles *t, const float *buf, int64_t ld, int64_t r0,
                        int64_t nrows, int64_t c0, int64_t ncols, uint32_t *crc)
{
    for (int64_t i = r0 / t->tr; i < t->nr; i++) {
        int64_t a = i * t->tr, b = a + t->tr < t->rows ? a + t->tr : t->rows;
        if (b > r0 + nrows)
            break;
        for (int64_t j = c0 / t->tc; j < t->nc; j++) {
            int64_t c = j * t->tc, d = c + t->tc < t->cols ? c + t->tc : t->cols;
            if (d > c0 + ncols)
                break;
            crc[i * t->nc + j] = block_crc(buf + (a - r0) * ld + (c - c0), ld, b - a, d - c);
        }
    }
}

void hpt_ckpt_tiles_cover(const hpt_ckpt_tiles *t, int64_t *r0, int64_t *r1, int64_t *c0,
                          int64_t *c1)
{
    *r0 = *r0 / t->tr * t->tr;
    *r1 = (*r1 + t->tr - 1) / t->tr * t->tr;
    *r1 = *r1 < t->rows ? *r1 : t->rows;
    *c0 = *c0 / t->tc * t->tc;
    *c1 = (*c1 + t->tc - 1) / t->tc * t->tc;
    *c1 = *c1 < t->cols ? *c1 : t->cols;
}

int hpt_ckpt_put_crc(hid_t ds, const hpt_ckpt_tiles *t, const uint32_t *crc)
{
    hsize_t n = (hsize_t)(t->nr * t->nc), two = 2;
    int64_t tile[2] = {t->tr, t->tc};
    uint32_t *zeros = crc ? NULL : calloc(n, sizeof(uint32_t));
    if (!crc && !zeros)
        return -1;
    int err = 0;
    const char *names[2] = {"crc_tile", "crc32c"};
    for (int k = 0; k < 2 && !err; k++) {
        hid_t type = k ? H5T_NATIVE_UINT32 : H5T_NATIVE_INT64, a;
        const void *v = k ? (const void *)(crc ? crc : zeros) : (const void *)tile;
        if (H5Aexists(ds, names[k]) > 0)
            a = H5Aopen(ds, names[k], H5P_DEFAULT);
        else {
            hid_t sp = H5Screate_simple(1, k ? &n : &two, NULL);
            a = H5Acreate2(ds, names[k], k ? H5T_STD_U32LE : H5T_STD_I64LE, sp, H5P_DEFAULT,
                           H5P_DEFAULT);
            H5Sclose(sp);
        }
        err = a < 0 || H5Awrite(a, type, v) < 0;
        if (a >= 0)
            H5Aclose(a);
    }
    free(zeros);
    return err ? -1 : 0;
}

/* Number of elements of attribute `name` of obj, or -1. */
static hssize_t attr_len(hid_t obj, const char *name)
{
    if (H5Aexists(obj, name) <= 0)
        return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT), sp = a < 0 ? -1 : H5Aget_space(a);
    hssize_t n = sp < 0 ? -1 : H5Sget_simple_extent_npoints(sp);
    if (sp >= 0)
        H5Sclose(sp);
    if (a >= 0)
        H5Aclose(a);
    return n;
}

static int read_attr(hid_t obj, const char *name, hid_t type, void *v)
{
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    int err = a < 0 || H5Aread(a, type, v) < 0;
    if (a >= 0)
        H5Aclose(a);
    return err;
}

int hpt_ckpt_get_crc(hid_t ds, int64_t rows, int64_t cols, hpt_ckpt_tiles *t, uint32_t **crc)
{
    int64_t tile[2];
    *crc = NULL;
    if (attr_len(ds, "crc_tile") != 2 || read_attr(ds, "crc_tile", H5T_NATIVE_INT64, tile) ||
        tile[0] < 1 || tile[1] < 1 || tile[0] > (rows > 1 ? rows : 1) || tile[1] > (cols > 1 ? cols : 1))
        return -1;
    hpt_ckpt_tiles_init(t, rows, cols, tile[0], tile[1]);
    if (attr_len(ds, "crc32c") != t->nr * t->nc || !(*crc = malloc(sizeof(uint32_t) *
                                                                   (size_t)(t->nr * t->nc))))
        return -1;
    if (read_attr(ds, "crc32c", H5T_NATIVE_UINT32, *crc)) {
        free(*crc);
        *crc = NULL;
        return -1;
    }
    return 0;
}

int64_t hpt_ckpt_band_rows(const hpt_ckpt_tiles *t, int64_t ncols)
{
    int64_t per = t->tr * ncols * (int64_t)sizeof(float); /* bytes per tile row */
    return per > 0 && HPT_CKPT_READ_BYTES / per > 1 ? HPT_CKPT_READ_BYTES / per * t->tr : t->tr;
}

int hpt_ckpt_read_checked(hid_t ds, hid_t dxpl, const hpt_ckpt_tiles *t, const uint32_t *crc,
                          int64_t r0, int64_t nrows, int64_t c0, int64_t ncols, float *buf,
                          int64_t *bad)
{
    int rank = t->cols > 1 ? 2 : 1, err = 0;
    hid_t fsp = H5Dget_space(ds);
    if (fsp < 0)
        return -1;
    /* Reads of about HPT_CKPT_READ_BYTES (whole tile rows): large enough
     * for the disk to stream (reads of 1 MiB, one after the other, were
     * seen to wait for the disk each time, at a third of its speed), small
     * enough that the checksums then run on data still in the CPU cache. */
    int64_t step = hpt_ckpt_band_rows(t, ncols);
    for (int64_t a = r0; a < r0 + nrows && !err; a += step) {
        int64_t b = a + step < r0 + nrows ? a + step : r0 + nrows;
        float *band = buf + (a - r0) * ncols;
        hsize_t off[2] = {(hsize_t)a, (hsize_t)c0}, cnt[2] = {(hsize_t)(b - a), (hsize_t)ncols};
        hid_t msp = H5Screate_simple(rank, cnt, NULL);
        err = msp < 0 || H5Sselect_hyperslab(fsp, H5S_SELECT_SET, off, NULL, cnt, NULL) < 0 ||
              H5Dread(ds, H5T_NATIVE_FLOAT, msp, fsp, dxpl, band) < 0 ? -1 : 0;
        if (msp >= 0)
            H5Sclose(msp);
        for (int64_t i = a / t->tr; i < t->nr && !err; i++) { /* whole tile rows in [a, b) */
            int64_t ta = i * t->tr, tb = ta + t->tr < t->rows ? ta + t->tr : t->rows;
            if (tb > b)
                break;
            for (int64_t j = c0 / t->tc; j < t->nc && !err; j++) {
                int64_t c = j * t->tc, d = c + t->tc < t->cols ? c + t->tc : t->cols;
                if (d > c0 + ncols)
                    break;
                if (block_crc(buf + (ta - r0) * ncols + (c - c0), ncols, tb - ta, d - c) !=
                    crc[i * t->nc + j]) {
                    *bad = i * t->nc + j;
                    err = -2;
                }
            }
        }
    }
    H5Sclose(fsp);
    return err;
}
