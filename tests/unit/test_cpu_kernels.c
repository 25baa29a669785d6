/* test_cpu_kernels.c — the vectorised CPU kernel tables (lib/kernels_cpu.h)
 * against a double-precision scalar reference, against each other, and the
 * determinism the CPU backend relies on.
 *
 * For every table this CPU can run (generic, avx2, avx512), on sizes that
 * are not multiples of the vector width (n = 0, 1, 7, 15, 16, 17, 33, 100,
 * 1000, 8193):
 *  - element-wise kernels (SwiGLU forward/backward, AdamW, add, scale, RoPE,
 *    exp-and-scale) equal the double reference within ELEM_TOL = 4e-6
 *    relative per element, with a floor of 1e-6 × the largest |reference|
 *    (expf of libmvec is within 1 ulp = 1.2e-7; a few more roundings
 *    follow);
 *  - sums (sumsq, RMSNorm's row sums, exp sums) equal the double reference
 *    within SUM_TOL(n) = 1e-6 · (n/16 + 8) relative to the sum of |terms|
 *    (16 lanes of float, each adding n/16 terms, then a 4-level tree);
 *  - max is exact;
 *  - every table equals the generic one within the same tolerances;
 *  - element-wise results do not depend on where a range is split (kernel
 *    on [0,n) equals kernel on [0,k) then [k,n), bitwise, k = 7): what
 *    makes the backend's results independent of its work split.
 * Backend level (hpt_backend_cpu): SwiGLU, add, scale, AdamW, sumsq,
 * RMSNorm forward/backward, the fused residual add + RMSNorm, embedding
 * backward and both cross-entropies give bitwise the same results with 1,
 * 2 and 3 OpenMP threads.
 * Fused residual add + RMSNorm (add_rmsnorm_row, the backend's
 * add_rmsnorm_forward): bitwise equal to add then RMSNorm, for every
 * table, C = 1, 15, 16, 17, 384, 1000, N = 1 ... 33, in place too.
 * HPT_CPU_KERNELS: an unknown name is refused naming the choices.
 * Exit status 1 on any failure. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "../helpers/expect.h"
#include "kernels_cpu.h"

#define ELEM_TOL 4e-6
#define SUM_TOL(n) (1e-6 * ((double)(n) / 16 + 8))

static const int sizes[] = {0, 1, 7, 15, 16, 17, 33, 100, 1000, 8193};
#define NSIZES ((int)(sizeof(sizes) / sizeof(sizes[0])))

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float urand(float a) /* uniform in [-a, a) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)(((double)(rng >> 11) / 9007199254740992.0 * 2 - 1) * a);
}
static float *frand(size_t n, float a)
{
    float *x = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++)
        x[i] = urand(a);
    return x;
}
static float *fcopy(const float *x, size_t n)
{
    float *y = malloc(sizeof(float) * (n ? n : 1));
    memcpy(y, x, sizeof(float) * n);
    return y;
}

/* got vs ref element-wise within ELEM_TOL, relative to max(|ref|, mag[i]
 * (the size of the terms of a difference, when it may cancel; mag may be
 * NULL), 1e-6 max|ref|). */
static void check_elems_mag(const char *tab, const char *what, int n, const float *got,
                            const double *ref, const double *mag)
{
    double mx = 0;
    for (int i = 0; i < n; i++)
        mx = fmax(mx, fabs(ref[i]));
    for (int i = 0; i < n; i++) {
        double size = fmax(fabs(ref[i]), mag ? mag[i] : 0);
        double err = fabs(got[i] - ref[i]) / fmax(size, 1e-6 * mx + 1e-30);
        if (!EXPECT(err <= ELEM_TOL, "%s %s n=%d i=%d: got %.9g ref %.9g rel err %.3g", tab, what,
                    n, i, got[i], ref[i], err))
            return;
    }
}

static void check_elems(const char *tab, const char *what, int n, const float *got,
                        const double *ref)
{
    check_elems_mag(tab, what, n, got, ref, NULL);
}

static void check_sum(const char *tab, const char *what, int n, double got, double ref,
                      double abs_terms)
{
    double err = fabs(got - ref) / (abs_terms > 0 ? abs_terms : 1);
    EXPECT(err <= SUM_TOL(n), "%s %s n=%d: got %.9g ref %.9g err %.3g > %.3g", tab, what, n, got,
           ref, err, SUM_TOL(n));
}

static void check_bitwise(const char *tab, const char *what, int n, const float *a, const float *b)
{
    EXPECT(!memcmp(a, b, sizeof(float) * n), "%s %s n=%d: results depend on the range split", tab,
           what, n);
}

/* ------------------------------------------------ one table, one size */

static void test_swiglu(const hpt_cpu_kernels *K, int n)
{
    float *g = frand(n, 6), *u = frand(n, 2), *dy = frand(n, 1);
    float *o = frand(n, 1), *o2 = frand(n, 1), *dg = frand(n, 1), *du = frand(n, 1);
    double *r = malloc(sizeof(double) * (n + 1)), *r2 = malloc(sizeof(double) * (n + 1));
    double *mag = malloc(sizeof(double) * (n + 1));
    K->swiglu_forward(o, g, u, n);
    for (int i = 0; i < n; i++)
        r[i] = g[i] / (1 + exp(-(double)g[i])) * u[i];
    check_elems(K->name, "swiglu_forward", n, o, r);
    int k = n < 7 ? n : 7;
    K->swiglu_forward(o2, g, u, k);
    K->swiglu_forward(o2 + k, g + k, u + k, n - k);
    check_bitwise(K->name, "swiglu_forward", n, o, o2);

    K->swiglu_backward(dg, du, dy, g, u, n);
    for (int i = 0; i < n; i++) {
        double s = 1 / (1 + exp(-(double)g[i]));
        r[i] = (double)dy[i] * u[i] * (s + g[i] * s * (1 - s));
        r2[i] = (double)dy[i] * g[i] * s;
        mag[i] = fabs((double)dy[i] * u[i]) * (s + fabs(g[i] * s * (1 - s)));
    }
    check_elems_mag(K->name, "swiglu_backward dgate", n, dg, r, mag);
    check_elems(K->name, "swiglu_backward dup", n, du, r2);
    free(g), free(u), free(dy), free(o), free(o2), free(dg), free(du), free(r), free(r2);
    free(mag);
}

static void test_adamw(const hpt_cpu_kernels *K, int n)
{
    float *p = frand(n, 1), *gr = frand(n, 1), *m = frand(n, 0.1f), *v = frand(n, 0.01f);
    for (int i = 0; i < n; i++)
        v[i] = fabsf(v[i]);
    float *p0 = fcopy(p, n), *m0 = fcopy(m, n), *v0 = fcopy(v, n);
    double *rp = malloc(sizeof(double) * (n + 1)), *mag = malloc(sizeof(double) * (n + 1));
    hpt_adamw_coef c = {.b1 = 0.9f, .b2 = 0.95f, .eps = 1e-8f, .grad_scale = 0.5f,
                        .decay = 1 - 6e-4f * 0.1f, .step = 6e-4f / (1 - 0.9f * 0.9f),
                        .bc2_sqrt = sqrtf(1 - 0.95f * 0.95f)};
    K->adamw(p, gr, m, v, n, &c);
    for (int i = 0; i < n; i++) {
        double g = (double)gr[i] * c.grad_scale;
        double mi = c.b1 * (double)m0[i] + (1 - (double)c.b1) * g;
        double vi = c.b2 * (double)v0[i] + (1 - (double)c.b2) * g * g;
        double upd = c.step * mi / (sqrt(vi) / c.bc2_sqrt + c.eps);
        rp[i] = p0[i] * (double)c.decay - upd;
        mag[i] = fabs(p0[i] * (double)c.decay) + fabs(upd); /* the difference may cancel */
    }
    check_elems_mag(K->name, "adamw", n, p, rp, mag);
    free(p), free(gr), free(m), free(v), free(p0), free(m0), free(v0), free(rp), free(mag);
}

static void test_sums(const hpt_cpu_kernels *K, int n)
{
    float *x = frand(n, 3), *w = frand(n, 1), *dy = frand(n, 1);
    double ss = 0, ab = 0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    check_sum(K->name, "sumsq", n, K->sumsq(x, n), ss, ss);

    /* RMSNorm row: r and y */
    float *y = frand(n, 1), *dx = frand(n, 1), *dx0 = fcopy(dx, n);
    double *ry = malloc(sizeof(double) * (n + 1));
    float r = K->rmsnorm_row(y, x, w, n, 1e-5f);
    if (n > 0) {
        double rr = 1 / sqrt(ss / n + 1e-5);
        check_sum(K->name, "rmsnorm rstd", n, r, rr, rr);
        for (int i = 0; i < n; i++)
            ry[i] = x[i] * rr * w[i];
        check_elems(K->name, "rmsnorm_row", n, y, ry);
        double dot = 0;
        ab = 0;
        for (int i = 0; i < n; i++)
            dot += (double)dy[i] * w[i] * x[i], ab += fabs((double)dy[i] * w[i] * x[i]);
        K->rmsnorm_row_backward(dx, dy, x, w, r, n);
        double kk = (double)r * r * r * dot / n;
        for (int i = 0; i < n; i++)
            ry[i] = dx0[i] + (double)r * w[i] * dy[i] - kk * x[i];
        /* the dot's rounding scales with sum |terms|: floor the check by it */
        double mx = 0;
        for (int i = 0; i < n; i++)
            mx = fmax(mx, fabs(ry[i]));
        for (int i = 0; i < n; i++) {
            double tol = ELEM_TOL * fabs(ry[i]) + SUM_TOL(n) * fabs((double)r * r * r / n * x[i]) * ab +
                         1e-6 * mx;
            if (!EXPECT(fabs(dx[i] - ry[i]) <= tol, "%s rmsnorm_row_backward n=%d i=%d: %.9g vs %.9g",
                        K->name, n, i, dx[i], ry[i]))
                break;
        }
    }

    /* max, exp sums */
    if (n > 0) {
        float mx = K->row_max(x, n);
        float rmx = x[0];
        for (int i = 1; i < n; i++)
            rmx = x[i] > rmx ? x[i] : rmx;
        EXPECT(mx == rmx, "%s row_max n=%d: %g vs %g", K->name, n, mx, rmx);
        double se = 0;
        for (int i = 0; i < n; i++)
            se += exp((double)x[i] - mx);
        check_sum(K->name, "row_sumexp", n, K->row_sumexp(x, n, mx), se, se);
        float *e = fcopy(x, n), *e2 = fcopy(x, n);
        check_sum(K->name, "row_exp_sum", n, K->row_exp_sum(e, n, mx), se, se);
        for (int i = 0; i < n; i++)
            ry[i] = exp((double)x[i] - mx);
        check_elems(K->name, "row_exp_sum values", n, e, ry);
        memcpy(e, x, sizeof(float) * n);
        K->row_exp_scale(e, n, mx, 0.25f);
        int k = n < 7 ? n : 7;
        K->row_exp_scale(e2, k, mx, 0.25f);
        K->row_exp_scale(e2 + k, n - k, mx, 0.25f);
        for (int i = 0; i < n; i++)
            ry[i] = 0.25 * exp((double)x[i] - mx);
        check_elems(K->name, "row_exp_scale", n, e, ry);
        check_bitwise(K->name, "row_exp_scale", n, e, e2);
        free(e), free(e2);
    } else {
        EXPECT(K->row_max(x, 0) == -INFINITY, "%s row_max n=0 is not -inf", K->name);
        EXPECT(K->row_sumexp(x, 0, 0) == 0 && K->sumsq(x, 0) == 0, "%s empty sums not 0", K->name);
    }
    free(x), free(w), free(dy), free(y), free(dx), free(dx0), free(ry);
}

static void test_misc(const hpt_cpu_kernels *K, int n)
{
    float *a = frand(n, 1), *b = frand(n, 1), *o = frand(n, 1);
    double *r = malloc(sizeof(double) * (n + 1));
    K->add(o, a, b, n);
    for (int i = 0; i < n; i++)
        r[i] = (double)a[i] + b[i];
    check_elems(K->name, "add", n, o, r);
    for (int i = 0; i < n; i++)
        r[i] = a[i] * 0.3;
    K->scale(a, 0.3f, n);
    check_elems(K->name, "scale", n, a, r);
    /* RoPE on one head of 2n dims */
    float *v = frand(2 * n, 1), *v0 = fcopy(v, 2 * n), *c = frand(n, 1), *s = frand(n, 1);
    double *rv = malloc(sizeof(double) * (2 * n + 1)), *mag = malloc(sizeof(double) * (2 * n + 1));
    K->rope_head(v, c, s, n);
    for (int i = 0; i < n; i++) {
        rv[i] = (double)v0[i] * c[i] - (double)v0[i + n] * s[i];
        rv[i + n] = (double)v0[i + n] * c[i] + (double)v0[i] * s[i];
        mag[i] = mag[i + n] = fabs((double)v0[i] * c[i]) + fabs((double)v0[i + n] * s[i]);
    }
    check_elems_mag(K->name, "rope_head", 2 * n, v, rv, mag);
    free(mag);
    free(a), free(b), free(o), free(r), free(v), free(v0), free(c), free(s), free(rv);
}

/* every table within tolerance of the generic one (SwiGLU, exp sums) */
static void test_vs_generic(const hpt_cpu_kernels *K, const hpt_cpu_kernels *G, int n)
{
    float *g = frand(n, 8), *u = frand(n, 2), *o = frand(n, 1), *og = frand(n, 1);
    double *r = malloc(sizeof(double) * (n + 1));
    K->swiglu_forward(o, g, u, n);
    G->swiglu_forward(og, g, u, n);
    for (int i = 0; i < n; i++)
        r[i] = og[i];
    check_elems(K->name, "swiglu_forward vs generic", n, o, r);
    if (n > 0) {
        float mx = G->row_max(g, n);
        double a = K->row_sumexp(g, n, mx), b = G->row_sumexp(g, n, mx);
        check_sum(K->name, "row_sumexp vs generic", n, a, b, b);
    }
    free(g), free(u), free(o), free(og), free(r);
}

/* ------------------------------------ residual add fused with RMSNorm */

static const int fuse_cols[] = {1, 15, 16, 17, 384, 1000};
#define NFUSE_COLS ((int)(sizeof(fuse_cols) / sizeof(fuse_cols[0])))

/* add_rmsnorm_row against add then rmsnorm_row of the same table, bitwise
 * (s, y and r), out of place and in place (s aliasing x), for one row of
 * each width. */
static void test_add_rmsnorm_row(const hpt_cpu_kernels *K)
{
    for (int ci = 0; ci < NFUSE_COLS; ci++) {
        int C = fuse_cols[ci];
        float *x = frand(C, 3), *d = frand(C, 1), *w = frand(C, 1);
        float *s1 = frand(C, 1), *y1 = frand(C, 1), *s2 = frand(C, 1), *y2 = frand(C, 1);
        float *s3 = fcopy(x, C), *y3 = frand(C, 1);
        K->add(s1, x, d, C);
        float r1 = K->rmsnorm_row(y1, s1, w, C, 1e-5f);
        float r2 = K->add_rmsnorm_row(s2, y2, x, d, w, C, 1e-5f);
        float r3 = K->add_rmsnorm_row(s3, y3, s3, d, w, C, 1e-5f); /* in place */
        int same = !memcmp(&r1, &r2, sizeof r1) && !memcmp(&r1, &r3, sizeof r1) &&
                   !memcmp(s1, s2, sizeof(float) * C) && !memcmp(y1, y2, sizeof(float) * C) &&
                   !memcmp(s1, s3, sizeof(float) * C) && !memcmp(y1, y3, sizeof(float) * C);
        EXPECT(same, "%s add_rmsnorm_row C=%d: not bitwise add + rmsnorm_row (r %.9g %.9g %.9g)",
               K->name, C, r1, r2, r3);
        free(x), free(d), free(w), free(s1), free(y1), free(s2), free(y2), free(s3), free(y3);
    }
}

/* The backend's add_rmsnorm_forward against its add then rmsnorm_forward,
 * bitwise (out, norm_out, rstd), with the process's kernel table, for
 * rows 1..33 of each width and 1 and 3 threads; in place (out = x) too. */
static void test_add_rmsnorm_backend(void)
{
    const hpt_backend *be = &hpt_backend_cpu;
    EXPECT(be->add_rmsnorm_forward != NULL, "cpu backend has no add_rmsnorm_forward");
    if (!be->add_rmsnorm_forward)
        return;
    for (int ci = 0; ci < NFUSE_COLS; ci++)
        for (int N = 1; N <= 33; N++) {
            int C = fuse_cols[ci];
            size_t n = (size_t)N * C;
            float *x = frand(n, 3), *d = frand(n, 1), *w = frand(C, 1);
            float *o1 = frand(n, 1), *y1 = frand(n, 1), *r1 = frand(N, 1);
            float *o2 = frand(n, 1), *y2 = frand(n, 1), *r2 = frand(N, 1);
            float *o3 = fcopy(x, n), *y3 = frand(n, 1), *r3 = frand(N, 1);
            omp_set_num_threads(1);
            be->add(o1, x, d, n);
            be->rmsnorm_forward(y1, r1, o1, w, N, C, 1e-5f);
            be->add_rmsnorm_forward(o2, y2, r2, x, d, w, N, C, 1e-5f);
            omp_set_num_threads(3);
            be->add_rmsnorm_forward(o3, y3, r3, o3, d, w, N, C, 1e-5f);
            int same = !memcmp(o1, o2, sizeof(float) * n) && !memcmp(y1, y2, sizeof(float) * n) &&
                       !memcmp(r1, r2, sizeof(float) * N) && !memcmp(o1, o3, sizeof(float) * n) &&
                       !memcmp(y1, y3, sizeof(float) * n) && !memcmp(r1, r3, sizeof(float) * N);
            EXPECT(same, "%s backend add_rmsnorm_forward N=%d C=%d: not bitwise add + "
                   "rmsnorm_forward", hpt_cpu_kernels_get()->name, N, C);
            free(x), free(d), free(w), free(o1), free(y1), free(r1), free(o2), free(y2), free(r2);
            free(o3), free(y3), free(r3);
            if (!same)
                return;
        }
}

/* ------------------------------------------- backend, thread counts */

typedef struct {
    float *f[6];
    double d[2];
} outputs;

/* Run the backend ops with `threads` OpenMP threads on fixed inputs. */
static void run_backend(int threads, outputs *out)
{
    const hpt_backend *be = &hpt_backend_cpu;
    omp_set_num_threads(threads);
    rng = 12345;
    size_t n = 3 * 8192 + 5; /* several work items, a partial last one */
    int N = 37, C = 200, V = 1001;
    float *g = frand(n, 6), *u = frand(n, 2), *o = frand(n, 1), *dg = frand(n, 1),
          *du = frand(n, 1);
    be->swiglu_forward(o, g, u, n);
    be->swiglu_backward(dg, du, u, g, u, n);
    be->add(o, o, dg, n);
    be->scale(o, 0.7f, n);
    float *m = frand(n, 0.1f), *v = frand(n, 0.1f);
    for (size_t i = 0; i < n; i++)
        v[i] = fabsf(v[i]);
    be->adamw(o, du, m, v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3);
    out->d[0] = be->sumsq(o, n) + be->sumsq(m, n);

    float *x = frand((size_t)N * C, 2), *w = frand(C, 1), *y = frand((size_t)N * C, 1);
    float *rstd = frand(N, 1), *dx = frand((size_t)N * C, 1), *dw = frand(C, 1);
    float *wte = frand((size_t)V * C, 1);
    int32_t tok[37];
    for (int i = 0; i < N; i++)
        tok[i] = (i * 7919) % V;
    tok[3] = tok[5] = tok[8]; /* repeated rows in the embedding backward */
    be->rmsnorm_forward(y, rstd, x, w, N, C, 1e-5f);
    be->rmsnorm_backward(dx, dw, y, x, w, rstd, N, C);
    be->add_rmsnorm_forward(x, y, rstd, x, dx, w, N, C, 1e-5f); /* into dx below */
    be->add(dx, dx, y, (size_t)N * C);
    be->embedding_backward(wte, dx, tok, N, C, 0, V);
    float *logits = frand((size_t)N * V, 5), *l2 = fcopy(logits, (size_t)N * V);
    out->d[1] = be->crossentropy_loss(logits, tok, N, V);
    out->d[1] += be->crossentropy_fused(logits, tok, N, V, 0.01f);
    float mx[37], se[37], tl[37];
    be->vocab_max(mx, l2, N, V, V - 3);
    be->vocab_sumexp(se, tl, l2, tok, mx, N, V, V - 3, 0);
    out->d[1] += be->vocab_ce_finish(l2, tok, mx, se, tl, N, V, V - 3, 0, 0.01f);
    size_t sz[6] = {n, n, (size_t)N * C, C, (size_t)N * V, (size_t)N * V};
    float *res[6] = {o, m, dx, dw, logits, l2};
    for (int i = 0; i < 6; i++)
        out->f[i] = fcopy(res[i], sz[i]);
    out->f[2] = realloc(out->f[2], sizeof(float) * ((size_t)N * C + (size_t)V * C));
    memcpy(out->f[2] + (size_t)N * C, wte, sizeof(float) * (size_t)V * C);
    free(g), free(u), free(o), free(dg), free(du), free(m), free(v), free(x), free(w), free(y);
    free(rstd), free(dx), free(dw), free(wte), free(logits), free(l2);
}

static void test_thread_counts(void)
{
    size_t n = 3 * 8192 + 5, N = 37, C = 200, V = 1001;
    size_t sz[6] = {n, n, N * C + V * C, C, N * V, N * V};
    outputs base, o;
    run_backend(1, &base);
    for (int t = 2; t <= 3; t++) {
        run_backend(t, &o);
        for (int i = 0; i < 6; i++) {
            EXPECT(!memcmp(base.f[i], o.f[i], sizeof(float) * sz[i]),
                   "backend output %d differs between 1 and %d threads", i, t);
            free(o.f[i]);
        }
        EXPECT(base.d[0] == o.d[0] && base.d[1] == o.d[1],
               "backend sums differ between 1 and %d threads: %.17g %.17g vs %.17g %.17g", t,
               base.d[0], base.d[1], o.d[0], o.d[1]);
    }
    for (int i = 0; i < 6; i++)
        free(base.f[i]);
}

int main(void)
{
    const char *names[] = {"generic", "avx2", "avx512"};
    const hpt_cpu_kernels *G = hpt_cpu_kernels_find("generic");
    EXPECT(G != NULL, "no generic kernel table");
    for (int t = 0; t < 3 && G; t++) {
        const hpt_cpu_kernels *K = hpt_cpu_kernels_find(names[t]);
        if (!K) {
            printf("skip %s: not built or not supported by this CPU\n", names[t]);
            continue;
        }
        int before = failures;
        for (int i = 0; i < NSIZES; i++) {
            test_swiglu(K, sizes[i]);
            test_adamw(K, sizes[i]);
            test_sums(K, sizes[i]);
            test_misc(K, sizes[i]);
            test_vs_generic(K, G, sizes[i]);
        }
        printf("%s %s: kernels vs double reference and generic, n = 0 ... 8193\n",
               failures == before ? "ok" : "FAIL", names[t]);
        before = failures;
        test_add_rmsnorm_row(K);
        setenv("HPT_CPU_KERNELS", names[t], 1);
        EXPECT(hpt_cpu_kernels_init() == HPT_OK, "HPT_CPU_KERNELS=%s refused", names[t]);
        test_add_rmsnorm_backend();
        printf("%s %s: add + RMSNorm fused bitwise equal to add then RMSNorm (row kernel; "
               "backend, N = 1 ... 33, C = 1 ... 1000, 1 and 3 threads)\n",
               failures == before ? "ok" : "FAIL", names[t]);
    }
    unsetenv("HPT_CPU_KERNELS");
    int before = failures;
    EXPECT(hpt_cpu_kernels_init() == HPT_OK, "init without HPT_CPU_KERNELS failed");
    printf("kernel table in use: %s\n", hpt_cpu_kernels_get()->name);
    test_thread_counts();
    printf("%s backend results bitwise equal with 1, 2, 3 threads\n",
           failures == before ? "ok" : "FAIL");
    setenv("HPT_CPU_KERNELS", "sse9", 1);
    EXPECT_ERR(hpt_cpu_kernels_init(), HPT_ERR_USAGE, "HPT_CPU_KERNELS=sse9");
    EXPECT(strstr(hpt_error_msg(), "generic") != NULL, "message lists no choices: %s",
           hpt_error_msg());
    setenv("HPT_CPU_KERNELS", "generic", 1);
    EXPECT(hpt_cpu_kernels_init() == HPT_OK && !strcmp(hpt_cpu_kernels_get()->name, "generic"),
           "HPT_CPU_KERNELS=generic not honoured");
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
