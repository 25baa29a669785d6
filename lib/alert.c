/* alert.c — see alert.h. */
#include "alert.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 when /steps column c may be named in a comparison rule. */
static int rule_column(int c)
{
    return c >= HPT_SC_NINT && c != HPT_SC_WALL;
}

static void known_columns(char *buf, size_t len)
{
    buf[0] = 0;
    for (int c = 0; c < HPT_SC_COUNT; c++)
        if (rule_column(c)) {
            size_t n = strlen(buf);
            snprintf(buf + n, len - n, "%s, ", hpt_metrics_step_cols[c].name);
        }
    size_t n = strlen(buf);
    snprintf(buf + n, len - n, "or the word nonfinite");
}

static const char *skip_space(const char *p)
{
    while (isspace((unsigned char)*p))
        p++;
    return p;
}

hpt_status hpt_alert_parse(const char *s, hpt_alert_rule *r)
{
    memset(r, 0, sizeof *r);
    char known[400];
    known_columns(known, sizeof known);
    const char *p = skip_space(s), *name = p;
    while (isalnum((unsigned char)*p) || *p == '_')
        p++;
    size_t nlen = (size_t)(p - name);
    if (nlen == 9 && !strncmp(name, "nonfinite", 9) && !*skip_space(p)) {
        r->col = -1;
        r->op = HPT_ALERT_NONFINITE;
        snprintf(r->text, sizeof r->text, "nonfinite");
        return HPT_OK;
    }
    r->col = -1;
    for (int c = 0; c < HPT_SC_COUNT && nlen; c++)
        if (rule_column(c) && strlen(hpt_metrics_step_cols[c].name) == nlen &&
            !strncmp(name, hpt_metrics_step_cols[c].name, nlen))
            r->col = c;
    if (r->col < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--alert '%s': %s '%.*s': expected COLUMN OP NUMBER "
                             "(e.g. 'grad_norm>10') with COLUMN one of %s", s,
                             nlen ? "unknown column" : "no column name before", (int)nlen, name,
                             known);
    p = skip_space(p);
    static const char *const ops[] = {"<=", ">=", "<", ">"};
    static const hpt_alert_op opv[] = {HPT_ALERT_LE, HPT_ALERT_GE, HPT_ALERT_LT, HPT_ALERT_GT};
    int op = -1;
    for (int i = 0; i < 4 && op < 0; i++)
        if (!strncmp(p, ops[i], strlen(ops[i])))
            op = i;
    if (op < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--alert '%s': no comparison operator after '%.*s': "
                             "expected one of < > <= >=", s, (int)nlen, name);
    p = skip_space(p + strlen(ops[op]));
    char *end;
    errno = 0;
    double v = strtod(p, &end);
    int bad = end == p || errno == ERANGE || !isfinite(v) || *skip_space(end);
    /* strtod also takes "nan", "inf" and hex; only decimal numbers here */
    for (const char *q = p; !bad && q < end; q++)
        bad = !(isdigit((unsigned char)*q) || strchr("+-.eE", *q));
    if (bad)
        return hpt_error_set(HPT_ERR_USAGE, "--alert '%s': threshold '%s' is not a finite "
                             "number", s, p);
    r->op = opv[op];
    r->threshold = v;
    snprintf(r->text, sizeof r->text, "%.*s%s%.*s", (int)nlen, name, ops[op], (int)(end - p), p);
    return HPT_OK;
}

int hpt_alert_eval(hpt_alert_rule *r, const double v[HPT_SC_COUNT], double *value)
{
    int met;
    if (r->op == HPT_ALERT_NONFINITE) {
        double loss = v[HPT_SC_LOSS], norm = v[HPT_SC_NORM];
        met = v[HPT_SC_SKIPPED] != 0 || !isfinite(loss) || !isfinite(norm);
        *value = !isfinite(loss) ? loss : norm;
    } else {
        double x = v[r->col];
        if (isnan(x))
            return 0; /* not evaluated this row: the state stays */
        *value = x;
        switch (r->op) {
        case HPT_ALERT_LT: met = x < r->threshold; break;
        case HPT_ALERT_GT: met = x > r->threshold; break;
        case HPT_ALERT_LE: met = x <= r->threshold; break;
        default: met = x >= r->threshold; break;
        }
    }
    int fire = met && !r->active;
    r->active = met;
    return fire;
}
