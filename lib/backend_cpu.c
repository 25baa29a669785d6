/* backend_cpu.c — the CPU compute backend: OpenBLAS SGEMM for every matrix
 * product, OpenMP loops for the rest. Reductions are done in a fixed order
 * (never an OpenMP reduction clause) so results are bitwise reproducible
 * for a given thread count. Shapes and maths: see backend.h. */
#include <cblas.h>
#include <omp.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_cpu.h"
#include "backend.h"
#include "hpt_config.h"

/* ------------------------------------------------------------- memory */

static void *cpu_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0)
        bytes = 64;
    if (posix_memalign(&p, 64, bytes))
        return NULL;
    memset(p, 0, bytes);
    return p;
}

static void cpu_free(void *p) { free(p); }
static void cpu_memset0(void *dst, size_t bytes) { memset(dst, 0, bytes); }
static void cpu_copy(void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }

/* ------------------------------------------------------------- linear */

/* One thread pool: OpenBLAS runs single-threaded and the OpenMP threads
 * split every product into independent row blocks. Two pools (OpenMP and
 * OpenBLAS's pthreads) on the same cores spin against each other; measured
 * 3.7x slower on the tiny model here. The split is fixed for a thread
 * count, so results are reproducible. */
static hpt_status cpu_init(void)
{
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    openblas_set_num_threads(1);
#endif
    return HPT_OK;
}

static hpt_status cpu_set_precision(hpt_precision p)
{
    if (p == HPT_PRECISION_FP32)
        return HPT_OK;
    return hpt_error_set(HPT_ERR_USAGE, "--precision %s: the cpu backend computes in fp32 only; "
                         "use --backend cuda", hpt_precision_name(p));
}

/* Rows [lo, hi) of `n` for the calling OpenMP thread. */
static void thread_rows(int n, int *lo, int *hi)
{
    int nt = omp_get_num_threads(), id = omp_get_thread_num();
    *lo = (int)((int64_t)n * id / nt);
    *hi = (int)((int64_t)n * (id + 1) / nt);
}

static void cpu_matmul_forward(float *out, const float *in, const float *w, int N, int Ic, int O)
{
#pragma omp parallel
    {
        int lo, hi;
        thread_rows(N, &lo, &hi);
        if (hi > lo)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, hi - lo, O, Ic, 1.0f,
                        in + (size_t)lo * Ic, Ic, w, Ic, 0.0f, out + (size_t)lo * O, O);
    }
}

static void cpu_matmul_backward(float *din, float *dw, const float *dout, const float *in,
                                const float *w, int N, int Ic, int O, int accum_din)
{
#pragma omp parallel
    {
        int lo, hi;
        thread_rows(N, &lo, &hi);
        if (din && hi > lo)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, hi - lo, Ic, O, 1.0f,
                        dout + (size_t)lo * O, O, w, Ic, accum_din ? 1.0f : 0.0f,
                        din + (size_t)lo * Ic, Ic);
        thread_rows(O, &lo, &hi);
        if (hi > lo)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hi - lo, Ic, N, 1.0f, dout + lo,
                        O, in, Ic, 1.0f, dw + (size_t)lo * Ic, Ic);
    }
}

/* ---------------------------------------------------------- embedding */

static void cpu_embedding_forward(float *out, const int32_t *tokens, const float *wte, int N, int C,
                                  int v0, int Vl)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        int r = tokens[n] - v0;
        if (r >= 0 && r < Vl)
            memcpy(out + (size_t)n * C, wte + (size_t)r * C, sizeof(float) * C);
        else
            memset(out + (size_t)n * C, 0, sizeof(float) * C);
    }
}

static void cpu_embedding_backward(float *dwte, const float *dout, const int32_t *tokens, int N,
                                   int C, int v0, int Vl)
{
    /* Rows may repeat, so accumulate sequentially over n (deterministic). */
    for (int n = 0; n < N; n++) {
        int r = tokens[n] - v0;
        if (r < 0 || r >= Vl)
            continue;
        float *d = dwte + (size_t)r * C;
        const float *g = dout + (size_t)n * C;
        for (int c = 0; c < C; c++)
            d[c] += g[c];
    }
}

/* ------------------------------------------------------------ RMSNorm */

static void cpu_rmsnorm_forward(float *out, float *rstd, const float *in, const float *w, int N,
                                int C, float eps)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = in + (size_t)n * C;
        float *y = out + (size_t)n * C;
        float ss = 0.0f;
        for (int c = 0; c < C; c++)
            ss += x[c] * x[c];
        float r = 1.0f / sqrtf(ss / C + eps);
        rstd[n] = r;
        for (int c = 0; c < C; c++)
            y[c] = x[c] * r * w[c];
    }
}

/* y_c = x_c r w_c, r = (mean x^2 + eps)^-1/2:
 * dx_c = r w_c dy_c - r^3 x_c / C * sum_j dy_j w_j x_j;  dw_c = sum_n dy_c x_c r. */
static void cpu_rmsnorm_backward(float *din, float *dw, const float *dout, const float *in,
                                 const float *w, const float *rstd, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = in + (size_t)n * C, *dy = dout + (size_t)n * C;
        float *dx = din + (size_t)n * C;
        float r = rstd[n], dot = 0.0f;
        for (int c = 0; c < C; c++)
            dot += dy[c] * w[c] * x[c];
        float k = r * r * r * dot / C;
        for (int c = 0; c < C; c++)
            dx[c] += r * w[c] * dy[c] - k * x[c];
    }
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        float acc = 0.0f;
        for (int n = 0; n < N; n++)
            acc += dout[(size_t)n * C + c] * in[(size_t)n * C + c] * rstd[n];
        dw[c] += acc;
    }
}

/* --------------------------------------------------------------- RoPE */

static void cpu_rope(float *x, int B, int T, int nh, int hd, float theta, int inverse)
{
    int half = hd / 2;
    float *cs = malloc(sizeof(float) * 2 * (size_t)T * half);
    if (!cs)
        HPT_FATAL("out of memory in rope");
    /* As Hugging Face: inv_freq = 1/theta^(2i/hd) and angle = t*inv_freq in fp32. */
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            float inv_freq = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
            float a = (float)t * inv_freq;
            cs[((size_t)t * half + i) * 2] = cosf(a);
            cs[((size_t)t * half + i) * 2 + 1] = inverse ? -sinf(a) : sinf(a);
        }
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *tab = cs + (size_t)t * half * 2;
            for (int h = 0; h < nh; h++) {
                float *v = x + (((size_t)b * T + t) * nh + h) * hd;
                for (int i = 0; i < half; i++) {
                    float c = tab[2 * i], s = tab[2 * i + 1];
                    float x1 = v[i], x2 = v[i + half];
                    v[i] = x1 * c - x2 * s;
                    v[i + half] = x2 * c + x1 * s;
                }
            }
        }
    free(cs);
}

/* ---------------------------------------------------------- attention */

/* Training attention (forward, backward) lives in lib/attention_cpu.c. */

/* ------------------------------------------- key/value-cache inference */

static void cpu_rope_at(float *x, int n, int nh, int hd, float theta, int pos0)
{
    int half = hd / 2;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n; t++)
        for (int i = 0; i < half; i++) {
            /* the angles of cpu_rope, so cached and recomputed keys agree */
            float inv_freq = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
            float a = (float)(pos0 + t) * inv_freq, c = cosf(a), s = sinf(a);
            for (int h = 0; h < nh; h++) {
                float *v = x + ((size_t)t * nh + h) * hd;
                float x1 = v[i], x2 = v[i + half];
                v[i] = x1 * c - x2 * s;
                v[i + half] = x2 * c + x1 * s;
            }
        }
}

static void cpu_attention_cached(float *out, const float *q, const float *kc, const float *vc,
                                 int n, int pos0, int H, int KV, int hd)
{
    float scale = 1.0f / sqrtf((float)hd);
    int group = H / KV, ldq = H * hd, ldk = KV * hd, S = pos0 + n;
#pragma omp parallel
    {
        float *p = malloc(sizeof(float) * (size_t)S);
        if (!p)
            HPT_FATAL("out of memory in attention_cached (%d positions)", S);
#pragma omp for collapse(2) schedule(static)
        for (int i = 0; i < n; i++)
            for (int h = 0; h < H; h++) {
                const float *qh = q + (size_t)i * ldq + h * hd;
                const float *kh = kc + (h / group) * hd, *vh = vc + (h / group) * hd;
                float *o = out + (size_t)i * ldq + h * hd, mx = -INFINITY, sum = 0.0f;
                int len = pos0 + i + 1; /* causal: positions 0 .. pos0+i */
                for (int s = 0; s < len; s++) {
                    float d = 0.0f;
                    for (int e = 0; e < hd; e++)
                        d += qh[e] * kh[(size_t)s * ldk + e];
                    p[s] = d * scale;
                    mx = p[s] > mx ? p[s] : mx;
                }
                for (int s = 0; s < len; s++) {
                    p[s] = expf(p[s] - mx);
                    sum += p[s];
                }
                memset(o, 0, sizeof(float) * hd);
                for (int s = 0; s < len; s++) {
                    float w = p[s] / sum;
                    for (int e = 0; e < hd; e++)
                        o[e] += w * vh[(size_t)s * ldk + e];
                }
            }
        free(p);
    }
}

/* ------------------------------------------------------------- SwiGLU */

static void cpu_swiglu_forward(float *out, const float *gate, const float *up, size_t n)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

static void cpu_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                                const float *up, size_t n)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g = gate[i], sg = 1.0f / (1.0f + expf(-g));
        float silu = g * sg;
        dup[i] = dout[i] * silu;
        dgate[i] = dout[i] * up[i] * (sg + g * sg * (1.0f - sg));
    }
}

/* --------------------------------------------------------- elementwise */

static void cpu_add(float *out, const float *a, const float *b, size_t n)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

static void cpu_scale(float *x, float s, size_t n)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
}

/* Fixed 64-way split summed in order: the result does not depend on the
 * number of OpenMP threads. */
#define SUMSQ_PARTS 64
static double cpu_sumsq(const float *x, size_t n)
{
    double part[SUMSQ_PARTS];
    size_t chunk = (n + SUMSQ_PARTS - 1) / SUMSQ_PARTS;
#pragma omp parallel for schedule(static)
    for (int p = 0; p < SUMSQ_PARTS; p++) {
        size_t lo = (size_t)p * chunk, hi = lo + chunk < n ? lo + chunk : n;
        double acc = 0.0;
        for (size_t i = lo; i < hi; i++)
            acc += (double)x[i] * x[i];
        part[p] = acc;
    }
    double s = 0.0;
    for (int p = 0; p < SUMSQ_PARTS; p++)
        s += part[p];
    return s;
}

/* ------------------------------------------------------- cross-entropy */

/* log-sum-exp of a row (max-shifted) and the row max. */
static float row_lse(const float *row, int V, float *mx_out)
{
    float mx = -INFINITY;
    for (int j = 0; j < V; j++)
        mx = row[j] > mx ? row[j] : mx;
    float sum = 0.0f;
    for (int j = 0; j < V; j++)
        sum += expf(row[j] - mx);
    *mx_out = mx;
    return mx + logf(sum);
}

static double sum_in_order(const double *x, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += x[i];
    return s;
}

static double cpu_crossentropy_fused(float *logits, const int32_t *targets, int N, int V,
                                     float grad_scale)
{
    double *loss = malloc(sizeof(double) * (N > 0 ? N : 1));
    if (!loss)
        HPT_FATAL("out of memory in cross-entropy");
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *row = logits + (size_t)n * V, mx = -INFINITY, sum = 0.0f;
        for (int j = 0; j < V; j++)
            mx = row[j] > mx ? row[j] : mx;
        float target = row[targets[n]];
        for (int j = 0; j < V; j++) { /* one expf per logit: keep exp(l - max) */
            row[j] = expf(row[j] - mx);
            sum += row[j];
        }
        loss[n] = (double)(mx + logf(sum)) - target;
        float k = grad_scale / sum;
        for (int j = 0; j < V; j++)
            row[j] *= k;
        row[targets[n]] -= grad_scale;
    }
    double s = sum_in_order(loss, N);
    free(loss);
    return s;
}

static double cpu_crossentropy_loss(const float *logits, const int32_t *targets, int N, int V)
{
    double *loss = malloc(sizeof(double) * (N > 0 ? N : 1));
    if (!loss)
        HPT_FATAL("out of memory in cross-entropy");
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *row = logits + (size_t)n * V;
        float mx;
        loss[n] = (double)row_lse(row, V, &mx) - row[targets[n]];
    }
    double s = sum_in_order(loss, N);
    free(loss);
    return s;
}

/* ---------------------------------------- vocab-parallel cross-entropy */

static void cpu_vocab_max(float *mx, const float *logits, int N, int Vl, int nvalid)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *row = logits + (size_t)n * Vl;
        float m = -INFINITY;
        for (int j = 0; j < nvalid; j++)
            m = row[j] > m ? row[j] : m;
        mx[n] = m;
    }
}

static void cpu_vocab_sumexp(float *sumexp, float *tlogit, const float *logits,
                             const int32_t *targets, const float *mx, int N, int Vl, int nvalid,
                             int v0)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *row = logits + (size_t)n * Vl;
        float s = 0.0f;
        for (int j = 0; j < nvalid; j++)
            s += expf(row[j] - mx[n]);
        sumexp[n] = s;
        int t = targets[n] - v0;
        tlogit[n] = t >= 0 && t < nvalid ? row[t] : 0.0f;
    }
}

static double cpu_vocab_ce_finish(float *logits, const int32_t *targets, const float *mx,
                                  const float *sumexp, const float *tlogit, int N, int Vl,
                                  int nvalid, int v0, float grad_scale)
{
    double *loss = malloc(sizeof(double) * (N > 0 ? N : 1));
    if (!loss)
        HPT_FATAL("out of memory in cross-entropy");
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float lse = mx[n] + logf(sumexp[n]);
        loss[n] = (double)lse - tlogit[n];
        if (grad_scale == 0.0f)
            continue;
        float *row = logits + (size_t)n * Vl;
        for (int j = 0; j < nvalid; j++)
            row[j] = expf(row[j] - lse) * grad_scale;
        for (int j = nvalid; j < Vl; j++)
            row[j] = 0.0f;
        int t = targets[n] - v0;
        if (t >= 0 && t < nvalid)
            row[t] -= grad_scale;
    }
    double s = sum_in_order(loss, N);
    free(loss);
    return s;
}

/* -------------------------------------------------------------- AdamW */

static void cpu_adamw(float *p, const float *grad, float *m, float *v, size_t n, float lr,
                      float b1, float b2, float eps, float wd, float grad_scale, int t)
{
    float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    float step = lr / bc1, bc2_sqrt = sqrtf(bc2), decay = 1.0f - lr * wd;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * grad_scale;
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - step * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}

const hpt_backend hpt_backend_cpu = {
    .name = "cpu",
    .init = cpu_init,
    .set_precision = cpu_set_precision,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memset0 = cpu_memset0,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .matmul_forward = cpu_matmul_forward,
    .matmul_backward = cpu_matmul_backward,
    .embedding_forward = cpu_embedding_forward,
    .embedding_backward = cpu_embedding_backward,
    .rmsnorm_forward = cpu_rmsnorm_forward,
    .rmsnorm_backward = cpu_rmsnorm_backward,
    .rope = cpu_rope,
    .attention_forward = hpt_attn_cpu_forward,
    .attention_saved_floats = hpt_attn_cpu_floats,
    .attention_backward = hpt_attn_cpu_backward,
    .attention_scratch_floats = hpt_attn_cpu_floats,
    .rope_at = cpu_rope_at,
    .attention_cached = cpu_attention_cached,
    .swiglu_forward = cpu_swiglu_forward,
    .swiglu_backward = cpu_swiglu_backward,
    .add = cpu_add,
    .scale = cpu_scale,
    .sumsq = cpu_sumsq,
    .crossentropy_fused = cpu_crossentropy_fused,
    .crossentropy_loss = cpu_crossentropy_loss,
    .vocab_max = cpu_vocab_max,
    .vocab_sumexp = cpu_vocab_sumexp,
    .vocab_ce_finish = cpu_vocab_ce_finish,
    .adamw = cpu_adamw,
};
