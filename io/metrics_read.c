/* metrics_read.c — see metrics_read.h. */
#include "metrics_read.h"
#include "ckpt_read.h"

#include "h5util.h"
#include "metrics_h5.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


void hpt_mread_close(hpt_mread *m)
{
    if (m->file > 0)
        H5Fclose(m->file);
    free(m->keep);
    free(m->step);
    free(m->hpt_version);
    memset(m, 0, sizeof *m);
}

/* A string attribute of `obj` (hpt_h5_read_str_attr), remembering HDF5's
 * cause when the attribute could not even be looked up. */
static char attr_cause[256]; /* HDF5's cause when read_str_attr failed */

static char *read_str_attr(hid_t obj, const char *name)
{
    htri_t ex = H5Aexists(obj, name);
    snprintf(attr_cause, sizeof attr_cause, "%s", ex < 0 ? hpt_h5_cause() : "");
    return ex > 0 ? hpt_h5_read_str_attr(obj, name) : NULL;
}

/* Extent of dataset `name`: dims[0] (and dims[1] for 2-D); -1 if missing
 * or of another rank than `ndims`. */
static char ds_cause[300]; /* why the last ds_extent failed */

static int ds_extent(hid_t file, const char *name, int ndims, hsize_t dims[2])
{
    htri_t ex = H5Lexists(file, name, H5P_DEFAULT);
    snprintf(ds_cause, sizeof ds_cause, "%s%s", ex < 0 ? "; HDF5: " : "",
             ex < 0 ? hpt_h5_cause() : "");
    if (ex <= 0)
        return -1;
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0) {
        snprintf(ds_cause, sizeof ds_cause, "; HDF5: %s", hpt_h5_cause());
        return -1;
    }
    hid_t sp = H5Dget_space(d);
    int nd = H5Sget_simple_extent_ndims(sp);
    if (nd == ndims)
        H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    H5Dclose(d);
    return nd == ndims ? 0 : -1;
}

/* Read the first `rows` elements (x `cols` for 2-D) of dataset `name` as
 * `type` into out. */
static hpt_status read_rows(const hpt_mread *m, const char *name, hid_t type, size_t cols, void *out)
{
    hid_t d = H5Dopen2(m->file, name, H5P_DEFAULT);
    if (d < 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: dataset %s is missing (damaged file; HDF5: %s)",
                             m->path, name, hpt_h5_cause());
    hid_t fs = H5Dget_space(d);
    int nd = H5Sget_simple_extent_ndims(fs);
    hsize_t start[2] = {0, 0}, count[2] = {m->rows, cols};
    herr_t e = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t ms = H5Screate_simple(nd, count, NULL);
    if (e >= 0 && m->rows > 0)
        e = H5Dread(d, type, ms, fs, H5P_DEFAULT, out);
    char cause[256];
    snprintf(cause, sizeof cause, "%s", e < 0 ? hpt_h5_cause() : "");
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    if (e < 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: cannot read dataset %s (damaged file; HDF5: %s)",
                             m->path, name, cause);
    return HPT_OK;
}

typedef struct {
    int64_t step;
    size_t row;
} step_row;

static int cmp_step_row(const void *a, const void *b)
{
    const step_row *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

long hpt_mread_keep(const int64_t *step, size_t rows, size_t *keep)
{
    step_row *idx = malloc(sizeof *idx * (rows ? rows : 1));
    if (!idx)
        return -1;
    for (size_t i = 0; i < rows; i++)
        idx[i] = (step_row){step[i], i};
    qsort(idx, rows, sizeof *idx, cmp_step_row);
    long n = 0;
    for (size_t i = 0; i < rows; i++)
        if (i + 1 == rows || idx[i + 1].step != idx[i].step)
            keep[n++] = idx[i].row; /* the last (largest) row of this step */
    free(idx);
    return n;
}

/* The dedup rule (hpt_mread_keep) into m->keep and m->n. */
static hpt_status dedup(hpt_mread *m)
{
    m->keep = malloc(sizeof *m->keep * (m->rows ? m->rows : 1));
    long n = m->keep ? hpt_mread_keep(m->step, m->rows, m->keep) : -1;
    if (n < 0)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory (%zu rows)", m->rows);
    m->n = (size_t)n;
    return HPT_OK;
}

/* Shortest extent of the 2-D datasets in /ranks into *rows (a writer
 * killed mid-append can leave some columns a row behind) and the rank-axis
 * extent into m->nranks. */
static hpt_status ranks_extent(hpt_mread *m, hsize_t *rows)
{
    char **names;
    int n = hpt_ckpt_names(m->file, "/ranks", &names); /* never by index: see ckpt_read.h */
    hpt_status st = HPT_OK;
    if (n < 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: group /ranks is %s (damaged file%s%s)", m->path,
                             n == -1 ? "missing" : "unreadable", n == -1 ? "" : ": ",
                             n == -1 ? "" : hpt_ckpt_names_why());
    for (int i = 0; !st && i < n; i++) {
        char path[4200];
        hsize_t dims[2];
        snprintf(path, sizeof path, "/ranks/%s", names[i]);
        if (ds_extent(m->file, path, 2, dims) < 0)
            st = hpt_error_set(HPT_ERR_DATA, "%s: dataset %s is missing or not 2-D (damaged "
                                             "file%s)", m->path, path, ds_cause);
        else {
            *rows = dims[0] < *rows ? dims[0] : *rows;
            m->nranks = (size_t)dims[1];
        }
    }
    hpt_ckpt_names_free(names, n);
    return st;
}

/* Rows every dataset holds (a live file, or the file of a writer killed
 * mid-append, may have some columns a row or more ahead: the shortest
 * wins) and the rank-axis extent; errors name the dataset. */
static hpt_status check_layout(hpt_mread *m)
{
    static const char *const tables[] = {"/segments", "/events", "/ranks/busy",
                                         "/ranks/step_time"};
    hsize_t dims[2], rows = (hsize_t)-1;
    char name[96];
    for (int c = 0; c < HPT_SC_COUNT; c++) {
        snprintf(name, sizeof name, "/steps/%s", hpt_metrics_step_cols[c].name);
        if (ds_extent(m->file, name, 1, dims) < 0)
            return hpt_error_set(HPT_ERR_DATA, "%s: dataset %s is missing or not 1-D (damaged "
                                               "file%s)", m->path, name, ds_cause);
        rows = dims[0] < rows ? dims[0] : rows;
    }
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
        int two = t >= 2;
        if (ds_extent(m->file, tables[t], two ? 2 : 1, dims) < 0)
            return hpt_error_set(HPT_ERR_DATA, "%s: dataset %s is missing or not %d-D (damaged "
                                               "file%s)", m->path, tables[t], two ? 2 : 1,
                                 ds_cause);
    }
    hpt_status st = ranks_extent(m, &rows);
    m->rows = (size_t)rows;
    return st;
}

/* Open FILE, check that it is an hpt metrics file of a known version, read
 * /steps/step and apply the dedup rule. Errors (HPT_ERR_DATA) name the
 * file and the attribute or dataset. */
hpt_status hpt_mread_open(hpt_mread *m, const char *path)
{
    memset(m, 0, sizeof *m);
    m->path = path;
    if (access(path, F_OK) != 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: no such file", path);
    if (access(path, R_OK) != 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: not readable (permission denied)", path);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: not a readable HDF5 file: empty file (0 bytes)",
                             path);
    hpt_status st = hpt_metrics_h5_probe(path);
    if (st)
        return st;
    hid_t fapl = hpt_metrics_h5_fapl();
    m->file = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl);
    if (m->file < 0) {
        char cause[256];
        snprintf(cause, sizeof cause, "%s", hpt_h5_cause());
        H5Pclose(fapl);
        return hpt_error_set(HPT_ERR_DATA, "%s: not a readable HDF5 file, or truncated (HDF5: "
                             "%s)%s", path, cause, strstr(cause, "already open")
                             ? "; a killed writer's file: `hpt-metrics close FILE` clears "
                               "HDF5's open-for-write flag" : "");
    }
    H5Pclose(fapl);
    char *fmt = read_str_attr(m->file, "format");
    if (!fmt && attr_cause[0])
        return hpt_error_set(HPT_ERR_DATA, "%s: cannot read the root attribute format (damaged "
                             "file; HDF5: %s)", path, attr_cause);
    st = hpt_metrics_h5_check_format(path, fmt);
    free(fmt);
    if (st)
        return st;
    m->format_version = -1;
    if (H5Aexists(m->file, "format_version") > 0) {
        hid_t a = H5Aopen(m->file, "format_version", H5P_DEFAULT);
        if (H5Aread(a, H5T_NATIVE_INT, &m->format_version) < 0)
            m->format_version = -1;
        H5Aclose(a);
    }
    if (m->format_version != HPT_METRICS_FORMAT_VERSION)
        return hpt_error_set(HPT_ERR_DATA, "%s: format_version %d, this hpt-metrics reads version "
                             "%d", path, m->format_version, HPT_METRICS_FORMAT_VERSION);
    m->hpt_version = read_str_attr(m->file, "hpt_version");
    m->peak_flops = NAN;
    if (H5Aexists(m->file, "peak_flops_per_rank") > 0) {
        hid_t a = H5Aopen(m->file, "peak_flops_per_rank", H5P_DEFAULT);
        H5Aread(a, H5T_NATIVE_DOUBLE, &m->peak_flops);
        H5Aclose(a);
    }
    st = check_layout(m);
    if (st)
        return st;
    m->step = malloc(sizeof *m->step * (m->rows ? m->rows : 1));
    if (!m->step)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory (%zu rows)", m->rows);
    st = read_rows(m, "/steps/step", H5T_NATIVE_INT64, 1, m->step);
    return st ? st : dedup(m);
}

/* /steps/NAME of the kept rows as doubles ([n], malloc'd) in *out. */
hpt_status hpt_mread_steps_col(const hpt_mread *m, const char *name, size_t from, double **out)
{
    char path[96];
    snprintf(path, sizeof path, "/steps/%s", name);
    from = from < m->n ? from : m->n;
    double *all = malloc(sizeof *all * (m->rows ? m->rows : 1));
    *out = malloc(sizeof **out * (m->n - from ? m->n - from : 1));
    if (!all || !*out) {
        free(all);
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    }
    hpt_status st = read_rows(m, path, H5T_NATIVE_DOUBLE, 1, all);
    for (size_t i = from; !st && i < m->n; i++)
        (*out)[i - from] = all[m->keep[i]];
    free(all);
    return st;
}

hpt_status hpt_mread_rows_col(const hpt_mread *m, const char *name, double **out)
{
    char path[96];
    snprintf(path, sizeof path, "/steps/%s", name);
    *out = malloc(sizeof **out * (m->rows ? m->rows : 1));
    if (!*out)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    hpt_status st = read_rows(m, path, H5T_NATIVE_DOUBLE, 1, *out);
    if (st) {
        free(*out);
        *out = NULL;
    }
    return st;
}

hpt_status hpt_mread_rows_rank(const hpt_mread *m, const char *name, size_t w, double **out)
{
    *out = NULL;
    if (!hpt_mread_has_ranks_col(m, name) || w >= m->nranks)
        return HPT_OK;
    char path[160];
    snprintf(path, sizeof path, "/ranks/%s", name);
    size_t W = m->nranks, cells = m->rows * W;
    double *all = malloc(sizeof *all * (cells ? cells : 1));
    *out = malloc(sizeof **out * (m->rows ? m->rows : 1));
    if (!all || !*out) {
        free(all);
        free(*out);
        *out = NULL;
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    }
    hpt_status st = read_rows(m, path, H5T_NATIVE_DOUBLE, W, all);
    for (size_t i = 0; !st && i < m->rows; i++)
        (*out)[i] = all[i * W + w];
    free(all);
    if (st) {
        free(*out);
        *out = NULL;
    }
    return st;
}

/* /ranks/NAME of the kept rows ([n][nranks], malloc'd) in *out. */
hpt_status hpt_mread_ranks_col(const hpt_mread *m, const char *name, size_t from, double **out)
{
    char path[160];
    snprintf(path, sizeof path, "/ranks/%s", name);
    size_t W = m->nranks;
    from = from < m->n ? from : m->n;
    size_t nall = m->rows * W, nout = (m->n - from) * W;
    double *all = malloc(sizeof *all * (nall ? nall : 1));
    *out = malloc(sizeof **out * (nout ? nout : 1));
    if (!all || !*out) {
        free(all);
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    }
    hpt_status st = read_rows(m, path, H5T_NATIVE_DOUBLE, W, all);
    for (size_t i = from; !st && i < m->n; i++)
        memcpy(*out + (i - from) * W, all + m->keep[i] * W, sizeof *all * W);
    free(all);
    return st;
}

/* A compound table (/segments or /events) read with memory type `t`; *n
 * rows in a malloc'd *out. */
static hpt_status read_table(const hpt_mread *m, const char *name, hid_t t, size_t size, void **out,
                             size_t *n)
{
    hid_t d = H5Dopen2(m->file, name, H5P_DEFAULT);
    hid_t sp = d >= 0 ? H5Dget_space(d) : -1;
    hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    *out = NULL;
    *n = 0;
    herr_t e = np < 0 ? -1 : 0;
    if (!e) {
        *out = calloc(np ? (size_t)np : 1, size);
        e = *out ? 0 : -1;
    }
    if (!e && np > 0)
        e = H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, *out);
    char cause[256];
    snprintf(cause, sizeof cause, "%s", e < 0 ? hpt_h5_cause() : "");
    if (sp >= 0)
        H5Sclose(sp);
    if (d >= 0)
        H5Dclose(d);
    if (e < 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: cannot read the table %s (damaged file; HDF5: "
                             "%s)", m->path, name, cause);
    *n = (size_t)np;
    return HPT_OK;
}

hpt_status hpt_mread_segments(const hpt_mread *m, hpt_mread_seg **out, size_t *n)
{
    /* newer fields: read where the file has them (else left 0 by calloc) */
    hid_t d = H5Dopen2(m->file, "/segments", H5P_DEFAULT), ft = d >= 0 ? H5Dget_type(d) : -1;
    hid_t t = hpt_metrics_seg_type(ft >= 0 ? ft : H5T_NATIVE_INT);
    if (ft >= 0)
        H5Tclose(ft);
    if (d >= 0)
        H5Dclose(d);
    hpt_status st = read_table(m, "/segments", t, sizeof(hpt_mread_seg), (void **)out, n);
    int has_ps = hpt_metrics_seg_type_has(t, "process_start");
    int has_ls = hpt_metrics_seg_type_has(t, "load_seconds");
    int has_pb = hpt_metrics_seg_type_has(t, "bubble_theory");
    for (size_t i = 0; !st && i < *n; i++) { /* not recorded by an older writer */
        if (!has_ps)
            (*out)[i].process_start = NAN;
        if (!has_ls)
            (*out)[i].load_seconds = NAN;
        if (!has_pb) {
            (*out)[i].pp_schedule = (*out)[i].pp_virtual = -1;
            (*out)[i].bubble_theory = NAN;
        }
    }
    H5Tclose(t);
    return st;
}

hpt_status hpt_mread_events(const hpt_mread *m, hpt_mread_event **out, size_t *n)
{
    hid_t t = hpt_metrics_event_type();
    hpt_status st = read_table(m, "/events", t, sizeof(hpt_mread_event), (void **)out, n);
    H5Tclose(t);
    return st;
}

hpt_status hpt_mread_trace(const hpt_mread *m, hpt_metrics_trace_row **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (H5Lexists(m->file, "trace", H5P_DEFAULT) <= 0)
        return hpt_error_set(HPT_ERR_DATA, "%s has no /trace: the run was not traced (hpt-train "
                             "--trace-steps A-B)", m->path);
    hid_t t = hpt_metrics_trace_type();
    hpt_status st = read_table(m, "/trace", t, sizeof **out, (void **)out, n);
    H5Tclose(t);
    return st;
}

/* The names in /ranks, comma-separated, into buf (for the error message). */
void hpt_mread_ranks_col_names(const hpt_mread *m, char *buf, size_t len)
{
    buf[0] = 0;
    char **names;
    int n = hpt_ckpt_names(m->file, "/ranks", &names);
    for (int i = 0; i < n; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, "%s%s", used ? ", " : "", names[i]);
    }
    hpt_ckpt_names_free(names, n);
}


int hpt_mread_has_ranks_col(const hpt_mread *m, const char *name)
{
    char path[160];
    hsize_t dims[2];
    if (strlen(name) >= 100 || strchr(name, '/') || !name[0] || name[0] == '.')
        return 0;
    snprintf(path, sizeof path, "/ranks/%s", name);
    return ds_extent(m->file, path, 2, dims) == 0;
}

/* ------------------------------------------------- incremental follow */

hpt_status hpt_mread_follow_extent(hid_t d, const char *path, const char *group,
                                   const char *name, hsize_t *rows, hsize_t *cols)
{
    hsize_t dims[2] = {0, 0};
    hid_t sp = H5Drefresh(d) < 0 ? -1 : H5Dget_space(d);
    if (sp < 0 || H5Sget_simple_extent_dims(sp, dims, NULL) < 0) {
        char cause[300];
        snprintf(cause, sizeof cause, "%s", hpt_h5_cause_line());
        if (sp >= 0)
            H5Sclose(sp);
        return hpt_error_set(HPT_ERR_DATA, "%s: cannot refresh dataset %s%s (damaged file; "
                             "HDF5: %s)", path, group, name, cause);
    }
    H5Sclose(sp);
    *rows = dims[0];
    if (cols)
        *cols = dims[1];
    return HPT_OK;
}

hpt_status hpt_mread_follow_rows(hid_t d, hid_t type, size_t from, size_t n, void *out,
                                 const char *path, const char *group, const char *name)
{
    if (n == 0)
        return HPT_OK;
    hsize_t at = from, cnt = n;
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(1, &cnt, NULL);
    herr_t e = fs < 0 ? -1 : H5Sselect_hyperslab(fs, H5S_SELECT_SET, &at, NULL, &cnt, NULL);
    if (e >= 0)
        e = H5Dread(d, type, ms, fs, H5P_DEFAULT, out);
    char cause[300];
    snprintf(cause, sizeof cause, "%s", e < 0 ? hpt_h5_cause_line() : "");
    H5Sclose(ms);
    if (fs >= 0)
        H5Sclose(fs);
    if (e < 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: cannot read %s%s%s (damaged file; HDF5: %s)",
                             path, *group ? "dataset " : "the table ", group, name, cause);
    return HPT_OK;
}

hpt_status hpt_mread_follow_table(hid_t d, hid_t t, size_t size, const char *path,
                                  const char *name, void **arr, size_t *count)
{
    hsize_t e;
    hpt_status st = hpt_mread_follow_extent(d, path, "", name, &e, NULL);
    if (st || e <= *count)
        return st;
    size_t n = (size_t)e - *count;
    void *p = realloc(*arr, size * (size_t)e);
    if (!p)
        return hpt_error_set(HPT_ERR_INTERNAL, "%s: out of memory", path);
    *arr = p;
    memset((char *)p + size * *count, 0, size * n);
    st = hpt_mread_follow_rows(d, t, *count, n, (char *)p + size * *count, path, "", name);
    if (!st)
        *count = (size_t)e;
    return st;
}
