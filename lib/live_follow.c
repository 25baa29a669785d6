/* live_follow.c — following one metrics file as a SWMR reader (live.h):
 * open, read what was appended since the last poll, keep each step once,
 * evaluate the alert rules, and tell the writer's state. */
#include "live.h"

#include "h5util.h"
#include "metrics_h5.h"
#include "metrics_read.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

const char *const hpt_live_col_json[HPT_LC_COUNT] = {
    "step", "time", "loss", "val_loss", "lr", "grad_norm", "clip", "tokens_per_s", "mfu",
    "step_time", "flops", "skipped", "segment", "tokens"};
const int hpt_live_col_src[HPT_LC_COUNT] = {
    HPT_SC_STEP, HPT_SC_WALL, HPT_SC_LOSS, HPT_SC_VAL, HPT_SC_LR, HPT_SC_NORM, HPT_SC_CLIP,
    HPT_SC_TOK_S, HPT_SC_MFU, HPT_SC_STEP_TIME, HPT_SC_FLOPS, HPT_SC_SKIPPED, HPT_SC_SEGMENT,
    HPT_SC_TOKENS};

const char *hpt_live_state_name(hpt_live_state s)
{
    static const char *const names[] = {"waiting", "live", "stopped", "finished", "error"};
    return names[s];
}

/* ------------------------------------------------------------ set up */

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* The run's name: the run directory's name for RUN_DIR/metrics.h5, else
 * the file's name. */
static void run_name(hpt_live_run *r)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", r->path);
    char *slash = strrchr(tmp, '/');
    const char *base = slash ? slash + 1 : tmp;
    if (!strcmp(base, "metrics.h5") && slash) {
        *slash = 0;
        while (slash > tmp && slash[-1] == '/')
            *--slash = 0;
        char *s2 = strrchr(tmp, '/');
        base = s2 ? s2 + 1 : tmp;
        if (!*base || !strcmp(base, "."))
            base = "metrics.h5";
    }
    snprintf(r->name, sizeof r->name, "%.255s", base);
}

void hpt_live_run_init(hpt_live_run *r, int id, const char *path, const hpt_alert_rule *rules,
                       int nrules)
{
    memset(r, 0, sizeof *r);
    r->id = id;
    struct stat sb;
    int dir = stat(path, &sb) == 0 ? S_ISDIR(sb.st_mode) : !ends_with(path, ".h5");
    snprintf(r->path, sizeof r->path, "%s%s", path, dir ? "/metrics.h5" : "");
    run_name(r);
    r->state = HPT_LIVE_WAITING;
    r->nrules = nrules <= 0 || !rules ? 0 : nrules < HPT_ALERT_MAX ? nrules : HPT_ALERT_MAX;
    if (r->nrules) /* memcpy from NULL is undefined even for 0 bytes */
        memcpy(r->rules, rules, sizeof *rules * (size_t)r->nrules);
    r->flops_per_token = r->peak_flops = NAN;
    r->seg_t = hpt_metrics_seg_type(-1);
    r->ev_t = hpt_metrics_event_type();
}

static void close_file(hpt_live_run *r)
{
    H5E_BEGIN_TRY
    {
        for (int c = 0; c < HPT_SC_COUNT; c++)
            if (r->sd[c] > 0)
                H5Dclose(r->sd[c]);
        for (int c = 0; c < HPT_RC_COUNT; c++)
            if (r->rd[c] > 0)
                H5Dclose(r->rd[c]);
        if (r->seg_ds > 0)
            H5Dclose(r->seg_ds);
        if (r->ev_ds > 0)
            H5Dclose(r->ev_ds);
        if (r->file > 0)
            H5Fclose(r->file);
    }
    H5E_END_TRY;
    memset(r->sd, 0, sizeof r->sd);
    memset(r->rd, 0, sizeof r->rd);
    r->seg_ds = r->ev_ds = r->file = 0;
}

uint64_t hpt_live_alert_key(const hpt_live_alert *a)
{
    uint64_t h = 1469598103934665603ull, bits;
    for (const char *p = a->rule; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    memcpy(&bits, &a->value, sizeof bits);
    uint64_t more[2] = {(uint64_t)a->step, bits};
    for (int i = 0; i < 2; i++)
        for (int b = 0; b < 8; b++)
            h = (h ^ ((more[i] >> (8 * b)) & 0xff)) * 1099511628211ull;
    return h;
}

int hpt_live_alert_fired(hpt_live_run *r, const hpt_live_alert *a)
{
    uint64_t k = hpt_live_alert_key(a);
    for (size_t i = 0; i < r->nfired; i++)
        if (r->fired[i] == k)
            return 1;
    if (r->nfired == r->capfired) {
        size_t cap = r->capfired ? 2 * r->capfired : 16;
        uint64_t *f = realloc(r->fired, cap * sizeof *f);
        if (!f)
            return -1;
        r->fired = f;
        r->capfired = cap;
    }
    r->fired[r->nfired++] = k;
    return 0;
}

void hpt_live_run_free(hpt_live_run *r)
{
    close_file(r);
    free(r->fired);
    for (int c = 0; c < HPT_LC_COUNT; c++)
        free(r->col[c]);
    free(r->row);
    free(r->ev);
    free(r->seg);
    free(r->alert);
    free(r->model_config);
    free(r->hpt_version);
    free(r->flop_formula);
    if (r->seg_t > 0)
        H5Tclose(r->seg_t);
    if (r->ev_t > 0)
        H5Tclose(r->ev_t);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------ opening */

static double num_attr(hid_t obj, const char *name)
{
    double v = NAN;
    if (H5Aexists(obj, name) > 0) {
        hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
        if (a < 0 || H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0)
            v = NAN;
        H5Aclose(a);
    }
    return v;
}

/* The format check of an open file: HPT_ERR_DATA naming the file. */
static hpt_status check_format(hid_t f, const char *path)
{
    char *fmt = H5Aexists(f, "format") > 0 ? hpt_h5_read_str_attr(f, "format") : NULL;
    hpt_status st = hpt_metrics_h5_check_format(path, fmt);
    free(fmt);
    if (st)
        return st;
    double ver = num_attr(f, "format_version");
    if (ver != HPT_METRICS_FORMAT_VERSION)
        return hpt_error_set(HPT_ERR_DATA, "%s: format_version %g, hpt-live reads version %d",
                             path, ver, HPT_METRICS_FORMAT_VERSION);
    return HPT_OK;
}

int hpt_live_not_metrics(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return 0;
    if (!S_ISREG(sb.st_mode)) { /* /dev/null, a fifo, a directory named x.h5 */
        hpt_error_set(HPT_ERR_DATA, "%s: not a regular file (a %s): not an hpt metrics file",
                      path, S_ISDIR(sb.st_mode) ? "directory" : S_ISCHR(sb.st_mode) ? "character device"
                      : S_ISFIFO(sb.st_mode) ? "fifo" : S_ISBLK(sb.st_mode) ? "block device"
                      : "special file");
        return 1;
    }
    if (sb.st_size == 0)
        return 0;
    if (!hpt_metrics_h5_looks_hdf5(path)) {
        hpt_error_set(HPT_ERR_DATA, "%s: not an HDF5 file (no HDF5 signature): not an hpt "
                      "metrics file", path);
        return 1;
    }
    hid_t fapl = hpt_metrics_h5_fapl(), f;
    H5E_BEGIN_TRY { f = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl); }
    H5E_END_TRY;
    H5Pclose(fapl);
    if (f < 0 || hpt_metrics_h5_probe(path) != HPT_OK) {
        if (f >= 0)
            H5Fclose(f);
        return 0; /* damaged or being written: the follower reports it */
    }
    hpt_status st;
    H5E_BEGIN_TRY { st = check_format(f, path); }
    H5E_END_TRY;
    H5Fclose(f);
    return st != HPT_OK;
}

/* Drop what was read from the file (it was replaced): back to nothing. */
static void reset_run(hpt_live_run *r)
{
    close_file(r);
    free(r->ev);
    free(r->seg);
    free(r->alert);
    r->ev = NULL;
    r->seg = NULL;
    r->alert = NULL;
    r->n = r->rows = r->nev = r->nseg = r->nalert = r->alerts_seen = r->nranks = 0;
    r->lock_seen = r->settling = 0;
    r->damage[0] = 0;
    r->last_growth = r->usual = 0;
    for (int k = 0; k < r->nrules; k++)
        r->rules[k].active = 0;
}

/* 1 when the open file is no longer the one `path` names. */
static int replaced(const hpt_live_run *r)
{
    struct stat sb;
    return r->file > 0 && (stat(r->path, &sb) != 0 || (unsigned long long)sb.st_dev != r->dev ||
                           (unsigned long long)sb.st_ino != r->ino);
}

/* What changed in the file since the last poll (its size, mtime and ctime
 * in ns; updates r->size, r->mtime_ns, r->ctime_ns): 0 nothing, else
 * STAMP_CHANGED, with STAMP_SHRUNK when it got shorter (HDF5 files only
 * grow, so something cut it: a truncation, a full disk's partial rewrite).
 * ctime catches a rewrite that kept the size and set the old mtime back. */
enum { STAMP_CHANGED = 1, STAMP_SHRUNK = 2 };

static int restat(hpt_live_run *r)
{
    struct stat sb;
    long long was = r->size, m = r->mtime_ns, c = r->ctime_ns;
    int ok = stat(r->path, &sb) == 0;
    r->size = ok ? (long long)sb.st_size : -1;
    r->mtime_ns = ok ? (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec : -1;
    r->ctime_ns = ok ? (long long)sb.st_ctim.tv_sec * 1000000000LL + sb.st_ctim.tv_nsec : -1;
    int f = r->size != was || r->mtime_ns != m || r->ctime_ns != c ? STAMP_CHANGED : 0;
    if (was >= 0 && r->size >= 0 && r->size < was)
        f |= STAMP_SHRUNK;
    return f;
}

static int lock_held_here(const char *path);

#define YOUNG_S 10 /* a short file this recent is being created, not damaged */

/* Open the file and every dataset; HPT_ERR_DATA with the message, or
 * HPT_REQUEUE when the file is not there or not yet readable (waiting).
 * A file shorter than the end its superblock records (HDF5 "truncated
 * file") is the writer creating it (HDF5 writes the superblock first) while
 * it was modified in the last YOUNG_S seconds or its writer's lock is held
 * on this host; damaged once it stays so. */
static hpt_status open_file(hpt_live_run *r)
{
    if (access(r->path, F_OK) != 0)
        return hpt_error_set(HPT_REQUEUE, "%s: no such file yet; waiting for it", r->path);
    if (access(r->path, R_OK) != 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: not readable (permission denied)", r->path);
    struct stat sb = {0};
    if (stat(r->path, &sb) == 0 && sb.st_size == 0)
        return hpt_error_set(HPT_REQUEUE, "%s: empty file (0 bytes); waiting for the writer",
                             r->path);
    r->dev = (unsigned long long)sb.st_dev;
    r->ino = (unsigned long long)sb.st_ino;
    /* attributes that crash HDF5 (metrics_h5.h): probed once per version of the file */
    long long stamp[3] = {(long long)sb.st_size,
                          (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec,
                          (long long)sb.st_ctim.tv_sec * 1000000000LL + sb.st_ctim.tv_nsec};
    if (memcmp(stamp, r->probed, sizeof stamp)) {
        memcpy(r->probed, stamp, sizeof stamp);
        r->probe_error[0] = 0;
        if (hpt_metrics_h5_probe(r->path))
            snprintf(r->probe_error, sizeof r->probe_error, "%s", hpt_error_msg());
    }
    if (r->probe_error[0])
        return hpt_error_set(HPT_ERR_DATA, "%s", r->probe_error);
    hid_t fapl = hpt_metrics_h5_fapl();
    r->file = H5Fopen(r->path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl);
    char cause[300];
    snprintf(cause, sizeof cause, "%s", r->file < 0 ? hpt_h5_cause_line() : "");
    H5Pclose(fapl); /* clears HDF5's error stack */
    if (r->file < 0) {
        r->file = 0;
        if (strstr(cause, "already open"))
            return hpt_error_set(HPT_REQUEUE, "%s: open for writing outside SWMR mode (a writer "
                                 "setting it up, or one killed then: `hpt-metrics close FILE` "
                                 "clears that); waiting", r->path);
        if (strstr(cause, "truncated file") &&
            (difftime(time(NULL), sb.st_mtime) < YOUNG_S || lock_held_here(r->path) == 1))
            return hpt_error_set(HPT_REQUEUE, "%s: being created (%lld bytes so far); waiting "
                                 "for the writer", r->path, (long long)sb.st_size);
        return hpt_error_set(HPT_ERR_DATA, "%s: not a readable HDF5 file, or damaged (HDF5: %s)",
                             r->path, cause);
    }
    hpt_status st = check_format(r->file, r->path);
    char p[96];
    for (int c = 0; !st && c < HPT_SC_COUNT; c++) {
        snprintf(p, sizeof p, "/steps/%s", hpt_metrics_step_cols[c].name);
        if ((r->sd[c] = H5Dopen2(r->file, p, H5P_DEFAULT)) < 0)
            st = HPT_ERR_DATA;
    }
    for (int c = 0; !st && c < HPT_RC_COUNT; c++) {
        snprintf(p, sizeof p, "/ranks/%s", hpt_metrics_rank_cols[c].name);
        if (c >= HPT_RC_V1_COUNT && H5Lexists(r->file, p, H5P_DEFAULT) == 0)
            r->rd[c] = 0; /* newer than the file (metrics_h5.h) */
        else if ((r->rd[c] = H5Dopen2(r->file, p, H5P_DEFAULT)) < 0)
            st = HPT_ERR_DATA;
    }
    if (!st && (r->seg_ds = H5Dopen2(r->file, "/segments", H5P_DEFAULT)) < 0)
        st = HPT_ERR_DATA, snprintf(p, sizeof p, "/segments");
    if (!st) { /* this file's /segments members decide what is read */
        hid_t ft = H5Dget_type(r->seg_ds), t = hpt_metrics_seg_type(ft >= 0 ? ft : H5T_NATIVE_INT);
        if (ft >= 0)
            H5Tclose(ft);
        if (r->seg_t > 0)
            H5Tclose(r->seg_t);
        r->seg_t = t;
    }
    if (!st && (r->ev_ds = H5Dopen2(r->file, "/events", H5P_DEFAULT)) < 0)
        st = HPT_ERR_DATA, snprintf(p, sizeof p, "/events");
    if (st && !strstr(hpt_error_msg(), r->path))
        hpt_error_set(HPT_ERR_DATA, "%s: dataset %s is missing or unreadable (damaged file; "
                      "HDF5: %s)", r->path, p, hpt_h5_cause_line());
    if (!st && !r->model_config) {
        r->model_config = H5Aexists(r->file, "model_config") > 0
                              ? hpt_h5_read_str_attr(r->file, "model_config") : NULL;
        r->hpt_version = H5Aexists(r->file, "hpt_version") > 0
                             ? hpt_h5_read_str_attr(r->file, "hpt_version") : NULL;
        r->flop_formula = H5Aexists(r->file, "flop_formula") > 0
                              ? hpt_h5_read_str_attr(r->file, "flop_formula") : NULL;
        r->flops_per_token = num_attr(r->file, "flops_per_token");
        r->peak_flops = num_attr(r->file, "peak_flops_per_rank");
    }
    return st;
}

/* ------------------------------------------------------------ reading */

static int grow(hpt_live_run *r, size_t need)
{
    if (need <= r->cap)
        return 0;
    size_t cap = r->cap ? r->cap : 1024;
    while (cap < need)
        cap *= 2;
    for (int c = 0; c < HPT_LC_COUNT; c++) {
        double *p = realloc(r->col[c], sizeof *p * cap);
        if (!p)
            return -1;
        r->col[c] = p;
    }
    size_t *q = realloc(r->row, sizeof *q * cap);
    if (!q)
        return -1;
    r->row = q;
    r->cap = cap;
    return 0;
}

/* Kept index of `step` (exact), or -1. */
static long find_step(const hpt_live_run *r, double step)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->col[HPT_LC_STEP][mid] < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->n && r->col[HPT_LC_STEP][lo] == step ? (long)lo : -(long)lo - 1;
}

/* Keep raw row `row` with values v (HPT_SC_*): the last row of a step wins. */
static void keep_row(hpt_live_run *r, size_t row, const double v[HPT_SC_COUNT])
{
    long at = r->n && v[HPT_SC_STEP] > r->col[HPT_LC_STEP][r->n - 1] ? -(long)r->n - 1
                                                                      : find_step(r, v[HPT_SC_STEP]);
    size_t i;
    if (at >= 0)
        i = (size_t)at;
    else {
        i = (size_t)(-at - 1);
        for (int c = 0; c < HPT_LC_COUNT; c++)
            memmove(r->col[c] + i + 1, r->col[c] + i, sizeof(double) * (r->n - i));
        memmove(r->row + i + 1, r->row + i, sizeof(size_t) * (r->n - i));
        r->n++;
    }
    for (int c = 0; c < HPT_LC_COUNT; c++)
        r->col[c][i] = v[hpt_live_col_src[c]];
    r->row[i] = row;
}

static void fire_alerts(hpt_live_run *r, const double v[HPT_SC_COUNT])
{
    for (int k = 0; k < r->nrules; k++) {
        double value;
        if (!hpt_alert_eval(&r->rules[k], v, &value))
            continue;
        hpt_live_alert *a = realloc(r->alert, sizeof *a * (r->nalert + 1));
        if (!a)
            return;
        r->alert = a;
        a += r->nalert++;
        memset(a, 0, sizeof *a);
        snprintf(a->rule, sizeof a->rule, "%s", r->rules[k].text);
        a->step = (int64_t)v[HPT_SC_STEP];
        a->value = value;
        a->time = v[HPT_SC_WALL];
    }
}

/* Rows appended since the last poll: every /steps column (the shortest
 * /steps and /ranks extent counts: a writer may be between datasets). */
static hpt_status read_rows(hpt_live_run *r, hpt_live_news *news)
{
    hsize_t rows = (hsize_t)-1, w = 0, ww = 0;
    for (int c = 0; c < HPT_SC_COUNT; c++) {
        hsize_t e;
        if (hpt_mread_follow_extent(r->sd[c], r->path, "/steps/", hpt_metrics_step_cols[c].name,
                                    &e, NULL))
            return HPT_ERR_DATA;
        rows = e < rows ? e : rows;
    }
    for (int c = 0; c < HPT_RC_COUNT; c++) {
        hsize_t e;
        if (r->rd[c] <= 0) /* a column newer than the file */
            continue;
        if (hpt_mread_follow_extent(r->rd[c], r->path, "/ranks/", hpt_metrics_rank_cols[c].name,
                                    &e, &ww))
            return HPT_ERR_DATA;
        rows = e < rows ? e : rows;
        w = c == 0 || ww < w ? ww : w;
    }
    r->nranks = (size_t)w;
    if (rows <= r->rows)
        return HPT_OK;
    size_t n = (size_t)(rows - r->rows);
    double *buf = malloc(sizeof *buf * n * HPT_SC_COUNT);
    if (!buf || grow(r, r->n + n) < 0) {
        free(buf);
        return hpt_error_set(HPT_ERR_INTERNAL, "%s: out of memory (%zu rows)", r->path, n);
    }
    for (int c = 0; c < HPT_SC_COUNT; c++)
        if (hpt_mread_follow_rows(r->sd[c], H5T_NATIVE_DOUBLE, r->rows, n, buf + (size_t)c * n,
                                  r->path, "/steps/", hpt_metrics_step_cols[c].name)) {
            free(buf);
            return HPT_ERR_DATA;
        }
    /* news->steps covers rows_from.. (a second attempt of a poll adds on) */
    int64_t *steps = NULL;
    size_t at = news && r->rows >= news->rows_from ? r->rows - news->rows_from : 0;
    if (news && (steps = realloc(news->steps, sizeof *steps * (at + n))) != NULL)
        news->steps = steps;
    else if (news) { /* out of memory: no rows record (the stream re-reads) */
        free(news->steps);
        news->steps = NULL;
    }
    for (size_t i = 0; i < n; i++) {
        double v[HPT_SC_COUNT];
        for (int c = 0; c < HPT_SC_COUNT; c++)
            v[c] = buf[(size_t)c * n + i];
        keep_row(r, r->rows + i, v);
        fire_alerts(r, v);
        if (steps)
            steps[at + i] = (int64_t)v[HPT_SC_STEP];
    }
    free(buf);
    r->rows = (size_t)rows;
    return HPT_OK;
}

static hpt_status read_new(hpt_live_run *r, hpt_live_news *news)
{
    hpt_status st;
    H5E_BEGIN_TRY
    {
        size_t seg0 = r->nseg;
        st = hpt_mread_follow_table(r->seg_ds, r->seg_t, sizeof(hpt_live_seg), r->path,
                                    "/segments", (void **)&r->seg, &r->nseg);
        /* fields the file does not record: -1 or NaN (null in the JSON) */
        int has_sp = hpt_metrics_seg_type_has(r->seg_t, "sequence_parallel");
        int has_rc = hpt_metrics_seg_type_has(r->seg_t, "recompute");
        int has_ps = hpt_metrics_seg_type_has(r->seg_t, "process_start");
        int has_ls = hpt_metrics_seg_type_has(r->seg_t, "load_seconds");
        int has_pb = hpt_metrics_seg_type_has(r->seg_t, "bubble_theory");
        for (size_t i = seg0; !st && i < r->nseg; i++) {
            if (!has_sp)
                r->seg[i].sequence_parallel = -1;
            if (!has_rc)
                r->seg[i].recompute = -1;
            if (!has_ps)
                r->seg[i].process_start = NAN;
            if (!has_ls)
                r->seg[i].load_seconds = NAN;
            if (!has_pb) {
                r->seg[i].pp_schedule = r->seg[i].pp_virtual = -1;
                r->seg[i].bubble_theory = NAN;
            }
        }
        if (!st)
            st = read_rows(r, news);
        if (!st)
            st = hpt_mread_follow_table(r->ev_ds, r->ev_t, sizeof(hpt_live_event), r->path,
                                        "/events", (void **)&r->ev, &r->nev);
    }
    H5E_END_TRY;
    return st;
}

/* ------------------------------------------------------------ goodput */

/* Rows [0, n) of rank 0's column of the 2-D dataset d into out. */
static hpt_status read_rank0(const hpt_live_run *r, hid_t d, const char *name, size_t n,
                             double *out)
{
    hsize_t start[2] = {0, 0}, count[2] = {n, 1};
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(2, count, NULL);
    herr_t e = fs < 0 ? -1 : H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    if (e >= 0 && n > 0)
        e = H5Dread(d, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, out);
    char cause[300];
    snprintf(cause, sizeof cause, "%s", e < 0 ? hpt_h5_cause_line() : "");
    H5Sclose(ms);
    if (fs >= 0)
        H5Sclose(fs);
    if (e < 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: cannot read dataset /ranks/%s (damaged file; "
                             "HDF5: %s)", r->path, name, cause);
    return HPT_OK;
}

static int rank_index(const char *name)
{
    for (int c = 0; c < HPT_RC_COUNT; c++)
        if (!strcmp(hpt_metrics_rank_cols[c].name, name))
            return c;
    return -1;
}

hpt_status hpt_live_goodput(const hpt_live_run *r, hpt_goodput *g)
{
    static const int sc[4] = {HPT_SC_STEP, HPT_SC_SEGMENT, HPT_SC_WALL, HPT_SC_STEP_TIME};
    static const char *const rc[2] = {"checkpoint", "validation"};
    memset(g, 0, sizeof *g);
    if (r->file <= 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: not open", r->path);
    size_t n = r->rows;
    double *v = malloc(sizeof *v * 6 * (n ? n : 1)), *col[6];
    if (!v)
        return hpt_error_set(HPT_ERR_INTERNAL, "%s: out of memory (goodput)", r->path);
    hpt_status st = HPT_OK;
    H5E_BEGIN_TRY
    {
        for (int c = 0; c < 6; c++)
            col[c] = v + (size_t)c * n;
        for (int c = 0; !st && c < 4; c++)
            st = hpt_mread_follow_rows(r->sd[sc[c]], H5T_NATIVE_DOUBLE, 0, n, col[c], r->path,
                                       "/steps/", hpt_metrics_step_cols[sc[c]].name);
        for (int k = 0; k < 2; k++) { /* a column newer than the file: NULL */
            int c = rank_index(rc[k]);
            if (c < 0 || r->rd[c] <= 0)
                col[4 + k] = NULL;
            else if (!st)
                st = read_rank0(r, r->rd[c], rc[k], n, col[4 + k]);
        }
    }
    H5E_END_TRY;
    if (!st) {
        hpt_goodput_in in = {.rows = n, .step = col[0], .segment = col[1], .wall_time = col[2],
                             .step_time = col[3], .checkpoint = col[4], .validation = col[5],
                             .seg = r->seg, .nseg = r->nseg, .ev = r->ev, .nev = r->nev};
        st = hpt_goodput_compute(&in, g);
    }
    free(v);
    return st;
}

/* ------------------------------------------------------------- state */

/* 1: an flock on PATH.lock is held by a process of this host (/proc/locks),
 * 0: not held here, -1: cannot tell (no lock file, no /proc/locks). A
 * reader never takes the lock itself: a writer starting at that moment
 * would be refused. */
static int lock_held_here(const char *path)
{
    char lp[4200], line[256], want[64];
    struct stat sb;
    snprintf(lp, sizeof lp, "%s.lock", path);
    if (stat(lp, &sb) != 0)
        return -1;
    FILE *f = fopen("/proc/locks", "r");
    if (!f)
        return -1;
    snprintf(want, sizeof want, " %02x:%02x:%lu ", major(sb.st_dev), minor(sb.st_dev),
             (unsigned long)sb.st_ino);
    int held = 0;
    while (!held && fgets(line, sizeof line, f))
        held = strstr(line, "FLOCK") && strstr(line, want);
    fclose(f);
    return held;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* First guess of the seconds between two flushes: 10 (the default
 * --metrics-interval) x the median step time of the last 20 steps. */
static double guess_interval(const hpt_live_run *r)
{
    double t[20];
    int k = 0;
    for (size_t i = r->n; i > 0 && k < 20; i--)
        if (isfinite(r->col[HPT_LC_STEP_TIME][i - 1]))
            t[k++] = r->col[HPT_LC_STEP_TIME][i - 1];
    if (!k)
        return 2;
    qsort(t, (size_t)k, sizeof *t, cmp_double);
    return 10 * t[k / 2];
}

/* The state of a readable file at time now. */
static hpt_live_state file_state(hpt_live_run *r, double now)
{
    /* a run_end after the last run_start: the writer closed the file */
    for (size_t i = r->nev; i > 0; i--) {
        const hpt_live_event *e = &r->ev[i - 1];
        if (!strcmp(e->kind, "run_start"))
            break;
        if (!strcmp(e->kind, "run_end"))
            return !strncmp(e->message, "done", 4) ? HPT_LIVE_FINISHED : HPT_LIVE_STOPPED;
    }
    int held = lock_held_here(r->path);
    if (held == 1) {
        r->lock_seen = 1;
        return HPT_LIVE_LIVE;
    }
    if (held == 0 && r->lock_seen)
        return HPT_LIVE_STOPPED; /* the writer on this host is gone */
    double last = r->last_growth;
    if (r->n && isfinite(r->col[HPT_LC_WALL][r->n - 1]) && r->col[HPT_LC_WALL][r->n - 1] > last)
        last = r->col[HPT_LC_WALL][r->n - 1];
    double usual = r->usual > 0 ? r->usual : guess_interval(r);
    double limit = 5 * usual > 10 ? 5 * usual : 10;
    return now - last > limit ? HPT_LIVE_STOPPED : HPT_LIVE_LIVE;
}

/* Drop what was read and read the file afresh at this poll (it changed in
 * place, or was cut): alerts already reported stay reported. */
static void reset_for_reread(hpt_live_run *r, hpt_live_news *news)
{
    size_t seen = r->alerts_seen;
    reset_run(r);
    r->reread_alerts = seen;
    if (news) {
        free(news->steps);
        news->steps = NULL;
        news->replaced = 1;
        news->rows_from = news->events_from = news->segs_from = news->alerts_from = 0;
    }
}

/* Open the file if needed and read what was appended; once more from a
 * fresh open when that fails (a writer re-opening the file: a resume). */
static hpt_status open_and_read(hpt_live_run *r, hpt_live_news *news)
{
    hpt_status st = HPT_OK;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (r->file <= 0) {
            H5E_BEGIN_TRY { st = open_file(r); }
            H5E_END_TRY;
            if (st) {
                close_file(r);
                break;
            }
            if (news)
                news->opened = 1;
        }
        st = read_new(r, news);
        if (!st)
            break;
        close_file(r);
    }
    return st;
}

int hpt_live_run_poll(hpt_live_run *r, double now, hpt_live_news *news)
{
    hpt_live_state old = r->state;
    char olderr[sizeof r->error];
    snprintf(olderr, sizeof olderr, "%s", r->error);
    size_t oldrows = r->rows;
    hpt_live_news local;
    if (!news)
        news = &local;
    memset(news, 0, sizeof *news);
    news->rows_from = r->rows;
    news->events_from = r->nev;
    news->segs_from = r->nseg;
    news->alerts_from = r->nalert;
    int stamp = restat(r), was_open = r->file > 0;
    if (replaced(r)) {
        reset_run(r);
        news->replaced = 1;
        news->rows_from = news->events_from = news->segs_from = news->alerts_from = 0;
    } else if (was_open && (stamp & STAMP_SHRUNK))
        reset_for_reread(r, news); /* never read through the stale handle as whole */
    if (news->replaced)
        oldrows = 0, r->settling = 0;
    size_t rows0 = r->rows, nev0 = r->nev, nseg0 = r->nseg;
    hpt_status st = open_and_read(r, news);
    int grew = r->rows > rows0 || r->nev > nev0 || r->nseg > nseg0;
    /* Changed in place without anything new (bytes overwritten, a copy
     * over it): once it has settled for a poll, read it afresh, which
     * finds damage in what was read before. A writer's flush that the
     * reader does not see yet settles with new rows, so is not re-read. */
    if (!st && was_open && !news->replaced) {
        if (grew)
            r->settling = 0;
        else if (stamp & STAMP_CHANGED)
            r->settling = 1;
        else if (r->settling) {
            r->settling = 0;
            reset_for_reread(r, news);
            oldrows = 0;
            st = open_and_read(r, news);
        }
    }
    news->rows_to = r->rows;
    if (st == HPT_REQUEUE) {
        r->state = HPT_LIVE_WAITING;
        snprintf(r->error, sizeof r->error, "%s", hpt_error_msg());
    } else if (st) {
        r->state = HPT_LIVE_ERROR;
        snprintf(r->error, sizeof r->error, "%s", hpt_error_msg());
    } else if (r->damage[0]) { /* found by a history read: until the file changes */
        r->state = HPT_LIVE_ERROR;
        snprintf(r->error, sizeof r->error, "%s", r->damage);
    } else {
        if (r->rows > oldrows && oldrows > 0) { /* the first read is history */
            if (r->last_growth > 0) {
                double gap = now - r->last_growth;
                r->usual = r->usual > 0 ? 0.7 * r->usual + 0.3 * gap : gap;
            }
            r->last_growth = now;
        }
        r->error[0] = 0;
        r->state = file_state(r, now);
    }
    if (r->reread_alerts) { /* a re-read finds the alerts it had: not new */
        r->alerts_seen = r->reread_alerts < r->nalert ? r->reread_alerts : r->nalert;
        news->alerts_from = r->alerts_seen;
        r->reread_alerts = 0;
    }
    if (news == &local)
        free(local.steps);
    int changed = r->state != old || strcmp(olderr, r->error);
    news->state_changed = changed;
    if (changed)
        r->said = 0;
    return changed;
}

int hpt_live_run_set_damage(hpt_live_run *r, const char *msg)
{
    snprintf(r->damage, sizeof r->damage, "%s", msg);
    int changed = r->state != HPT_LIVE_ERROR || strcmp(r->error, r->damage);
    r->state = HPT_LIVE_ERROR;
    snprintf(r->error, sizeof r->error, "%s", r->damage);
    if (changed)
        r->said = 0;
    return changed;
}
