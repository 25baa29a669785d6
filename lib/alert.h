/* alert.h — alert rules on the per-step metrics (docs/LIVE.md): parsed from
 * `--alert RULE` by hpt-live and hpt-train, evaluated on each step's global
 * values (the /steps columns of docs/METRICS.md).
 *
 * A rule is `COLUMN OP NUMBER` (no spaces needed; spaces around the parts
 * are allowed) with COLUMN one of the float64 /steps columns (loss,
 * val_loss, lr, grad_norm, clip_coef, tokens, step_time, tokens_per_s,
 * flops, mfu, noise_g2, noise_s, noise_scale), OP one of < > <= >= and
 * NUMBER a finite decimal number; or the word `nonfinite` (the step was
 * skipped, or its loss or gradient norm is not finite).
 *
 * Firing: once per firing EDGE. A rule fires on the first row that meets
 * it, then stays quiet while the following rows meet it too, and re-arms
 * on the first row that does not. Rows where a comparison rule's column is
 * NaN (val_loss between evaluations) leave it as it was. `nonfinite`
 * re-arms on every finite step, so two separate NaN steps fire twice. */
#ifndef HPT_ALERT_H
#define HPT_ALERT_H

#include "error.h"
#include "metrics_h5.h"

#define HPT_ALERT_MAX 32     /* rules per program                          */
#define HPT_ALERT_TEXT 64    /* bytes of a rule's canonical text           */

typedef enum {
    HPT_ALERT_LT, HPT_ALERT_GT, HPT_ALERT_LE, HPT_ALERT_GE, HPT_ALERT_NONFINITE
} hpt_alert_op;

typedef struct {
    char text[HPT_ALERT_TEXT]; /* canonical form, e.g. "grad_norm>10"      */
    int col;                   /* HPT_SC_* column (-1 for nonfinite)        */
    hpt_alert_op op;
    double threshold;
    int active;                /* the last decided row met the rule         */
} hpt_alert_rule;

/* Parse `s` into *r (inactive). Errors: HPT_ERR_USAGE "--alert 'S': ..."
 * naming the expression and what is wrong (unknown column with the list of
 * known ones, missing or unknown operator, a threshold that is not a
 * finite number). */
hpt_status hpt_alert_parse(const char *s, hpt_alert_rule *r);

/* Evaluate rule r on one row, v[c] the value of /steps column c
 * (HPT_SC_*, integers as doubles). Returns 1 when the rule fires on this
 * row (an edge, see above) with the value that fired it in *value (the
 * column's value; for nonfinite the loss, or the gradient norm when the
 * loss is finite), else 0. Updates r->active. */
int hpt_alert_eval(hpt_alert_rule *r, const double v[HPT_SC_COUNT], double *value);

#endif
