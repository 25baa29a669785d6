/* goodput.c — a run's wall time split over its segments, and Young/Daly's
 * checkpoint interval (goodput.h). */
#include "goodput.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- accounting */

/* kept[i] = 1 for the last row of each step (the dedup rule,
 * hpt_mread_keep); returns the distinct steps, -1 out of memory. */
static long mark_kept(const hpt_goodput_in *in, unsigned char *kept)
{
    int64_t *step = malloc(sizeof *step * (in->rows ? in->rows : 1));
    size_t *keep = malloc(sizeof *keep * (in->rows ? in->rows : 1));
    long n = step && keep ? 0 : -1;
    for (size_t i = 0; n == 0 && i < in->rows; i++)
        step[i] = (int64_t)in->step[i];
    if (n == 0)
        n = hpt_mread_keep(step, in->rows, keep);
    memset(kept, 0, in->rows);
    for (long k = 0; k < n; k++)
        kept[keep[k]] = 1;
    free(step);
    free(keep);
    return n;
}

static double or0(const double *v, size_t i)
{
    return v && isfinite(v[i]) ? v[i] : 0;
}

/* Segment s's process start: recorded, else its metrics open time. */
static double seg_start(const hpt_metrics_seg_row *s)
{
    return isfinite(s->process_start) && s->process_start <= s->start_time ? s->process_start
                                                                           : s->start_time;
}

/* Index of the segment event time t falls in: the last whose start is
 * <= t (0 when before every start). */
static size_t seg_of_time(const double *start, size_t nseg, double t)
{
    size_t lo = 0, hi = nseg;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (start[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* One segment's part: [P, E] where E is its last known time. last_save:
 * its last checkpoint_save event's time (-inf none). */
static void account_segment(const hpt_goodput_in *in, const unsigned char *kept, size_t s,
                            double P, double E, double last_save, hpt_goodput *g)
{
    const hpt_metrics_seg_row *sg = &in->seg[s];
    size_t r0 = sg->first_row < 0 ? 0 : (size_t)sg->first_row;
    size_t r1 = s + 1 < in->nseg && in->seg[s + 1].first_row >= 0 ? (size_t)in->seg[s + 1].first_row
                                                                   : in->rows;
    r1 = r1 < in->rows ? r1 : in->rows;
    double prev = NAN, startup = 0;
    for (size_t i = r0; i < r1; i++) {
        if (in->segment[i] != (double)sg->segment)
            continue;
        double t = or0(in->step_time, i), c = or0(in->checkpoint, i), v = or0(in->validation, i);
        double w = in->wall_time[i];
        if (isnan(prev))
            startup = (w - t - c - v) - P; /* everything before the first step */
        else
            g->other += (w - prev) - t - c - v;
        *(kept[i] ? &g->productive : &g->redone) += t;
        g->checkpoint += c;
        g->validation += v;
        prev = w;
    }
    if (isnan(prev)) { /* no rows: it never reached its first step */
        startup = E - P;
    } else if (last_save > prev) { /* the save that ended it (stop signal, last step) */
        g->checkpoint += last_save - prev;
        g->other += E - last_save;
    } else {
        g->other += E - prev;
    }
    g->startup += startup;
    if (sg->resumed_from >= 0) {
        g->restart_startup += startup;
        g->resumes++;
    }
    g->load += isfinite(sg->load_seconds) ? sg->load_seconds : 0;
}

hpt_status hpt_goodput_compute(const hpt_goodput_in *in, hpt_goodput *g)
{
    memset(g, 0, sizeof *g);
    g->fraction = NAN;
    size_t S = in->nseg;
    unsigned char *kept = malloc(in->rows ? in->rows : 1);
    double *start = malloc(sizeof *start * (S ? 3 * S : 1));
    long steps = kept ? mark_kept(in, kept) : -1;
    if (!kept || !start || steps < 0) {
        free(kept);
        free(start);
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory (goodput of %zu rows)", in->rows);
    }
    double *end = start + S, *save = start + 2 * S;
    for (size_t s = 0; s < S; s++) {
        start[s] = seg_start(&in->seg[s]);
        end[s] = fmax(start[s], in->seg[s].start_time);
        save[s] = -INFINITY;
        g->start_known += isfinite(in->seg[s].process_start);
    }
    for (size_t i = 0; S && i < in->rows; i++) { /* a row's time ends its segment's so far */
        double sg = in->segment[i];
        if (sg >= 0 && sg < (double)S)
            end[(size_t)sg] = fmax(end[(size_t)sg], in->wall_time[i]);
    }
    for (size_t e = 0; S && e < in->nev; e++) {
        size_t s = seg_of_time(start, S, in->ev[e].wall_time);
        end[s] = fmax(end[s], in->ev[e].wall_time);
        if (!strcmp(in->ev[e].kind, "checkpoint_save")) { /* one per save committed
                                                              * (--async-save: at its
                                                              * commit) */
            save[s] = fmax(save[s], in->ev[e].wall_time);
            g->saves++;
        }
    }
    for (size_t s = 0; s < S; s++) {
        account_segment(in, kept, s, start[s], end[s], save[s], g);
        if (s > 0)
            g->between += start[s] - end[s - 1];
    }
    g->wall = S ? end[S - 1] - start[0] : 0;
    g->fraction = g->wall > 0 ? g->productive / g->wall : NAN;
    g->rows = (int64_t)in->rows;
    g->steps = steps;
    g->redone_steps = (int64_t)in->rows - steps;
    g->segments = (int)S;
    g->validation_known = in->validation != NULL || in->rows == 0; /* no rows: nothing unknown */
    free(kept);
    free(start);
    return HPT_OK;
}

hpt_status hpt_goodput_read(const hpt_mread *m, hpt_goodput *g)
{
    static const char *const cols[4] = {"step", "segment", "wall_time", "step_time"};
    double *col[4] = {0}, *ckpt = NULL, *val = NULL;
    hpt_mread_seg *seg = NULL;
    hpt_mread_event *ev = NULL;
    size_t nseg = 0, nev = 0;
    hpt_status st = HPT_OK;
    memset(g, 0, sizeof *g);
    for (int c = 0; !st && c < 4; c++)
        st = hpt_mread_rows_col(m, cols[c], &col[c]);
    if (!st)
        st = hpt_mread_rows_rank(m, "checkpoint", 0, &ckpt);
    if (!st)
        st = hpt_mread_rows_rank(m, "validation", 0, &val);
    if (!st)
        st = hpt_mread_segments(m, &seg, &nseg);
    if (!st)
        st = hpt_mread_events(m, &ev, &nev);
    if (!st) {
        hpt_goodput_in in = {.rows = m->rows, .step = col[0], .segment = col[1],
                             .wall_time = col[2], .step_time = col[3], .checkpoint = ckpt,
                             .validation = val, .seg = seg, .nseg = nseg, .ev = ev, .nev = nev};
        st = hpt_goodput_compute(&in, g);
    }
    for (int c = 0; c < 4; c++)
        free(col[c]);
    free(ckpt);
    free(val);
    free(seg);
    free(ev);
    return st;
}

hpt_status hpt_goodput_of_file(const char *path, hpt_goodput *g)
{
    hpt_mread m;
    memset(g, 0, sizeof *g);
    hpt_status st = hpt_mread_open(&m, path);
    if (!st)
        st = hpt_goodput_read(&m, g);
    hpt_mread_close(&m);
    return st;
}

/* ------------------------------------------------------------- output */

static double pct(double part, double wall)
{
    return wall > 0 ? 100 * part / wall : NAN;
}

void hpt_goodput_print(const hpt_goodput *g, FILE *out)
{
    double W = g->wall;
    fprintf(out, "wall: %.3f s, %d segment%s (%d resumed), from the first process start to "
            "the last known time\n", W, g->segments, g->segments == 1 ? "" : "s", g->resumes);
    fprintf(out, "productive: %.3f s (%.2f %%), %lld steps\n", g->productive,
            pct(g->productive, W), (long long)g->steps);
    fprintf(out, "redone: %.3f s (%.2f %%), %lld steps run again after a restart\n", g->redone,
            pct(g->redone, W), (long long)g->redone_steps);
    fprintf(out, "checkpoint: %.3f s (%.2f %%), %d saves\n", g->checkpoint,
            pct(g->checkpoint, W), g->saves);
    fprintf(out, "startup: %.3f s (%.2f %%), of which checkpoint loading %.3f s; %d of %d "
            "segments with their process start recorded\n", g->startup, pct(g->startup, W),
            g->load, g->start_known, g->segments);
    if (g->validation_known)
        fprintf(out, "validation: %.3f s (%.2f %%)\n", g->validation, pct(g->validation, W));
    else
        fprintf(out, "validation: not recorded (a file older than /ranks/validation: in "
                "other)\n");
    fprintf(out, "between segments: %.3f s (%.2f %%), after each segment's last known time\n",
            g->between, pct(g->between, W));
    fprintf(out, "other: %.3f s (%.2f %%), metrics, logging and agreements between steps\n",
            g->other, pct(g->other, W));
    fprintf(out, "goodput: %.2f %% (productive / wall: effective training time)\n",
            pct(g->productive, W));
}

void hpt_goodput_print_line(const hpt_goodput *g, FILE *out)
{
    fprintf(out, "goodput: %.2f %% of %.3f s (redone %lld steps %.3f s, checkpoint %.3f s, "
            "startup %.3f s, validation %.3f s, between segments %.3f s)\n",
            pct(g->productive, g->wall), g->wall, (long long)g->redone_steps, g->redone,
            g->checkpoint, g->startup, g->validation, g->between);
}

/* ------------------------------------------------ checkpoint interval */

double hpt_goodput_young(double delta, double mtbf)
{
    return sqrt(2 * delta * mtbf);
}

double hpt_goodput_daly(double delta, double mtbf)
{
    if (delta >= 2 * mtbf)
        return mtbf;
    double x = delta / (2 * mtbf);
    return sqrt(2 * delta * mtbf) * (1 + sqrt(x) / 3 + x / 9) - delta;
}

double hpt_goodput_expected(double tau, double delta, double restart, double mtbf)
{
    return tau / (mtbf * exp(restart / mtbf) * expm1((tau + delta) / mtbf));
}
