/* metrics.c — the metrics file writer (metrics.h, docs/METRICS.md). */
#include "hpt_config.h"

#include "metrics.h"

#include "fsutil.h"
#include "h5util.h"
#include "metrics_h5.h"

#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define FORMAT_NAME "hpt-metrics"
#define FORMAT_VERSION 1
#define KIND_LEN 24
#define MSG_LEN 256
#define HIST 64 /* running-median window of the anomaly detectors */

/* ------------------------------------------------------------- columns */

typedef struct {
    const char *name, *units, *desc;
} column;

/* Global per-step columns (/steps/NAME, shape [rows]). The first four are
 * integers; the rest float64. */
enum {
    SC_STEP, SC_SEGMENT, SC_REPEATED, SC_SKIPPED, SC_WALL, SC_LOSS, SC_VAL, SC_LR, SC_NORM,
    SC_CLIP, SC_TOKENS, SC_STEP_TIME, SC_TOK_S, SC_FLOPS, SC_MFU, SC_G2, SC_S, SC_NOISE,
    SC_COUNT
};
static const column step_cols[SC_COUNT] = {
    {"step", "1", "optimizer step (1-based)"},
    {"segment", "1", "index into /segments of the run segment that wrote the row"},
    {"repeated", "1", "1: this step was already logged by an earlier segment (redone after a "
                      "resume); curves keep the last row of each step"},
    {"skipped", "1", "1: non-finite loss or gradient norm, no update"},
    {"wall_time", "s", "Unix time at the end of the step"},
    {"loss", "nats/token", "mean training loss over the tokens of the global batch"},
    {"val_loss", "nats/token", "validation loss after this step; NaN when not evaluated"},
    {"lr", "1", "learning rate of the step"},
    {"grad_norm", "1", "global gradient L2 norm before clipping"},
    {"clip_coef", "1", "factor the gradients were multiplied by (1 = not clipped)"},
    {"tokens", "tokens", "tokens in the global batch"},
    {"step_time", "s", "wall time of the step on world rank 0 (validation and checkpoint "
                       "excluded)"},
    {"tokens_per_s", "tokens/s", "tokens / step_time"},
    {"flops", "FLOP", "model FLOPs of the step (attribute flop_formula)"},
    {"mfu", "1", "model FLOP utilisation: flops / step_time / (world x peak_flops_per_rank)"},
    {"noise_g2", "1", "unbiased estimate of |G|^2 from per-DP-rank and global gradient norms "
                      "(McCandlish et al. 2018, appendix A.1); NaN when DP = 1"},
    {"noise_s", "tokens", "estimate of tr(Sigma) in the same units; NaN when DP = 1"},
    {"noise_scale", "tokens", "simple gradient noise scale B_noise = EMA(noise_s) / "
                              "EMA(noise_g2), EMA decay 0.9; NaN when DP = 1"},
};

/* Per-rank columns (/ranks/NAME, shape [rows, ranks], float64; NaN where a
 * rank did not exist in a row's segment). Order of metrics.h's HPT_MR_*. */
static const column rank_cols[HPT_MR_COUNT] = {
    {"step_time", "s", "wall time of forward, backward and optimizer on this rank"},
    {"forward", "s", "compute in the stage forwards (their TP communication excluded)"},
    {"backward", "s", "compute in the stage backwards (TP and DP communication excluded)"},
    {"optimizer", "s", "gradient norm, clipping and AdamW, communication excluded"},
    {"data", "s", "building micro-batches from the token shards"},
    {"pipeline_wait", "s", "blocked receiving activations or gradients from a neighbour stage"},
    {"checkpoint", "s", "saving the checkpoint written at the boundary before this step (rows "
                        "reach the file before a checkpoint commits, so its time is carried to "
                        "the next step)"},
    {"comm_tp", "s", "time in tensor-parallel communication calls"},
    {"comm_pp", "s", "time in pipeline-parallel communication calls (incl. pipeline_wait)"},
    {"comm_dp", "s", "time in data-parallel communication calls (all-reduce, reduce-scatter, "
                     "all-gather, waits)"},
    {"comm_mp", "s", "time in model-parallel (TP x PP) reductions of the gradient norm"},
    {"comm_embed", "s", "time in the tied-embedding all-reduce between first and last stage"},
    {"bytes_tp", "bytes", "payload bytes this rank handed to tensor-parallel calls"},
    {"bytes_pp", "bytes", "payload bytes sent to neighbour stages"},
    {"bytes_dp", "bytes", "payload bytes handed to data-parallel calls"},
    {"bytes_mp", "bytes", "payload bytes handed to model-parallel calls"},
    {"bytes_embed", "bytes", "payload bytes handed to the tied-embedding all-reduce"},
    {"tokens", "tokens", "tokens this rank processed in the step"},
    {"loss", "nats/token", "mean loss over this rank's tokens; NaN off the last stage"},
    {"grad_sumsq", "1", "sum of squares of this rank's gradient before the data-parallel "
                        "reduction (replicated tensors on TP rank 0 only)"},
    {"peak_rss", "bytes", "peak resident set size of the process so far"},
    {"device_mem", "bytes", "peak device memory; NaN on the CPU backend"},
    {"busy", "s", "step_time minus time in communication calls: the rank's own work"},
    {"nonfinite", "1", "1: this rank's own loss or pre-reduction gradient was non-finite"},
};

/* ----------------------------------------------------------- the state */

typedef struct {
    int32_t segment;
    int64_t first_row, first_step, resumed_from, last_step_before;
    int32_t world, tp, pp, dp, zero1, grad_accum, micro_batch, seq_len;
    double start_time, flops_per_token, peak_flops_per_rank;
    char hpt_version[32], slurm_job_id[32], host[64];
} seg_row;

typedef struct {
    int64_t step;
    double wall_time;
    int32_t rank;
    char kind[KIND_LEN];
    char message[MSG_LEN];
} event_row;

struct hpt_metrics {
    MPI_Comm comm;
    int rank, world, interval, n;
    hpt_metrics_step *steps; /* [interval]                                  */
    hpt_metrics_rank *recs;  /* [interval]                                  */
    double *all;             /* rank 0: [interval][world][HPT_MR_COUNT]      */
    /* rank 0 only */
    hid_t file, sd[SC_COUNT], rd[HPT_MR_COUNT], seg_ds, ev_ds, seg_t, ev_t;
    int broken;              /* a write failed: warned once, stop writing   */
    int damaged;             /* open found a damaged file: move it aside     */
    char path[4096];
    int64_t rows, rank_cols_n; /* rows in the file; extent of the rank axis  */
    int64_t prev_max_step;   /* largest step logged by earlier segments      */
    int32_t segment;
    hpt_metrics_info info;
    int *dp_rank;
    event_row *ev;
    int nev, cap_ev;
    double norm_hist[HIST], tps_hist[HIST];
    int nnorm, ntps;
    double ema_g2, ema_s, ema_w;
    double seconds;          /* wall time spent in this module               */
    int64_t recorded;        /* records made by this process                 */
    int lock_fd;             /* flock on PATH.lock: one writer per file      */
    double *slow_buf;        /* [HIST][world] busy times awaiting judgement  */
    int nslow;
    int64_t slow_first;      /* first step in slow_buf                        */
    char kinds[8][KIND_LEN]; /* anomaly lines printed per kind (rate limit)   */
    int printed[8];
};

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* ---------------------------------------------------------- HDF5 helpers */

static void set_str_attr(hid_t obj, const char *name, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, &value);
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
}

static void set_num_attr(hid_t obj, const char *name, hid_t type, const void *v)
{
    hid_t s = H5Screate(H5S_SCALAR), a = H5Acreate2(obj, name, type, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, type, v);
    H5Aclose(a);
    H5Sclose(s);
}

static hid_t step_type(int c)
{
    return c == SC_STEP ? H5T_NATIVE_INT64 : c == SC_SEGMENT ? H5T_NATIVE_INT32
         : c <= SC_SKIPPED ? H5T_NATIVE_INT8 : H5T_NATIVE_DOUBLE;
}

static hid_t make_ds(hid_t loc, const column *col, hid_t type, int rank2)
{
    hsize_t dims[2] = {0, 0}, maxd[2] = {H5S_UNLIMITED, H5S_UNLIMITED};
    hsize_t chunk[2] = {rank2 ? 64 : 1024, 16};
    hid_t sp = H5Screate_simple(rank2 ? 2 : 1, dims, maxd), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, rank2 ? 2 : 1, chunk);
    if (H5Tequal(type, H5T_NATIVE_DOUBLE) > 0) {
        double nan = NAN;
        H5Pset_fill_value(dcpl, H5T_NATIVE_DOUBLE, &nan);
    }
    hid_t d = H5Dcreate2(loc, col->name, type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d >= 0) {
        set_str_attr(d, "units", col->units);
        set_str_attr(d, "description", col->desc);
    }
    H5Pclose(dcpl);
    H5Sclose(sp);
    return d;
}

static void make_types(hpt_metrics *m)
{
    hid_t s32 = H5Tcopy(H5T_C_S1), s64 = H5Tcopy(H5T_C_S1), sk = H5Tcopy(H5T_C_S1),
          sm = H5Tcopy(H5T_C_S1);
    H5Tset_size(s32, 32);
    H5Tset_size(s64, 64);
    H5Tset_size(sk, KIND_LEN);
    H5Tset_size(sm, MSG_LEN);
    m->seg_t = H5Tcreate(H5T_COMPOUND, sizeof(seg_row));
#define F(name, t) H5Tinsert(m->seg_t, #name, HOFFSET(seg_row, name), t)
    F(segment, H5T_NATIVE_INT32); F(first_row, H5T_NATIVE_INT64); F(first_step, H5T_NATIVE_INT64);
    F(resumed_from, H5T_NATIVE_INT64); F(last_step_before, H5T_NATIVE_INT64);
    F(world, H5T_NATIVE_INT32); F(tp, H5T_NATIVE_INT32); F(pp, H5T_NATIVE_INT32);
    F(dp, H5T_NATIVE_INT32); F(zero1, H5T_NATIVE_INT32); F(grad_accum, H5T_NATIVE_INT32);
    F(micro_batch, H5T_NATIVE_INT32); F(seq_len, H5T_NATIVE_INT32);
    F(start_time, H5T_NATIVE_DOUBLE); F(flops_per_token, H5T_NATIVE_DOUBLE);
    F(peak_flops_per_rank, H5T_NATIVE_DOUBLE); F(hpt_version, s32); F(slurm_job_id, s32);
    F(host, s64);
#undef F
    m->ev_t = H5Tcreate(H5T_COMPOUND, sizeof(event_row));
    H5Tinsert(m->ev_t, "step", HOFFSET(event_row, step), H5T_NATIVE_INT64);
    H5Tinsert(m->ev_t, "wall_time", HOFFSET(event_row, wall_time), H5T_NATIVE_DOUBLE);
    H5Tinsert(m->ev_t, "rank", HOFFSET(event_row, rank), H5T_NATIVE_INT32);
    H5Tinsert(m->ev_t, "kind", HOFFSET(event_row, kind), sk);
    H5Tinsert(m->ev_t, "message", HOFFSET(event_row, message), sm);
    H5Tclose(s32);
    H5Tclose(s64);
    H5Tclose(sk);
    H5Tclose(sm);
}

static hid_t make_table(hid_t loc, const char *name, hid_t type, const char *desc)
{
    hsize_t dims = 0, maxd = H5S_UNLIMITED, chunk = 64;
    hid_t sp = H5Screate_simple(1, &dims, &maxd), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    hid_t d = H5Dcreate2(loc, name, type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d >= 0)
        set_str_attr(d, "description", desc);
    H5Pclose(dcpl);
    H5Sclose(sp);
    return d;
}

/* HDF5's innermost cause of the first failed write since the last
 * fail_reset() (rank 0 writes; one writer per process). */
static char fail_cause[256];

static void fail_reset(void)
{
    fail_cause[0] = 0;
}

/* Note the cause of a failed HDF5 call (call right after it); -1. */
static int fail_note(void)
{
    if (!fail_cause[0])
        snprintf(fail_cause, sizeof fail_cause, "%s", hpt_h5_cause());
    return -1;
}

/* Write n rows of `buf` (type t) at row `at` of a 1-D dataset, setting
 * its extent to at + n. */
static int write_1d_at(hid_t d, hid_t t, const void *buf, hsize_t at, hsize_t n)
{
    hsize_t cur = at, ext = at + n;
    hid_t sp;
    if (H5Dset_extent(d, &ext) < 0)
        return fail_note();
    sp = H5Dget_space(d);
    H5Sselect_hyperslab(sp, H5S_SELECT_SET, &cur, NULL, &n, NULL);
    hid_t ms = H5Screate_simple(1, &n, NULL);
    herr_t e = H5Dwrite(d, t, ms, sp, H5P_DEFAULT, buf);
    if (e < 0)
        fail_note();
    H5Sclose(ms);
    H5Sclose(sp);
    return e < 0 ? -1 : 0;
}

/* Rows along the first axis of dataset d. */
static hsize_t rows_of(hid_t d)
{
    hsize_t dims[2] = {0, 0};
    hid_t sp = H5Dget_space(d);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    return dims[0];
}

/* Append n rows along the first axis of a 1-D table. */
static int append_1d(hid_t d, hid_t t, const void *buf, hsize_t n)
{
    return write_1d_at(d, t, buf, rows_of(d), n);
}

static hpt_status io_error(hpt_metrics *m, const char *what)
{
    return hpt_error_set(HPT_ERR_IO, "metrics file %s: %s", m->path, what);
}

/* Create a new file with every dataset (rank 0). */
static hpt_status create_file(hpt_metrics *m, hid_t fapl)
{
    m->file = H5Fcreate(m->path, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
    if (m->file < 0)
        return hpt_error_set(HPT_ERR_IO, "metrics file %s: cannot create it (HDF5: %s)",
                             m->path, hpt_h5_cause());
    set_str_attr(m->file, "format", FORMAT_NAME);
    int v = FORMAT_VERSION;
    set_num_attr(m->file, "format_version", H5T_NATIVE_INT, &v);
    set_str_attr(m->file, "hpt_version", PACKAGE_VERSION);
    set_str_attr(m->file, "model_config", m->info.model_config ? m->info.model_config : "{}");
    set_str_attr(m->file, "flop_formula", m->info.flop_formula ? m->info.flop_formula : "");
    set_num_attr(m->file, "flops_per_token", H5T_NATIVE_DOUBLE, &m->info.flops_per_token);
    set_num_attr(m->file, "peak_flops_per_rank", H5T_NATIVE_DOUBLE,
                 &m->info.peak_flops_per_rank);
    hid_t gs = H5Gcreate2(m->file, "steps", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t gr = H5Gcreate2(m->file, "ranks", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    set_str_attr(gs, "description", "global values, one row per logged step, shape [rows]");
    set_str_attr(gr, "description", "per-rank values, shape [rows, world ranks]; row i is the "
                                    "step of /steps/step[i]");
    for (int c = 0; c < SC_COUNT; c++)
        m->sd[c] = make_ds(gs, &step_cols[c], step_type(c), 0);
    set_str_attr(m->sd[SC_MFU], "flop_formula", m->info.flop_formula ? m->info.flop_formula : "");
    set_num_attr(m->sd[SC_MFU], "peak_flops_per_rank", H5T_NATIVE_DOUBLE,
                 &m->info.peak_flops_per_rank);
    for (int c = 0; c < HPT_MR_COUNT; c++)
        m->rd[c] = make_ds(gr, &rank_cols[c], H5T_NATIVE_DOUBLE, 1);
    m->seg_ds = make_table(m->file, "segments", m->seg_t,
                           "one row per run segment (start or resume): layout, first row/step, "
                           "checkpoint resumed from");
    m->ev_ds = make_table(m->file, "events", m->ev_t,
                          "events: run_start, run_end, checkpoint_save, checkpoint_load, signal, "
                          "resume, layout_change, skipped_step, grad_norm_spike, "
                          "throughput_drop, slow_rank");
    H5Gclose(gs);
    H5Gclose(gr);
    for (int c = 0; c < SC_COUNT; c++)
        if (m->sd[c] < 0)
            return hpt_error_set(HPT_ERR_IO, "metrics file %s: cannot create the datasets "
                                 "(HDF5: %s)", m->path, hpt_h5_cause());
    for (int c = 0; c < HPT_MR_COUNT; c++)
        if (m->rd[c] < 0)
            return hpt_error_set(HPT_ERR_IO, "metrics file %s: cannot create the datasets "
                                 "(HDF5: %s)", m->path, hpt_h5_cause());
    if (m->seg_ds < 0 || m->ev_ds < 0)
        return hpt_error_set(HPT_ERR_IO, "metrics file %s: cannot create the datasets (HDF5: "
                             "%s)", m->path, hpt_h5_cause());
    m->rows = 0;
    m->rank_cols_n = 0;
    m->segment = 0;
    m->prev_max_step = 0;
    return HPT_OK;
}

/* A damaged hpt metrics file (a dataset missing, metadata that fails its
 * checksum): flagged so that open_root moves it aside. The message names
 * the part and HDF5's innermost cause; call right after the failing call. */
static hpt_status damaged(hpt_metrics *m, const char *what)
{
    m->damaged = 1;
    return hpt_error_set(HPT_ERR_IO, "metrics file %s: %s (HDF5: %s)", m->path, what,
                         hpt_h5_cause());
}

/* String attribute `name` of the root as a malloc'd string in *out (NULL
 * when absent). -1 when HDF5 cannot read the attribute (damaged). */
static int root_str_attr(hpt_metrics *m, const char *name, char **out)
{
    *out = NULL;
    htri_t ex = H5Aexists(m->file, name);
    if (ex <= 0)
        return ex < 0 ? -1 : 0;
    hid_t t = H5Tcopy(H5T_C_S1), a = H5Aopen(m->file, name, H5P_DEFAULT);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    int e = a < 0 || H5Aread(a, t, out) < 0 ? -1 : 0;
    if (e)
        *out = NULL;
    H5Aclose(a);
    H5Tclose(t);
    return e;
}

/* The root attributes: an hpt metrics file of this version and of this
 * run's model, or refused and left untouched. */
static hpt_status check_root(hpt_metrics *m)
{
    char *fmt = NULL;
    int ver = -1;
    if (root_str_attr(m, "format", &fmt) < 0)
        return damaged(m, "cannot read the root attribute format");
    int ok = fmt && !strcmp(fmt, FORMAT_NAME);
    free(fmt);
    if (!ok)
        return io_error(m, "exists but is not an hpt metrics file (attribute format != "
                           "\"hpt-metrics\"); left untouched");
    htri_t ex = H5Aexists(m->file, "format_version");
    if (ex > 0) {
        hid_t a = H5Aopen(m->file, "format_version", H5P_DEFAULT);
        ex = a < 0 || H5Aread(a, H5T_NATIVE_INT, &ver) < 0 ? -1 : 1;
        H5Aclose(a);
    }
    if (ex < 0)
        return damaged(m, "cannot read the root attribute format_version");
    if (ver != FORMAT_VERSION)
        return hpt_error_set(HPT_ERR_IO,
                             "metrics file %s: format_version %d, this hpt writes version %d; "
                             "left untouched (pass another --metrics path)",
                             m->path, ver, FORMAT_VERSION);
    char *cfg = NULL;
    if (!m->info.model_config)
        return HPT_OK;
    if (root_str_attr(m, "model_config", &cfg) < 0)
        return damaged(m, "cannot read the root attribute model_config");
    int same = !cfg || !strcmp(cfg, m->info.model_config);
    free(cfg);
    if (!same)
        return io_error(m, "holds the metrics of another model (its model_config differs "
                           "from this run's); left untouched: pass another --metrics path "
                           "or --run-dir");
    return HPT_OK;
}

/* Open every dataset of the layout; a missing one is damage. */
static hpt_status open_datasets(hpt_metrics *m)
{
    char p[64], what[160];
    for (int c = 0; c < SC_COUNT; c++) {
        snprintf(p, sizeof p, "steps/%s", step_cols[c].name);
        if ((m->sd[c] = H5Dopen2(m->file, p, H5P_DEFAULT)) < 0)
            break;
    }
    for (int c = 0; c < HPT_MR_COUNT && m->sd[SC_COUNT - 1] > 0; c++) {
        snprintf(p, sizeof p, "ranks/%s", rank_cols[c].name);
        if ((m->rd[c] = H5Dopen2(m->file, p, H5P_DEFAULT)) < 0)
            break;
    }
    if (m->sd[SC_COUNT - 1] <= 0 || m->rd[HPT_MR_COUNT - 1] <= 0) {
        snprintf(what, sizeof what, "dataset /%s is missing or unreadable", p);
        return damaged(m, what);
    }
    if ((m->seg_ds = H5Dopen2(m->file, "segments", H5P_DEFAULT)) < 0)
        return damaged(m, "dataset /segments is missing or unreadable");
    if ((m->ev_ds = H5Dopen2(m->file, "events", H5P_DEFAULT)) < 0)
        return damaged(m, "dataset /events is missing or unreadable");
    return HPT_OK;
}

/* Rows every column holds; a writer killed in the middle of an append may
 * leave some columns longer than others: the rest is cut before appending
 * (before SWMR writing, which cannot shrink). Then the largest step
 * logged so far. */
static hpt_status cut_to_complete_rows(hpt_metrics *m)
{
    hsize_t dims[2] = {0, 0}, minrows = rows_of(m->sd[0]);
    for (int c = 0; c < SC_COUNT; c++)
        minrows = rows_of(m->sd[c]) < minrows ? rows_of(m->sd[c]) : minrows;
    for (int c = 0; c < HPT_MR_COUNT; c++)
        minrows = rows_of(m->rd[c]) < minrows ? rows_of(m->rd[c]) : minrows;
    m->rows = (int64_t)minrows;
    for (int c = 0; c < SC_COUNT; c++)
        if (rows_of(m->sd[c]) != minrows && H5Dset_extent(m->sd[c], &minrows) < 0)
            return damaged(m, "cannot cut a partly written row");
    hid_t sp = H5Dget_space(m->rd[0]);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    m->rank_cols_n = (int64_t)dims[1];
    for (int c = 0; c < HPT_MR_COUNT; c++) {
        hsize_t ext[2] = {minrows, dims[1]};
        if (rows_of(m->rd[c]) != minrows && H5Dset_extent(m->rd[c], ext) < 0)
            return damaged(m, "cannot cut a partly written row");
    }
    m->segment = (int32_t)rows_of(m->seg_ds);
    m->prev_max_step = 0;
    if (m->rows == 0)
        return HPT_OK;
    int64_t *st = malloc(sizeof *st * (size_t)rows_of(m->sd[SC_STEP]));
    if (!st)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory (metrics)");
    if (H5Dread(m->sd[SC_STEP], H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, st) < 0) {
        free(st);
        return damaged(m, "cannot read dataset /steps/step");
    }
    for (int64_t i = 0; i < m->rows; i++)
        m->prev_max_step = st[i] > m->prev_max_step ? st[i] : m->prev_max_step;
    free(st);
    return HPT_OK;
}

static int is_damaged_hdf5(const char *path);

/* Open an existing metrics file for appending (rank 0). A file left open
 * by a killed writer carries HDF5's "open for write" flags; they are
 * cleared as h5clear -s does. Anything but an hpt metrics file of a known
 * version is refused and left untouched; a damaged one (HDF5's signature
 * but unopenable, empty, a dataset missing or unreadable) sets m->damaged. */
static hpt_status open_existing(hpt_metrics *m, hid_t fapl)
{
    bool clear = true;
    struct stat sb;
    if (stat(m->path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0) {
        m->damaged = 1; /* a writer killed while creating it */
        return hpt_error_set(HPT_ERR_IO, "metrics file %s: empty file (0 bytes)", m->path);
    }
    if (H5Pexist(fapl, "clear_status_flags") > 0)
        H5Pset(fapl, "clear_status_flags", &clear);
    m->file = H5Fopen(m->path, H5F_ACC_RDWR, fapl);
    if (m->file < 0 && is_damaged_hdf5(m->path))
        return damaged(m, "cannot be opened by HDF5");
    if (m->file < 0)
        return hpt_error_set(HPT_ERR_IO, "metrics file %s: exists but is not a readable HDF5 "
                             "file (HDF5: %s); left untouched: move it away or pass another "
                             "--metrics path", m->path, hpt_h5_cause());
    hpt_status st = check_root(m);
    if (!st)
        st = open_datasets(m);
    return st ? st : cut_to_complete_rows(m);
}

/* The path must be a regular file or not exist in a writable directory. */
static hpt_status check_path(hpt_metrics *m)
{
    return hpt_check_output_file("metrics file", m->path);
}

static void close_root(hpt_metrics *m);
static void start_segment(hpt_metrics *m, hid_t fapl);

/* Bytes free on the file system holding the metrics file. */
static double free_bytes(const hpt_metrics *m)
{
    char dir[4096];
    hpt_path_dir(m->path, dir, sizeof dir);
    struct statvfs v;
    if (statvfs(dir, &v) != 0)
        return INFINITY; /* unknown: let the write tell */
    return (double)v.f_bavail * (double)v.f_frsize;
}

/* Bytes an append of n rows may need: new chunks of every column (1024-row
 * chunks of /steps, 64 x 16 chunks of /ranks) plus metadata, doubled, plus
 * 1 MiB for closing the file cleanly. HDF5 must never meet ENOSPC: its
 * failed-flush path cannot be recovered from (the library then crashes
 * when MPI_Finalize closes it), so the writer stops before. */
static double bytes_needed(const hpt_metrics *m, int n)
{
    double cols = (m->world + 15) / 16, rows64 = n / 64 + 1, rows1k = n / 1024 + 1;
    double chunks = SC_COUNT * rows1k * 8192.0 + HPT_MR_COUNT * cols * rows64 * 8192.0;
    return 2 * (chunks + 65536.0 + (double)m->nev * sizeof(event_row)) + 1048576.0;
}

/* One writer per metrics file: an exclusive flock on PATH.lock, held until
 * the file is closed (HDF5's own locking is off, so that SWMR readers
 * holding the file do not stop a run from starting). */
static hpt_status take_lock(hpt_metrics *m)
{
    char lp[4200];
    snprintf(lp, sizeof lp, "%s.lock", m->path);
    m->lock_fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (m->lock_fd < 0)
        return hpt_error_set(HPT_ERR_IO, "metrics file %s: cannot create the lock file %s: %s",
                             m->path, lp, strerror(errno));
    if (flock(m->lock_fd, LOCK_EX | LOCK_NB) == 0)
        return HPT_OK;
    int err = errno;
    if (err == EWOULDBLOCK)
        return hpt_error_set(HPT_ERR_IO,
                             "metrics file %s is being written by another process (%s is "
                             "locked); one hpt-train per metrics file: pass another --metrics "
                             "path or --run-dir",
                             m->path, lp);
    close(m->lock_fd);
    m->lock_fd = -1;
    if (err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL) {
        /* NFS without lockd, Lustre without flock: no lock to take, not a
         * second writer. One warning; the run goes on unlocked. */
        fprintf(stderr, "hpt-train: warning: metrics file %s: its file system does not "
                "support file locks (flock on %s: %s); going on without the lock: make sure "
                "no other hpt-train writes this file\n", m->path, lp, strerror(err));
        return HPT_OK;
    }
    return hpt_error_set(HPT_ERR_IO, "metrics file %s: cannot lock %s: %s", m->path, lp,
                         strerror(err));
}

/* Move the metrics file aside to PATH.unreadable-TIME (never deleted);
 * the aside name in `aside`. 0 on success. */
static int move_aside(hpt_metrics *m, char *aside, size_t len)
{
    close_root(m);
    snprintf(aside, len, "%s.unreadable-%lld", m->path, (long long)time(NULL));
    return rename(m->path, aside);
}

/* Stop writing after a failure or before the disk fills: close the file
 * now, while there is room for its last metadata, and warn once. An HDF5
 * failure (`hdf5`: the cause) means a damaged file: it is moved aside. */
static void give_up(hpt_metrics *m, const char *why, const char *hdf5)
{
    char aside[4200] = "";
    if (m->broken)
        return;
    m->broken = 1;
    if (hdf5 && move_aside(m, aside, sizeof aside) == 0) {
        fprintf(stderr, "hpt-train: warning: metrics file %s: %s (HDF5: %s); damaged file moved "
                "to %s; no more metrics rows are written; training goes on\n", m->path, why,
                hdf5, aside);
        return;
    }
    fprintf(stderr,
            "hpt-train: warning: metrics file %s: %s%s%s%s; no more metrics rows are written (the "
            "%lld rows already flushed stay readable); training goes on\n",
            m->path, why, hdf5 ? " (HDF5: " : "", hdf5 ? hdf5 : "", hdf5 ? ")" : "",
            (long long)m->rows);
    close_root(m);
}

/* A file with HDF5's signature that HDF5 cannot open (a writer died while
 * creating it, a truncated copy), or an empty one: moved aside, never
 * deleted. */
static int is_damaged_hdf5(const char *path)
{
    unsigned char sig[8];
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0)
        return 1;
    FILE *f = fopen(path, "rb");
    int n = f ? (int)fread(sig, 1, 8, f) : 0;
    if (f)
        fclose(f);
    return n == 8 && !memcmp(sig, "\x89HDF\r\n\x1a\n", 8);
}

/* An existing file: opened for appending, or (damaged) moved aside so
 * that a new one is started. */
static hpt_status open_or_move_aside(hpt_metrics *m, hid_t fapl)
{
    hpt_status st;
    char aside[4200];
    H5E_BEGIN_TRY { st = open_existing(m, fapl); }
    H5E_END_TRY;
    if (!st || !m->damaged)
        return st;
    if (move_aside(m, aside, sizeof aside) != 0)
        return st;
    fprintf(stderr, "hpt-train: warning: %s; moved to %s, starting a new file\n",
            hpt_error_msg(), aside);
    m->damaged = 0;
    return HPT_OK;
}

/* Create a new file; on failure nothing is left behind (the path did not
 * exist: the file is created exclusively). */
static hpt_status create_or_clean(hpt_metrics *m, hid_t fapl)
{
    hpt_status st;
    H5E_BEGIN_TRY { st = create_file(m, fapl); }
    H5E_END_TRY;
    if (st) {
        int made = m->file > 0;
        close_root(m);
        if (made)
            unlink(m->path);
    }
    return st;
}

static hpt_status open_root(hpt_metrics *m)
{
    hid_t fapl = hpt_metrics_h5_fapl();
    hpt_status st = check_path(m);
    if (!st)
        st = take_lock(m);
    if (!st && access(m->path, F_OK) == 0)
        st = open_or_move_aside(m, fapl);
    if (!st && access(m->path, F_OK) != 0) {
        double need = bytes_needed(m, m->interval), have = free_bytes(m);
        if (have < need) { /* not an error: the run goes on without metrics */
            H5Pclose(fapl);
            m->broken = 1;
            fprintf(stderr, "hpt-train: warning: metrics file %s: %.0f KiB free on its file "
                    "system, %.0f KiB needed; training goes on without metrics\n", m->path,
                    have / 1024, need / 1024);
            return HPT_OK;
        }
        st = create_or_clean(m, fapl);
    }
    if (!st && !m->broken)
        start_segment(m, fapl);
    H5Pclose(fapl);
    return st;
}

/* This segment's row of /segments. */
static void fill_segment(const hpt_metrics *m, seg_row *s)
{
    memset(s, 0, sizeof *s);
    s->segment = m->segment;
    s->first_row = m->rows;
    s->first_step = m->info.first_step;
    s->resumed_from = m->info.resumed_from;
    s->last_step_before = m->prev_max_step;
    s->world = m->info.world;
    s->tp = m->info.tp;
    s->pp = m->info.pp;
    s->dp = m->info.dp;
    s->zero1 = m->info.zero1;
    s->grad_accum = m->info.grad_accum;
    s->micro_batch = m->info.micro_batch;
    s->seq_len = m->info.seq_len;
    s->start_time = wall_now();
    s->flops_per_token = m->info.flops_per_token;
    s->peak_flops_per_rank = m->info.peak_flops_per_rank;
    snprintf(s->hpt_version, sizeof s->hpt_version, "%s", PACKAGE_VERSION);
    const char *job = getenv("SLURM_JOB_ID");
    snprintf(s->slurm_job_id, sizeof s->slurm_job_id, "%s", job ? job : "");
    gethostname(s->host, sizeof s->host - 1);
}

/* Append this segment's row, then reopen the file for SWMR writing with
 * `fapl` (not H5Fstart_swmr_write: HDF5 1.10 sets its own 100 metadata
 * read attempts there, ignoring the fapl's bound — one flipped bit then
 * hangs the writer; metrics_h5.h). A failure means a damaged file: moved
 * aside, the run goes on without metrics. */
static void start_segment(hpt_metrics *m, hid_t fapl)
{
    seg_row s;
    fill_segment(m, &s);
    herr_t e;
    hpt_status st = HPT_OK;
    fail_reset();
    H5E_BEGIN_TRY
    {
        e = append_1d(m->seg_ds, m->seg_t, &s, 1);
        if (e >= 0) {
            close_root(m);
            if ((m->file = H5Fopen(m->path, H5F_ACC_RDWR | H5F_ACC_SWMR_WRITE, fapl)) < 0)
                e = fail_note();
            else if ((st = open_datasets(m)) != HPT_OK)
                e = fail_note();
        }
    }
    H5E_END_TRY;
    if (e < 0)
        give_up(m, "cannot append the segment or reopen the file for SWMR writing",
                st ? hpt_error_msg() : fail_cause[0] ? fail_cause : "HDF5 error");
}

static void close_root(hpt_metrics *m)
{
    if (m->file <= 0)
        return;
    H5E_BEGIN_TRY
    {
        for (int c = 0; c < SC_COUNT; c++)
            if (m->sd[c] > 0)
                H5Dclose(m->sd[c]);
        for (int c = 0; c < HPT_MR_COUNT; c++)
            if (m->rd[c] > 0)
                H5Dclose(m->rd[c]);
        if (m->seg_ds > 0)
            H5Dclose(m->seg_ds);
        if (m->ev_ds > 0)
            H5Dclose(m->ev_ds);
        H5Fclose(m->file);
    }
    H5E_END_TRY;
    m->file = 0;
    memset(m->sd, 0, sizeof m->sd);
    memset(m->rd, 0, sizeof m->rd);
    m->seg_ds = m->ev_ds = 0;
}

static void free_m(hpt_metrics *m)
{
    if (!m)
        return;
    close_root(m);
    if (m->seg_t > 0)
        H5Tclose(m->seg_t);
    if (m->ev_t > 0)
        H5Tclose(m->ev_t);
    free(m->steps);
    free(m->recs);
    free(m->all);
    free(m->dp_rank);
    free(m->ev);
    free(m->slow_buf);
    if (m->lock_fd >= 0)
        close(m->lock_fd); /* releases the flock */
    free(m);
}

hpt_status hpt_metrics_open(hpt_metrics **out, MPI_Comm comm, const char *path, int interval,
                            const hpt_metrics_info *info)
{
    *out = NULL;
    hpt_metrics *m = calloc(1, sizeof *m);
    hpt_status st = HPT_OK;
    if (!m)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory (metrics)");
    m->comm = comm;
    m->lock_fd = -1;
    MPI_Comm_rank(comm, &m->rank);
    MPI_Comm_size(comm, &m->world);
    m->interval = interval < 1 ? 1 : interval;
    m->info = *info;
    m->steps = calloc((size_t)m->interval, sizeof *m->steps);
    m->recs = calloc((size_t)m->interval, sizeof *m->recs);
    if (!m->steps || !m->recs)
        st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory (metrics)");
    if (!st && m->rank == 0) {
        snprintf(m->path, sizeof m->path, "%s", path);
        m->all = malloc(sizeof(double) * (size_t)m->interval * m->world * HPT_MR_COUNT);
        m->dp_rank = malloc(sizeof(int) * (size_t)m->world);
        if (!m->all || !m->dp_rank)
            st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory (metrics)");
        else {
            memcpy(m->dp_rank, info->dp_rank, sizeof(int) * (size_t)m->world);
            m->info.dp_rank = m->dp_rank;
            make_types(m);
            st = open_root(m);
        }
    }
    /* one verdict: rank 0's */
    int code = st, len = 0;
    char msg[1024] = "";
    if (m->rank == 0 && st)
        len = snprintf(msg, sizeof msg, "%s", hpt_error_msg());
    MPI_Bcast(&code, 1, MPI_INT, 0, comm);
    MPI_Bcast(&len, 1, MPI_INT, 0, comm);
    if (code) {
        MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, 0, comm);
        free_m(m);
        return hpt_error_set((hpt_status)code, "%s", msg);
    }
    *out = m;
    return HPT_OK;
}

void hpt_metrics_record(hpt_metrics *m, const hpt_metrics_step *s, const hpt_metrics_rank *r)
{
    if (!m || m->n >= m->interval)
        return;
    double t0 = MPI_Wtime();
    m->steps[m->n] = *s;
    m->recs[m->n] = *r;
    m->n++;
    m->recorded++;
    m->seconds += MPI_Wtime() - t0;
}

int hpt_metrics_due(const hpt_metrics *m)
{
    return m && m->n >= m->interval;
}

static void vevent(hpt_metrics *m, int64_t step, int rank, const char *kind, const char *fmt,
                   va_list ap)
{
    if (m->nev == m->cap_ev) {
        int cap = m->cap_ev ? 2 * m->cap_ev : 16;
        event_row *p = realloc(m->ev, sizeof *p * (size_t)cap);
        if (!p)
            return;
        m->ev = p;
        m->cap_ev = cap;
    }
    event_row *e = &m->ev[m->nev++];
    memset(e, 0, sizeof *e);
    e->step = step;
    e->wall_time = wall_now();
    e->rank = rank;
    snprintf(e->kind, sizeof e->kind, "%s", kind);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
}

void hpt_metrics_event(hpt_metrics *m, int64_t step, int rank, const char *kind, const char *fmt,
                       ...)
{
    if (!m || m->rank != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vevent(m, step, rank, kind, fmt, ap);
    va_end(ap);
}

/* Anomaly: record an event and print one line to the job log. */
static void anomaly(hpt_metrics *m, FILE *log, int64_t step, int rank, const char *kind,
                    const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void anomaly(hpt_metrics *m, FILE *log, int64_t step, int rank, const char *kind,
                    const char *fmt, ...)
{
    va_list ap;
    int before = m->nev;
    va_start(ap, fmt);
    vevent(m, step, rank, kind, fmt, ap);
    va_end(ap);
    if (m->nev == before)
        return; /* out of memory: not recorded */
    /* the closing flush judges the last steps after run_end was queued:
     * run_end stays the last event */
    int at = m->nev - 1; /* this event's index */
    if (at >= 1 && !strcmp(m->ev[at - 1].kind, "run_end")) {
        event_row t = m->ev[at - 1];
        m->ev[at - 1] = m->ev[at];
        m->ev[at--] = t;
    }
    int k = 0; /* at most 5 lines per kind in the job log; all in the file */
    while (k < 7 && m->kinds[k][0] && strcmp(m->kinds[k], kind))
        k++;
    snprintf(m->kinds[k], KIND_LEN, "%s", kind);
    if (log && ++m->printed[k] <= 5) {
        fprintf(log, "hpt-train: anomaly at step %lld: %s: %s%s\n", (long long)step, kind,
                m->ev[at].message,
                m->printed[k] == 5 ? " (further ones only in the metrics file)" : "");
        fflush(log);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n, double *scratch)
{
    memmove(scratch, v, sizeof *v * (size_t)n);
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_double);
    return n % 2 ? scratch[n / 2] : 0.5 * (scratch[n / 2 - 1] + scratch[n / 2]);
}

static void push(double *hist, int *n, double v)
{
    if (*n < HIST)
        hist[(*n)++] = v;
    else {
        memmove(hist, hist + 1, sizeof *hist * (HIST - 1));
        hist[HIST - 1] = v;
    }
}

/* Gathered value c of step record i from world rank w, with n records per
 * rank (MPI_Gather lays them out rank by rank). */
#define AT(m, n, i, w, c) ((m)->all[(((size_t)(w) * (n) + (i)) * HPT_MR_COUNT) + (c)])

/* Derived values and anomaly detection over the gathered rows (rank 0).
 * cols[c][i] are the /steps columns of row i. */
static void derive(hpt_metrics *m, FILE *log, int n, double *cols[SC_COUNT])
{
    int W = m->world, D = m->info.dp;
    double scratch[HIST], *sums = calloc((size_t)D, sizeof *sums);
    double *busy = malloc(sizeof *busy * (size_t)W);
    if (!sums || !busy) {
        free(sums);
        free(busy);
        return;
    }
    for (int i = 0; i < n; i++) {
        const hpt_metrics_step *s = &m->steps[i];

        cols[SC_G2][i] = cols[SC_S][i] = cols[SC_NOISE][i] = NAN;
        if (D > 1 && !s->skipped) {
            /* McCandlish et al. 2018, appendix A.1: |G_small|^2 from each DP
             * replica's gradient (the ranks' pre-reduction gradients are
             * scaled by 1/global tokens, so a replica's mean gradient is D
             * times their sum), |G_big|^2 from the global norm. */
            memset(sums, 0, sizeof *sums * (size_t)D);
            for (int w = 0; w < W; w++)
                sums[m->dp_rank[w]] += AT(m, n, i, w, HPT_MR_GRAD_SUMSQ);
            double gs2 = 0;
            for (int d = 0; d < D; d++)
                gs2 += sums[d] * (double)D * D;
            gs2 /= D;
            double gb2 = s->grad_norm * s->grad_norm, bb = s->tokens, bs = s->tokens / D;
            double g2 = (bb * gb2 - bs * gs2) / (bb - bs);
            double S = (gs2 - gb2) / (1.0 / bs - 1.0 / bb);
            cols[SC_G2][i] = g2;
            cols[SC_S][i] = S;
            if (isfinite(g2) && isfinite(S)) {
                m->ema_g2 = 0.9 * m->ema_g2 + 0.1 * g2;
                m->ema_s = 0.9 * m->ema_s + 0.1 * S;
                m->ema_w = 0.9 * m->ema_w + 0.1;
            }
            if (m->ema_w > 0 && m->ema_g2 > 0)
                cols[SC_NOISE][i] = m->ema_s / m->ema_g2;
        }
        /* gradient-norm spike and throughput drop against running medians */
        if (!s->skipped && isfinite(s->grad_norm)) {
            if (m->nnorm >= 10) {
                double med = median(m->norm_hist, m->nnorm, scratch);
                if (s->grad_norm > m->info.spike_factor * med)
                    anomaly(m, log, s->step, 0, "grad_norm_spike",
                            "gradient norm %.4g is %.1fx the running median %.4g", s->grad_norm,
                            s->grad_norm / med, med);
            }
            push(m->norm_hist, &m->nnorm, s->grad_norm);
        }
        double tps = cols[SC_TOK_S][i];
        if (isfinite(tps) && tps > 0) {
            if (m->ntps >= 10) {
                double med = median(m->tps_hist, m->ntps, scratch);
                if (tps < 0.5 * med)
                    anomaly(m, log, s->step, 0, "throughput_drop",
                            "%.0f tokens/s is %.0f%% of the running median %.0f", tps,
                            100 * tps / med, med);
            }
            push(m->tps_hist, &m->ntps, tps);
        }
    }
    /* slow ranks over windows of >= 3 steps (kept across flushes when the
     * interval is shorter): each rank's median busy time against the
     * median of the other ranks' (robust to one noisy step) */
    if (!m->slow_buf)
        m->slow_buf = malloc(sizeof(double) * HIST * (size_t)W);
    double *col = malloc(sizeof *col * (size_t)(HIST > W ? HIST : W));
    for (int i = 0; W > 1 && m->slow_buf && col && i < n; i++) {
        if (m->nslow == 0)
            m->slow_first = m->steps[i].step;
        for (int w = 0; w < W; w++)
            m->slow_buf[(size_t)m->nslow * W + w] = AT(m, n, i, w, HPT_MR_BUSY);
        m->nslow++;
        int end = i == n - 1;
        if (m->nslow < HIST && !(end && m->nslow >= 3))
            continue;
        int k = m->nslow;
        for (int w = 0; w < W; w++) {
            for (int j = 0; j < k; j++)
                col[j] = m->slow_buf[(size_t)j * W + w];
            busy[w] = median(col, k, col);
        }
        for (int w = 0; w < W; w++) {
            int q = 0;
            for (int x = 0; x < W; x++)
                if (x != w)
                    col[q++] = busy[x];
            double med = median(col, q, col);
            if (busy[w] > m->info.slow_factor * med && busy[w] - med > 0.02)
                anomaly(m, log, m->steps[i].step, w, "slow_rank",
                        "rank %d computes %.3f s/step, %.1fx the median %.3f s of the other "
                        "ranks (steps %lld-%lld)",
                        w, busy[w], med > 0 ? busy[w] / med : INFINITY, med,
                        (long long)m->slow_first, (long long)m->steps[i].step);
        }
        m->nslow = 0;
    }
    free(col);
    free(sums);
    free(busy);
}

/* Append the pending events only (rank 0). */
static int write_rows_n0(hpt_metrics *m)
{
    int e;
    H5E_BEGIN_TRY
    {
        e = append_1d(m->ev_ds, m->ev_t, m->ev, (hsize_t)m->nev);
        if (!e && H5Fflush(m->file, H5F_SCOPE_GLOBAL) < 0)
            e = fail_note();
    }
    H5E_END_TRY;
    if (!e)
        m->nev = 0;
    return e;
}

/* Append n gathered rows and the pending events to the file (rank 0). */
static int write_rows(hpt_metrics *m, FILE *log)
{
    int n = m->n, W = m->world;
    double *cols[SC_COUNT];
    int64_t *step = malloc(sizeof *step * (size_t)n);
    int32_t *seg = malloc(sizeof *seg * (size_t)n);
    int8_t *rep = malloc((size_t)n), *skp = malloc((size_t)n);
    double *buf = malloc(sizeof *buf * (size_t)n * (SC_COUNT + (size_t)W));
    int e = -1;
    if (n == 0) { /* events only */
        e = write_rows_n0(m);
        goto out;
    }
    if (!step || !seg || !rep || !skp || !buf)
        goto out;
    for (int c = 0; c < SC_COUNT; c++)
        cols[c] = buf + (size_t)c * n;
    double peak = m->info.peak_flops_per_rank * W;
    for (int i = 0; i < n; i++) {
        const hpt_metrics_step *s = &m->steps[i];
        step[i] = s->step;
        seg[i] = m->segment;
        rep[i] = s->step <= m->prev_max_step;
        skp[i] = (int8_t)s->skipped;
        cols[SC_WALL][i] = s->wall_time;
        cols[SC_LOSS][i] = s->loss;
        cols[SC_VAL][i] = s->val_loss;
        cols[SC_LR][i] = s->lr;
        cols[SC_NORM][i] = s->grad_norm;
        cols[SC_CLIP][i] = s->clip_coef;
        cols[SC_TOKENS][i] = s->tokens;
        cols[SC_STEP_TIME][i] = s->step_time;
        cols[SC_TOK_S][i] = s->step_time > 0 ? s->tokens / s->step_time : NAN;
        cols[SC_FLOPS][i] = s->tokens * m->info.flops_per_token;
        cols[SC_MFU][i] = s->step_time > 0 && peak > 0 ? cols[SC_FLOPS][i] / s->step_time / peak
                                                       : NAN;
    }
    derive(m, log, n, cols);
    H5E_BEGIN_TRY
    {
        e = 0;
        hsize_t at = (hsize_t)m->rows, nn = (hsize_t)n;
        e |= write_1d_at(m->sd[SC_STEP], H5T_NATIVE_INT64, step, at, nn);
        e |= write_1d_at(m->sd[SC_SEGMENT], H5T_NATIVE_INT32, seg, at, nn);
        e |= write_1d_at(m->sd[SC_REPEATED], H5T_NATIVE_INT8, rep, at, nn);
        e |= write_1d_at(m->sd[SC_SKIPPED], H5T_NATIVE_INT8, skp, at, nn);
        for (int c = SC_WALL; c < SC_COUNT; c++)
            e |= write_1d_at(m->sd[c], H5T_NATIVE_DOUBLE, cols[c], at, nn);
        /* per-rank [rows, ranks]: widen the rank axis if this segment has
         * more ranks than any before */
        hsize_t ncol = (hsize_t)(W > m->rank_cols_n ? W : m->rank_cols_n);
        hsize_t ext[2] = {(hsize_t)(m->rows + n), ncol};
        hsize_t start[2] = {(hsize_t)m->rows, 0}, count[2] = {(hsize_t)n, (hsize_t)W};
        hid_t ms = H5Screate_simple(2, count, NULL);
        for (int c = 0; c < HPT_MR_COUNT && !e; c++) {
            double *v = buf; /* reuse: [n][W] */
            for (int i = 0; i < n; i++)
                for (int w = 0; w < W; w++)
                    v[(size_t)i * W + w] = AT(m, n, i, w, c);
            if (H5Dset_extent(m->rd[c], ext) < 0) {
                e = fail_note();
                break;
            }
            hid_t fs = H5Dget_space(m->rd[c]);
            H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
            if (H5Dwrite(m->rd[c], H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, v) < 0)
                e = fail_note();
            H5Sclose(fs);
        }
        H5Sclose(ms);
        if (!e && m->nev > 0)
            e |= append_1d(m->ev_ds, m->ev_t, m->ev, (hsize_t)m->nev);
        if (!e && H5Fflush(m->file, H5F_SCOPE_GLOBAL) < 0)
            e = fail_note();
        if (!e) {
            m->rows += n;
            m->rank_cols_n = (int64_t)ncol;
            m->nev = 0;
        }
    }
    H5E_END_TRY;
out:
    free(step);
    free(seg);
    free(rep);
    free(skp);
    free(buf);
    return e;
}

hpt_status hpt_metrics_flush(hpt_metrics *m, FILE *log)
{
    if (!m)
        return HPT_OK;
    int n = m->n;
    double t0 = MPI_Wtime();
    /* n is the same on every rank: records are made once per step */
    MPI_Gather(m->recs, n * HPT_MR_COUNT, MPI_DOUBLE, m->all, n * HPT_MR_COUNT, MPI_DOUBLE, 0,
               m->comm);
    if (m->rank == 0 && !m->broken && (n > 0 || m->nev > 0)) {
        double need = bytes_needed(m, n), have = free_bytes(m);
        char why[256];
        if (have < need) {
            snprintf(why, sizeof why, "%.0f KiB free on its file system, %.0f KiB needed",
                     have / 1024, need / 1024);
            give_up(m, why, NULL);
        } else {
            fail_reset();
            if (write_rows(m, log) < 0)
                give_up(m, "an HDF5 write or flush failed", fail_cause[0] ? fail_cause
                                                                          : "HDF5 error");
        }
    }
    m->n = 0;
    m->seconds += MPI_Wtime() - t0;
    return HPT_OK;
}

void hpt_metrics_write_events(hpt_metrics *m)
{
    if (!m || m->rank != 0 || m->broken || m->nev == 0)
        return;
    double t0 = MPI_Wtime();
    if (free_bytes(m) < bytes_needed(m, 0))
        give_up(m, "the disk is nearly full", NULL);
    else {
        fail_reset();
        if (write_rows_n0(m) < 0)
            give_up(m, "an HDF5 write or flush failed", fail_cause[0] ? fail_cause
                                                                      : "HDF5 error");
    }
    m->seconds += MPI_Wtime() - t0;
}

void hpt_metrics_close(hpt_metrics *m, int collective, FILE *log)
{
    if (!m)
        return;
    if (collective)
        hpt_metrics_flush(m, log);
    if (m->rank == 0 && log && m->recorded > 0)
        fprintf(log, "metrics: %lld rows in %s; %.1f ms in the metrics code on rank 0 (%.3f ms "
                "per step)%s\n", (long long)m->rows, m->path, 1e3 * m->seconds,
                1e3 * m->seconds / (double)m->recorded, m->broken ? "; stopped writing early (see the warning above)" : "");
    free_m(m);
}
