/* kernels_cpu.h — the CPU backend's element-wise kernels, one table per
 * instruction set, chosen at run time (lib/backend_cpu.c calls them inside
 * its OpenMP loops).
 *
 * lib/kernels_cpu.c compiles the same source (lib/kernels_cpu_impl.h) three
 * times: for generic x86-64 (SSE2), for AVX2+FMA and for AVX-512
 * (F/VL/DQ/BW), each under `#pragma GCC target`, so the program still runs
 * on any x86-64 and uses the widest vectors the CPU has. exp() is the
 * vector expf of glibc's libmvec (_ZGV?N?v_expf, via `#pragma omp declare
 * simd`) when configure found it (HAVE_LIBMVEC), else libm's expf.
 *
 * Every kernel is serial and works on the range it is given; the caller
 * splits the work. Results depend only on the inputs and the table, never
 * on how the caller splits rows between threads:
 *  - element-wise results are a function of the element's inputs only:
 *    each exp goes through the same vector routine, a partial last block
 *    through a padded 16-float buffer;
 *  - sums keep 16 lanes (element i of a range goes to lane i mod 16), added
 *    in a fixed tree at the end, whatever the vector width.
 * Different tables may differ in the last bits (FMA contraction, the libmvec
 * variant): within 2e-6 relative for exp and within float rounding of the
 * sum for the sums (tests/unit/test_cpu_kernels.c). One process uses one table.
 *
 * Sizes count elements. */
#ifndef HPT_KERNELS_CPU_H
#define HPT_KERNELS_CPU_H

#include <stddef.h>

#include "error.h"

/* AdamW constants of one step (see backend.h's adamw): decay = 1 - lr*wd,
 * step = lr/bc1, bc2_sqrt = sqrt(bc2). */
typedef struct {
    float b1, b2, eps, grad_scale, decay, step, bc2_sqrt;
} hpt_adamw_coef;

typedef struct {
    const char *name; /* "generic", "avx2", "avx512" */
    /* p, m, v updated in place for n elements (backend.h adamw). */
    void (*adamw)(float *p, const float *grad, float *m, float *v, size_t n,
                  const hpt_adamw_coef *c);
    /* out = a + b (out may alias a). */
    void (*add)(float *out, const float *a, const float *b, size_t n);
    /* x *= s. */
    void (*scale)(float *x, float s, size_t n);
    /* sum of x^2 in double (16 lanes). */
    double (*sumsq)(const float *x, size_t n);
    /* out = silu(gate) * up (Shazeer 2020, eq. 6). */
    void (*swiglu_forward)(float *out, const float *gate, const float *up, size_t n);
    /* dup = dout * silu(g); dgate = dout * up * silu'(g). */
    void (*swiglu_backward)(float *dgate, float *dup, const float *dout, const float *gate,
                            const float *up, size_t n);
    /* One RMSNorm row (Zhang & Sennrich 2019, eq. 4): y (C) = x r w,
     * returns r = 1/sqrt(mean x^2 + eps). */
    float (*rmsnorm_row)(float *y, const float *x, const float *w, int C, float eps);
    /* One row of RMSNorm's input gradient: dx (C) += r w dy - r^3 x/C
     * sum_j(dy_j w_j x_j). */
    void (*rmsnorm_row_backward)(float *dx, const float *dy, const float *x, const float *w,
                                 float r, int C);
    /* dw[c] += sum over n = 0..N-1, in order, of dy[n ld + c] x[n ld + c]
     * rstd[n], for c in [0, C): RMSNorm's weight gradient of C columns. */
    void (*rmsnorm_dw)(float *dw, const float *dy, const float *x, const float *rstd, int N, int C,
                       size_t ld);
    /* max of x[0..n) (-inf for n = 0). */
    float (*row_max)(const float *x, int n);
    /* sum of exp(x - shift) over x[0..n). */
    float (*row_sumexp)(const float *x, int n, float shift);
    /* x = exp(x - shift) in place; returns the sum of the new x. */
    float (*row_exp_sum)(float *x, int n, float shift);
    /* x = exp(x - shift) * k in place. */
    void (*row_exp_scale)(float *x, int n, float shift, float k);
    /* RoPE of one head vector v (2 half): (v1, v2) -> (v1 c - v2 s, v2 c + v1 s)
     * with c, s (half) (Su et al. 2021, eq. 34, Hugging Face pairing). */
    void (*rope_head)(float *v, const float *c, const float *s, int half);
    /* Residual add fused with one RMSNorm row: s (C) = x + d, then as
     * rmsnorm_row(y, s, w, C, eps), in one sweep over x and d; bitwise
     * equal to add(s, x, d, C) followed by rmsnorm_row (same lanes, same
     * order). s may alias x or d; y aliases none. Returns r. */
    float (*add_rmsnorm_row)(float *s, float *y, const float *x, const float *d, const float *w,
                             int C, float eps);
} hpt_cpu_kernels;

/* The table of `name` ("generic", "avx2", "avx512") if this build has it and
 * this CPU can run it, else NULL. */
const hpt_cpu_kernels *hpt_cpu_kernels_find(const char *name);

/* Choose the process's table once (idempotent): HPT_CPU_KERNELS from the
 * environment when set, else the widest the CPU supports. Errors:
 * HPT_ERR_USAGE when HPT_CPU_KERNELS names an unknown table or one this CPU
 * cannot run (message lists the choices). */
hpt_status hpt_cpu_kernels_init(void);

/* The chosen table (the widest supported if hpt_cpu_kernels_init was not
 * called or failed). Never NULL. */
const hpt_cpu_kernels *hpt_cpu_kernels_get(void);

#endif
