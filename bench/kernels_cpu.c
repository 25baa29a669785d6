/* kernels_cpu.c (bench) — time the CPU element-wise kernels of each table
 * of lib/kernels_cpu.h against the scalar loops lib/backend_cpu.c ran before
 * them ("scalar", copied here verbatim, built with the same -O3
 * -fno-math-errno), one thread, shapes of the `small` preset with
 * batch 4 x 256 tokens. Built and run by bench/kernels_cpu.sh.
 *
 *   kernels_cpu [REPS]      (default 15; median per kernel, interleaved)
 *
 * Prints one line per kernel: ms per call for scalar and each table the
 * CPU supports, and the speed-up of each over scalar. The residual add
 * followed by RMSNorm is timed twice per table: as the two unfused calls
 * ("add, rmsnorm_forward") and fused ("add_rmsnorm fused",
 * add_rmsnorm_row); the scalar column of both is the unfused scalar pair. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels_cpu.h"

enum { N = 1024, C = 384, I = 1152, V = 8192, NCE = 256, NADAM = 1 << 22 };

/* ---- the scalar loops of lib/backend_cpu.c before the kernel tables ---- */

static void old_swiglu_forward(float *out, const float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

static void old_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                                const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = gate[i], sg = 1.0f / (1.0f + expf(-g));
        float silu = g * sg;
        dup[i] = dout[i] * silu;
        dgate[i] = dout[i] * up[i] * (sg + g * sg * (1.0f - sg));
    }
}

static void old_rmsnorm_forward(float *out, float *rstd, const float *in, const float *w, int n_,
                                int c_, float eps)
{
    for (int n = 0; n < n_; n++) {
        const float *x = in + (size_t)n * c_;
        float *y = out + (size_t)n * c_;
        float ss = 0.0f;
        for (int c = 0; c < c_; c++)
            ss += x[c] * x[c];
        float r = 1.0f / sqrtf(ss / c_ + eps);
        rstd[n] = r;
        for (int c = 0; c < c_; c++)
            y[c] = x[c] * r * w[c];
    }
}

static void old_rmsnorm_backward(float *din, float *dw, const float *dout, const float *in,
                                 const float *w, const float *rstd, int n_, int c_)
{
    for (int n = 0; n < n_; n++) {
        const float *x = in + (size_t)n * c_, *dy = dout + (size_t)n * c_;
        float *dx = din + (size_t)n * c_;
        float r = rstd[n], dot = 0.0f;
        for (int c = 0; c < c_; c++)
            dot += dy[c] * w[c] * x[c];
        float k = r * r * r * dot / c_;
        for (int c = 0; c < c_; c++)
            dx[c] += r * w[c] * dy[c] - k * x[c];
    }
    for (int c = 0; c < c_; c++) {
        float acc = 0.0f;
        for (int n = 0; n < n_; n++)
            acc += dout[(size_t)n * c_ + c] * in[(size_t)n * c_ + c] * rstd[n];
        dw[c] += acc;
    }
}

static void old_add(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

static double old_ce(float *logits, const int *targets, int n_, int v_, float gs)
{
    double s = 0;
    for (int n = 0; n < n_; n++) {
        float *row = logits + (size_t)n * v_, mx = -INFINITY, sum = 0.0f;
        for (int j = 0; j < v_; j++)
            mx = row[j] > mx ? row[j] : mx;
        float target = row[targets[n]];
        for (int j = 0; j < v_; j++) {
            row[j] = expf(row[j] - mx);
            sum += row[j];
        }
        s += (double)(mx + logf(sum)) - target;
        float k = gs / sum;
        for (int j = 0; j < v_; j++)
            row[j] *= k;
        row[targets[n]] -= gs;
    }
    return s;
}

static void old_adamw(float *p, const float *grad, float *m, float *v, size_t n,
                      const hpt_adamw_coef *c)
{
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * c->grad_scale;
        float mi = c->b1 * m[i] + (1.0f - c->b1) * g;
        float vi = c->b2 * v[i] + (1.0f - c->b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * c->decay - c->step * mi / (sqrtf(vi) / c->bc2_sqrt + c->eps);
    }
}

static double old_sumsq(const float *x, size_t n)
{
    double acc = 0.0;
    for (size_t i = 0; i < n; i++)
        acc += (double)x[i] * x[i];
    return acc;
}

/* ---- the same work through a table ---- */

static double new_ce(const hpt_cpu_kernels *K, float *logits, const int *targets, int n_, int v_,
                     float gs)
{
    double s = 0;
    for (int n = 0; n < n_; n++) {
        float *row = logits + (size_t)n * v_;
        float mx = K->row_max(row, v_), target = row[targets[n]];
        float sum = K->row_exp_sum(row, v_, mx);
        s += (double)(mx + logf(sum)) - target;
        K->scale(row, gs / sum, (size_t)v_);
        row[targets[n]] -= gs;
    }
    return s;
}

static float *buf(size_t n, float a)
{
    float *x = aligned_alloc(64, ((sizeof(float) * n + 63) / 64) * 64);
    for (size_t i = 0; i < n; i++)
        x[i] = a * (float)((i * 2654435761u) % 2001) / 1000.0f - a;
    return x;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { K_SWIGLU_F, K_SWIGLU_B, K_RMS_F, K_RMS_B, K_ADD_RMS, K_ADD_RMS_FUSED, K_CE, K_ADAMW,
       K_SUMSQ, NK };
static const char *kname[NK] = {"swiglu_forward (N x I)", "swiglu_backward (N x I)",
                                "rmsnorm_forward (N x C)", "rmsnorm_backward (N x C)",
                                "add, rmsnorm_forward (N x C)", "add_rmsnorm fused (N x C)",
                                "cross-entropy fused (256 x V)", "adamw (4 Mi params)",
                                "sumsq (4 Mi floats)"};

static float *g, *u, *dy, *o1, *o2, *x, *w, *rstd, *dx, *dw, *logits, *p, *gr, *m, *v;
static int tg[NCE];
volatile double sink;

/* one call of kernel k with table K (NULL: scalar) */
static void run(int k, const hpt_cpu_kernels *K)
{
    hpt_adamw_coef c = {0.9f, 0.95f, 1e-8f, 1.0f, 0.99994f, 6e-4f, 0.3f};
    switch (k) {
    case K_SWIGLU_F:
        K ? K->swiglu_forward(o1, g, u, (size_t)N * I) : old_swiglu_forward(o1, g, u, (size_t)N * I);
        break;
    case K_SWIGLU_B:
        K ? K->swiglu_backward(o1, o2, dy, g, u, (size_t)N * I)
          : old_swiglu_backward(o1, o2, dy, g, u, (size_t)N * I);
        break;
    case K_RMS_F:
        if (!K)
            old_rmsnorm_forward(o1, rstd, x, w, N, C, 1e-5f);
        else
            for (int n = 0; n < N; n++)
                rstd[n] = K->rmsnorm_row(o1 + (size_t)n * C, x + (size_t)n * C, w, C, 1e-5f);
        break;
    case K_RMS_B:
        if (!K) {
            old_rmsnorm_backward(dx, dw, dy, x, w, rstd, N, C);
        } else {
            for (int n = 0; n < N; n++)
                K->rmsnorm_row_backward(dx + (size_t)n * C, dy + (size_t)n * C, x + (size_t)n * C,
                                        w, rstd[n], C);
            for (int c0 = 0; c0 < C; c0 += 64)
                K->rmsnorm_dw(dw + c0, dy + c0, x + c0, rstd, N, C - c0 < 64 ? C - c0 : 64,
                              (size_t)C);
        }
        break;
    case K_ADD_RMS: /* residual add over the whole (N,C), then the norm reads it again */
    case K_ADD_RMS_FUSED: /* one sweep per row (table) */
        if (!K) {
            old_add(o2, x, dx, (size_t)N * C);
            old_rmsnorm_forward(o1, rstd, o2, w, N, C, 1e-5f);
        } else if (k == K_ADD_RMS) {
            K->add(o2, x, dx, (size_t)N * C);
            for (int n = 0; n < N; n++)
                rstd[n] = K->rmsnorm_row(o1 + (size_t)n * C, o2 + (size_t)n * C, w, C, 1e-5f);
        } else {
            for (int n = 0; n < N; n++)
                rstd[n] = K->add_rmsnorm_row(o2 + (size_t)n * C, o1 + (size_t)n * C,
                                             x + (size_t)n * C, dx + (size_t)n * C, w, C, 1e-5f);
        }
        break;
    case K_CE:
        memcpy(o1, logits, sizeof(float) * NCE * V);
        sink = K ? new_ce(K, o1, tg, NCE, V, 1e-3f) : old_ce(o1, tg, NCE, V, 1e-3f);
        break;
    case K_ADAMW:
        K ? K->adamw(p, gr, m, v, NADAM, &c) : old_adamw(p, gr, m, v, NADAM, &c);
        break;
    case K_SUMSQ:
        sink = K ? K->sumsq(p, NADAM) : old_sumsq(p, NADAM);
        break;
    }
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 15;
    if (reps < 1)
        reps = 1;
    size_t big = (size_t)N * I > (size_t)NCE * V ? (size_t)N * I : (size_t)NCE * V;
    g = buf(big, 6), u = buf(big, 2), dy = buf(big, 1), o1 = buf(big, 1), o2 = buf(big, 1);
    x = buf((size_t)N * C, 2), w = buf(C, 1), rstd = buf(N, 1), dx = buf((size_t)N * C, 1);
    dw = buf(C, 1), logits = buf((size_t)NCE * V, 8);
    p = buf(NADAM, 1), gr = buf(NADAM, 1), m = buf(NADAM, 0.1f), v = buf(NADAM, 0.01f);
    for (size_t i = 0; i < NADAM; i++)
        v[i] = fabsf(v[i]);
    for (int i = 0; i < NCE; i++)
        tg[i] = (i * 7919) % V;
    const char *names[] = {"generic", "avx2", "avx512"};
    const hpt_cpu_kernels *tabs[4] = {NULL};
    const char *cols[4] = {"scalar"};
    int nt = 1;
    for (int i = 0; i < 3; i++)
        if ((tabs[nt] = hpt_cpu_kernels_find(names[i])))
            cols[nt++] = names[i];
    printf("%-30s", "ms per call (median)");
    for (int t = 0; t < nt; t++)
        printf(" %9s", cols[t]);
    printf("   speed-up over scalar\n");
    double *ms = malloc(sizeof(double) * reps);
    double med[4];
    for (int k = 0; k < NK; k++) {
        double all[4][64];
        for (int r = 0; r < reps && r < 64; r++)
            for (int t = 0; t < nt; t++) { /* interleaved: load hits all alike */
                double t0 = now();
                run(k, tabs[t]);
                all[t][r] = 1e3 * (now() - t0);
            }
        for (int t = 0; t < nt; t++) {
            int nr = reps < 64 ? reps : 64;
            memcpy(ms, all[t], sizeof(double) * nr);
            qsort(ms, nr, sizeof(double), cmpd);
            med[t] = ms[nr / 2];
        }
        printf("%-30s", kname[k]);
        for (int t = 0; t < nt; t++)
            printf(" %9.3f", med[t]);
        printf("  ");
        for (int t = 1; t < nt; t++)
            printf(" %s %.2fx", cols[t], med[0] / med[t]);
        printf("\n");
    }
    free(ms);
    return 0;
}
