/* test_alert.c — alert rules (lib/alert.h): parsing (canonical text, column,
 * operator, threshold, spaces) and evaluation once per firing edge, with NaN
 * rows of a comparison rule changing nothing and `nonfinite` re-arming on
 * each finite step. Exit status 0 when every check passes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "alert.h"
#include "../helpers/expect.h"

/* Feed rule r the values xs of its column (or, for nonfinite, losses with
 * skipped = 0) and return the bit mask of the rows that fired. */
static unsigned feed(hpt_alert_rule *r, const double *xs, int n)
{
    unsigned mask = 0;
    for (int i = 0; i < n; i++) {
        double v[HPT_SC_COUNT], value;
        for (int c = 0; c < HPT_SC_COUNT; c++)
            v[c] = 1.0;
        v[HPT_SC_SKIPPED] = 0;
        v[HPT_SC_STEP] = i + 1;
        if (r->op == HPT_ALERT_NONFINITE)
            v[HPT_SC_LOSS] = xs[i];
        else
            v[r->col] = xs[i];
        if (hpt_alert_eval(r, v, &value)) {
            mask |= 1u << i;
            EXPECT(isnan(xs[i]) ? isnan(value) : value == xs[i], "value %g for row %d", value, i);
        }
    }
    return mask;
}

int main(void)
{
    hpt_alert_rule r;
    EXPECT(hpt_alert_parse(" grad_norm >= 1e1 ", &r) == HPT_OK, "%s", hpt_error_msg());
    EXPECT(!strcmp(r.text, "grad_norm>=1e1") && r.col == HPT_SC_NORM && r.op == HPT_ALERT_GE &&
               r.threshold == 10.0, "text '%s' col %d op %d thr %g", r.text, r.col, r.op,
           r.threshold);
    EXPECT(hpt_alert_parse("tokens_per_s<500", &r) == HPT_OK && r.op == HPT_ALERT_LT &&
               r.col == HPT_SC_TOK_S, "%s", hpt_error_msg());
    EXPECT(hpt_alert_parse("nonfinite", &r) == HPT_OK && r.op == HPT_ALERT_NONFINITE,
           "%s", hpt_error_msg());
    EXPECT_ERR(hpt_alert_parse("wall_time>1", &r), HPT_ERR_USAGE, "unknown column 'wall_time'");
    EXPECT_ERR(hpt_alert_parse("skipped>0", &r), HPT_ERR_USAGE, "unknown column 'skipped'");
    EXPECT_ERR(hpt_alert_parse("loss<-inf", &r), HPT_ERR_USAGE, "not a finite number");
    EXPECT_ERR(hpt_alert_parse("loss=<1", &r), HPT_ERR_USAGE, "no comparison operator");

    /* an edge: fires on rows 1 and 4 (0-based), not while it stays met */
    hpt_alert_parse("loss>8", &r);
    double loss[] = {7, 9, 10, 8, 8.5, 11};
    unsigned m = feed(&r, loss, 6);
    EXPECT(m == ((1u << 1) | (1u << 4)), "loss>8 fired %#x", m);
    /* <= at the threshold; NaN rows (val_loss between evaluations) change nothing */
    hpt_alert_parse("val_loss<=3", &r);
    double val[] = {NAN, 3, NAN, 2.5, NAN, 3.5, NAN, 1};
    m = feed(&r, val, 8);
    EXPECT(m == ((1u << 1) | (1u << 7)), "val_loss<=3 fired %#x", m);
    /* nonfinite: each separate non-finite step fires, a run of them once */
    hpt_alert_parse("nonfinite", &r);
    double nf[] = {1, NAN, INFINITY, 1, NAN, 2};
    m = feed(&r, nf, 6);
    EXPECT(m == ((1u << 1) | (1u << 4)), "nonfinite fired %#x", m);
    /* a skipped step with finite loss and norm is nonfinite too */
    hpt_alert_parse("nonfinite", &r);
    double v[HPT_SC_COUNT], value;
    for (int c = 0; c < HPT_SC_COUNT; c++)
        v[c] = 1.0;
    v[HPT_SC_SKIPPED] = 1;
    EXPECT(hpt_alert_eval(&r, v, &value) == 1, "skipped step did not fire");
    if (failures)
        fprintf(stderr, "test_alert: %d failure(s)\n", failures);
    else
        printf("test_alert: all checks passed\n");
    return failures != 0;
}
