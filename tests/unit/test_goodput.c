/* test_goodput.c — lib/goodput.c on a hand-made timeline of three segments
 * (a kill -9 after a save, a stop signal, an older segment without its
 * process start) whose split is computed by hand below, and Young's and
 * Daly's intervals and Daly's expected goodput against hand-computed
 * values. Prints one line per check; exit 1 if any fails. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "goodput.h"

static int failures;

static void expect(const char *what, double got, double want)
{
    if (!(fabs(got - want) <= 1e-9 * fmax(1, fabs(want)))) {
        printf("FAIL %s: got %.17g, expected %.17g\n", what, got, want);
        failures++;
    } else {
        printf("ok   %s = %.17g\n", what, got);
    }
}

static hpt_metrics_seg_row seg(int i, int64_t first_row, int64_t resumed, double proc, double start,
                               double load)
{
    hpt_metrics_seg_row s;
    memset(&s, 0, sizeof s);
    s.segment = i, s.first_row = first_row, s.resumed_from = resumed;
    s.process_start = proc, s.start_time = start, s.load_seconds = load;
    return s;
}

static hpt_metrics_event_row ev(double t, const char *kind)
{
    hpt_metrics_event_row e;
    memset(&e, 0, sizeof e);
    e.wall_time = t;
    snprintf(e.kind, sizeof e.kind, "%s", kind);
    return e;
}

/* Segment 0 (process start 1000, fresh): steps 1-4, validation after 2
 * (0.25 s), a save after 2 (0.5 s, carried by row 3), killed after step 4.
 * Segment 1 (1010, resumed from 2, load 0.2 s): steps 3-5, then a stop
 * signal: a save ending at 1014.6, run_end 1014.7. Segment 2 (an older
 * writer: no process start, start_time 1020; resumed from 5): step 6,
 * run_end 1021.6. Every step 1 s.
 *   startup  (1003 - 1 - 1000) + (1012 - 1 - 1010) + (1021.5 - 1 - 1020)
 *            = 2 + 1 + 0.5 = 3.5 (resumed segments 1.5)
 *   other    row 2: 1.5 - 1 - 0.25 = 0.25; row 3: 1.5 - 1 - 0.5 = 0;
 *            row 4: 0.1; seg 1 rows 0, 0, tail after the save 0.1;
 *            seg 2 tail 0.1: 0.55
 *   checkpoint 0.5 + (1014.6 - 1014) = 1.1, 2 saves
 *   between  (1010 - 1007.1) + (1020 - 1014.7) = 8.2
 *   productive 6 rows x 1 s (steps 1-6, the last row of each), redone
 *            2 x 1 s (segment 0's steps 3 and 4)
 *   wall     1021.6 - 1000 = 21.6 = the sum; goodput 6 / 21.6 */
static void timeline(void)
{
    const double step[] = {1, 2, 3, 4, 3, 4, 5, 6};
    const double segc[] = {0, 0, 0, 0, 1, 1, 1, 2};
    const double wall[] = {1003, 1004.5, 1006, 1007.1, 1012, 1013, 1014, 1021.5};
    const double st[] = {1, 1, 1, 1, 1, 1, 1, 1};
    const double ck[] = {0, 0, 0.5, 0, 0, 0, 0, 0};
    const double val[] = {0, 0.25, 0, 0, 0, 0, 0, NAN};
    hpt_metrics_seg_row sg[3] = {seg(0, 0, -1, 1000, 1001, 0), seg(1, 4, 2, 1010, 1010.5, 0.2),
                                 seg(2, 7, 5, NAN, 1020, NAN)};
    hpt_metrics_event_row e[8] = {ev(1001, "run_start"),       ev(1005, "checkpoint_save"),
                                  ev(1010.5, "run_start"),     ev(1014, "signal"),
                                  ev(1014.6, "checkpoint_save"), ev(1014.7, "run_end"),
                                  ev(1021.6, "run_end"),       ev(1020, "run_start")};
    hpt_goodput_in in = {.rows = 8, .step = step, .segment = segc, .wall_time = wall,
                         .step_time = st, .checkpoint = ck, .validation = val, .seg = sg,
                         .nseg = 3, .ev = e, .nev = 8};
    hpt_goodput g;
    if (hpt_goodput_compute(&in, &g)) {
        printf("FAIL hpt_goodput_compute: %s\n", hpt_error_msg());
        failures++;
        return;
    }
    expect("wall", g.wall, 21.6);
    expect("productive", g.productive, 6);
    expect("redone", g.redone, 2);
    expect("checkpoint", g.checkpoint, 1.1);
    expect("startup", g.startup, 3.5);
    expect("validation", g.validation, 0.25);
    expect("between", g.between, 8.2);
    expect("other", g.other, 0.55);
    expect("parts add up to the wall time", g.productive + g.redone + g.checkpoint + g.startup +
           g.validation + g.between + g.other, g.wall);
    expect("fraction", g.fraction, 6 / 21.6);
    expect("load", g.load, 0.2);
    expect("restart startup", g.restart_startup, 1.5);
    expect("steps", (double)g.steps, 6);
    expect("redone steps", (double)g.redone_steps, 2);
    expect("saves", g.saves, 2);
    expect("resumes", g.resumes, 2);
    expect("segments with a process start", g.start_known, 2);
    /* a file before /ranks/validation: the 0.25 s fall into other */
    in.validation = NULL;
    hpt_goodput_compute(&in, &g);
    expect("no validation column: validation", g.validation, 0);
    expect("no validation column: other", g.other, 0.8);
    expect("no validation column: known", g.validation_known, 0);
    /* nothing: no segment, no rows */
    hpt_goodput_in none = {0};
    hpt_goodput_compute(&none, &g);
    expect("empty: wall", g.wall, 0);
    printf("%s empty: fraction NaN\n", isnan(g.fraction) ? "ok  " : "FAIL");
    failures += !isnan(g.fraction);
}

/* delta 30 s, M 2 h = 7200 s, by hand:
 *   Young  sqrt(2 x 30 x 7200) = sqrt(432000) = 657.267069006199
 *   Daly   x = 30 / 14400 = 1/480; 657.267069006199 x (1 + sqrt(1/480)/3
 *          + (1/480)/9) - 30 = 657.267069006199 x 1.015445996967... - 30
 *          = 637.419214161062
 *   Daly's expected goodput at tau 600, R 60: 600 / (7200 e^(60/7200)
 *          (e^(630/7200) - 1)) = 0.903759053759336
 * and delta >= 2M: Daly's tau = M. */
static void intervals(void)
{
    expect("Young 1974", hpt_goodput_young(30, 7200), 657.267069006199);
    expect("Daly 2006", hpt_goodput_daly(30, 7200), 637.419214161062);
    expect("Daly 2006, delta >= 2M", hpt_goodput_daly(100, 40), 40);
    expect("expected goodput", hpt_goodput_expected(600, 30, 60, 7200), 0.903759053759336);
    /* the optimum: Daly's tau beats a tau 20 % either side */
    double d = hpt_goodput_daly(30, 7200), best = hpt_goodput_expected(d, 30, 60, 7200);
    int ok = best > hpt_goodput_expected(0.8 * d, 30, 60, 7200) &&
             best > hpt_goodput_expected(1.2 * d, 30, 60, 7200);
    printf("%s Daly's interval is better than 0.8x and 1.2x of it\n", ok ? "ok  " : "FAIL");
    failures += !ok;
}

int main(void)
{
    timeline();
    intervals();
    if (failures)
        printf("%d check(s) failed\n", failures);
    return failures != 0;
}
