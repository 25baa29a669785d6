/* optim.c — AdamW, clipping and the learning-rate schedule; see optim.h. */
#include "optim.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

float hpt_lr_at(const hpt_optim_opts *o, int step)
{
    if (step < o->warmup)
        return o->lr * (float)(step + 1) / (float)o->warmup;
    if (step >= o->total_steps || o->total_steps <= o->warmup)
        return o->min_lr;
    double progress = (double)(step - o->warmup) / (double)(o->total_steps - o->warmup);
    return (float)(o->min_lr + 0.5 * (o->lr - o->min_lr) * (1.0 + cos(M_PI * progress)));
}

float hpt_clip_coef(const hpt_optim_opts *o, double norm)
{
    if (o->max_norm <= 0)
        return 1.0f;
    double c = o->max_norm / (norm + 1e-6);
    return c < 1.0 ? (float)c : 1.0f;
}

hpt_status hpt_optim_init(hpt_optim *opt, const hpt_model *m, const hpt_optim_opts *o, size_t lo,
                          size_t hi)
{
    memset(opt, 0, sizeof *opt);
    opt->o = *o;
    opt->be = m->be;
    opt->lo = lo;
    opt->hi = hi;
    hpt_error_set(HPT_OK, "%s", ""); /* a failing alloc may leave its reason here */
    opt->state = m->be->alloc(2 * sizeof(float) * (hi - lo));
    if (!opt->state) {
        char why[512];
        snprintf(why, sizeof why, "%s", hpt_error_msg());
        return hpt_error_set(why[0] ? HPT_ERR_USAGE : HPT_ERR_INTERNAL,
                             "out of memory: AdamW state needs %.1f MiB%s%s",
                             2.0 * sizeof(float) * (hi - lo) / 1048576.0, why[0] ? ": " : "", why);
    }
    return HPT_OK;
}

void hpt_optim_free(hpt_optim *opt)
{
    if (opt && opt->be)
        opt->be->free(opt->state);
    if (opt)
        memset(opt, 0, sizeof *opt);
}

void hpt_optim_step(hpt_optim *opt, hpt_model *m, const float *grads, float lr, float clip_coef)
{
    const hpt_optim_opts *o = &opt->o;
    size_t n_own = opt->hi - opt->lo;
    float *mom1 = opt->state, *mom2 = opt->state + n_own;
    opt->t++;
    for (int i = 0; i < m->ntensors; i++) {
        const hpt_tensor *t = &m->tensors[i];
        size_t a = t->offset, b = t->offset + (size_t)(t->rows * t->cols);
        a = a > opt->lo ? a : opt->lo; /* intersect with the owned range */
        b = b < opt->hi ? b : opt->hi;
        if (a >= b)
            continue;
        float wd = t->is_matrix ? o->weight_decay : 0.0f;
        size_t k = a - opt->lo;
        m->be->adamw(m->params + a, grads + k, mom1 + k, mom2 + k, b - a, lr, o->beta1, o->beta2,
                     o->eps, wd, clip_coef, opt->t);
    }
}
