/* kernels_cpu_impl.h — body of the CPU element-wise kernels, included by
 * lib/kernels_cpu.c once per instruction set with KSUF set to the table's
 * suffix (generic, avx2, avx512) and, for the wide ones, under a
 * `#pragma GCC target`. Contracts: lib/kernels_cpu.h. Not a header to
 * include anywhere else (no include guard on purpose).
 *
 * Shape of every kernel: full blocks of KW = 16 floats, then the rest of the
 * range through a zero-padded 16-float buffer, so each element takes the
 * same path (the same vector exp) wherever it sits; sums keep 16 lanes. The
 * compiler turns each 16-wide inner loop into 1, 2 or 4 vector operations
 * for AVX-512, AVX2 and SSE2. */

#define KN_CAT2(a, b) a##_##b
#define KN_CAT(a, b) KN_CAT2(a, b)
#define KN(x) KN_CAT(x, KSUF)

#ifndef KW
#define KW 16
#endif

/* d = exp(s) for 16 floats: one call of libmvec's vector expf per vector
 * (HAVE_LIBMVEC), else 16 calls of expf. */
static inline void KN(exp16)(float *restrict d, const float *restrict s)
{
#pragma omp simd
    for (int j = 0; j < KW; j++)
        d[j] = expf(s[j]);
}

/* a[0] + ... + a[15] in a fixed tree (a is clobbered). */
static inline float KN(hsum16)(float *a)
{
    for (int w = KW / 2; w > 0; w /= 2)
        for (int j = 0; j < w; j++)
            a[j] += a[j + w];
    return a[0];
}

static void KN(adamw)(float *p, const float *grad, float *m, float *v, size_t n,
                      const hpt_adamw_coef *c)
{
    const float b1 = c->b1, b2 = c->b2, eps = c->eps, gs = c->grad_scale, decay = c->decay;
    const float step = c->step, bc2_sqrt = c->bc2_sqrt;
    /* one sweep: each of p, m, v read and written once, grad read once */
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * gs;
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - step * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}

static void KN(add)(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

static void KN(scale)(float *x, float s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
}

static double KN(sumsq)(const float *x, size_t n)
{
    double acc[KW] = {0};
    size_t i = 0;
    for (; i + KW <= n; i += KW)
        for (int j = 0; j < KW; j++)
            acc[j] += (double)x[i + j] * x[i + j];
    for (int j = 0; i + j < n; j++)
        acc[j] += (double)x[i + j] * x[i + j];
    for (int w = KW / 2; w > 0; w /= 2)
        for (int j = 0; j < w; j++)
            acc[j] += acc[j + w];
    return acc[0];
}

/* SwiGLU on 16 elements: o = g / (1 + exp(-g)) * u. */
static inline void KN(swiglu16)(float *restrict o, const float *restrict g,
                                const float *restrict u)
{
    float t[KW], e[KW];
    for (int j = 0; j < KW; j++)
        t[j] = -g[j];
    KN(exp16)(e, t);
    for (int j = 0; j < KW; j++)
        o[j] = g[j] / (1.0f + e[j]) * u[j];
}

static void KN(swiglu_forward)(float *out, const float *gate, const float *up, size_t n)
{
    size_t i = 0;
    for (; i + KW <= n; i += KW)
        KN(swiglu16)(out + i, gate + i, up + i);
    if (i < n) {
        float g[KW] = {0}, u[KW] = {0}, o[KW];
        memcpy(g, gate + i, sizeof(float) * (n - i));
        memcpy(u, up + i, sizeof(float) * (n - i));
        KN(swiglu16)(o, g, u);
        memcpy(out + i, o, sizeof(float) * (n - i));
    }
}

/* s = sigmoid(g): dup = dy silu(g), dgate = dy u (s + g s (1 - s)). */
static inline void KN(swiglu16_bwd)(float *restrict dg, float *restrict du,
                                    const float *restrict dy, const float *restrict g,
                                    const float *restrict u)
{
    float t[KW], e[KW];
    for (int j = 0; j < KW; j++)
        t[j] = -g[j];
    KN(exp16)(e, t);
    for (int j = 0; j < KW; j++) {
        float sg = 1.0f / (1.0f + e[j]), silu = g[j] * sg;
        du[j] = dy[j] * silu;
        dg[j] = dy[j] * u[j] * (sg + g[j] * sg * (1.0f - sg));
    }
}

static void KN(swiglu_backward)(float *dgate, float *dup, const float *dout, const float *gate,
                                const float *up, size_t n)
{
    size_t i = 0;
    for (; i + KW <= n; i += KW)
        KN(swiglu16_bwd)(dgate + i, dup + i, dout + i, gate + i, up + i);
    if (i < n) {
        size_t r = n - i;
        float dy[KW] = {0}, g[KW] = {0}, u[KW] = {0}, dg[KW], du[KW];
        memcpy(dy, dout + i, sizeof(float) * r);
        memcpy(g, gate + i, sizeof(float) * r);
        memcpy(u, up + i, sizeof(float) * r);
        KN(swiglu16_bwd)(dg, du, dy, g, u);
        memcpy(dgate + i, dg, sizeof(float) * r);
        memcpy(dup + i, du, sizeof(float) * r);
    }
}

/* sum of a[i] * b[i] * c[i] (c may be NULL: a[i] * b[i]) in 16 lanes. */
static inline float KN(dot3)(const float *a, const float *b, const float *c, int n)
{
    float acc[KW] = {0};
    int i = 0;
    if (c) {
        for (; i + KW <= n; i += KW)
            for (int j = 0; j < KW; j++)
                acc[j] += a[i + j] * b[i + j] * c[i + j];
        for (int j = 0; i + j < n; j++)
            acc[j] += a[i + j] * b[i + j] * c[i + j];
    } else {
        for (; i + KW <= n; i += KW)
            for (int j = 0; j < KW; j++)
                acc[j] += a[i + j] * b[i + j];
        for (int j = 0; i + j < n; j++)
            acc[j] += a[i + j] * b[i + j];
    }
    return KN(hsum16)(acc);
}

static float KN(rmsnorm_row)(float *y, const float *x, const float *w, int C, float eps)
{
    float ss = KN(dot3)(x, x, NULL, C);
    float r = 1.0f / sqrtf(ss / C + eps);
    for (int c = 0; c < C; c++)
        y[c] = x[c] * r * w[c];
    return r;
}

/* s = x + d and the sum of s^2 in one sweep over x and d, then y = s r w
 * while the row is in L1. The sums use the lanes and the order of
 * dot3(s, s, NULL, C) in rmsnorm_row (element i to lane i mod 16, full
 * blocks then the tail, hsum16), and r and y its expressions, so the
 * result is bitwise add followed by rmsnorm_row (tests/unit/test_cpu_kernels.c
 * checks every table). Each block goes through the local t, which aliases
 * nothing: written as one loop that stores s and sums v*v, the compiler
 * left the block scalar (s may alias x) and, in the avx2 table, its alias
 * fallback contracted the squares into FMAs unlike dot3. s may alias x or
 * d. */
static float KN(add_rmsnorm_row)(float *s, float *y, const float *x, const float *d,
                                 const float *w, int C, float eps)
{
    float acc[KW] = {0};
    int i = 0;
    for (; i + KW <= C; i += KW) {
        float t[KW];
        for (int j = 0; j < KW; j++)
            t[j] = x[i + j] + d[i + j];
        for (int j = 0; j < KW; j++)
            s[i + j] = t[j];
        for (int j = 0; j < KW; j++)
            acc[j] += t[j] * t[j];
    }
    for (int j = 0; i + j < C; j++) {
        float v = x[i + j] + d[i + j];
        s[i + j] = v;
        acc[j] += v * v;
    }
    float ss = KN(hsum16)(acc);
    float r = 1.0f / sqrtf(ss / C + eps);
    for (int c = 0; c < C; c++)
        y[c] = s[c] * r * w[c];
    return r;
}

static void KN(rmsnorm_row_backward)(float *dx, const float *dy, const float *x, const float *w,
                                     float r, int C)
{
    float dot = KN(dot3)(dy, w, x, C);
    float k = r * r * r * dot / C;
    for (int c = 0; c < C; c++)
        dx[c] += r * w[c] * dy[c] - k * x[c];
}

static void KN(rmsnorm_dw)(float *dw, const float *dy, const float *x, const float *rstd, int N,
                           int C, size_t ld)
{
    enum { COLS = 256 };
    float acc[COLS];
    for (int c0 = 0; c0 < C; c0 += COLS) {
        int nc = C - c0 < COLS ? C - c0 : COLS;
        memset(acc, 0, sizeof(acc));
        for (int n = 0; n < N; n++) {
            const float *a = dy + (size_t)n * ld + c0, *b = x + (size_t)n * ld + c0;
            float r = rstd[n];
            for (int c = 0; c < nc; c++)
                acc[c] += a[c] * b[c] * r;
        }
        for (int c = 0; c < nc; c++)
            dw[c0 + c] += acc[c];
    }
}

static float KN(row_max)(const float *x, int n)
{
    float m[KW];
    for (int j = 0; j < KW; j++)
        m[j] = -INFINITY;
    int i = 0;
    for (; i + KW <= n; i += KW)
        for (int j = 0; j < KW; j++)
            m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
    for (int j = 0; i + j < n; j++)
        m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
    for (int w = KW / 2; w > 0; w /= 2)
        for (int j = 0; j < w; j++)
            m[j] = m[j + w] > m[j] ? m[j + w] : m[j];
    return m[0];
}

/* e = exp(x - shift) for 16 floats. */
static inline void KN(expshift16)(float *restrict e, const float *restrict x, float shift)
{
    float t[KW];
    for (int j = 0; j < KW; j++)
        t[j] = x[j] - shift;
    KN(exp16)(e, t);
}

/* exp(x - shift) over [0, n) in blocks; `store`: write back into x;
 * k: factor of the stored values; returns the sum of exp(x - shift). */
static inline float KN(exp_pass)(float *x, int n, float shift, int store, float k)
{
    float acc[KW] = {0}, e[KW];
    int i = 0;
    for (; i + KW <= n; i += KW) {
        KN(expshift16)(e, x + i, shift);
        for (int j = 0; j < KW; j++)
            acc[j] += e[j];
        if (store)
            for (int j = 0; j < KW; j++)
                x[i + j] = e[j] * k;
    }
    if (i < n) {
        float t[KW] = {0};
        memcpy(t, x + i, sizeof(float) * (n - i));
        KN(expshift16)(e, t, shift);
        for (int j = 0; i + j < n; j++)
            acc[j] += e[j];
        if (store)
            for (int j = 0; i + j < n; j++)
                x[i + j] = e[j] * k;
    }
    return KN(hsum16)(acc);
}

static float KN(row_sumexp)(const float *x, int n, float shift)
{
    return KN(exp_pass)((float *)x, n, shift, 0, 1.0f); /* store = 0: x is only read */
}

static float KN(row_exp_sum)(float *x, int n, float shift)
{
    return KN(exp_pass)(x, n, shift, 1, 1.0f);
}

static void KN(row_exp_scale)(float *x, int n, float shift, float k)
{
    (void)KN(exp_pass)(x, n, shift, 1, k);
}

static void KN(rope_head)(float *v, const float *c, const float *s, int half)
{
    float *v2 = v + half;
    for (int i = 0; i < half; i++) {
        float x1 = v[i], x2 = v2[i];
        v[i] = x1 * c[i] - x2 * s[i];
        v2[i] = x2 * c[i] + x1 * s[i];
    }
}

static const hpt_cpu_kernels KN(hpt_cpu_kernels) = {
    .name = KSUF_NAME,
    .adamw = KN(adamw),
    .add = KN(add),
    .scale = KN(scale),
    .sumsq = KN(sumsq),
    .swiglu_forward = KN(swiglu_forward),
    .swiglu_backward = KN(swiglu_backward),
    .rmsnorm_row = KN(rmsnorm_row),
    .rmsnorm_row_backward = KN(rmsnorm_row_backward),
    .rmsnorm_dw = KN(rmsnorm_dw),
    .row_max = KN(row_max),
    .row_sumexp = KN(row_sumexp),
    .row_exp_sum = KN(row_exp_sum),
    .row_exp_scale = KN(row_exp_scale),
    .rope_head = KN(rope_head),
    .add_rmsnorm_row = KN(add_rmsnorm_row),
};
