/* live_prom.c — GET /metrics of hpt-live: the followed runs in the
 * Prometheus text exposition format 0.0.4 (live.h, docs/LIVE.md).
 *
 * Every family is written once (# HELP, # TYPE, then one series per run),
 * labels run (the run's name as hpt-live shows it) and job (the Slurm job
 * id of its newest segment, "" if none). Gauges of the newest kept row are
 * left out for a run with no row yet. Per-rank figures stay bounded in
 * cardinality: a summary over ranks (four quantiles, _sum, _count) and
 * the top-k slowest ranks. */
#include "live.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A label value: backslash, double quote and newline escaped (0.0.4). */
static void prom_label(hpt_sbuf *b, const char *s)
{
    hpt_sbuf_put(b, "\"", 1);
    for (; *s; s++) {
        if (*s == '\\')
            hpt_sbuf_put(b, "\\\\", 2);
        else if (*s == '"')
            hpt_sbuf_put(b, "\\\"", 2);
        else if (*s == '\n')
            hpt_sbuf_put(b, "\\n", 2);
        else
            hpt_sbuf_put(b, s, 1);
    }
    hpt_sbuf_put(b, "\"", 1);
}

/* A sample value: NaN, +Inf, -Inf as the format spells them, else the
 * shortest round trip. */
static void prom_num(hpt_sbuf *b, double v)
{
    if (isnan(v))
        hpt_sbuf_printf(b, "NaN");
    else if (isinf(v))
        hpt_sbuf_printf(b, "%sInf", v > 0 ? "+" : "-");
    else
        hpt_sbuf_printf(b, "%.17g", v);
}

static void family(hpt_sbuf *b, const char *name, const char *type, const char *help)
{
    hpt_sbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* "NAME{run="...",slurm_job="..."" — the caller adds more labels and the "} v". */
static void series_open(hpt_sbuf *b, const char *name, const hpt_live_run *r)
{
    const char *job = r->nseg ? r->seg[r->nseg - 1].slurm_job_id : "";
    hpt_sbuf_printf(b, "%s{run=", name);
    prom_label(b, r->name);
    hpt_sbuf_printf(b, ",slurm_job=");
    prom_label(b, job);
}

static void sample(hpt_sbuf *b, double v)
{
    hpt_sbuf_put(b, "} ", 2);
    prom_num(b, v);
    hpt_sbuf_put(b, "\n", 1);
}

/* The gauges of the newest kept row. */
static const struct {
    const char *name, *help;
    int col;
} row_gauges[] = {
    {"hpt_step", "Step of the newest row.", HPT_LC_STEP},
    {"hpt_loss", "Training loss of the newest row (nats/token).", HPT_LC_LOSS},
    {"hpt_val_loss", "Validation loss of the newest row (nats/token; NaN: no validation "
                     "at that step).", HPT_LC_VAL},
    {"hpt_lr", "Learning rate of the newest row.", HPT_LC_LR},
    {"hpt_grad_norm", "Gradient norm before clipping of the newest row.", HPT_LC_NORM},
    {"hpt_tokens_per_second", "Tokens per second of the newest row.", HPT_LC_TOK_S},
    {"hpt_mfu", "Model FLOP utilisation of the newest row (fraction of peak).", HPT_LC_MFU},
    {"hpt_step_seconds", "Wall time of the newest step on world rank 0 (s).",
     HPT_LC_STEP_TIME},
};

static const char *const state_label[] = {"waiting", "live", "writer_stopped", "finished",
                                          "error"};

static double last_checkpoint(const hpt_live_run *r)
{
    for (size_t i = r->nev; i-- > 0;)
        if (!strcmp(r->ev[i].kind, "checkpoint_save"))
            return r->ev[i].wall_time;
    return NAN;
}

/* Counts of r's events by file kind: kinds[0..*nk) with counts. */
static size_t event_kinds(const hpt_live_run *r, const char **kinds, size_t *counts, size_t max)
{
    size_t nk = 0;
    for (size_t i = 0; i < r->nev; i++) {
        size_t k = 0;
        while (k < nk && strcmp(kinds[k], r->ev[i].kind))
            k++;
        if (k == nk && nk == max)
            continue; /* more distinct kinds than the file format has */
        if (k == nk) {
            kinds[nk] = r->ev[i].kind;
            counts[nk++] = 0;
        }
        counts[k]++;
    }
    return nk;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Linear interpolation between order statistics (Hyndman & Fan 1996,
 * definition 7): v sorted, n >= 1. */
static double quantile(const double *v, size_t n, double q)
{
    double h = (double)(n - 1) * q;
    size_t lo = (size_t)floor(h);
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (h - (double)lo) * (v[hi] - v[lo]);
}

typedef struct {
    double t;
    size_t rank;
} rank_time;

static int cmp_slow(const void *a, const void *b)
{
    const rank_time *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? 1 : -1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Per-rank step times of r's newest row into *t (malloc'd [*n], finite
 * values only, with their ranks); 0 if there is none to read, -1 when the
 * read failed (the run is marked damaged). */
static int rank_times(hpt_live_run *r, rank_time **t, size_t *n, int *changed)
{
    *t = NULL;
    *n = 0;
    if (!r->n || !r->nranks || r->file <= 0 || r->state == HPT_LIVE_ERROR)
        return 0;
    double *v = malloc(sizeof *v * r->nranks);
    rank_time *out = malloc(sizeof *out * r->nranks);
    if (!v || !out) {
        free(v);
        free(out);
        return 0;
    }
    if (hpt_live_rank_values(r, "step_time", r->row[r->n - 1], v)) {
        if (hpt_live_run_set_damage(r, hpt_error_msg()) && changed)
            *changed = 1;
        free(v);
        free(out);
        return -1;
    }
    for (size_t i = 0; i < r->nranks; i++)
        if (isfinite(v[i]))
            out[(*n)++] = (rank_time){v[i], i};
    free(v);
    *t = out;
    return 0;
}

static void write_rank_families(hpt_sbuf *b, hpt_live_run *const *runs, int nruns, int topk,
                                int *changed)
{
    rank_time **t = calloc((size_t)(nruns ? nruns : 1), sizeof *t);
    size_t *n = calloc((size_t)(nruns ? nruns : 1), sizeof *n);
    if (!t || !n) {
        b->oom = 1;
        free(t);
        free(n);
        return;
    }
    for (int i = 0; i < nruns; i++)
        rank_times(runs[i], &t[i], &n[i], changed ? &changed[i] : NULL);
    family(b, "hpt_rank_step_seconds", "summary", "Quantiles over ranks of the per-rank step "
           "time of the newest row (s; 0 and 1: the fastest and slowest rank; _count ranks, "
           "_sum their total).");
    static const double qs[] = {0, 0.5, 0.9, 1};
    for (int i = 0; i < nruns; i++) {
        if (!n[i])
            continue;
        double *v = malloc(sizeof *v * n[i]);
        if (!v) {
            b->oom = 1;
            continue;
        }
        for (size_t j = 0; j < n[i]; j++)
            v[j] = t[i][j].t;
        qsort(v, n[i], sizeof *v, cmp_double);
        for (size_t q = 0; q < sizeof qs / sizeof *qs; q++) {
            series_open(b, "hpt_rank_step_seconds", runs[i]);
            hpt_sbuf_printf(b, ",quantile=\"%g\"", qs[q]);
            sample(b, quantile(v, n[i], qs[q]));
        }
        double sum = 0;
        for (size_t j = 0; j < n[i]; j++)
            sum += v[j];
        series_open(b, "hpt_rank_step_seconds_sum", runs[i]);
        sample(b, sum);
        series_open(b, "hpt_rank_step_seconds_count", runs[i]);
        sample(b, (double)n[i]);
        free(v);
    }
    family(b, "hpt_slowest_rank_step_seconds", "gauge", "Step time of the newest row on the "
           "slowest ranks (s; hpt-live --prometheus-top-k of them).");
    for (int i = 0; i < nruns; i++) {
        if (n[i]) /* a run without per-rank values (damaged, empty) has t[i] NULL */
            qsort(t[i], n[i], sizeof *t[i], cmp_slow);
        for (size_t j = 0; j < n[i] && j < (size_t)topk; j++) {
            series_open(b, "hpt_slowest_rank_step_seconds", runs[i]);
            hpt_sbuf_printf(b, ",rank=\"%zu\"", t[i][j].rank);
            sample(b, t[i][j].t);
        }
        free(t[i]);
    }
    free(t);
    free(n);
}

void hpt_live_prom_write(hpt_live_run *const *runs, int nruns, double now, int topk,
                         int *changed, hpt_sbuf *out)
{
    /* per-rank reads first: a damaged file turns its run to error before
     * the state gauges are written */
    hpt_sbuf ranks = {0};
    write_rank_families(&ranks, runs, nruns, topk, changed);
    for (size_t g = 0; g < sizeof row_gauges / sizeof *row_gauges; g++) {
        family(out, row_gauges[g].name, "gauge", row_gauges[g].help);
        for (int i = 0; i < nruns; i++)
            if (runs[i]->n) {
                series_open(out, row_gauges[g].name, runs[i]);
                sample(out, runs[i]->col[row_gauges[g].col][runs[i]->n - 1]);
            }
    }
    family(out, "hpt_run_state", "gauge", "1 for the state the run is in (live, "
           "writer_stopped, finished, error, waiting), 0 for the others.");
    for (int i = 0; i < nruns; i++)
        for (int s = 0; s < 5; s++) {
            series_open(out, "hpt_run_state", runs[i]);
            hpt_sbuf_printf(out, ",state=\"%s\"", state_label[s]);
            sample(out, runs[i]->state == (hpt_live_state)s);
        }
    family(out, "hpt_seconds_since_last_row", "gauge", "Seconds from the newest row's "
           "wall_time to now.");
    for (int i = 0; i < nruns; i++)
        if (runs[i]->n) {
            series_open(out, "hpt_seconds_since_last_row", runs[i]);
            sample(out, now - runs[i]->col[HPT_LC_WALL][runs[i]->n - 1]);
        }
    family(out, "hpt_seconds_since_last_checkpoint", "gauge", "Seconds from the newest "
           "checkpoint_save event to now (absent: no checkpoint saved yet).");
    for (int i = 0; i < nruns; i++) {
        double t = last_checkpoint(runs[i]);
        if (!isnan(t)) {
            series_open(out, "hpt_seconds_since_last_checkpoint", runs[i]);
            sample(out, now - t);
        }
    }
    family(out, "hpt_events_total", "counter", "Events of the metrics file by kind "
           "(docs/METRICS.md).");
    for (int i = 0; i < nruns; i++) {
        const char *kinds[64];
        size_t counts[64];
        size_t nk = event_kinds(runs[i], kinds, counts, 64);
        for (size_t k = 0; k < nk; k++) {
            series_open(out, "hpt_events_total", runs[i]);
            hpt_sbuf_printf(out, ",kind=");
            prom_label(out, kinds[k]);
            sample(out, (double)counts[k]);
        }
    }
    family(out, "hpt_alerts_fired_total", "counter", "Alerts of hpt-live's --alert rules "
           "fired on the run.");
    for (int i = 0; i < nruns; i++) {
        series_open(out, "hpt_alerts_fired_total", runs[i]);
        sample(out, (double)runs[i]->nalert);
    }
    hpt_sbuf_put(out, ranks.p ? ranks.p : "", ranks.n);
    out->oom |= ranks.oom;
    free(ranks.p);
}
