/* hpt-metrics — summary and CSV export of an hpt metrics file without
 * Python (the file lib/metrics.c writes; docs/ANALYSIS.md).
 *
 * Reads with serial HDF5 in SWMR-read mode (H5F_ACC_SWMR_READ, libver
 * latest), so the file of a live or a killed run opens. Every step is
 * reported once: rows are in time order and after a resume a step can be
 * logged again, so for each step the LAST row is kept (the later segment
 * wins) — the rule analysis/hpt_metrics.py applies too, and `summary`
 * prints the same lines as its summary_text(). Under mpiexec rank 0 does
 * the work and every rank exits with its status.
 */
#include <errno.h>
#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "h5util.h"
#include "metrics_h5.h"
#include "hpt_config.h"

#define FORMAT_NAME "hpt-metrics"
#define FORMAT_VERSION 1
#define NSLOW 3 /* slowest ranks listed */

/* /steps columns of format version 1, in the writer's order; the first
 * four are integers. */
static const char *const step_cols[] = {
    "step", "segment", "repeated", "skipped", "wall_time", "loss", "val_loss", "lr",
    "grad_norm", "clip_coef", "tokens", "step_time", "tokens_per_s", "flops", "mfu",
    "noise_g2", "noise_s", "noise_scale"};
#define NSTEP_COLS (int)(sizeof step_cols / sizeof step_cols[0])
#define NINT_COLS 4

static void usage(FILE *f)
{
    fputs("usage: hpt-metrics summary FILE\n"
          "       hpt-metrics csv FILE [--ranks COL] [-o OUT]\n"
          "       hpt-metrics close FILE\n"
          "\n"
          "Read the metrics file hpt-train writes (RUN_DIR/metrics.h5; also the file of a\n"
          "live or a killed run). Each step is reported once: after a resume the last\n"
          "row of a step (the later segment) wins (docs/ANALYSIS.md).\n"
          "\n"
          "commands:\n"
          "  summary FILE    segments and layouts, steps and rows, final/best train and\n"
          "                  validation loss, mean tokens/s and MFU, the slowest ranks\n"
          "                  (mean busy time per step) and every event\n"
          "  csv FILE        one row per step, the /steps columns (step, segment, ...,\n"
          "                  noise_scale), sorted by step\n"
          "    --ranks COL   instead: steps x ranks of the per-rank column /ranks/COL\n"
          "                  (step_time, busy, forward, comm_dp, bytes_tp, ...): columns\n"
          "                  step, rank_0, rank_1, ...; nan where a rank did not exist\n"
          "    -o OUT        write to OUT instead of standard output: a regular file is\n"
          "                  written as OUT.tmp and renamed to OUT; a device or FIFO\n"
          "                  (e.g. /dev/stdout) is written directly\n"
          "  close FILE      clear HDF5's open-for-write flag that a killed hpt-train\n"
          "                  leaves, so that plain readers (h5py.File(FILE, \"r\"),\n"
          "                  h5dump) open the file; refused while a live hpt-train\n"
          "                  writes it (FILE.lock is locked)\n"
          "\n"
          "options:\n"
          "  -h, --help      print this help and exit\n"
          "  --version       print the hpt version and exit\n"
          "\n"
          "exit status: 0 ok, 2 usage error (unknown command, option or column), 3 missing\n"
          "file, not an hpt metrics file or damaged, 5 OUT not writable or (close) a live\n"
          "writer holds FILE.\n",
          f);
}

/* ------------------------------------------------------------ the file */

typedef struct {
    int32_t segment;
    int64_t first_row, first_step, resumed_from, last_step_before;
    int32_t world, tp, pp, dp, zero1, grad_accum, micro_batch, seq_len;
    char hpt_version[33], slurm_job_id[33], host[65];
} seg_row;

typedef struct {
    int64_t step;
    double wall_time;
    int32_t rank;
    char kind[25];
    char message[257];
} event_row;

typedef struct {
    const char *path;
    hid_t file;
    size_t rows;   /* rows every /steps and /ranks dataset holds            */
    size_t nranks; /* extent of the rank axis                               */
    size_t n;      /* distinct steps                                        */
    size_t *keep;  /* [n]: row kept for each step, sorted by step           */
    int64_t *step; /* [rows]                                                */
    char *hpt_version;
    int format_version;
    double peak_flops;
} mfile;

static void mfile_close(mfile *m)
{
    if (m->file > 0)
        H5Fclose(m->file);
    free(m->keep);
    free(m->step);
    free(m->hpt_version);
    memset(m, 0, sizeof *m);
}

/* A string attribute of `obj` (variable- or fixed-length) as a malloc'd
 * string; NULL when absent or not a string. */
static char attr_cause[256]; /* HDF5's cause when read_str_attr failed */

static char *read_str_attr(hid_t obj, const char *name)
{
    htri_t ex = H5Aexists(obj, name);
    snprintf(attr_cause, sizeof attr_cause, "%s", ex < 0 ? hpt_h5_cause() : "");
    if (ex <= 0)
        return NULL;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT), ft = H5Aget_type(a), sp = H5Aget_space(a);
    char *out = NULL;
    if (H5Tget_class(ft) == H5T_STRING && H5Sget_simple_extent_npoints(sp) == 1) {
        if (H5Tis_variable_str(ft) > 0) {
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, H5T_VARIABLE);
            H5Tset_cset(mt, H5Tget_cset(ft)); /* HDF5 does not convert ASCII <-> UTF-8 */
            char *s = NULL;
            if (H5Aread(a, mt, &s) >= 0 && s) {
                out = strdup(s);
                H5free_memory(s);
            }
            H5Tclose(mt);
        } else {
            size_t len = H5Tget_size(ft);
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, len + 1);
            H5Tset_cset(mt, H5Tget_cset(ft));
            out = calloc(len + 2, 1);
            if (out && H5Aread(a, mt, out) < 0) {
                free(out);
                out = NULL;
            }
            H5Tclose(mt);
        }
    }
    H5Sclose(sp);
    H5Tclose(ft);
    H5Aclose(a);
    return out;
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
static hpt_status read_rows(const mfile *m, const char *name, hid_t type, size_t cols, void *out)
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

/* The dedup rule: for each distinct step the last row (time order), sorted
 * by step. Fills m->keep and m->n. */
static hpt_status dedup(mfile *m)
{
    step_row *idx = malloc(sizeof *idx * (m->rows ? m->rows : 1));
    m->keep = malloc(sizeof *m->keep * (m->rows ? m->rows : 1));
    if (!idx || !m->keep) {
        free(idx);
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory (%zu rows)", m->rows);
    }
    for (size_t i = 0; i < m->rows; i++)
        idx[i] = (step_row){m->step[i], i};
    qsort(idx, m->rows, sizeof *idx, cmp_step_row);
    m->n = 0;
    for (size_t i = 0; i < m->rows; i++)
        if (i + 1 == m->rows || idx[i + 1].step != idx[i].step)
            m->keep[m->n++] = idx[i].row; /* the last (largest) row of this step */
    free(idx);
    return HPT_OK;
}

/* Shortest extent of the 2-D datasets in /ranks into *rows (a writer
 * killed mid-append can leave some columns a row behind) and the rank-axis
 * extent into m->nranks. */
static hpt_status ranks_extent(mfile *m, hsize_t *rows)
{
    hid_t g = H5Gopen2(m->file, "/ranks", H5P_DEFAULT);
    H5G_info_t info;
    hpt_status st = HPT_OK;
    if (g < 0 || H5Gget_info(g, &info) < 0) {
        st = hpt_error_set(HPT_ERR_DATA, "%s: group /ranks is missing (damaged file)", m->path);
        goto out;
    }
    for (hsize_t i = 0; !st && i < info.nlinks; i++) {
        char name[64], path[80];
        hsize_t dims[2];
        if (H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                               H5P_DEFAULT) < 0)
            continue;
        snprintf(path, sizeof path, "/ranks/%s", name);
        if (ds_extent(m->file, path, 2, dims) < 0)
            st = hpt_error_set(HPT_ERR_DATA, "%s: dataset %s is missing or not 2-D (damaged "
                                             "file%s)", m->path, path, ds_cause);
        else {
            *rows = dims[0] < *rows ? dims[0] : *rows;
            m->nranks = (size_t)dims[1];
        }
    }
out:
    if (g >= 0)
        H5Gclose(g);
    return st;
}

/* Rows every dataset holds (a live file, or the file of a writer killed
 * mid-append, may have some columns a row or more ahead: the shortest
 * wins) and the rank-axis extent; errors name the dataset. */
static hpt_status check_layout(mfile *m)
{
    static const char *const tables[] = {"/segments", "/events", "/ranks/busy",
                                         "/ranks/step_time"};
    hsize_t dims[2], rows = (hsize_t)-1;
    char name[96];
    for (int c = 0; c < NSTEP_COLS; c++) {
        snprintf(name, sizeof name, "/steps/%s", step_cols[c]);
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
static hpt_status mfile_open(mfile *m, const char *path)
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
    int ok = fmt && !strcmp(fmt, FORMAT_NAME);
    if (!ok) {
        hpt_error_set(HPT_ERR_DATA, "%s: not an hpt metrics file (root attribute format = %s%s%s, "
                      "expected \"%s\")", path, fmt ? "\"" : "", fmt ? fmt : "missing",
                      fmt ? "\"" : "", FORMAT_NAME);
        free(fmt);
        return HPT_ERR_DATA;
    }
    free(fmt);
    m->format_version = -1;
    if (H5Aexists(m->file, "format_version") > 0) {
        hid_t a = H5Aopen(m->file, "format_version", H5P_DEFAULT);
        if (H5Aread(a, H5T_NATIVE_INT, &m->format_version) < 0)
            m->format_version = -1;
        H5Aclose(a);
    }
    if (m->format_version != FORMAT_VERSION)
        return hpt_error_set(HPT_ERR_DATA, "%s: format_version %d, this hpt-metrics reads version "
                             "%d", path, m->format_version, FORMAT_VERSION);
    m->hpt_version = read_str_attr(m->file, "hpt_version");
    m->peak_flops = NAN;
    if (H5Aexists(m->file, "peak_flops_per_rank") > 0) {
        hid_t a = H5Aopen(m->file, "peak_flops_per_rank", H5P_DEFAULT);
        H5Aread(a, H5T_NATIVE_DOUBLE, &m->peak_flops);
        H5Aclose(a);
    }
    hpt_status st = check_layout(m);
    if (st)
        return st;
    m->step = malloc(sizeof *m->step * (m->rows ? m->rows : 1));
    if (!m->step)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory (%zu rows)", m->rows);
    st = read_rows(m, "/steps/step", H5T_NATIVE_INT64, 1, m->step);
    return st ? st : dedup(m);
}

/* /steps/NAME of the kept rows as doubles ([n], malloc'd) in *out. */
static hpt_status kept_steps_col(const mfile *m, const char *name, double **out)
{
    char path[96];
    snprintf(path, sizeof path, "/steps/%s", name);
    double *all = malloc(sizeof *all * (m->rows ? m->rows : 1));
    *out = malloc(sizeof **out * (m->n ? m->n : 1));
    if (!all || !*out) {
        free(all);
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    }
    hpt_status st = read_rows(m, path, H5T_NATIVE_DOUBLE, 1, all);
    for (size_t i = 0; !st && i < m->n; i++)
        (*out)[i] = all[m->keep[i]];
    free(all);
    return st;
}

/* /ranks/NAME of the kept rows ([n][nranks], malloc'd) in *out. */
static hpt_status kept_ranks_col(const mfile *m, const char *name, double **out)
{
    char path[160];
    snprintf(path, sizeof path, "/ranks/%s", name);
    size_t W = m->nranks;
    size_t nall = m->rows * W, nout = m->n * W;
    double *all = malloc(sizeof *all * (nall ? nall : 1));
    *out = malloc(sizeof **out * (nout ? nout : 1));
    if (!all || !*out) {
        free(all);
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    }
    hpt_status st = read_rows(m, path, H5T_NATIVE_DOUBLE, W, all);
    for (size_t i = 0; !st && i < m->n; i++)
        memcpy(*out + i * W, all + m->keep[i] * W, sizeof *all * W);
    free(all);
    return st;
}

/* A compound table (/segments or /events) read with memory type `t`; *n
 * rows in a malloc'd *out. */
static hpt_status read_table(const mfile *m, const char *name, hid_t t, size_t size, void **out,
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

static hid_t str_type(size_t n)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, n);
    return t;
}

static hpt_status read_segments(const mfile *m, seg_row **out, size_t *n)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(seg_row));
    hid_t s32 = str_type(sizeof((seg_row *)0)->hpt_version), s64 = str_type(sizeof((seg_row *)0)->host);
#define F(name, ty) H5Tinsert(t, #name, HOFFSET(seg_row, name), ty)
    F(segment, H5T_NATIVE_INT32); F(first_row, H5T_NATIVE_INT64); F(first_step, H5T_NATIVE_INT64);
    F(resumed_from, H5T_NATIVE_INT64); F(last_step_before, H5T_NATIVE_INT64);
    F(world, H5T_NATIVE_INT32); F(tp, H5T_NATIVE_INT32); F(pp, H5T_NATIVE_INT32);
    F(dp, H5T_NATIVE_INT32); F(zero1, H5T_NATIVE_INT32); F(grad_accum, H5T_NATIVE_INT32);
    F(micro_batch, H5T_NATIVE_INT32); F(seq_len, H5T_NATIVE_INT32);
    F(hpt_version, s32); F(slurm_job_id, s32); F(host, s64);
#undef F
    hpt_status st = read_table(m, "/segments", t, sizeof(seg_row), (void **)out, n);
    H5Tclose(s32);
    H5Tclose(s64);
    H5Tclose(t);
    return st;
}

static hpt_status read_events(const mfile *m, event_row **out, size_t *n)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(event_row));
    hid_t sk = str_type(sizeof((event_row *)0)->kind), sm = str_type(sizeof((event_row *)0)->message);
    H5Tinsert(t, "step", HOFFSET(event_row, step), H5T_NATIVE_INT64);
    H5Tinsert(t, "wall_time", HOFFSET(event_row, wall_time), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "rank", HOFFSET(event_row, rank), H5T_NATIVE_INT32);
    H5Tinsert(t, "kind", HOFFSET(event_row, kind), sk);
    H5Tinsert(t, "message", HOFFSET(event_row, message), sm);
    hpt_status st = read_table(m, "/events", t, sizeof(event_row), (void **)out, n);
    H5Tclose(sk);
    H5Tclose(sm);
    H5Tclose(t);
    return st;
}

/* ------------------------------------------------------------- summary */

/* "%.6g", or "nan" for a non-finite value (as the Python summary). */
static const char *g6(double v, char buf[32])
{
    if (isfinite(v))
        snprintf(buf, 32, "%.6g", v);
    else
        snprintf(buf, 32, "nan");
    return buf;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void print_segments(FILE *out, const seg_row *sg, size_t nseg)
{
    fprintf(out, "segments: %zu\n", nseg);
    for (size_t i = 0; i < nseg; i++) {
        const seg_row *s = &sg[i];
        char res[48];
        if (s->resumed_from < 0)
            snprintf(res, sizeof res, "fresh start");
        else
            snprintf(res, sizeof res, "resumed from step %lld", (long long)s->resumed_from);
        fprintf(out,
                "  segment %d: first row %lld, %s, world %d (TP %d x PP %d x DP %d%s), "
                "micro-batch %d x grad-accum %d x seq %d, host %s, job %s\n",
                s->segment, (long long)s->first_row, res, s->world, s->tp, s->pp, s->dp,
                s->zero1 ? ", ZeRO-1" : "", s->micro_batch, s->grad_accum, s->seq_len,
                s->host[0] ? s->host : "-", s->slurm_job_id[0] ? s->slurm_job_id : "-");
    }
}

/* "NAME: final X (step S), best Y (step T)" over the finite v[i], leaving
 * out skipped steps when `skipped` is given. */
static void print_loss(FILE *out, const char *name, const double *v, const double *step,
                       const double *skipped, size_t n)
{
    long fin = -1, best = -1;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i]) || (skipped && skipped[i] != 0))
            continue;
        fin = (long)i;
        if (best < 0 || v[i] < v[best])
            best = (long)i;
    }
    char a[32], b[32];
    if (fin < 0)
        fprintf(out, "%s: none\n", name);
    else
        fprintf(out, "%s: final %s (step %.0f), best %s (step %.0f)\n", name, g6(v[fin], a),
                step[fin], g6(v[best], b), step[best]);
}

/* Mean of the finite v[i] of steps not skipped. */
static double mean_ok(const double *v, const double *skipped, size_t n)
{
    double s = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (skipped[i] == 0 && isfinite(v[i])) {
            s += v[i];
            k++;
        }
    return k ? s / (double)k : NAN;
}

static double median_of(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n == 0 ? NAN : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The NSLOW ranks of largest mean busy time (rows where a rank was absent
 * are NaN and left out), slowest first, ties to the lower rank, each with
 * the median of the other ranks' means (the trainer's slow_rank test). */
static void print_slowest(FILE *out, const double *busy, size_t n, size_t W)
{
    double *mean = malloc(sizeof *mean * (W ? W : 1)), *others = malloc(sizeof *others * (W ? W : 1));
    int *order = malloc(sizeof *order * (W ? W : 1));
    size_t k = 0;
    if (!mean || !others || !order)
        goto out;
    for (size_t w = 0; w < W; w++) {
        double s = 0;
        size_t c = 0;
        for (size_t i = 0; i < n; i++)
            if (isfinite(busy[i * W + w])) {
                s += busy[i * W + w];
                c++;
            }
        mean[w] = c ? s / (double)c : NAN;
        if (c)
            order[k++] = (int)w;
    }
    fprintf(out, "slowest ranks (mean busy s/step, against the median of the other ranks):\n");
    for (size_t i = 0; i < k && i < NSLOW; i++) {
        size_t best = i; /* selection sort of the first NSLOW */
        for (size_t j = i + 1; j < k; j++)
            if (mean[order[j]] > mean[order[best]] ||
                (mean[order[j]] == mean[order[best]] && order[j] < order[best]))
                best = j;
        int tmp = order[i];
        order[i] = order[best];
        order[best] = tmp;
        size_t no = 0;
        for (size_t j = 0; j < k; j++)
            if (order[j] != order[i])
                others[no++] = mean[order[j]];
        double r = mean[order[i]], med = median_of(others, no);
        char a[32], b[32];
        if (no == 0) /* one rank: nothing to compare with */
            fprintf(out, "  rank %d: %s (the only rank)\n", order[i], g6(r, a));
        else
            fprintf(out, "  rank %d: %s (%.2fx, others %s)\n", order[i], g6(r, a),
                    med > 0 ? r / med : NAN, g6(med, b));
    }
out:
    free(mean);
    free(others);
    free(order);
}

static hpt_status cmd_summary(const char *path, FILE *out)
{
    mfile m;
    seg_row *sg = NULL;
    event_row *ev = NULL;
    size_t nseg = 0, nev = 0;
    double *col[6] = {0}, *busy = NULL;
    static const char *const names[6] = {"step", "skipped", "loss", "val_loss", "tokens_per_s",
                                         "mfu"};
    double *tok = NULL;
    hpt_status st = mfile_open(&m, path);
    if (!st)
        st = read_segments(&m, &sg, &nseg);
    if (!st)
        st = read_events(&m, &ev, &nev);
    for (int c = 0; !st && c < 6; c++)
        st = kept_steps_col(&m, names[c], &col[c]);
    if (!st)
        st = kept_steps_col(&m, "tokens", &tok);
    if (!st)
        st = kept_ranks_col(&m, "busy", &busy);
    if (st)
        goto out;
    const double *step = col[0], *skipped = col[1];
    size_t n = m.n, nskip = 0;
    double tokens = 0;
    for (size_t i = 0; i < n; i++) {
        nskip += skipped[i] != 0;
        tokens += isfinite(tok[i]) ? tok[i] : 0;
    }
    char a[32];
    fprintf(out, "file: %s\n", path);
    fprintf(out, "format: hpt-metrics %d (hpt %s)\n", m.format_version,
            m.hpt_version ? m.hpt_version : "None");
    print_segments(out, sg, nseg);
    if (n)
        fprintf(out, "steps: %zu (%.0f-%.0f), %zu rows, %zu repeated rows, %zu skipped\n", n,
                step[0], step[n - 1], m.rows, m.rows - n, nskip);
    else
        fprintf(out, "steps: 0\n");
    fprintf(out, "tokens: %.0f\n", tokens);
    print_loss(out, "train loss", col[2], step, skipped, n);
    print_loss(out, "val loss", col[3], step, NULL, n);
    fprintf(out, "mean tokens/s: %s\n", g6(mean_ok(col[4], skipped, n), a));
    fprintf(out, "mean MFU (%%): %s\n", g6(100 * mean_ok(col[5], skipped, n), a));
    print_slowest(out, busy, n, m.nranks);
    fprintf(out, "events: %zu\n", nev);
    for (size_t i = 0; i < nev; i++)
        fprintf(out, "  step %lld rank %d %s: %s\n", (long long)ev[i].step, ev[i].rank,
                ev[i].kind, ev[i].message);
out:
    for (int c = 0; c < 6; c++)
        free(col[c]);
    free(tok);
    free(busy);
    free(sg);
    free(ev);
    mfile_close(&m);
    return st;
}

/* ----------------------------------------------------------------- csv */

static void put_num(FILE *f, double v)
{
    if (isnan(v))
        fputs("nan", f);
    else if (isinf(v))
        fputs(v > 0 ? "inf" : "-inf", f);
    else
        fprintf(f, "%.17g", v);
}

static hpt_status csv_steps(const mfile *m, FILE *f)
{
    double *col[NSTEP_COLS] = {0};
    hpt_status st = HPT_OK;
    for (int c = 0; !st && c < NSTEP_COLS; c++)
        st = kept_steps_col(m, step_cols[c], &col[c]);
    if (!st) {
        for (int c = 0; c < NSTEP_COLS; c++)
            fprintf(f, "%s%s", c ? "," : "", step_cols[c]);
        fputc('\n', f);
        for (size_t i = 0; i < m->n; i++) {
            for (int c = 0; c < NSTEP_COLS; c++) {
                if (c)
                    fputc(',', f);
                if (c < NINT_COLS)
                    fprintf(f, "%lld", (long long)col[c][i]);
                else
                    put_num(f, col[c][i]);
            }
            fputc('\n', f);
        }
    }
    for (int c = 0; c < NSTEP_COLS; c++)
        free(col[c]);
    return st;
}

/* The names in /ranks, comma-separated, into buf (for the error message). */
static void rank_col_names(hid_t file, char *buf, size_t len)
{
    buf[0] = 0;
    hid_t g = H5Gopen2(file, "/ranks", H5P_DEFAULT);
    H5G_info_t info;
    if (g < 0 || H5Gget_info(g, &info) < 0)
        goto out;
    for (hsize_t i = 0; i < info.nlinks; i++) {
        char name[64];
        if (H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                               H5P_DEFAULT) < 0)
            continue;
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, "%s%s", used ? ", " : "", name);
    }
out:
    if (g >= 0)
        H5Gclose(g);
}

static hpt_status csv_ranks(const mfile *m, const char *col, FILE *f)
{
    char path[160];
    int known = strlen(col) < 100 && !strchr(col, '/') && col[0] && col[0] != '.';
    snprintf(path, sizeof path, "/ranks/%s", known ? col : "");
    hsize_t dims[2];
    if (!known || ds_extent(m->file, path, 2, dims) < 0) {
        char names[1024];
        rank_col_names(m->file, names, sizeof names);
        return hpt_error_set(HPT_ERR_USAGE, "--ranks %s: %s has no per-rank column '%s' (known: "
                             "%s)", col, m->path, col, names);
    }
    double *v = NULL, *step = NULL;
    hpt_status st = kept_ranks_col(m, col, &v);
    if (!st)
        st = kept_steps_col(m, "step", &step);
    if (!st) {
        fputs("step", f);
        for (size_t w = 0; w < m->nranks; w++)
            fprintf(f, ",rank_%zu", w);
        fputc('\n', f);
        for (size_t i = 0; i < m->n; i++) {
            fprintf(f, "%.0f", step[i]);
            for (size_t w = 0; w < m->nranks; w++) {
                fputc(',', f);
                put_num(f, v[i * m->nranks + w]);
            }
            fputc('\n', f);
        }
    }
    free(v);
    free(step);
    return st;
}

/* Does `path`, or a symbolic link on the way from it, name something
 * under /dev or /proc (/dev/stdout -> /proc/self/fd/1 -> the shell's
 * redirect file)? Such a name stands for an open file of this process:
 * replacing the file behind it would not reach the descriptor. */
static int via_dev_or_proc(const char *path)
{
    char cur[PATH_MAX], next[PATH_MAX];
    snprintf(cur, sizeof cur, "%s", path);
    for (int hop = 0; hop < 40; hop++) {
        if (!strncmp(cur, "/dev/", 5) || !strncmp(cur, "/proc/", 6))
            return 1;
        ssize_t n = readlink(cur, next, sizeof next - 1);
        if (n < 0)
            return 0; /* not a link (or gone): the chain ends here */
        next[n] = 0;
        if (next[0] == '/') {
            snprintf(cur, sizeof cur, "%s", next);
        } else { /* relative to the link's directory */
            char *slash = strrchr(cur, '/');
            char dir[PATH_MAX];
            snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - cur + 1) : 0, cur);
            if (snprintf(cur, sizeof cur, "%s%s", dir, next) >= (int)sizeof cur)
                return 0;
        }
    }
    return 0;
}

/* Where -o writes. A regular file (or a new name) is written as TARGET.tmp
 * and renamed over TARGET, so a failed export leaves no partial file; a
 * symbolic link to a regular file is followed (the link stays, its target
 * is replaced). Anything else that exists — a character device such as
 * /dev/null, a FIFO, a socket, a link to one, or a name under /dev or
 * /proc such as /dev/stdout even when it leads to a regular file — is
 * written directly: renaming over it would replace the device with a
 * regular file, or miss the open descriptor. target gets the path renamed to (empty: direct), tmp the
 * temporary name. Errors: HPT_ERR_IO naming -o OUT. */
static hpt_status csv_open_out(const char *outpath, char *target, char *tmp, size_t len,
                               FILE **f)
{
    struct stat sb;
    target[0] = tmp[0] = 0;
    if (stat(outpath, &sb) == 0 && S_ISDIR(sb.st_mode))
        return hpt_error_set(HPT_ERR_IO, "-o %s: is a directory", outpath);
    if (stat(outpath, &sb) == 0 && (!S_ISREG(sb.st_mode) || via_dev_or_proc(outpath))) {
        if (!(*f = fopen(outpath, "w")))
            return hpt_error_set(HPT_ERR_IO, "-o %s: cannot write: %s", outpath,
                                 strerror(errno));
        return HPT_OK;
    }
    char *real = stat(outpath, &sb) == 0 ? realpath(outpath, NULL) : NULL;
    int n = snprintf(target, len, "%s", real ? real : outpath);
    free(real);
    if (n < 0 || (size_t)n + 5 > len)
        return hpt_error_set(HPT_ERR_IO, "-o %s: path too long", outpath);
    snprintf(tmp, len, "%s.tmp", target);
    if (!(*f = fopen(tmp, "w")))
        return hpt_error_set(HPT_ERR_IO, "-o %s: cannot write %s: %s", outpath, tmp,
                             strerror(errno));
    return HPT_OK;
}

/* csv: to standard output, or to -o OUT (see csv_open_out). */
static hpt_status cmd_csv(const char *path, const char *ranks, const char *outpath, FILE *out)
{
    mfile m;
    hpt_status st = mfile_open(&m, path);
    char target[PATH_MAX + 8] = "", tmp[PATH_MAX + 8] = "";
    FILE *f = out;
    if (!st && outpath)
        st = csv_open_out(outpath, target, tmp, sizeof tmp, &f);
    if (!st)
        st = ranks ? csv_ranks(&m, ranks, f) : csv_steps(&m, f);
    if (f && f != out) {
        if (fclose(f) != 0 && !st)
            st = hpt_error_set(HPT_ERR_IO, "-o %s: write failed: %s", outpath, strerror(errno));
        if (!st && tmp[0] && rename(tmp, target) != 0)
            st = hpt_error_set(HPT_ERR_IO, "-o %s: cannot rename %s to it: %s", outpath, tmp,
                               strerror(errno));
        if (st && tmp[0])
            unlink(tmp);
    }
    mfile_close(&m);
    return st;
}

/* --------------------------------------------------------------- close */

static hpt_status cmd_close(const char *path, FILE *out)
{
    int cleared = 0;
    hpt_status st = hpt_metrics_h5_clear(path, stderr, &cleared);
    if (!st)
        fprintf(out, "%s: %s\n", path, cleared ? "cleared HDF5's open-for-write flag; plain "
                "readers (h5py.File(FILE, \"r\"), h5dump) open it now"
                : "not flagged open for write: nothing to clear");
    return st;
}

/* ----------------------------------------------------------------- CLI */

typedef struct {
    const char *cmd, *file, *ranks, *out;
    int help, version;
} cli;

static hpt_status parse_args(int argc, char **argv, cli *c)
{
    memset(c, 0, sizeof *c);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            c->help = 1;
        else if (!strcmp(a, "--version"))
            c->version = 1;
        else if (!strcmp(a, "--ranks") || !strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (i + 1 >= argc)
                return hpt_error_set(HPT_ERR_USAGE, "%s needs a value (see --help)", a);
            *(!strcmp(a, "--ranks") ? &c->ranks : &c->out) = argv[++i];
        } else if (!strncmp(a, "--ranks=", 8))
            c->ranks = a + 8;
        else if (a[0] == '-' && a[1])
            return hpt_error_set(HPT_ERR_USAGE, "unknown option '%s' (see --help)", a);
        else if (!c->cmd)
            c->cmd = a;
        else if (!c->file)
            c->file = a;
        else
            return hpt_error_set(HPT_ERR_USAGE, "unexpected argument '%s' (see --help)", a);
    }
    if (c->help || c->version)
        return HPT_OK;
    if (!c->cmd)
        return hpt_error_set(HPT_ERR_USAGE, "a command is required: summary or csv (see --help)");
    if (strcmp(c->cmd, "summary") && strcmp(c->cmd, "csv") && strcmp(c->cmd, "close"))
        return hpt_error_set(HPT_ERR_USAGE, "unknown command '%s' (summary, csv, close; see "
                             "--help)", c->cmd);
    if (!c->file)
        return hpt_error_set(HPT_ERR_USAGE, "%s needs a metrics FILE (see --help)", c->cmd);
    if (strcmp(c->cmd, "csv") && (c->ranks || c->out))
        return hpt_error_set(HPT_ERR_USAGE, "%s: only csv takes --ranks and -o", c->ranks
                             ? "--ranks" : "-o");
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
        fprintf(out, "hpt-metrics (hpt) %s; reads metrics format version %d\n", PACKAGE_VERSION,
                FORMAT_VERSION);
        return HPT_OK;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our messages, not HDF5's error stack */
    if (!strcmp(c.cmd, "summary"))
        return cmd_summary(c.file, out);
    if (!strcmp(c.cmd, "close"))
        return cmd_close(c.file, out);
    return cmd_csv(c.file, c.ranks, c.out, out);
}

int main(int argc, char **argv)
{
    int rank, code = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        hpt_status st = run(argc, argv, stdout);
        if (fflush(stdout) != 0 && !st)
            st = hpt_error_set(HPT_ERR_IO, "standard output: write failed");
        if (st)
            fprintf(stderr, "hpt-metrics: %s\n", hpt_error_msg());
        code = hpt_status_exit_code(st);
    }
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return code;
}
