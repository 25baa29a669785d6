/* ckpt.c — checkpoint metadata (root attributes), names and listing; see
 * ckpt.h. Tensor I/O is in lib/checkpoint.c. */
#include "ckpt.h"

#include <dirent.h>
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
    return err ? hpt_error_set(HPT_ERR_IO, "checkpoint: cannot write the root attributes") : HPT_OK;
}

hpt_status hpt_ckpt_read_meta(hid_t file, const char *path, hpt_ckpt_meta *meta)
{
    char fmt[64] = "";
    memset(meta, 0, sizeof *meta);
    if (get_str(file, "format", fmt, sizeof fmt) || strcmp(fmt, HPT_CKPT_FORMAT))
        return hpt_error_set(HPT_ERR_DATA, "%s: not an hpt checkpoint (attribute format = '%s', "
                             "expected '%s')", path, fmt, HPT_CKPT_FORMAT);
    if (get_attr(file, "format_version", H5T_NATIVE_INT32, &meta->format_version))
        return hpt_error_set(HPT_ERR_DATA, "%s: attribute format_version missing", path);
    if (meta->format_version != HPT_CKPT_VERSION)
        return hpt_error_set(HPT_ERR_DATA, "%s: unknown checkpoint format version %d (this hpt reads %d)",
                             path, meta->format_version, HPT_CKPT_VERSION);
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
    return HPT_OK;
}

void hpt_ckpt_dirname(int64_t step, char *buf) { snprintf(buf, 32, "step_%08lld", (long long)step); }

static int cmp_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
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
