/* backend_cpu.c — the CPU compute backend: OpenBLAS SGEMM for every matrix
 * product, OpenMP loops for the rest. Reductions are done in a fixed order
 * (never an OpenMP reduction clause) so results are bitwise reproducible
 * for a given thread count. Shapes and maths: see backend.h.
 *
 * The element-wise ops run the vectorised kernels of lib/kernels_cpu.h
 * (AVX-512, AVX2 or generic, chosen at start-up) over work items of fixed
 * size handed out dynamically (schedule(dynamic)): a thread slowed down by
 * another process on its core takes fewer items instead of holding the
 * others at the barrier, and since each item's result depends only on its
 * inputs, no result depends on the thread count or on which thread ran
 * which item. */
#include <cblas.h>
#include <omp.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "attention_cpu.h"
#include "backend.h"
#include "hpt_config.h"
#include "kernels_cpu.h"

/* Elements per work item of the flat element-wise ops (a multiple of the
 * kernels' 16-float block) and the row count of row-wise ops' items. */
#define FLAT_ITEM 8192
#define ROW_ITEM_FLOATS 4096

/* Rows per work item for rows of C floats: about ROW_ITEM_FLOATS floats. */
static int row_item(int C) { return C >= ROW_ITEM_FLOATS ? 1 : ROW_ITEM_FLOATS / (C > 0 ? C : 1); }

/* ------------------------------------------------------------- memory */

/* Zeroed, 64-byte aligned. calloc: a large block is fresh anonymous
 * memory (glibc maps it), zero without being written, so its pages take
 * memory only once used — what lets ZeRO-3's parameter block and ZeRO-2's
 * gradient block hold only the pages in use. The pointer calloc returned
 * sits just below the aligned one. */
static void *cpu_alloc(size_t bytes)
{
    char *base = calloc(1, bytes + 64 + sizeof(void *));
    if (!base)
        return NULL;
    char *p = (char *)(((uintptr_t)base + sizeof(void *) + 63) / 64 * 64);
    ((void **)p)[-1] = base;
    return p;
}

static void cpu_free(void *p)
{
    if (p)
        free(((void **)p)[-1]);
}
/* The decommit slot (backend.h): the whole pages inside [p, p + bytes) go
 * back to the OS (MADV_DONTNEED: anonymous private pages then read as zero
 * and take no memory until written again: cpu_alloc's large blocks are
 * such pages). Advice: a refusal costs memory only. No commit slot: a page
 * given back returns on its first write. */
static void cpu_decommit(void *p, size_t bytes)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + pg - 1) / pg * pg, b = ((uintptr_t)p + bytes) / pg * pg;
    if (p && a < b)
        (void)madvise((void *)a, (size_t)(b - a), MADV_DONTNEED);
}

static void cpu_memset0(void *dst, size_t bytes) { memset(dst, 0, bytes); }
static void cpu_copy(void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }

/* ------------------------------------------------------------- linear */

/* One thread pool: OpenBLAS runs single-threaded and the OpenMP threads
 * split every product into independent tiles. Two pools (OpenMP and
 * OpenBLAS's pthreads) on the same cores spin against each other; measured
 * 3.7x slower on the tiny model here. The split is fixed for a thread
 * count, so results are reproducible. */
static hpt_status cpu_init(void)
{
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    openblas_set_num_threads(1);
#endif
    return hpt_cpu_kernels_init();
}

static hpt_status cpu_set_precision(hpt_precision p)
{
    if (p == HPT_PRECISION_FP32)
        return HPT_OK;
    return hpt_error_set(HPT_ERR_USAGE, "--precision %s: the cpu backend computes in fp32 only; "
                         "use --backend cuda%s", hpt_precision_name(p),
                         hpt_backend_compiled("cuda") ? "" : " (this hpt was built without it: ./configure "
                                     "--with-cuda=yes)");
}

/* Work items of one product C (M x Nc) = A·B: a grid of nr x nc tiles of at
 * most `rows` x `cols` elements of C, each computed by one single-threaded
 * SGEMM over the whole inner dimension (K is never split, so no sum is
 * reassociated) and handed out with schedule(dynamic, 1). A thread that
 * loses its core to another process for a while takes fewer tiles instead
 * of holding the others at the end of the product (the static split of
 * one row block per thread did that: every product waited for its slowest
 * thread). About GEMM_ITEMS_PER_THREAD tiles per thread, at least
 * GEMM_MIN_ROWS x GEMM_MIN_COLS each. More tiles cost more packing:
 * OpenBLAS packs the A rows and B columns of every call, so each row block
 * repacks all of B (K x Nc) and each column block all of A (M x K); of the
 * grids with enough tiles the one packing least is taken (row blocks for
 * most products, column blocks for the LM head, whose B is large). One
 * thread makes one call. The grid depends on the shape and the thread
 * count only, so results are bitwise reproducible for a given thread
 * count (OpenBLAS's bits for an element can depend on the tile it falls
 * in, so not across thread counts). */
#ifndef GEMM_ITEMS_PER_THREAD /* bench/gemm_ceiling.sh may set it to compare */
#define GEMM_ITEMS_PER_THREAD 3
#endif
#define GEMM_MIN_ROWS 64
#define GEMM_MIN_COLS 256

typedef struct {
    int rows, cols; /* tile size (elements of C) */
    int nr, nc;     /* tiles down and across */
} gemm_grid;

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* The tile grid for C of M x Nc on nt threads (see above). */
static gemm_grid gemm_grid_for(int M, int Nc, int nt)
{
    gemm_grid g = {M > 0 ? M : 1, Nc > 0 ? Nc : 1, 1, 1};
    if (nt <= 1 || M <= 0 || Nc <= 0)
        return g;
    int want = GEMM_ITEMS_PER_THREAD * nt;
    int max_r = M / GEMM_MIN_ROWS > 1 ? M / GEMM_MIN_ROWS : 1;
    int max_c = Nc / GEMM_MIN_COLS > 1 ? Nc / GEMM_MIN_COLS : 1;
    int best_r = 1, best_c = 1, best_short = want;
    double best_pack = 0;
    for (int nr = 1; nr <= max_r && nr <= want; nr++) {
        int nc = ceil_div(want, nr) < max_c ? ceil_div(want, nr) : max_c;
        /* fewest tiles short of `want` first, then least packing */
        int shortfall = nr * nc < want ? want - nr * nc : 0;
        double pack = (double)nr * Nc + (double)nc * M;
        if (nr == 1 || shortfall < best_short || (shortfall == best_short && pack < best_pack))
            best_short = shortfall, best_pack = pack, best_r = nr, best_c = nc;
    }
    g.rows = (ceil_div(M, best_r) + 15) / 16 * 16;
    g.nr = ceil_div(M, g.rows);
    g.cols = (ceil_div(Nc, best_c) + 15) / 16 * 16;
    g.nc = ceil_div(Nc, g.cols);
    return g;
}

/* Tile t of grid g: rows [*r0, *r0 + *rn), columns [*c0, *c0 + *cn). */
static void gemm_tile(const gemm_grid *g, int M, int Nc, int t, int *r0, int *rn, int *c0, int *cn)
{
    int r = t / g->nc, c = t % g->nc;
    *r0 = r * g->rows;
    *rn = M - *r0 < g->rows ? M - *r0 : g->rows;
    *c0 = c * g->cols;
    *cn = Nc - *c0 < g->cols ? Nc - *c0 : g->cols;
}

static void cpu_matmul_forward(void *out_act, hpt_dtype out_dtype, const void *in_act,
                               const float *w, int N, int Ic, int O)
{
    HPT_CHECK(out_dtype == HPT_DTYPE_F32); /* the CPU's activations are fp32 */
    float *out = out_act;
    const float *in = in_act;
    /* out (N, O) = in (N, Ic) · wᵀ, w (O, Ic) */
    gemm_grid g = gemm_grid_for(N, O, omp_get_max_threads());
    int items = g.nr * g.nc;
#pragma omp parallel for schedule(dynamic, 1) if (items > 1)
    for (int t = 0; t < items; t++) {
        int r0, rn, c0, cn;
        gemm_tile(&g, N, O, t, &r0, &rn, &c0, &cn);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rn, cn, Ic, 1.0f,
                    in + (size_t)r0 * Ic, Ic, w + (size_t)c0 * Ic, Ic, 0.0f,
                    out + (size_t)r0 * O + c0, O);
    }
}

static void cpu_matmul_backward(float *din, float *dw, const float *dout, const void *in_act,
                                const float *w, int N, int Ic, int O, int accum_din)
{
    const float *in = in_act;
    /* din (N, Ic) (+)= dout (N, O) · w (O, Ic);  dw (O, Ic) += doutᵀ · in (N, Ic).
     * The tiles of both products form one list, so no barrier between them. */
    int nt = omp_get_max_threads();
    gemm_grid gx = gemm_grid_for(N, Ic, nt), gw = gemm_grid_for(O, Ic, nt);
    int nx = din ? gx.nr * gx.nc : 0, items = nx + (dw ? gw.nr * gw.nc : 0);
#pragma omp parallel for schedule(dynamic, 1) if (items > 1)
    for (int t = 0; t < items; t++) {
        int r0, rn, c0, cn;
        if (t < nx) {
            gemm_tile(&gx, N, Ic, t, &r0, &rn, &c0, &cn);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rn, cn, O, 1.0f,
                        dout + (size_t)r0 * O, O, w + c0, Ic, accum_din ? 1.0f : 0.0f,
                        din + (size_t)r0 * Ic + c0, Ic);
        } else {
            gemm_tile(&gw, O, Ic, t - nx, &r0, &rn, &c0, &cn);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, rn, cn, N, 1.0f, dout + r0, O,
                        in + c0, Ic, 1.0f, dw + (size_t)r0 * Ic + c0, Ic);
        }
    }
}

/* ---------------------------------------------------------- embedding */

static void cpu_embedding_forward(float *out, const int32_t *tokens, const float *wte, int N, int C,
                                  int v0, int Vl)
{
#pragma omp parallel for schedule(dynamic, 16)
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
    /* Rows may repeat, so each column block accumulates sequentially over
     * n (deterministic); the column blocks run in parallel. */
    const hpt_cpu_kernels *K = hpt_cpu_kernels_get();
    enum { COLS = 64 };
    int nb = (C + COLS - 1) / COLS;
#pragma omp parallel for schedule(dynamic, 1) if (nb > 1 && N > 16)
    for (int b = 0; b < nb; b++) {
        int c0 = b * COLS, nc = C - c0 < COLS ? C - c0 : COLS;
        for (int n = 0; n < N; n++) {
            int r = tokens[n] - v0;
            if (r < 0 || r >= Vl)
                continue;
            float *d = dwte + (size_t)r * C + c0;
            K->add(d, d, dout + (size_t)n * C + c0, (size_t)nc);
        }
    }
}

/* ------------------------------------------------------------ RMSNorm */

static void cpu_rmsnorm_forward(void *out_act, float *rstd, const float *in, const float *w,
                                int N, int C, float eps)
{
    float *out = out_act;
    const hpt_cpu_kernels *K = hpt_cpu_kernels_get();
    int rows = row_item(C);
#pragma omp parallel for schedule(dynamic, rows)
    for (int n = 0; n < N; n++)
        rstd[n] = K->rmsnorm_row(out + (size_t)n * C, in + (size_t)n * C, w, C, eps);
}

/* The residual add and the RMSNorm of its result row by row (backend.h):
 * each row is read from memory once, normalised while in cache. */
static void cpu_add_rmsnorm_forward(float *out, void *norm_act, float *rstd, const float *x,
                                    const float *delta, const float *w, int N, int C, float eps)
{
    const hpt_cpu_kernels *K = hpt_cpu_kernels_get();
    float *norm_out = norm_act; /* the CPU's activations are fp32 */
    int rows = row_item(C);
#pragma omp parallel for schedule(dynamic, rows)
    for (int n = 0; n < N; n++) {
        size_t o = (size_t)n * C;
        rstd[n] = K->add_rmsnorm_row(out + o, norm_out + o, x + o, delta + o, w, C, eps);
    }
}

/* y_c = x_c r w_c, r = (mean x^2 + eps)^-1/2:
 * dx_c = r w_c dy_c - r^3 x_c / C * sum_j dy_j w_j x_j;  dw_c = sum_n dy_c x_c r. */
static void cpu_rmsnorm_backward(float *din, float *dw, const float *dout, const float *in,
                                 const float *w, const float *rstd, int N, int C)
{
    const hpt_cpu_kernels *K = hpt_cpu_kernels_get();
    int rows = row_item(C);
    enum { COLS = 64 }; /* dw: column blocks, each summed over n in order */
    int nb = (C + COLS - 1) / COLS;
#pragma omp parallel
    {
        /* nowait: the dw blocks read only dout, in and rstd */
#pragma omp for schedule(dynamic, rows) nowait
        for (int n = 0; n < N; n++)
            K->rmsnorm_row_backward(din + (size_t)n * C, dout + (size_t)n * C, in + (size_t)n * C,
                                    w, rstd[n], C);
#pragma omp for schedule(dynamic, 1)
        for (int b = 0; b < nb; b++) {
            int c0 = b * COLS, nc = C - c0 < COLS ? C - c0 : COLS;
            K->rmsnorm_dw(dw + c0, dout + c0, in + c0, rstd, N, nc, (size_t)C);
        }
    }
}

/* --------------------------------------------------------------- RoPE */

static void cpu_rope_pos(void *x_act, hpt_dtype dtype, int B, int T, int nh, int hd,
                         float theta, int inverse, const int *pos)
{
    HPT_CHECK(dtype == HPT_DTYPE_F32);
    float *x = x_act;
    int half = hd / 2;
    const hpt_cpu_kernels *K = hpt_cpu_kernels_get();
    /* cos (T,half) then sin (T,half) */
    float *cs = malloc(sizeof(float) * 2 * (size_t)T * half), *sn = cs + (size_t)T * half;
    if (!cs)
        HPT_FATAL("out of memory in rope");
#pragma omp parallel
    {
        /* As Hugging Face: inv_freq = 1/theta^(2i/hd) and angle = t*inv_freq in fp32. */
#pragma omp for schedule(dynamic, 16)
        for (int t = 0; t < T; t++)
            for (int i = 0; i < half; i++) {
                float inv_freq = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
                float a = (float)(pos ? pos[t] : t) * inv_freq;
                cs[(size_t)t * half + i] = cosf(a);
                sn[(size_t)t * half + i] = inverse ? -sinf(a) : sinf(a);
            }
#pragma omp for collapse(2) schedule(dynamic, 8)
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int h = 0; h < nh; h++)
                    K->rope_head(x + (((size_t)b * T + t) * nh + h) * hd, cs + (size_t)t * half,
                                 sn + (size_t)t * half, half);
    }
    free(cs);
}

static void cpu_rope(void *x_act, hpt_dtype dtype, int B, int T, int nh, int hd, float theta,
                     int inverse)
{
    cpu_rope_pos(x_act, dtype, B, T, nh, hd, theta, inverse, NULL);
}

/* ---------------------------------------------------------- attention */

/* Training attention (forward, backward) lives in lib/attention_cpu.c. */

/* ------------------------------------------- key/value-cache inference */

static void cpu_rope_at(void *x_act, int n, int nh, int hd, float theta, int pos0)
{
    float *x = x_act;
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

static void cpu_attention_cached(void *out_act, const void *q_act, const void *kc_act,
                                 const void *vc_act, int n, int pos0, int H, int KV, int hd)
{
    float *out = out_act;
    const float *q = q_act, *kc = kc_act, *vc = vc_act;
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

/* Work items of FLAT_ITEM elements over [0, n): item b is [b*FLAT_ITEM,
 * min(n, (b+1)*FLAT_ITEM)). One item runs without a parallel region. */
#define FLAT_ITEMS(n) (((n) + FLAT_ITEM - 1) / FLAT_ITEM)
#define FLAT_LEN(n, b) ((n) - (b) * FLAT_ITEM < FLAT_ITEM ? (n) - (b) * FLAT_ITEM : FLAT_ITEM)

static void cpu_swiglu_forward(void *out_act, const void *gate_act, const void *up_act, size_t n)
{
    float *out = out_act;
    const float *gate = gate_act, *up = up_act;
    const hpt_cpu_kernels *K = hpt_cpu_kernels_get();
    size_t nb = FLAT_ITEMS(n);
#pragma omp parallel for schedule(dynamic, 1) if (nb > 1)
    for (size_t b = 0; b < nb; b++) {
        size_t o = b * FLAT_ITEM;
        K->swiglu_forward(out + o, gate + o, up + o, FLAT_LEN(n, b));
    }
}

static void cpu_swiglu_backward(float *dgate, float *dup, const float *dout, const void *gate_act,
                                const void *up_act, size_t n)
{
    const float *gate = gate_act, *up = up_act;
    const hpt_cpu_kernels *K = hpt_cpu_kernels_get();
    size_t nb = FLAT_ITEMS(n);
#pragma omp parallel for schedule(dynamic, 1) if (nb > 1)
    for (size_t b = 0; b < nb; b++) {
        size_t o = b * FLAT_ITEM;
        K->swiglu_backward(dgate + o, dup + o, dout + o, gate + o, up + o, FLAT_LEN(n, b));
    }
}

/* --------------------------------------------------------- elementwise */

static void cpu_add(float *out, const float *a, const float *b, size_t n)
{
    const hpt_cpu_kernels *K = hpt_cpu_kernels_get();
    size_t nb = FLAT_ITEMS(n);
#pragma omp parallel for schedule(dynamic, 1) if (nb > 1)
    for (size_t i = 0; i < nb; i++) {
        size_t o = i * FLAT_ITEM;
        K->add(out + o, a + o, b + o, FLAT_LEN(n, i));
    }
}

static void cpu_scale(float *x, float s, size_t n)
{
    const hpt_cpu_kernels *K = hpt_cpu_kernels_get();
    size_t nb = FLAT_ITEMS(n);
#pragma omp parallel for schedule(dynamic, 1) if (nb > 1)
    for (size_t b = 0; b < nb; b++)
        K->scale(x + b * FLAT_ITEM, s, FLAT_LEN(n, b));
}

/* Fixed 64-way split summed in order: the result does not depend on the
 * number of OpenMP threads. */
#define SUMSQ_PARTS 64
static double cpu_sumsq(const float *x, size_t n)
{
    const hpt_cpu_kernels *K = hpt_cpu_kernels_get();
    double part[SUMSQ_PARTS];
    size_t chunk = (n + SUMSQ_PARTS - 1) / SUMSQ_PARTS;
#pragma omp parallel for schedule(dynamic, 1) if (n > FLAT_ITEM)
    for (int p = 0; p < SUMSQ_PARTS; p++) {
        size_t lo = (size_t)p * chunk < n ? (size_t)p * chunk : n;
        size_t hi = lo + chunk < n ? lo + chunk : n;
        part[p] = K->sumsq(x + lo, hi - lo);
    }
    double s = 0.0;
    for (int p = 0; p < SUMSQ_PARTS; p++)
        s += part[p];
    return s;
}

/* ------------------------------------------------------- cross-entropy */

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
    const hpt_cpu_kernels *K = hpt_cpu_kernels_get();
    double *loss = malloc(sizeof(double) * (N > 0 ? N : 1));
    if (!loss)
        HPT_FATAL("out of memory in cross-entropy");
#pragma omp parallel for schedule(dynamic, 1)
    for (int n = 0; n < N; n++) {
        float *row = logits + (size_t)n * V;
        float mx = K->row_max(row, V);
        float target = row[targets[n]];
        float sum = K->row_exp_sum(row, V, mx); /* one exp per logit: keep exp(l - max) */
        loss[n] = (double)(mx + logf(sum)) - target;
        K->scale(row, grad_scale / sum, (size_t)V);
        row[targets[n]] -= grad_scale;
    }
    double s = sum_in_order(loss, N);
    free(loss);
    return s;
}

static double cpu_crossentropy_loss(const float *logits, const int32_t *targets, int N, int V)
{
    const hpt_cpu_kernels *K = hpt_cpu_kernels_get();
    double *loss = malloc(sizeof(double) * (N > 0 ? N : 1));
    if (!loss)
        HPT_FATAL("out of memory in cross-entropy");
#pragma omp parallel for schedule(dynamic, 1)
    for (int n = 0; n < N; n++) {
        const float *row = logits + (size_t)n * V;
        float mx = K->row_max(row, V);
        loss[n] = (double)(mx + logf(K->row_sumexp(row, V, mx))) - row[targets[n]];
    }
    double s = sum_in_order(loss, N);
    free(loss);
    return s;
}

/* ---------------------------------------- vocab-parallel cross-entropy */

static void cpu_vocab_max(float *mx, const float *logits, int N, int Vl, int nvalid)
{
    const hpt_cpu_kernels *K = hpt_cpu_kernels_get();
#pragma omp parallel for schedule(dynamic, row_item(Vl))
    for (int n = 0; n < N; n++)
        mx[n] = K->row_max(logits + (size_t)n * Vl, nvalid);
}

static void cpu_vocab_sumexp(float *sumexp, float *tlogit, const float *logits,
                             const int32_t *targets, const float *mx, int N, int Vl, int nvalid,
                             int v0)
{
    const hpt_cpu_kernels *K = hpt_cpu_kernels_get();
#pragma omp parallel for schedule(dynamic, row_item(Vl))
    for (int n = 0; n < N; n++) {
        const float *row = logits + (size_t)n * Vl;
        sumexp[n] = K->row_sumexp(row, nvalid, mx[n]);
        int t = targets[n] - v0;
        tlogit[n] = t >= 0 && t < nvalid ? row[t] : 0.0f;
    }
}

static double cpu_vocab_ce_finish(float *logits, const int32_t *targets, const float *mx,
                                  const float *sumexp, const float *tlogit, int N, int Vl,
                                  int nvalid, int v0, float grad_scale)
{
    const hpt_cpu_kernels *K = hpt_cpu_kernels_get();
    double *loss = malloc(sizeof(double) * (N > 0 ? N : 1));
    if (!loss)
        HPT_FATAL("out of memory in cross-entropy");
#pragma omp parallel for schedule(dynamic, row_item(Vl))
    for (int n = 0; n < N; n++) {
        float lse = mx[n] + logf(sumexp[n]);
        loss[n] = (double)lse - tlogit[n];
        if (grad_scale == 0.0f)
            continue;
        float *row = logits + (size_t)n * Vl;
        K->row_exp_scale(row, nvalid, lse, grad_scale);
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
    const hpt_cpu_kernels *K = hpt_cpu_kernels_get();
    float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    hpt_adamw_coef c = {.b1 = b1, .b2 = b2, .eps = eps, .grad_scale = grad_scale,
                        .decay = 1.0f - lr * wd, .step = lr / bc1, .bc2_sqrt = sqrtf(bc2)};
    size_t nb = FLAT_ITEMS(n);
#pragma omp parallel for schedule(dynamic, 1) if (nb > 1)
    for (size_t b = 0; b < nb; b++) {
        size_t o = b * FLAT_ITEM;
        K->adamw(p + o, grad + o, m + o, v + o, FLAT_LEN(n, b), &c);
    }
}

/* The kernel table in use (lib/kernels_cpu.c), for the banner. */
static const char *cpu_describe(void)
{
    const char *n = hpt_cpu_kernels_get()->name;
    return !strcmp(n, "avx512") ? "avx512 kernels" : !strcmp(n, "avx2") ? "avx2 kernels"
                                                                          : "generic kernels";
}

/* The attention library's float signatures (lib/attention_cpu.h) under the
 * table's activation-typed ones (backend.h: `void *` act pointers, fp32 on
 * the CPU). The other ops take the table's types directly. */
static void cpu_act_attention_forward(void *out, float *saved, const void *q, const void *k,
                                      const void *v, int B, int T, int H, int KV, int hd)
{
    hpt_attn_cpu_forward(out, saved, q, k, v, B, T, H, KV, hd);
}

static void cpu_act_attention_backward(float *dq, float *dk, float *dv, float *scratch,
                                       const float *dout, const void *out, const float *saved,
                                       const void *q, const void *k, const void *v, int B, int T,
                                       int H, int KV, int hd)
{
    hpt_attn_cpu_backward(dq, dk, dv, scratch, dout, out, saved, q, k, v, B, T, H, KV, hd);
}

static void cpu_act_block_forward(void *out, float *lse, const void *q, const void *k,
                                  const void *v, const hpt_attn_block *blk, int B, int H, int KV,
                                  int hd, int merge)
{
    hpt_attn_cpu_block_forward(out, lse, q, k, v, blk, B, H, KV, hd, merge);
}

static void cpu_act_block_backward(float *dq, float *dk, float *dv, const float *D,
                                   const float *dout, const float *lse, const void *q,
                                   const void *k, const void *v, const hpt_attn_block *blk, int B,
                                   int H, int KV, int hd)
{
    hpt_attn_cpu_block_backward(dq, dk, dv, D, dout, lse, q, k, v, blk, B, H, KV, hd);
}

static void cpu_act_rowdot(float *D, const float *dout, const void *out, int B, int T, int H,
                           int hd)
{
    hpt_attn_cpu_rowdot(D, dout, out, B, T, H, hd);
}

const hpt_backend hpt_backend_cpu = {
    .name = "cpu",
    .describe = cpu_describe,
    .init = cpu_init,
    .set_precision = cpu_set_precision,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .decommit = cpu_decommit,
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
    .attention_forward = cpu_act_attention_forward,
    .attention_saved_floats = hpt_attn_cpu_floats,
    .attention_backward = cpu_act_attention_backward,
    .attention_scratch_floats = hpt_attn_cpu_floats,
    .rope_pos = cpu_rope_pos,
    .attention_block_forward = cpu_act_block_forward,
    .attention_block_backward = cpu_act_block_backward,
    .attention_rowdot = cpu_act_rowdot,
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
    .add_rmsnorm_forward = cpu_add_rmsnorm_forward,
};
