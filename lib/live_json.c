/* live_json.c — the JSON of hpt-live's API (docs/LIVE.md): the runs list,
 * the history with server-side downsampling that keeps extremes, and the
 * Server-Sent Events records of what a poll found (live.h). */
#include "live.h"

#include "h5util.h"
#include "metrics_h5.h"
#include "plan.h"

#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ buffers */

static int reserve(hpt_sbuf *b, size_t more)
{
    if (b->oom)
        return -1;
    if (b->n + more + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + more + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void hpt_sbuf_put(hpt_sbuf *b, const char *s, size_t n)
{
    if (reserve(b, n) < 0)
        return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void hpt_sbuf_printf(hpt_sbuf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        hpt_sbuf_put(b, small, (size_t)n);
        return;
    }
    if (reserve(b, (size_t)n) < 0)
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

void hpt_sbuf_json_str(hpt_sbuf *b, const char *s)
{
    hpt_sbuf_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            hpt_sbuf_printf(b, "\\%c", *p);
        else if (*p < 0x20)
            hpt_sbuf_printf(b, "\\u%04x", *p);
        else
            hpt_sbuf_put(b, (const char *)p, 1);
    }
    hpt_sbuf_put(b, "\"", 1);
}

void hpt_sbuf_json_num(hpt_sbuf *b, double v)
{
    if (!isfinite(v)) {
        hpt_sbuf_put(b, "null", 4);
        return;
    }
    char s[40];
    int n;
    if (v == floor(v) && fabs(v) < 9e15)
        n = snprintf(s, sizeof s, "%.0f", v);
    else { /* exact: 15 digits when they round-trip, else 17 */
        n = snprintf(s, sizeof s, "%.15g", v);
        if (strtod(s, NULL) != v)
            n = snprintf(s, sizeof s, "%.17g", v);
    }
    hpt_sbuf_put(b, s, (size_t)n);
}

/* A JSON number to 6 significant digits (the per-rank matrices); NaN and
 * +-inf as null. */
static void json_num6(hpt_sbuf *b, double v)
{
    char s[40];
    int n = isfinite(v) ? snprintf(s, sizeof s, "%.6g", v) : snprintf(s, sizeof s, "null");
    hpt_sbuf_put(b, s, (size_t)n);
}

/* ------------------------------------------------------------- events */

/* The live view's kind of a file event kind (docs/LIVE.md). */
static const char *live_kind(const char *kind)
{
    static const char *const map[][2] = {
        {"skipped_step", "nonfinite"}, {"grad_norm_spike", "spike"},
        {"checkpoint_save", "checkpoint"}, {"run_start", "segment"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(kind, map[i][0]))
            return map[i][1];
    return kind;
}

static void event_fields(const hpt_live_event *e, hpt_sbuf *out)
{
    hpt_sbuf_printf(out, "\"step\":%lld,\"time\":", (long long)e->step);
    hpt_sbuf_json_num(out, e->wall_time);
    hpt_sbuf_printf(out, ",\"kind\":");
    hpt_sbuf_json_str(out, live_kind(e->kind));
    hpt_sbuf_printf(out, ",\"file_kind\":");
    hpt_sbuf_json_str(out, e->kind);
    hpt_sbuf_printf(out, ",\"rank\":%d,\"detail\":", (int)e->rank);
    hpt_sbuf_json_str(out, e->message);
}

void hpt_live_event_json(const hpt_live_event *e, hpt_sbuf *out)
{
    hpt_sbuf_put(out, "{", 1);
    event_fields(e, out);
    hpt_sbuf_put(out, "}", 1);
}

static void alert_fields(const hpt_live_alert *a, hpt_sbuf *out)
{
    hpt_sbuf_printf(out, "\"rule\":");
    hpt_sbuf_json_str(out, a->rule);
    hpt_sbuf_printf(out, ",\"step\":%lld,\"value\":", (long long)a->step);
    hpt_sbuf_json_num(out, a->value);
    hpt_sbuf_printf(out, ",\"time\":");
    hpt_sbuf_json_num(out, a->time);
}

/* CP is not a /segments field: world = TP x CP x PP x DP */
static int seg_cp(int world, int tp, int pp, int dp)
{
    long tpd = (long)tp * pp * dp;
    return tpd > 0 && world > tpd && world % tpd == 0 ? (int)(world / tpd) : 1;
}

static void segment_json(const hpt_live_seg *s, hpt_sbuf *out)
{
    hpt_sbuf_printf(out, "{\"step\":%lld,\"time\":", (long long)s->first_step + 1);
    hpt_sbuf_json_num(out, s->start_time);
    hpt_sbuf_printf(out, ",\"resumed_from\":%lld,\"world\":%d,\"tp\":%d,\"cp\":%d,\"pp\":%d,"
                    "\"dp\":%d,\"host\":", (long long)s->resumed_from, s->world, s->tp,
                    seg_cp(s->world, s->tp, s->pp, s->dp), s->pp, s->dp);
    hpt_sbuf_json_str(out, s->host);
    hpt_sbuf_printf(out, ",\"slurm_job_id\":");
    hpt_sbuf_json_str(out, s->slurm_job_id);
    /* as hpt-train's options name them; null where the file predates them */
    static const char *const rc[] = {"none", "full", "selective"};
    hpt_sbuf_printf(out, ",\"sequence_parallel\":%s,\"recompute\":",
                    s->sequence_parallel < 0 ? "null" : s->sequence_parallel ? "true" : "false");
    if (s->recompute >= 0 && s->recompute <= 2)
        hpt_sbuf_printf(out, "\"%s\"", rc[s->recompute]);
    else
        hpt_sbuf_put(out, "null", 4);
    /* the pipeline schedule as --pp-schedule names it (lib/plan.c), its
     * model chunks per rank and hpt-plan's bubble for the layout */
    hpt_sbuf_printf(out, ",\"pp_schedule\":");
    if (hpt_plan_schedule_str(s->pp_schedule))
        hpt_sbuf_json_str(out, hpt_plan_schedule_str(s->pp_schedule));
    else
        hpt_sbuf_put(out, "null", 4);
    if (s->pp_virtual >= 1)
        hpt_sbuf_printf(out, ",\"pp_virtual\":%d", s->pp_virtual);
    else
        hpt_sbuf_printf(out, ",\"pp_virtual\":null");
    hpt_sbuf_printf(out, ",\"bubble_theory\":");
    hpt_sbuf_json_num(out, s->bubble_theory);
    hpt_sbuf_put(out, "}", 1);
}

/* The goodput object of the history (docs/LIVE.md): seconds of each part,
 * the fraction, the counts; validation null in a file that predates it. */
static void goodput_json(const hpt_goodput *g, hpt_sbuf *out)
{
    const struct {
        const char *key;
        double v;
    } parts[] = {{"wall", g->wall}, {"productive", g->productive}, {"redone", g->redone},
                 {"checkpoint", g->checkpoint}, {"startup", g->startup},
                 {"validation", g->validation_known ? g->validation : NAN},
                 {"between", g->between}, {"other", g->other}, {"load", g->load},
                 {"fraction", g->fraction}};
    hpt_sbuf_put(out, "{", 1);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        hpt_sbuf_printf(out, "%s\"%s\":", i ? "," : "", parts[i].key);
        hpt_sbuf_json_num(out, parts[i].v);
    }
    hpt_sbuf_printf(out, ",\"steps\":%lld,\"redone_steps\":%lld,\"saves\":%d,\"segments\":%d,"
                    "\"resumes\":%d}", (long long)g->steps, (long long)g->redone_steps, g->saves,
                    g->segments, g->resumes);
}

/* --------------------------------------------------------------- runs */

static void state_fields(const hpt_live_run *r, hpt_sbuf *out)
{
    hpt_sbuf_printf(out, "\"state\":\"%s\",\"error\":", hpt_live_state_name(r->state));
    if (r->error[0])
        hpt_sbuf_json_str(out, r->error);
    else
        hpt_sbuf_put(out, "null", 4);
}

/* The model's config.json as JSON (re-serialised by json-c: never raw
 * text from the file), or null. */
static void model_json(const char *cfg, hpt_sbuf *out)
{
    json_object *o = cfg ? json_tokener_parse(cfg) : NULL;
    if (o && json_object_is_type(o, json_type_object)) {
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        hpt_sbuf_put(out, s, strlen(s));
    } else
        hpt_sbuf_put(out, "null", 4);
    json_object_put(o);
}

static void run_json(const hpt_live_run *r, hpt_sbuf *out)
{
    const hpt_live_seg *s = r->nseg ? &r->seg[r->nseg - 1] : NULL;
    hpt_sbuf_printf(out, "{\"id\":%d,\"name\":", r->id);
    hpt_sbuf_json_str(out, r->name);
    hpt_sbuf_printf(out, ",\"path\":");
    hpt_sbuf_json_str(out, r->path);
    hpt_sbuf_printf(out, ",\"layout\":{\"tp\":%d,\"cp\":%d,\"pp\":%d,\"dp\":%d,\"world\":%d},"
                    "\"attrs\":{", s ? s->tp : 1, s ? seg_cp(s->world, s->tp, s->pp, s->dp) : 1,
                    s ? s->pp : 1, s ? s->dp : 1, s ? s->world : 1);
    hpt_sbuf_printf(out, "\"hpt_version\":");
    hpt_sbuf_json_str(out, r->hpt_version ? r->hpt_version : "");
    hpt_sbuf_printf(out, ",\"model_config\":");
    model_json(r->model_config, out);
    hpt_sbuf_printf(out, ",\"flop_formula\":");
    hpt_sbuf_json_str(out, r->flop_formula ? r->flop_formula : "");
    hpt_sbuf_printf(out, ",\"flops_per_token\":");
    hpt_sbuf_json_num(out, r->flops_per_token);
    hpt_sbuf_printf(out, ",\"peak_flops_per_rank\":");
    hpt_sbuf_json_num(out, s ? s->peak_flops_per_rank : r->peak_flops);
    if (s)
        hpt_sbuf_printf(out, ",\"zero1\":%d,\"grad_accum\":%d,\"micro_batch\":%d,\"seq_len\":%d,"
                        "\"segments\":%zu", s->zero1, s->grad_accum, s->micro_batch, s->seq_len,
                        r->nseg);
    hpt_sbuf_printf(out, ",\"ranks\":%zu,\"steps\":%zu},", r->nranks, r->n);
    state_fields(r, out);
    hpt_sbuf_put(out, "}", 1);
}

void hpt_live_runs_json(hpt_live_run *const *runs, int nruns, hpt_sbuf *out)
{
    hpt_sbuf_printf(out, "{\"runs\":[");
    for (int i = 0; i < nruns; i++) {
        if (i)
            hpt_sbuf_put(out, ",", 1);
        run_json(runs[i], out);
    }
    hpt_sbuf_printf(out, "]}");
}

/* --------------------------------------------------------- downsample */

/* Kept index of the step at or just below `step` (0 if none). */
static size_t index_at(const hpt_live_run *r, double step)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->col[HPT_LC_STEP][mid] <= step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? lo - 1 : 0;
}

/* Mark the rows of the smallest and largest finite value of col in
 * [a, b) among idx (k rows; NULL: the rows a..b-1 themselves). */
static void mark_extremes(const double *col, const size_t *idx, size_t a, size_t b, char *mark)
{
    size_t lo = (size_t)-1, hi = (size_t)-1;
    for (size_t j = a; j < b; j++) {
        double v = col[idx ? idx[j] : j];
        if (!isfinite(v))
            continue;
        if (lo == (size_t)-1 || v < col[idx ? idx[lo] : lo])
            lo = j;
        if (hi == (size_t)-1 || v > col[idx ? idx[hi] : hi])
            hi = j;
    }
    if (lo != (size_t)-1)
        mark[lo] = mark[hi] = 1;
}

/* The kept rows of the history's columns (docs/LIVE.md): all when n <=
 * points, else first, last, every event and alert step, and per bucket
 * (points/8 buckets, one when points < 8: the extremes are always kept)
 * the min and max of loss, grad_norm, tokens_per_s and mfu: at most
 * max(points, 8) + 2 rows besides the event and alert steps. *idx
 * malloc'd [*k]. */
static int select_rows(const hpt_live_run *r, size_t points, size_t **idx, size_t *k)
{
    size_t n = r->n;
    *idx = malloc(sizeof **idx * (n ? n : 1));
    char *mark = calloc(n ? n : 1, 1);
    if (!*idx || !mark) {
        free(mark);
        return -1;
    }
    if (n <= points)
        memset(mark, 1, n);
    else {
        static const int cols[] = {HPT_LC_LOSS, HPT_LC_NORM, HPT_LC_TOK_S, HPT_LC_MFU};
        size_t nb = points / 8 ? points / 8 : 1; /* 8 rows per bucket at most */
        for (size_t b = 0; b < nb; b++)
            for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++)
                mark_extremes(r->col[cols[c]], NULL, b * n / nb, (b + 1) * n / nb, mark);
        mark[0] = mark[n - 1] = 1;
        for (size_t e = 0; e < r->nev; e++)
            mark[index_at(r, (double)r->ev[e].step)] = 1;
        for (size_t a = 0; a < r->nalert; a++)
            mark[index_at(r, (double)r->alert[a].step)] = 1;
    }
    *k = 0;
    for (size_t i = 0; i < n; i++)
        if (mark[i])
            (*idx)[(*k)++] = i;
    free(mark);
    return 0;
}

/* Validation rows (finite val_loss), min/max-downsampled above points. */
static int select_val(const hpt_live_run *r, size_t points, size_t **idx, size_t *k)
{
    size_t nv = 0;
    for (size_t i = 0; i < r->n; i++)
        nv += isfinite(r->col[HPT_LC_VAL][i]) != 0;
    size_t *all = malloc(sizeof *all * (nv ? nv : 1));
    char *mark = calloc(nv ? nv : 1, 1);
    *idx = all;
    *k = 0;
    if (!all || !mark) {
        free(mark);
        return -1;
    }
    for (size_t i = 0; i < r->n; i++)
        if (isfinite(r->col[HPT_LC_VAL][i]))
            all[(*k)++] = i;
    if (nv > points) {
        size_t nb = points / 2 ? points / 2 : 1;
        for (size_t b = 0; b < nb; b++)
            mark_extremes(r->col[HPT_LC_VAL], all, b * nv / nb, (b + 1) * nv / nb, mark);
        mark[0] = mark[nv - 1] = 1;
        *k = 0;
        for (size_t j = 0; j < nv; j++)
            if (mark[j])
                all[(*k)++] = all[j];
    }
    free(mark);
    return 0;
}

/* The heat map's rows: all kept rows up to rp, else the slowest step
 * (largest step_time) of each of rp buckets. */
static int select_rank_rows(const hpt_live_run *r, size_t rp, size_t **idx, size_t *k)
{
    size_t n = r->n;
    *idx = malloc(sizeof **idx * (n < rp ? (n ? n : 1) : rp));
    if (!*idx)
        return -1;
    *k = 0;
    if (n <= rp) {
        for (size_t i = 0; i < n; i++)
            (*idx)[(*k)++] = i;
        return 0;
    }
    for (size_t b = 0; b < rp; b++) {
        size_t a = b * n / rp, e = (b + 1) * n / rp, best = e - 1;
        for (size_t j = a; j < e; j++)
            if (r->col[HPT_LC_STEP_TIME][j] > r->col[HPT_LC_STEP_TIME][best])
                best = j;
        (*idx)[(*k)++] = best;
    }
    return 0;
}

/* ------------------------------------------------------------- output */

static void num_array(hpt_sbuf *out, const double *col, const size_t *idx, size_t k)
{
    hpt_sbuf_put(out, "[", 1);
    for (size_t j = 0; j < k; j++) {
        if (j)
            hpt_sbuf_put(out, ",", 1);
        hpt_sbuf_json_num(out, col[idx ? idx[j] : j]);
    }
    hpt_sbuf_put(out, "]", 1);
}

/* "columns":{...} of the kept rows idx (k) and the validation rows vidx. */
static void columns_json(const hpt_live_run *r, const size_t *idx, size_t k, const size_t *vidx,
                         size_t kv, hpt_sbuf *out)
{
    hpt_sbuf_printf(out, "\"columns\":{");
    for (int c = 0; c < HPT_LC_COUNT; c++) {
        if (c == HPT_LC_VAL)
            continue;
        hpt_sbuf_printf(out, "%s\"%s\":", c ? "," : "", hpt_live_col_json[c]);
        num_array(out, r->col[c], idx, k);
    }
    hpt_sbuf_printf(out, ",\"val_step\":");
    num_array(out, r->col[HPT_LC_STEP], vidx, kv);
    hpt_sbuf_printf(out, ",\"val_loss\":");
    num_array(out, r->col[HPT_LC_VAL], vidx, kv);
    hpt_sbuf_put(out, "}", 1);
}

static int rank_col(const char *name)
{
    for (int c = 0; c < HPT_RC_COUNT; c++)
        if (!strcmp(hpt_metrics_rank_cols[c].name, name))
            return c;
    return -1;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* HDF5's cause of the last failed read_rank_rows (noted before the
 * clean-up calls clear HDF5's error stack). */
static char rank_cause[300];

/* /ranks/NAME of raw rows rows[0..k) (any order, repeats allowed) into out
 * [k][W]: one read of the union of the distinct rows (in file order), then
 * each requested row copied to its place. -1 on failure (rank_cause). */
static int read_rank_rows(const hpt_live_run *r, const char *name, const size_t *rows, size_t k,
                          double *out)
{
    snprintf(rank_cause, sizeof rank_cause, "not an open dataset");
    size_t W = r->nranks;
    int c = rank_col(name);
    if (c < 0 || r->rd[c] <= 0)
        return -1;
    if (k == 0 || W == 0)
        return 0;
    size_t *u = malloc(sizeof *u * k), nu = 0;
    double *tmp = malloc(sizeof *tmp * k * W);
    hid_t fs = H5Dget_space(r->rd[c]);
    int e = fs < 0 || !u || !tmp ? -1 : 0;
    if (!e) {
        memcpy(u, rows, sizeof *u * k);
        qsort(u, k, sizeof *u, cmp_size);
        for (size_t j = 0; j < k; j++)
            if (!nu || u[j] != u[nu - 1])
                u[nu++] = u[j];
    }
    for (size_t j = 0; !e && j < nu;) {
        size_t run = 1;
        while (j + run < nu && u[j + run] == u[j] + run)
            run++;
        hsize_t start[2] = {u[j], 0}, count[2] = {run, W};
        e = H5Sselect_hyperslab(fs, j ? H5S_SELECT_OR : H5S_SELECT_SET, start, NULL, count,
                                NULL) < 0 ? -1 : 0;
        j += run;
    }
    hsize_t mdims[2] = {nu, W};
    hid_t ms = e ? -1 : H5Screate_simple(2, mdims, NULL);
    if (!e && H5Dread(r->rd[c], H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, tmp) < 0)
        e = -1;
    if (e)
        snprintf(rank_cause, sizeof rank_cause, "%s", hpt_h5_cause_line());
    for (size_t j = 0; !e && j < k; j++) {
        size_t *at = bsearch(&rows[j], u, nu, sizeof *u, cmp_size);
        memcpy(out + j * W, tmp + (size_t)(at - u) * W, sizeof *out * W);
    }
    if (ms >= 0)
        H5Sclose(ms);
    if (fs >= 0)
        H5Sclose(fs);
    free(u);
    free(tmp);
    return e;
}

hpt_status hpt_live_rank_values(const hpt_live_run *r, const char *name, size_t row,
                                double *out)
{
    int e;
    H5E_BEGIN_TRY { e = read_rank_rows(r, name, &row, 1, out); }
    H5E_END_TRY;
    if (e)
        return hpt_error_set(HPT_ERR_DATA, "%s: cannot read the per-rank column %s (damaged "
                             "file; HDF5: %s)", r->path, name, rank_cause);
    return HPT_OK;
}

/* [[...]...] of k rows of W values, 6 significant digits. */
static void matrix_json(hpt_sbuf *out, const double *m, size_t k, size_t W)
{
    hpt_sbuf_put(out, "[", 1);
    for (size_t j = 0; j < k; j++) {
        hpt_sbuf_put(out, j ? ",[" : "[", j ? 2 : 1);
        for (size_t w = 0; w < W; w++) {
            if (w)
                hpt_sbuf_put(out, ",", 1);
            json_num6(out, m[j * W + w]);
        }
        hpt_sbuf_put(out, "]", 1);
    }
    hpt_sbuf_put(out, "]", 1);
}

static const char *const comm_groups[] = {"tp", "pp", "dp", "mp", "embed", "cp"};
#define NGROUPS 6

/* "ranks":{...},"comm":{...} for the kept rows kidx (k); raw rows from
 * r->row. Per-rank FLOP/s: the step's model FLOPs shared equally by the
 * ranks present in the row, over the rank's own step time. The pipeline
 * bubble: null throughout in a file older than /ranks/pipeline_bubble;
 * step_time: /steps/step_time of those rows, exact (the bubble's share of
 * the step, as hpt-metrics summary takes it). Communication: mean seconds
 * per step over these rows. */
static hpt_status ranks_json(const hpt_live_run *r, const size_t *kidx, size_t k, int comm,
                             hpt_sbuf *out)
{
    size_t W = r->nranks, cells = k * W;
    size_t *rows = malloc(sizeof *rows * (k ? k : 1));
    double *busy = malloc(sizeof *busy * (cells ? cells : 1));
    double *st = malloc(sizeof *st * (cells ? cells : 1));
    double *pb = malloc(sizeof *pb * (cells ? cells : 1));
    double *tmp = malloc(sizeof *tmp * (cells ? cells : 1));
    double *sum = calloc(NGROUPS * (W ? W : 1), sizeof *sum);
    hpt_status ret = HPT_OK;
    if (!rows || !busy || !st || !pb || !tmp || !sum) {
        ret = hpt_error_set(HPT_ERR_INTERNAL, "out of memory (%zu x %zu per-rank values)", k, W);
        goto done;
    }
    for (size_t j = 0; j < k; j++)
        rows[j] = r->row[kidx[j]];
    int pbc = rank_col("pipeline_bubble"), has_pb = pbc >= 0 && r->rd[pbc] > 0;
    for (size_t i = 0; !has_pb && i < cells; i++) /* a file older than the column */
        pb[i] = NAN;
    char failed[32] = "";
    H5E_BEGIN_TRY
    {
        if (read_rank_rows(r, "busy", rows, k, busy) < 0)
            snprintf(failed, sizeof failed, "busy");
        else if (read_rank_rows(r, "step_time", rows, k, st) < 0)
            snprintf(failed, sizeof failed, "step_time");
        else if (has_pb && read_rank_rows(r, "pipeline_bubble", rows, k, pb) < 0)
            snprintf(failed, sizeof failed, "pipeline_bubble");
        for (int g = 0; comm && !failed[0] && g < NGROUPS; g++) {
            char name[32];
            snprintf(name, sizeof name, "comm_%s", comm_groups[g]);
            int c = rank_col(name);
            if (c >= 0 && r->rd[c] <= 0) /* a file older than the column (comm_cp) */
                for (size_t i = 0; i < cells; i++)
                    tmp[i] = NAN;
            else if (read_rank_rows(r, name, rows, k, tmp) < 0)
                snprintf(failed, sizeof failed, "%s", name);
            for (size_t w = 0; !failed[0] && w < W; w++) {
                double s = 0;
                size_t cnt = 0;
                for (size_t j = 0; j < k; j++)
                    if (isfinite(tmp[j * W + w]))
                        s += tmp[j * W + w], cnt++;
                sum[g * W + w] = cnt ? s / (double)cnt : NAN;
            }
        }
    }
    H5E_END_TRY;
    if (failed[0]) {
        ret = hpt_error_set(HPT_ERR_DATA, "%s: cannot read the per-rank column %s (damaged "
                            "file; HDF5: %s)", r->path, failed, rank_cause);
        goto done;
    }
    hpt_sbuf_printf(out, "\"ranks\":{\"step\":");
    num_array(out, r->col[HPT_LC_STEP], kidx, k);
    hpt_sbuf_printf(out, ",\"step_time\":");
    num_array(out, r->col[HPT_LC_STEP_TIME], kidx, k);
    hpt_sbuf_printf(out, ",\"busy_s\":");
    matrix_json(out, busy, k, W);
    hpt_sbuf_printf(out, ",\"step_s\":");
    matrix_json(out, st, k, W);
    hpt_sbuf_printf(out, ",\"bubble_s\":");
    matrix_json(out, pb, k, W);
    for (size_t j = 0; j < k; j++) {
        size_t present = 0;
        for (size_t w = 0; w < W; w++)
            present += !isnan(st[j * W + w]);
        for (size_t w = 0; w < W; w++)
            tmp[j * W + w] = present && st[j * W + w] > 0
                                 ? r->col[HPT_LC_FLOPS][kidx[j]] / (double)present / st[j * W + w]
                                 : NAN;
    }
    hpt_sbuf_printf(out, ",\"flops\":");
    matrix_json(out, tmp, k, W);
    hpt_sbuf_put(out, "}", 1);
    if (comm) {
        hpt_sbuf_printf(out, ",\"comm\":{\"groups\":[");
        for (int g = 0; g < NGROUPS; g++)
            hpt_sbuf_printf(out, "%s\"%s\"", g ? "," : "", comm_groups[g]);
        hpt_sbuf_printf(out, "],\"seconds\":");
        matrix_json(out, sum, NGROUPS, W);
        hpt_sbuf_put(out, "}", 1);
    }
done:
    free(rows);
    free(busy);
    free(st);
    free(pb);
    free(tmp);
    free(sum);
    return ret;
}

#define TRACE_JSON_MAX 100000 /* spans in a history's "trace" (whole steps) */

static int cmp_trace_row(const void *a, const void *b)
{
    const hpt_metrics_trace_row *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->segment != y->segment)
        return x->segment > y->segment ? -1 : 1; /* the later segment first */
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->t_start < y->t_start ? -1 : x->t_start > y->t_start;
}

/* Index of s in names[*n] (added when new; at most 64). */
static int name_index(char names[][HPT_METRICS_TRACE_NAME_LEN], int *n, const char *s)
{
    for (int i = 0; i < *n; i++)
        if (!strncmp(names[i], s, HPT_METRICS_TRACE_NAME_LEN))
            return i;
    if (*n == 64)
        return 63;
    snprintf(names[*n], HPT_METRICS_TRACE_NAME_LEN, "%s", s);
    return (*n)++;
}

/* "trace": the step timeline /trace (docs/METRICS.md), null when the file
 * has none: {"steps":[...],"names":[...],"streams":[...],"truncated":B,
 * "comm_left_out":{"STEP":N},
 * "spans":{"STEP":[[rank,stage,stream,name,micro,t0,t1,bytes],...]}},
 * stream and name indices into "streams" and "names", t0/t1 in ms from
 * the step's earliest span, each step as its last segment traced it; at
 * most TRACE_JSON_MAX spans: whole steps, the first ones; a step that does
 * not fit whole but whose step and compute spans do comes without its N
 * communication spans (comm_left_out); then truncated. */
static hpt_status trace_json(hpt_live_run *r, hpt_sbuf *out)
{
    if (H5Lexists(r->file, "trace", H5P_DEFAULT) <= 0) {
        hpt_sbuf_printf(out, ",\"trace\":null");
        return HPT_OK;
    }
    hid_t d = H5Dopen2(r->file, "trace", H5P_DEFAULT), t = hpt_metrics_trace_type(), sp = -1;
    hssize_t n = -1;
    hpt_metrics_trace_row *rows = NULL;
    if (d >= 0 && H5Drefresh(d) >= 0 && (sp = H5Dget_space(d)) >= 0)
        n = H5Sget_simple_extent_npoints(sp);
    if (n >= 0 && !(rows = malloc(sizeof *rows * (size_t)(n ? n : 1))))
        n = -2;
    herr_t e = n > 0 ? H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) : 0;
    char cause[256];
    snprintf(cause, sizeof cause, "%s", hpt_h5_cause());
    if (sp >= 0)
        H5Sclose(sp);
    if (d >= 0)
        H5Dclose(d);
    H5Tclose(t);
    if (n == -2)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory (trace of %s)", r->path);
    if (n < 0 || e < 0) {
        free(rows);
        return hpt_error_set(HPT_ERR_DATA, "%s: cannot read the table /trace (damaged file; HDF5: "
                             "%s)", r->path, cause);
    }
    qsort(rows, (size_t)n, sizeof *rows, cmp_trace_row);
    char names[64][HPT_METRICS_TRACE_NAME_LEN], streams[64][HPT_METRICS_TRACE_NAME_LEN];
    int nn = 0, ns = 0, truncated = 0;
    size_t emitted = 0;
    hpt_sbuf steps = {0}, left = {0};
    hpt_sbuf_printf(out, ",\"trace\":{\"spans\":{");
    for (size_t i = 0; i < (size_t)n;) {
        size_t j = i; /* [i, j): this step as its last segment traced it */
        while (j < (size_t)n && rows[j].step == rows[i].step && rows[j].segment == rows[i].segment)
            j++;
        size_t next = j;
        while (next < (size_t)n && rows[next].step == rows[i].step) /* earlier segments' */
            next++;
        size_t ncomp = 0; /* its step and compute spans */
        for (size_t k = i; k < j; k++)
            ncomp += !strcmp(rows[k].stream, "step") || !strcmp(rows[k].stream, "compute");
        int comm = emitted + (j - i) <= TRACE_JSON_MAX;
        if (!comm && emitted + ncomp > TRACE_JSON_MAX) {
            truncated = 1;
            break;
        }
        if (!comm)
            hpt_sbuf_printf(&left, "%s\"%d\":%zu", left.n ? "," : "", rows[i].step,
                            (j - i) - ncomp);
        double t0 = rows[i].t_start;
        for (size_t k = i; k < j; k++)
            t0 = rows[k].t_start < t0 ? rows[k].t_start : t0;
        hpt_sbuf_printf(&steps, "%s%d", steps.n ? "," : "", rows[i].step);
        hpt_sbuf_printf(out, "%s\"%d\":[", emitted ? "," : "", rows[i].step);
        int put = 0;
        for (size_t k = i; k < j; k++) {
            const hpt_metrics_trace_row *w = &rows[k];
            if (!comm && strcmp(w->stream, "step") && strcmp(w->stream, "compute"))
                continue;
            hpt_sbuf_printf(out, "%s[%d,%d,%d,%d,%d,%.4f,%.4f,%lld]", put++ ? "," : "", w->rank,
                            w->stage, name_index(streams, &ns, w->stream),
                            name_index(names, &nn, w->name), w->micro, (w->t_start - t0) * 1e3,
                            (w->t_end - t0) * 1e3, (long long)w->bytes);
        }
        hpt_sbuf_put(out, "]", 1);
        emitted += comm ? j - i : ncomp;
        i = next;
    }
    hpt_sbuf_printf(out, "},\"steps\":[%s],\"truncated\":%s,\"comm_left_out\":{%s},\"names\":[",
                    steps.p ? steps.p : "", truncated ? "true" : "false", left.p ? left.p : "");
    for (int k = 0; k < nn; k++) {
        hpt_sbuf_put(out, k ? "," : "", k ? 1 : 0);
        hpt_sbuf_json_str(out, names[k]);
    }
    hpt_sbuf_printf(out, "],\"streams\":[");
    for (int k = 0; k < ns; k++) {
        hpt_sbuf_put(out, k ? "," : "", k ? 1 : 0);
        hpt_sbuf_json_str(out, streams[k]);
    }
    hpt_sbuf_printf(out, "]}");
    free(steps.p);
    free(left.p);
    free(rows);
    return steps.oom || left.oom ? hpt_error_set(HPT_ERR_INTERNAL, "out of memory (trace JSON)")
                                 : HPT_OK;
}

hpt_status hpt_live_run_history_json(hpt_live_run *r, size_t points, long long seq, hpt_sbuf *out)
{
    size_t *idx = NULL, *vidx = NULL, *ridx = NULL, k = 0, kv = 0, kr = 0;
    if (points < 2)
        points = 2;
    /* heat map: at most 512 steps and 2^17 cells a matrix */
    size_t cap = r->nranks ? ((size_t)1 << 17) / r->nranks : 512;
    size_t rp = points < 512 ? points : 512;
    rp = rp < cap ? rp : (cap > 16 ? cap : 16);
    if (select_rows(r, points, &idx, &k) < 0 || select_val(r, points, &vidx, &kv) < 0 ||
        select_rank_rows(r, rp, &ridx, &kr) < 0) {
        free(idx);
        free(vidx);
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory (history of %zu steps)", r->n);
    }
    hpt_sbuf_printf(out, "{\"run\":%d,\"name\":", r->id);
    hpt_sbuf_json_str(out, r->name);
    hpt_sbuf_put(out, ",", 1);
    state_fields(r, out);
    hpt_sbuf_printf(out, ",\"steps\":%zu,\"rows\":%zu,\"nranks\":%zu,", r->n, r->rows, r->nranks);
    if (seq >= 0)
        hpt_sbuf_printf(out, "\"seq\":%lld,", seq);
    columns_json(r, idx, k, vidx, kv, out);
    hpt_sbuf_put(out, ",", 1);
    hpt_status st = HPT_OK;
    if (r->file > 0 && !r->damage[0]) /* damaged: the values read before only */
        st = ranks_json(r, ridx, kr, 1, out);
    else
        hpt_sbuf_printf(out, "\"ranks\":{\"step\":[],\"step_time\":[],\"busy_s\":[],\"step_s\":[],"
                        "\"bubble_s\":[],\"flops\":[]},"
                        "\"comm\":{\"groups\":[],\"seconds\":[]}");
    hpt_sbuf_printf(out, ",\"events\":[");
    for (size_t e = 0; e < r->nev; e++) {
        if (e)
            hpt_sbuf_put(out, ",", 1);
        hpt_live_event_json(&r->ev[e], out);
    }
    hpt_sbuf_printf(out, "],\"segments\":[");
    for (size_t s = 0; s < r->nseg; s++) {
        if (s)
            hpt_sbuf_put(out, ",", 1);
        segment_json(&r->seg[s], out);
    }
    hpt_sbuf_printf(out, "],\"alerts\":[");
    for (size_t a = 0; a < r->nalert; a++) {
        hpt_sbuf_printf(out, "%s{", a ? "," : "");
        alert_fields(&r->alert[a], out);
        hpt_sbuf_put(out, "}", 1);
    }
    hpt_sbuf_printf(out, "],\"goodput\":");
    hpt_goodput g;
    if (!st && r->file > 0 && !r->damage[0] && !(st = hpt_live_goodput(r, &g)))
        goodput_json(&g, out);
    else /* not open, or damaged: none (a failed read is the caller's) */
        hpt_sbuf_put(out, "null", 4);
    if (!st && r->file > 0 && !r->damage[0])
        st = trace_json(r, out);
    else
        hpt_sbuf_printf(out, ",\"trace\":null");
    hpt_sbuf_put(out, "}", 1);
    free(idx);
    free(vidx);
    free(ridx);
    if (!st && out->oom)
        st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory (history JSON)");
    return st;
}

hpt_status hpt_live_goodput_json(hpt_live_run *r, hpt_sbuf *out)
{
    hpt_goodput g;
    hpt_status st = HPT_OK;
    hpt_sbuf_printf(out, "{\"run\":%d,\"goodput\":", r->id);
    if (r->file > 0 && !r->damage[0] && !(st = hpt_live_goodput(r, &g)))
        goodput_json(&g, out);
    else
        hpt_sbuf_put(out, "null", 4);
    hpt_sbuf_put(out, "}", 1);
    if (!st && out->oom)
        st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory (goodput JSON)");
    return st;
}

/* ------------------------------------------------------------- stream */

static void sse_begin(hpt_sbuf *out, const char *event, int run)
{
    hpt_sbuf_printf(out, "event: %s\ndata: {\"run\":%d", event, run);
}

static void sse_end(hpt_sbuf *out)
{
    hpt_sbuf_printf(out, "}\n\n");
}

/* "event: rows" of the new raw rows (values of their kept steps). */
static void rows_sse(hpt_live_run *r, const hpt_live_news *nw, hpt_sbuf *out)
{
    size_t m = nw->rows_to - nw->rows_from, W = r->nranks;
    size_t *idx = calloc(m ? m : 1, sizeof *idx), *vidx = calloc(m ? m : 1, sizeof *vidx), kv = 0;
    if (!idx || !vidx) {
        free(idx);
        free(vidx);
        return;
    }
    for (size_t j = 0; j < m; j++) {
        size_t i = index_at(r, (double)nw->steps[j]);
        idx[j] = i;
        if (isfinite(r->col[HPT_LC_VAL][i]))
            vidx[kv++] = i;
    }
    sse_begin(out, "rows", r->id);
    hpt_sbuf_put(out, ",", 1);
    columns_json(r, idx, m, vidx, kv, out);
    if (m * W <= (1u << 20)) { /* per-rank values of a small batch */
        hpt_sbuf_put(out, ",", 1);
        size_t mark = out->n;
        if (ranks_json(r, idx, m, 0, out) != HPT_OK) {
            out->n = mark - 1; /* drop the ranks key */
            out->p[out->n] = 0;
        }
    }
    sse_end(out);
    free(idx);
    free(vidx);
}

void hpt_live_news_sse(hpt_live_run *r, const hpt_live_news *nw, size_t max_rows, hpt_sbuf *out)
{
    if (nw->replaced || nw->rows_to - nw->rows_from > max_rows) {
        sse_begin(out, "history", r->id);
        sse_end(out);
    } else if (nw->rows_to > nw->rows_from && nw->steps)
        rows_sse(r, nw, out);
    for (size_t s = nw->segs_from; s < r->nseg; s++) {
        sse_begin(out, "segment", r->id);
        hpt_sbuf_put(out, ",", 1);
        size_t at = out->n;
        segment_json(&r->seg[s], out);
        memmove(out->p + at, out->p + at + 1, out->n - at - 1); /* unwrap the object */
        out->n -= 2;
        out->p[out->n] = 0;
        sse_end(out);
    }
    for (size_t e = nw->events_from; e < r->nev; e++) {
        sse_begin(out, "event", r->id);
        hpt_sbuf_put(out, ",", 1);
        event_fields(&r->ev[e], out);
        sse_end(out);
    }
    for (size_t a = nw->alerts_from; a < r->nalert; a++) {
        sse_begin(out, "alert", r->id);
        hpt_sbuf_put(out, ",", 1);
        alert_fields(&r->alert[a], out);
        sse_end(out);
    }
    if (nw->state_changed) {
        sse_begin(out, "state", r->id);
        hpt_sbuf_put(out, ",", 1);
        state_fields(r, out);
        sse_end(out);
    }
}
