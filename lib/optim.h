/* optim.h — AdamW, global gradient-norm clipping and the learning-rate
 * schedule. */
#ifndef HPT_OPTIM_H
#define HPT_OPTIM_H

#include "model.h"

typedef struct {
    float lr;        /* peak learning rate                                 */
    float min_lr;    /* floor of the cosine decay                          */
    int warmup;      /* linear warm-up steps                               */
    int total_steps; /* schedule length (steps)                            */
    float beta1, beta2, eps;
    float weight_decay; /* decoupled; 2-D weight matrices only             */
    float max_norm;     /* clip threshold on the global L2 norm; 0 = off   */
} hpt_optim_opts;

/* Learning rate for step s (0-based): linear warm-up lr*(s+1)/warmup for
 * s < warmup, then cosine decay (Loshchilov & Hutter 2017, SGDR eq. 5)
 * min_lr + (lr-min_lr)/2 * (1 + cos(pi * (s-warmup)/(total-warmup))),
 * and min_lr once s >= total_steps. */
float hpt_lr_at(const hpt_optim_opts *o, int step);

/* Clip coefficient for a global gradient norm: min(1, max_norm/(norm+1e-6))
 * (as torch.nn.utils.clip_grad_norm_); 1 when max_norm <= 0. */
float hpt_clip_coef(const hpt_optim_opts *o, double norm);

typedef struct {
    hpt_optim_opts o;
    const hpt_backend *be;
    size_t lo, hi; /* the parameter range [lo, hi) this optimizer updates  */
    float *state;  /* device block of 2*(hi-lo): first moments, then second */
    int t;         /* number of updates applied (Adam's t)                  */
} hpt_optim;

/* Allocate the optimizer state (zeroed) for parameters [lo, hi) of model m
 * — the whole block (0, m->nparams), or one ZeRO-1 shard (Rajbhandari et
 * al. 2020, "ZeRO", section 5.1: optimizer state partitioned over data-
 * parallel ranks). Errors: HPT_ERR_INTERNAL on allocation failure. */
hpt_status hpt_optim_init(hpt_optim *opt, const hpt_model *m, const hpt_optim_opts *o, size_t lo,
                          size_t hi);

/* Free the state; accepts a zeroed struct. */
void hpt_optim_free(hpt_optim *opt);

/* One AdamW update of the parameters in [opt->lo, opt->hi) with learning
 * rate lr, gradients scaled by clip_coef; weight decay on 2-D matrices only.
 * grads[x - opt->lo] is the gradient of parameter x (pass m->grads + lo for
 * the full gradient block, or a ZeRO-1 shard buffer). Increments t. */
void hpt_optim_step(hpt_optim *opt, hpt_model *m, const float *grads, float lr, float clip_coef);

#endif
