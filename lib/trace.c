/* trace.c — the step timeline; see trace.h. */
#include "trace.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "metrics_h5.h"

struct hpt_trace {
    int a, b, rank, stage;
    int step;                  /* current step (1-based), 0 before the first    */
    int capturing;             /* the flight recorder's capture runs            */
    hpt_flight *fr;
    hpt_flight_rec *ops;       /* [HPT_TRACE_MAX_OPS] the capture buffer        */
    hpt_metrics_trace_row *rows; /* [HPT_TRACE_MAX_SPANS]                      */
    size_t n;
    int64_t dropped;           /* spans and operations that did not fit        */
    int first_step, last_step; /* steps traced so far (0: none)                 */
    double offset;             /* Unix time - monotonic time, seconds           */
};

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int parse_step(const char *s, char **end)
{
    errno = 0;
    if (*s < '0' || *s > '9')
        return -1;
    long v = strtol(s, end, 10);
    return errno || v < 1 || v > INT32_MAX ? -1 : (int)v;
}

hpt_status hpt_trace_parse(const char *spec, int *a, int *b)
{
    char *end = NULL;
    int x = spec ? parse_step(spec, &end) : -1, y = x;
    if (x > 0 && *end == '-')
        y = parse_step(end + 1, &end);
    if (x < 1 || y < 1 || *end)
        return hpt_error_set(HPT_ERR_USAGE, "--trace-steps '%s': expected the steps to trace "
                             "as A-B or A (1-based step numbers, A <= B), e.g. 10-12",
                             spec ? spec : "");
    if (x > y)
        return hpt_error_set(HPT_ERR_USAGE, "--trace-steps '%s': reversed: the first step %d is "
                             "after the last %d", spec, x, y);
    *a = x;
    *b = y;
    return HPT_OK;
}

hpt_trace *hpt_trace_new(int a, int b, int rank, int stage, hpt_flight *fr)
{
    hpt_trace *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->rows = malloc(sizeof *t->rows * HPT_TRACE_MAX_SPANS);
    t->ops = fr ? malloc(sizeof *t->ops * HPT_TRACE_MAX_OPS) : NULL;
    if (!t->rows || (fr && !t->ops)) {
        hpt_trace_free(t);
        return NULL;
    }
    t->a = a, t->b = b, t->rank = rank, t->stage = stage, t->fr = fr;
    double m0 = clock_s(CLOCK_MONOTONIC), u = clock_s(CLOCK_REALTIME);
    t->offset = u - 0.5 * (m0 + clock_s(CLOCK_MONOTONIC));
    return t;
}

void hpt_trace_free(hpt_trace *t)
{
    if (!t)
        return;
    if (t->fr && t->capturing)
        hpt_flight_capture(t->fr, NULL, 0);
    free(t->rows);
    free(t->ops);
    free(t);
}

int hpt_trace_on(const hpt_trace *t)
{
    return t && t->step >= t->a && t->step <= t->b;
}

static void copy_name(char *dst, const char *src)
{
    snprintf(dst, HPT_METRICS_TRACE_NAME_LEN, "%s", src);
}

/* A row of the current step (NULL: full, counted). */
static hpt_metrics_trace_row *add_row(hpt_trace *t)
{
    if (t->n == HPT_TRACE_MAX_SPANS) {
        t->dropped++;
        return NULL;
    }
    hpt_metrics_trace_row *r = &t->rows[t->n++];
    memset(r, 0, sizeof *r);
    r->step = t->step;
    r->rank = t->rank;
    r->stage = t->stage;
    r->micro = -1;
    r->peer = -1;
    if (t->step < t->first_step || !t->first_step)
        t->first_step = t->step;
    t->last_step = t->step > t->last_step ? t->step : t->last_step;
    return r;
}

void hpt_trace_span(hpt_trace *t, const char *name, const char *stream, int micro, double t0,
                    double t1)
{
    hpt_metrics_trace_row *r;
    if (!hpt_trace_on(t) || !(r = add_row(t)))
        return;
    r->micro = micro;
    r->t_start = t0 + t->offset;
    r->t_end = t1 + t->offset;
    copy_name(r->name, name);
    copy_name(r->stream, stream);
}

/* The operations captured since the last take, as rows of the current
 * step. */
static void take_ops(hpt_trace *t)
{
    if (!t->capturing)
        return;
    int64_t posted = hpt_flight_capture_take(t->fr);
    int64_t kept = posted < HPT_TRACE_MAX_OPS ? posted : HPT_TRACE_MAX_OPS;
    t->dropped += posted - kept;
    for (int64_t i = 0; i < kept; i++) {
        const hpt_flight_rec *op = &t->ops[i];
        hpt_metrics_trace_row *r = add_row(t);
        if (!r)
            continue;
        r->peer = op->peer;
        r->bytes = op->bytes;
        r->t_start = op->t_start + t->offset;
        r->t_end = (op->t_end > 0 ? op->t_end : op->t_start) + t->offset; /* still posted */
        copy_name(r->name, hpt_flight_op_name(op->op));
        copy_name(r->stream, hpt_flight_group_name(op->group));
    }
}

void hpt_trace_step(hpt_trace *t, int step)
{
    if (!t)
        return;
    take_ops(t);
    t->step = step;
    int want = t->fr && hpt_trace_on(t);
    if (want && !t->capturing)
        hpt_flight_capture(t->fr, t->ops, HPT_TRACE_MAX_OPS);
    else if (!want && t->capturing)
        hpt_flight_capture(t->fr, NULL, 0);
    t->capturing = want;
}

int hpt_trace_due(const hpt_trace *t, int step, int stopping)
{
    return t && step >= t->a && step <= t->b && (step == t->b || stopping);
}

void hpt_trace_flush(hpt_trace *t, MPI_Comm world, hpt_metrics *m, FILE *log)
{
    int rank, size;
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);
    take_ops(t);
    if (t->capturing)
        hpt_flight_capture(t->fr, NULL, 0);
    t->capturing = 0;
    t->b = t->step < t->b ? t->step : t->b; /* nothing after this is traced */
    long long mine[2] = {(long long)t->n, (long long)t->dropped}, tot[2] = {0, 0};
    hpt_comm_watch w = hpt_comm_watch_begin(world, HPT_FLIGHT_ALLREDUCE, sizeof mine);
    MPI_Reduce(mine, tot, 2, MPI_LONG_LONG, MPI_SUM, 0, world);
    hpt_comm_watch_end(w);
    if (rank != 0) {
        w = hpt_comm_watch_begin(world, HPT_FLIGHT_GATHER, t->n * sizeof *t->rows);
        MPI_Send(&t->n, sizeof t->n, MPI_BYTE, 0, 0, world);
        MPI_Send(t->rows, (int)(t->n * sizeof *t->rows), MPI_BYTE, 0, 1, world);
        hpt_comm_watch_end(w);
    } else {
        hpt_metrics_trace(m, t->rows, t->n);
        size_t n;
        for (int r = 1; r < size; r++) {
            w = hpt_comm_watch_begin(world, HPT_FLIGHT_GATHER, 0);
            MPI_Recv(&n, sizeof n, MPI_BYTE, r, 0, world, MPI_STATUS_IGNORE);
            MPI_Recv(t->rows, (int)(n * sizeof *t->rows), MPI_BYTE, r, 1, world,
                     MPI_STATUS_IGNORE);
            hpt_comm_watch_end(w);
            hpt_metrics_trace(m, t->rows, n);
        }
        int a = t->first_step ? t->first_step : t->a, b = t->last_step ? t->last_step : t->b;
        char drop[160] = "";
        if (tot[1])
            snprintf(drop, sizeof drop, " (%lld dropped: over %d spans per rank or %d operations "
                     "per rank and step)", tot[1], HPT_TRACE_MAX_SPANS, HPT_TRACE_MAX_OPS);
        hpt_metrics_event(m, b, 0, "trace", "steps %d-%d traced: %lld spans from %d ranks in "
                          "/trace%s", a, b, tot[0], size, drop);
        if (log) {
            fprintf(log, "trace: steps %d-%d, %lld spans from %d ranks written to /trace of the "
                    "metrics file%s; hpt-metrics trace RUN_DIR -o trace.json\n", a, b, tot[0],
                    size, drop);
            fflush(log);
        }
    }
    t->n = 0;
    t->dropped = 0;
}
