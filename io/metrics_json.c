/* metrics_json.c — see metrics_json.h. */
#include "metrics_json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "metrics_read.h"

#define RANK_BUCKETS 200 /* at most this many steps in the rank x step maps */

/* The plotted /steps columns: JSON name, dataset name. */
static const char *const col_json[] = {"loss", "lr", "grad_norm", "clip", "tokens_per_s", "mfu",
                                       "skipped", "time", "step_time", "flops", "segment",
                                       "tokens"};
static const char *const col_file[] = {"loss", "lr", "grad_norm", "clip_coef", "tokens_per_s",
                                       "mfu", "skipped", "wall_time", "step_time", "flops",
                                       "segment", "tokens"};
#define NCOL ((int)(sizeof col_json / sizeof *col_json))
#define NEXTREME 6 /* the first 6 keep their extremes when downsampling */

static const char *const comm_group[] = {"tp", "pp", "dp", "mp", "embed"};
#define NGROUP 5

/* An open file with its segments and events. */
typedef struct {
    hpt_mread m;
    hpt_mread_seg *seg;
    size_t nseg;
    hpt_mread_event *ev;
    size_t nev;
} run_t;

static void run_close(run_t *r)
{
    hpt_mread_close(&r->m);
    free(r->seg);
    free(r->ev);
    memset(r, 0, sizeof *r);
}

static hpt_status run_open(run_t *r, const char *path)
{
    memset(r, 0, sizeof *r);
    hpt_status st = hpt_mread_open(&r->m, path);
    if (!st)
        st = hpt_mread_segments(&r->m, &r->seg, &r->nseg);
    if (!st)
        st = hpt_mread_events(&r->m, &r->ev, &r->nev);
    if (st)
        run_close(r);
    return st;
}

/* "finished" when the last run_start/run_end event is a run_end "done". */
static const char *run_state(const run_t *r)
{
    for (size_t i = r->nev; i-- > 0;) {
        if (!strcmp(r->ev[i].kind, "run_end"))
            return strcmp(r->ev[i].message, "done") ? "stopped" : "finished";
        if (!strcmp(r->ev[i].kind, "run_start"))
            break;
    }
    return "stopped";
}

/* ------------------------------------------------------------ writing */

static void put_num(FILE *f, double v)
{
    if (!isfinite(v))
        fputs("null", f);
    else if (v == floor(v) && fabs(v) < 1e15)
        fprintf(f, "%.0f", v);
    else
        fprintf(f, "%.17g", v);
}

/* A JSON string; '<' as \u003c so that no "</script" reaches a page. */
static void put_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == '<' || *p == 0x7f)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* "name":[v[idx[0]],...] (every row when idx is NULL). */
static void put_array(FILE *f, const char *name, const double *v, const size_t *idx, size_t n)
{
    fprintf(f, "\"%s\":[", name);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputc(',', f);
        put_num(f, v[idx ? idx[i] : i]);
    }
    fputc(']', f);
}

/* ------------------------------------------------------- downsampling */

/* Kept index of `step` in the sorted step[0..n), or n if absent. */
static size_t find_step(const double *step, size_t n, double s)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (step[mid] < s)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && step[lo] == s ? lo : n;
}

/* Mark in sel[0..n) the rows kept for `points`; returns their count. */
static size_t select_rows(const run_t *r, double *const *col, const double *step, int points,
                          unsigned char *sel)
{
    size_t n = r->m.n;
    if (points <= 0 || n <= (size_t)points) {
        memset(sel, 1, n);
        return n;
    }
    memset(sel, 0, n);
    sel[0] = sel[n - 1] = 1;
    for (size_t i = 0; i < r->nev; i++) {
        size_t k = find_step(step, n, (double)r->ev[i].step);
        if (k < n)
            sel[k] = 1;
    }
    size_t nb = points / 2 > 0 ? (size_t)points / 2 : 1;
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * n / nb, hi = (b + 1) * n / nb;
        for (int c = 0; c < NEXTREME; c++) {
            size_t amin = n, amax = n;
            for (size_t i = lo; i < hi; i++) {
                double v = col[c][i];
                if (!isfinite(v))
                    continue;
                if (amin == n || v < col[c][amin])
                    amin = i;
                if (amax == n || v > col[c][amax])
                    amax = i;
            }
            if (amin < n)
                sel[amin] = sel[amax] = 1;
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += sel[i];
    return k;
}

/* ---------------------------------------------------------- sections */

/* The rows with a finite validation loss, downsampled on their own (they
 * are sparse): all of them when at most `points`, else the first, the
 * last and per bucket the smallest and largest. Fills vidx, returns the
 * count. */
static size_t select_val(const double *val, size_t n, int points, size_t *vidx)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += isfinite(val[i]) != 0;
    size_t *all = points > 0 && m > (size_t)points ? malloc(sizeof *all * m) : vidx;
    if (!all) /* out of memory: every validation row */
        all = vidx, points = 0;
    m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(val[i]))
            all[m++] = i;
    if (all == vidx)
        return m;
    size_t nb = (size_t)points / 2 > 0 ? (size_t)points / 2 : 1, k = 0;
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * m / nb, hi = (b + 1) * m / nb, amin = lo, amax = lo;
        for (size_t j = lo; j < hi; j++) {
            amin = val[all[j]] < val[all[amin]] ? j : amin;
            amax = val[all[j]] > val[all[amax]] ? j : amax;
        }
        size_t a = amin < amax ? amin : amax, z = amin < amax ? amax : amin;
        if (b == 0 && a != 0)
            vidx[k++] = all[0];
        if (hi > lo)
            vidx[k++] = all[a];
        if (hi > lo && z != a)
            vidx[k++] = all[z];
        if (b == nb - 1 && hi > lo && z != m - 1)
            vidx[k++] = all[m - 1];
    }
    free(all);
    return k;
}

static void put_columns(FILE *f, double *const *col, const double *step, const double *val,
                        const size_t *idx, size_t k, size_t *vidx, size_t n, int points)
{
    fputs("\"columns\":{", f);
    put_array(f, "step", step, idx, k);
    for (int c = 0; c < NCOL; c++) {
        fputc(',', f);
        put_array(f, col_json[c], col[c], idx, k);
    }
    size_t kv = select_val(val, n, points, vidx);
    fputc(',', f);
    put_array(f, "val_step", step, vidx, kv);
    fputc(',', f);
    put_array(f, "val_loss", val, vidx, kv);
    fputs("}", f);
}

/* One rank x step matrix: per bucket of rows [lo,hi) the mean of the
 * finite values of each rank. */
static void put_rank_matrix(FILE *f, const char *name, const double *v, size_t n, size_t W,
                            size_t nb)
{
    fprintf(f, ",\"%s\":[", name);
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * n / nb, hi = (b + 1) * n / nb;
        fputs(b ? ",[" : "[", f);
        for (size_t w = 0; w < W; w++) {
            double s = 0;
            size_t c = 0;
            for (size_t i = lo; i < hi; i++)
                if (isfinite(v[i * W + w])) {
                    s += v[i * W + w];
                    c++;
                }
            fputs(w ? "," : "", f);
            put_num(f, c ? s / (double)c : NAN);
        }
        fputc(']', f);
    }
    fputc(']', f);
}

static hpt_status put_ranks(FILE *f, const run_t *r, const double *step)
{
    size_t n = r->m.n, W = r->m.nranks;
    double *busy = NULL, *st_time = NULL, *flops = NULL;
    hpt_status st = hpt_mread_ranks_col(&r->m, "busy", 0, &busy);
    if (!st)
        st = hpt_mread_ranks_col(&r->m, "step_time", 0, &st_time);
    if (!st)
        st = hpt_mread_steps_col(&r->m, "flops", 0, &flops);
    size_t cells = n * W;
    double *fps = st ? NULL : malloc(sizeof *fps * (cells > 0 ? cells : 1));
    if (!st && !fps)
        st = hpt_error_set(HPT_ERR_INTERNAL, "%s: out of memory for the rank maps", r->m.path);
    if (!st) {
        for (size_t i = 0; i < n; i++) { /* the step's FLOPs shared by its ranks */
            size_t present = 0;
            for (size_t w = 0; w < W; w++)
                present += isfinite(st_time[i * W + w]);
            for (size_t w = 0; w < W; w++) {
                double t = st_time[i * W + w];
                fps[i * W + w] = present && t > 0 ? flops[i] / (double)present / t : NAN;
            }
        }
        size_t nb = n < RANK_BUCKETS ? n : RANK_BUCKETS;
        fputs("\"ranks\":{\"step\":[", f);
        for (size_t b = 0; b < nb; b++) {
            fputs(b ? "," : "", f);
            put_num(f, step[(b + 1) * n / nb - 1]);
        }
        fputc(']', f);
        put_rank_matrix(f, "busy_s", busy, n, W, nb);
        put_rank_matrix(f, "step_s", st_time, n, W, nb);
        put_rank_matrix(f, "flops", fps, n, W, nb);
        fputc('}', f);
    }
    free(busy);
    free(st_time);
    free(flops);
    free(fps);
    return st;
}

static hpt_status put_comm(FILE *f, const run_t *r)
{
    size_t n = r->m.n, W = r->m.nranks;
    fputs("\"comm\":{\"groups\":[", f);
    for (int g = 0; g < NGROUP; g++)
        fprintf(f, "%s\"%s\"", g ? "," : "", comm_group[g]);
    fputs("],\"seconds\":[", f);
    for (int g = 0; g < NGROUP; g++) {
        char name[16];
        snprintf(name, sizeof name, "comm_%s", comm_group[g]);
        double *v = NULL;
        hpt_status st = hpt_mread_ranks_col(&r->m, name, 0, &v);
        if (st)
            return st;
        fputs(g ? ",[" : "[", f);
        for (size_t w = 0; w < W; w++) { /* mean seconds per step */
            double s = 0;
            size_t c = 0;
            for (size_t i = 0; i < n; i++)
                if (isfinite(v[i * W + w])) {
                    s += v[i * W + w];
                    c++;
                }
            fputs(w ? "," : "", f);
            put_num(f, c ? s / (double)c : NAN);
        }
        fputc(']', f);
        free(v);
    }
    fputs("]}", f);
    return HPT_OK;
}

/* The page's kind of a file event kind (the file's own stays in file_kind). */
static const char *page_kind(const char *kind)
{
    static const char *const map[][2] = {{"skipped_step", "nonfinite"},
                                         {"grad_norm_spike", "spike"},
                                         {"checkpoint_save", "checkpoint"},
                                         {"run_start", "segment"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(kind, map[i][0]))
            return map[i][1];
    return kind;
}

static void put_events(FILE *f, const run_t *r)
{
    fputs("\"events\":[", f);
    for (size_t i = 0; i < r->nev; i++) {
        const hpt_mread_event *e = &r->ev[i];
        fprintf(f, "%s{\"step\":%lld,\"time\":", i ? "," : "", (long long)e->step);
        put_num(f, e->wall_time);
        fputs(",\"kind\":", f);
        put_str(f, page_kind(e->kind));
        fputs(",\"file_kind\":", f);
        put_str(f, e->kind);
        fprintf(f, ",\"rank\":%d,\"detail\":", (int)e->rank);
        put_str(f, e->message);
        fputc('}', f);
    }
    fputc(']', f);
}

static void put_segments(FILE *f, const run_t *r)
{
    fputs("\"segments\":[", f);
    size_t ev = 0;
    for (size_t i = 0; i < r->nseg; i++) {
        double t = NAN; /* the wall time of the segment's run_start */
        while (ev < r->nev && strcmp(r->ev[ev].kind, "run_start"))
            ev++;
        if (ev < r->nev)
            t = r->ev[ev++].wall_time;
        const hpt_mread_seg *g = &r->seg[i];
        fprintf(f, "%s{\"step\":%lld,\"time\":", i ? "," : "", (long long)g->first_step + 1);
        put_num(f, t);
        fprintf(f, ",\"resumed_from\":%lld,\"world\":%d,\"tp\":%d,\"pp\":%d,\"dp\":%d,\"host\":",
                (long long)g->resumed_from, g->world, g->tp, g->pp, g->dp);
        put_str(f, g->host);
        fputs(",\"slurm_job_id\":", f);
        put_str(f, g->slurm_job_id);
        fputc('}', f);
    }
    fputc(']', f);
}

static hpt_status out_checked(FILE *out, const char *path)
{
    if (ferror(out))
        return hpt_error_set(HPT_ERR_IO, "%s: writing its JSON failed: %s", path,
                             strerror(errno));
    return HPT_OK;
}

/* ------------------------------------------------------------ public */

static hpt_status history_of(const run_t *r, int points, FILE *out)
{
    size_t n = r->m.n;
    double *col[NCOL] = {0}, *step = NULL, *val = NULL;
    unsigned char *sel = malloc(n ? n : 1);
    size_t *idx = malloc(sizeof *idx * (n ? n : 1)), *vidx = malloc(sizeof *vidx * (n ? n : 1));
    hpt_status st = sel && idx && vidx ? HPT_OK
                               : hpt_error_set(HPT_ERR_INTERNAL, "%s: out of memory", r->m.path);
    if (!st)
        st = hpt_mread_steps_col(&r->m, "step", 0, &step);
    if (!st)
        st = hpt_mread_steps_col(&r->m, "val_loss", 0, &val);
    for (int c = 0; !st && c < NCOL; c++)
        st = hpt_mread_steps_col(&r->m, col_file[c], 0, &col[c]);
    if (!st) {
        size_t k = select_rows(r, col, step, points, sel), j = 0;
        for (size_t i = 0; i < n; i++)
            if (sel[i])
                idx[j++] = i;
        fprintf(out, "{\"run\":0,\"state\":\"%s\",", run_state(r));
        put_columns(out, col, step, val, idx, k, vidx, n, points);
        fputc(',', out);
        st = put_ranks(out, r, step);
    }
    if (!st) {
        fputc(',', out);
        st = put_comm(out, r);
    }
    if (!st) {
        fputc(',', out);
        put_events(out, r);
        fputc(',', out);
        put_segments(out, r);
        fputs(",\"alerts\":[]}", out);
        st = out_checked(out, r->m.path);
    }
    for (int c = 0; c < NCOL; c++)
        free(col[c]);
    free(step);
    free(val);
    free(sel);
    free(idx);
    free(vidx);
    return st;
}

hpt_status hpt_metrics_history_json(const char *path, int points, FILE *out)
{
    run_t r;
    hpt_status st = run_open(&r, path);
    if (!st)
        st = history_of(&r, points, out);
    run_close(&r);
    return st;
}

static void run_entry(const run_t *r, const char *path, int id, FILE *out)
{
    const char *slash = strrchr(path, '/');
    char name[256];
    if (slash && slash > path) { /* the directory's name */
        const char *d = slash;
        while (d > path && d[-1] != '/')
            d--;
        snprintf(name, sizeof name, "%.*s", (int)(slash - d), d);
    } else {
        snprintf(name, sizeof name, "%s", slash ? slash + 1 : path);
    }
    const hpt_mread_seg *s = r->nseg ? &r->seg[r->nseg - 1] : NULL;
    fprintf(out, "{\"id\":%d,\"name\":", id);
    put_str(out, name);
    fputs(",\"path\":", out);
    put_str(out, path);
    fprintf(out, ",\"layout\":{\"tp\":%d,\"pp\":%d,\"dp\":%d,\"world\":%d},\"attrs\":{",
            s ? s->tp : 1, s ? s->pp : 1, s ? s->dp : 1, s ? s->world : 1);
    fputs("\"hpt_version\":", out);
    put_str(out, r->m.hpt_version ? r->m.hpt_version : "");
    fprintf(out, ",\"format_version\":%d,\"peak_flops_per_rank\":", r->m.format_version);
    put_num(out, r->m.peak_flops);
    fprintf(out, ",\"segments\":%zu,\"steps\":%zu},\"state\":\"%s\",\"error\":null}", r->nseg,
            r->m.n, run_state(r));
}

hpt_status hpt_metrics_run_json(const char *path, int id, FILE *out)
{
    run_t r;
    hpt_status st = run_open(&r, path);
    if (!st) {
        run_entry(&r, path, id, out);
        st = out_checked(out, path);
    }
    run_close(&r);
    return st;
}

/* ------------------------------------------------------------ report */

/* The whole of file `path`, NUL-terminated: malloc'd, the caller frees. */
static hpt_status slurp(const char *path, char **out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return hpt_error_set(HPT_ERR_IO, "%s: cannot read the page asset: %s", path,
                             strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len - 1, f);
        if (len < cap - 1)
            break;
        char *nb = realloc(buf, cap *= 2);
        if (!nb)
            free(buf);
        buf = nb;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf)
        return hpt_error_set(HPT_ERR_INTERNAL, "%s: out of memory reading it", path);
    if (bad) {
        free(buf);
        return hpt_error_set(HPT_ERR_IO, "%s: read error", path);
    }
    buf[len] = 0;
    *out = buf;
    return HPT_OK;
}

/* Write `text` inside a <script> or <style> element: every "</" followed
 * by the element's name becomes "<\/" (equal in JS strings and regular
 * expressions, where alone it can occur), so the element cannot end early. */
static void put_inline(FILE *out, const char *text, const char *tag)
{
    size_t tl = strlen(tag);
    for (const char *p = text; *p; p++) {
        if (p[0] == '<' && p[1] == '/' && !strncasecmp(p + 2, tag, tl)) {
            fputs("<\\/", out);
            p++;
            continue;
        }
        fputc(*p, out);
    }
}

static hpt_status report_data(const char *const *paths, int n, int points, FILE *out)
{
    hpt_status st = HPT_OK;
    fputs("window.HPT_DATA = {\"runs\":[", out);
    for (int i = 0; !st && i < n; i++) {
        fputs(i ? ",\n" : "\n", out);
        st = hpt_metrics_run_json(paths[i], i, out);
    }
    fputs("],\"history\":[", out);
    for (int i = 0; !st && i < n; i++) {
        run_t r;
        fputs(i ? ",\n" : "\n", out);
        st = run_open(&r, paths[i]);
        if (!st)
            st = history_of(&r, points, out);
        run_close(&r);
    }
    fputs("]};\n", out);
    return st;
}

hpt_status hpt_metrics_report_write(const char *const *paths, int n, int points,
                                    const char *const assets[3], FILE *out)
{
    char *text[3] = {0};
    hpt_status st = HPT_OK;
    for (int a = 0; !st && a < 3; a++)
        st = slurp(assets[a], &text[a]);
    if (!st) {
        fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
              "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
              "<meta name=\"generator\" content=\"hpt-metrics report\">\n<link rel=\"icon\" href=\"data:,\">\n"
              "<title>hpt report</title>\n<style>\n", out);
        put_inline(out, text[0], "style");
        fputs("</style>\n</head>\n<body>\n<script>\n", out);
        st = report_data(paths, n, points, out);
    }
    if (!st) {
        fputs("</script>\n<script>\n", out);
        put_inline(out, text[1], "script");
        fputs("\n</script>\n<script>\n", out);
        put_inline(out, text[2], "script");
        fputs("\n</script>\n</body>\n</html>\n", out);
        if (ferror(out))
            st = hpt_error_set(HPT_ERR_IO, "writing the report failed: %s", strerror(errno));
    }
    for (int a = 0; a < 3; a++)
        free(text[a]);
    return st;
}
