/* kernels_cuda.cu — the CUDA backend's kernels other than attention and
 * the products (the CPU's are lib/kernels_cpu.c and backend_cpu.c):
 * embedding, RMSNorm, RoPE, SwiGLU, add/scale, sums of squares, the
 * cross-entropies (whole-vocabulary and vocab-parallel) and AdamW.
 * Reductions whose result goes to the host are accumulated in double,
 * per block then in a fixed order (deterministic), through the one
 * block_reduce of cuda_internal.h. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

namespace hpt_cuda {

/* ---------------------------------------------------------- host sums */

/* *out = sum of x[0..n) (one block, fixed order for a given n). */
__global__ static void __launch_bounds__(1024) k_sum_d(double *out, const double *x, size_t n)
{
    double acc = 0.0;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x)
        acc += x[i];
    acc = block_sum_d(acc);
    if (threadIdx.x == 0)
        *out = acc;
}

/* Sum of x[0..n) (device doubles) returned to the host; `res` is one
 * device double of scratch that is not part of x. */
static double sum_to_host(const double *x, size_t n, double *res)
{
    k_sum_d<<<1, 1024>>>(res, x, n);
    LAUNCHED("k_sum_d");
    double h = 0.0;
    memcpy_d2h(&h, res, sizeof h);
    return h;
}

/* ---------------------------------------------------------- embedding */

__global__ static void k_embedding_forward(float *out, const int32_t *tokens, const float *wte,
                                           int C, int v0, int Vl, size_t total)
{
    GRID_STRIDE(i, total)
    {
        int n = (int)(i / C), c = (int)(i % C), r = tokens[n] - v0;
        out[i] = r >= 0 && r < Vl ? wte[(size_t)r * C + c] : 0.0f;
    }
}

/* Repeated tokens, in position order, without an order that depends on
 * atomics (whose order, and so whose rounding, changes from run to run):
 * for each position n with a token row r = tokens[n] - v0 in [0, Vl),
 * nxt[n] = the next position m > n with the same token (-1: none) and
 * head[n] = 1 when no earlier position has it (0 for rows outside the
 * shard). A counting sort by row: cnt[r] (atomic counts), off[r] their
 * exclusive scan, each position dropped into its row's segment of `slot`
 * (in any order), then ranked inside its segment by position (a position's
 * rank: the segment's smaller positions), so `sorted` holds each row's
 * positions in order whatever order the atomics ran in. Work O(N + Vl +
 * the sum of the squared repeat counts) — BPE text's most frequent token,
 * ~4 % of the positions: ~330^2 compares at N = 8192 — instead of N^2. */
__global__ static void k_embed_count(int *cnt, const int32_t *tokens, int N, int v0, int Vl)
{
    GRID_STRIDE(i, (size_t)N)
    {
        int r = tokens[i] - v0;
        if (r >= 0 && r < Vl)
            atomicAdd(&cnt[r], 1);
    }
}

/* One block of 1024 threads: off = the exclusive scan of cnt[0..Vl), *total
 * its sum. Thread t scans a contiguous chunk; the chunk sums are scanned in
 * shared memory. */
__global__ static void __launch_bounds__(1024) k_embed_scan(int *off, int *total, const int *cnt,
                                                            int Vl)
{
    __shared__ int part[1024];
    int t = threadIdx.x, per = (Vl + (int)blockDim.x - 1) / (int)blockDim.x;
    int lo = t * per < Vl ? t * per : Vl, hi = lo + per < Vl ? lo + per : Vl, s = 0;
    for (int r = lo; r < hi; r++)
        s += cnt[r];
    part[t] = s;
    __syncthreads();
    if (t == 0) {
        int acc = 0;
        for (int i = 0; i < (int)blockDim.x; i++) {
            int v = part[i];
            part[i] = acc;
            acc += v;
        }
        *total = acc;
    }
    __syncthreads();
    s = part[t];
    for (int r = lo; r < hi; r++) {
        off[r] = s;
        s += cnt[r];
    }
}

__global__ static void k_embed_place(int *slot, int *fill, const int *off, const int32_t *tokens,
                                     int N, int v0, int Vl)
{
    GRID_STRIDE(i, (size_t)N)
    {
        int r = tokens[i] - v0;
        if (r >= 0 && r < Vl)
            slot[off[r] + atomicAdd(&fill[r], 1)] = (int)i;
    }
}

/* Slot s (< *total): its position's rank among its segment's positions. */
__global__ static void k_embed_rank(int *sorted, const int *slot, const int *off, const int *cnt,
                                    const int *total, const int32_t *tokens, int v0)
{
    GRID_STRIDE(s, (size_t)*total)
    {
        int n = slot[s], r = tokens[n] - v0, a = off[r], k = cnt[r], rank = 0;
        for (int j = a; j < a + k; j++)
            rank += slot[j] < n;
        sorted[a + rank] = n;
    }
}

/* Slot s of `sorted`: link its position to the next of its row. */
__global__ static void k_embed_link(int *nxt, int *head, const int *sorted, const int *off,
                                    const int *cnt, const int *total, const int32_t *tokens, int v0)
{
    GRID_STRIDE(s, (size_t)*total)
    {
        int n = sorted[s], r = tokens[n] - v0, i = (int)s - off[r];
        nxt[n] = i + 1 < cnt[r] ? sorted[s + 1] : -1;
        head[n] = i == 0;
    }
}

static scratch g_embed_scratch; /* the chains' ints (cuda_reserve grows it) */

static size_t embed_scratch_bytes(size_t n, size_t v) { return sizeof(int) * (4 * n + 3 * v + 1); }

int embed_scratch_reserve(size_t n, size_t v)
{
    return scratch_grow(&g_embed_scratch, embed_scratch_bytes(n, v));
}

/* nxt, head (N ints each) for cuda_embedding_backward; k_embed_* above. */
static void embed_chains(int **nxt, int **head, const int32_t *tokens, int N, int v0, int Vl)
{
    size_t n = (size_t)N, v = (size_t)(Vl > 0 ? Vl : 0);
    int *w = (int *)scratch_need(&g_embed_scratch, embed_scratch_bytes(n, v),
                                 "embedding backward scratch");
    int *cnt = w, *fill = cnt + v, *off = fill + v, *slot = off + v, *sorted = slot + n;
    int *total = sorted + n;
    *nxt = total + 1, *head = *nxt + n;
    HPT_CUDA(cudaMemset(cnt, 0, sizeof(int) * 2 * v)); /* cnt, fill */
    HPT_CUDA(cudaMemset(*head, 0, sizeof(int) * n));   /* rows outside the shard */
    k_embed_count<<<ew_blocks(n), EW_THREADS>>>(cnt, tokens, N, v0, Vl);
    LAUNCHED("k_embed_count");
    k_embed_scan<<<1, 1024>>>(off, total, cnt, Vl);
    LAUNCHED("k_embed_scan");
    k_embed_place<<<ew_blocks(n), EW_THREADS>>>(slot, fill, off, tokens, N, v0, Vl);
    LAUNCHED("k_embed_place");
    k_embed_rank<<<ew_blocks(n), EW_THREADS>>>(sorted, slot, off, cnt, total, tokens, v0);
    LAUNCHED("k_embed_rank");
    k_embed_link<<<ew_blocks(n), EW_THREADS>>>(*nxt, *head, sorted, off, cnt, total, tokens, v0);
    LAUNCHED("k_embed_link");
}

/* Blocks (x, column chunk), x striding over the positions n: for the first
 * position n of each token in the shard, dwte[row, c] += dout[n, c], then
 * the next position's, ... in position order — the CPU backend's order and
 * rounding, the same every run. Other positions are skipped. A chain is
 * walked load after load: a token that fills much of the batch costs its
 * count in dependent loads (BPE text's most frequent token, ~4 % of the
 * positions: ~0.1 ms at N = 8192). */
__global__ static void k_embedding_backward(float *dwte, const float *dout, const int32_t *tokens,
                                            const int *nxt, const int *head, int N, int C, int v0,
                                            int Vl)
{
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        int r = tokens[n] - v0;
        if (!head[n] || r < 0 || r >= Vl)
            continue;
        float v = dwte[(size_t)r * C + c];
        for (int m = n; m >= 0; m = nxt[m])
            v += dout[(size_t)m * C + c];
        dwte[(size_t)r * C + c] = v;
    }
}

void cuda_embedding_forward(float *out, const int32_t *tokens, const float *wte, int N,
                                   int C, int v0, int Vl)
{
    size_t total = (size_t)N * C;
    if (!total)
        return;
    k_embedding_forward<<<ew_blocks(total), EW_THREADS>>>(out, tokens, wte, C, v0, Vl, total);
    LAUNCHED("k_embedding_forward");
}

void cuda_embedding_backward(float *dwte, const float *dout, const int32_t *tokens, int N,
                                    int C, int v0, int Vl)
{
    if (N <= 0 || C <= 0)
        return;
    int *nxt, *head;
    embed_chains(&nxt, &head, tokens, N, v0, Vl);
    int gx = N < 4096 ? N : 4096; /* blocks striding over the positions */
    k_embedding_backward<<<dim3(gx, (C + EW_THREADS - 1) / EW_THREADS), EW_THREADS>>>(
        dwte, dout, tokens, nxt, head, N, C, v0, Vl);
    LAUNCHED("k_embedding_backward");
}

/* ------------------------------------------------------------ RMSNorm */

/* Row s (C floats) from the row x, plus the row d when ADD (s = x + d,
 * stored into s; s may alias x or d), elements c0 .. c0+m-1 (m <= VEC)
 * into v; 16-byte accesses when vec. */
template <int ADD>
__device__ static inline void rms_row_load(float v[VEC], float *s, const float *x, const float *d,
                                           int c0, int m, int vec)
{
    if (vec) {
        ld8f(x + c0, v);
        if (ADD) {
            float e[VEC];
            ld8f(d + c0, e);
            for (int j = 0; j < VEC; j++)
                v[j] = v[j] + e[j];
            st8f(s + c0, v);
        }
        return;
    }
    for (int j = 0; j < m; j++) {
        v[j] = x[c0 + j];
        if (ADD) {
            v[j] = v[j] + d[c0 + j];
            s[c0 + j] = v[j];
        }
    }
}

/* RMSNorm of one row per block (Zhang & Sennrich 2019, eq. 4), with the
 * residual add before it when ADD: s (N,C) = x + d, then out (N,C, act:
 * bf16 when bf) = s * r * w, rstd (N) = r = 1/sqrt(mean(s^2) + eps).
 * Without ADD the row read is x itself (s unused). Thread t owns the
 * chunks t, t + blockDim.x, ... of VEC elements: its sum of squares and
 * the block_sum order are the same with and without ADD, and with vec
 * (16-byte accesses: C % VEC == 0, every pointer aligned) and without, so
 * add + rmsnorm_forward and add_rmsnorm_forward give the same bits. The
 * second sweep re-reads the thread's own elements of the row (from the
 * cache: one pass over the residual stream in memory). */
template <int ADD>
__global__ static void k_rmsnorm_rows(float *s, void *out, int bf, float *rstd, const float *x,
                                      const float *d, const float *w, int C, float eps, int vec)
{
    size_t o = (size_t)blockIdx.x * C;
    x += o, d = ADD ? d + o : d, s = ADD ? s + o : s;
    float ss = 0.0f, v[VEC];
    for (int c0 = threadIdx.x * VEC; c0 < C; c0 += blockDim.x * VEC) {
        int m = C - c0 < VEC ? C - c0 : VEC;
        rms_row_load<ADD>(v, s, x, d, c0, m, vec);
        for (int j = 0; j < m; j++)
            ss += v[j] * v[j];
    }
    ss = block_sum(ss);
    float r = 1.0f / sqrtf(ss / C + eps);
    if (threadIdx.x == 0)
        rstd[blockIdx.x] = r;
    const float *y = ADD ? s : x;
    for (int c0 = threadIdx.x * VEC; c0 < C; c0 += blockDim.x * VEC) {
        int m = C - c0 < VEC ? C - c0 : VEC;
        float wv[VEC];
        if (vec) {
            ld8f(y + c0, v), ld8f(w + c0, wv);
            for (int j = 0; j < VEC; j++)
                v[j] = v[j] * r * wv[j];
            st8_act(out, o + c0, v, bf);
        } else {
            for (int j = 0; j < m; j++)
                st_act(out, o + c0 + j, y[c0 + j] * r * w[c0 + j], bf);
        }
    }
}

/* din += r w dy - r^3 x / C * sum_j dy_j w_j x_j; one block per row. */
__global__ static void k_rmsnorm_backward_din(float *din, const float *dout, const float *in,
                                              const float *w, const float *rstd, int C)
{
    size_t n = blockIdx.x;
    const float *x = in + n * C, *dy = dout + n * C;
    float *dx = din + n * C;
    float r = rstd[n], dot = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        dot += dy[c] * w[c] * x[c];
    dot = block_sum(dot);
    float k = r * r * r * dot / C;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        dx[c] += r * w[c] * dy[c] - k * x[c];
}

/* dw (C) += sum_n dy x r over S slices of the rows: block (32, 8) of grid
 * (ceil(C/32), S) owns 32 columns of slice y; its 8 rows of threads split
 * the slice's n, then sum their parts in order into part[y][c] — or, with
 * one slice, into dw. A grid of ceil(C/32) blocks alone would leave most
 * of a GPU idle (12 blocks for C = 384) while each thread walked N/8 rows. */
__global__ static void k_rmsnorm_backward_dw(float *dw, float *part, const float *dout,
                                             const float *in, const float *rstd, int N, int C)
{
    __shared__ float sp[8][33];
    int c = blockIdx.x * 32 + threadIdx.x, S = gridDim.y, y = blockIdx.y;
    int n0 = (int)((long)N * y / S), n1 = (int)((long)N * (y + 1) / S);
    float acc = 0.0f;
    if (c < C)
        for (int n = n0 + threadIdx.y; n < n1; n += 8)
            acc += dout[(size_t)n * C + c] * in[(size_t)n * C + c] * rstd[n];
    sp[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float s = 0.0f;
        for (int j = 0; j < 8; j++)
            s += sp[j][threadIdx.x];
        if (S == 1)
            dw[c] += s;
        else
            part[(size_t)y * C + c] = s;
    }
}

/* dw[c] += the S slices' parts, in slice order (deterministic). */
__global__ static void k_rmsnorm_dw_sum(float *dw, const float *part, int S, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    float s = 0.0f;
    for (int y = 0; y < S; y++)
        s += part[(size_t)y * C + c];
    dw[c] += s;
}

/* Row slices of the dw reduction: one per 128 rows, at most 64 (a function
 * of N alone, so the order of the sums, and the result, never changes). */
int rmsnorm_dw_slices(int N)
{
    int S = (N + 127) / 128;
    return S < 1 ? 1 : S > 64 ? 64 : S;
}

void cuda_rmsnorm_forward(void *out, float *rstd, const float *in, const float *w, int N,
                                 int C, float eps)
{
    if (N <= 0)
        return;
    int vec = C % VEC == 0 && al16(out) && al16(in) && al16(w);
    k_rmsnorm_rows<0><<<N, ROW_THREADS>>>(NULL, out, g_bf16, rstd, in, NULL, w, C, eps, vec);
    LAUNCHED("k_rmsnorm_rows<0>");
}

/* backend.h add_rmsnorm_forward: one kernel, one block per row; bitwise
 * cuda_add then cuda_rmsnorm_forward (k_rmsnorm_rows). out may alias x or
 * delta (each thread reads its elements before writing them). */
void cuda_add_rmsnorm_forward(float *out, void *norm_out, float *rstd, const float *x,
                              const float *delta, const float *w, int N, int C, float eps)
{
    work_mark_dirty(out); /* as cuda_add */
    if (N <= 0 || C <= 0)
        return;
    int vec = C % VEC == 0 && al16(out) && al16(norm_out) && al16(x) && al16(delta) && al16(w);
    k_rmsnorm_rows<1><<<N, ROW_THREADS>>>(out, norm_out, g_bf16, rstd, x, delta, w, C, eps, vec);
    LAUNCHED("k_rmsnorm_rows<1>");
}

void cuda_rmsnorm_backward(float *din, float *dw, const float *dout, const float *in,
                                  const float *w, const float *rstd, int N, int C)
{
    if (N <= 0 || C <= 0)
        return;
    k_rmsnorm_backward_din<<<N, ROW_THREADS>>>(din, dout, in, w, rstd, C);
    LAUNCHED("k_rmsnorm_backward_din");
    int S = rmsnorm_dw_slices(N);
    float *part = S > 1 ? (float *)dscratch(((size_t)S * C + 1) / 2) : NULL;
    k_rmsnorm_backward_dw<<<dim3((C + 31) / 32, S), dim3(32, 8)>>>(dw, part, dout, in, rstd, N, C);
    LAUNCHED("k_rmsnorm_backward_dw");
    if (S > 1) {
        k_rmsnorm_dw_sum<<<(C + EW_THREADS - 1) / EW_THREADS, EW_THREADS>>>(dw, part, S, C);
        LAUNCHED("k_rmsnorm_dw_sum");
    }
}

/* --------------------------------------------------------------- RoPE */

/* The (cos, sin) table of positions [0, npos) for (hd, theta), computed on
 * the host with exactly backend_cpu.c's expressions (so the angles are
 * bitwise the CPU's) and cached on the device: (npos, hd/2, 2) floats. */
const float *rope_table_try(int npos, int hd, float theta)
{
    static float *dev;
    static int cap_pos, cap_hd;
    static float cap_theta;
    if (dev && npos <= cap_pos && hd == cap_hd && theta == cap_theta)
        return dev;
    int half = hd / 2, n = npos > cap_pos && hd == cap_hd && theta == cap_theta ? 2 * npos : npos;
    n = n < 64 ? 64 : n;
    size_t count = 2 * (size_t)n * half;
    float *host = (float *)malloc(sizeof(float) * (count ? count : 1));
    if (!host)
        HPT_FATAL("out of memory for the RoPE table (%d positions x %d)", n, half);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < half; i++) {
            float inv_freq = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
            float a = (float)t * inv_freq;
            host[((size_t)t * half + i) * 2] = cosf(a);
            host[((size_t)t * half + i) * 2 + 1] = sinf(a);
        }
    cuda_free(dev);
    cap_pos = 0;
    dev = (float *)cuda_alloc(sizeof(float) * (count ? count : 1));
    if (!dev) { /* the reason (bytes asked for and free) stays in hpt_error_msg() */
        free(host);
        return NULL;
    }
    cuda_upload(dev, host, sizeof(float) * count);
    free(host);
    cap_pos = n;
    cap_hd = hd;
    cap_theta = theta;
    return dev;
}

/* rope_table_try for an op: a failure mid-step aborts (cuda_reserve builds
 * the training's table at start-up). */
static const float *rope_table(int npos, int hd, float theta)
{
    const float *t = rope_table_try(npos, hd, theta);
    if (!t)
        hpt_fatal(__FILE__, __LINE__, HPT_ERR_USAGE, "RoPE table: %s", hpt_error_msg());
    return t;
}

/* Rotate pairs i .. i+m-1 (m = VEC with vec, else 1) of the head at
 * offset o of x: (x[o+i], x[o+i+half]) by the table's angles of position
 * t. vec: 16-byte accesses (x's and the table's offsets aligned). */
__device__ static inline void rope_pairs(void *x, int bf, const float *cs, size_t o, int i, int half,
                                         int t, int inverse, int vec)
{
    const float *a = cs + ((size_t)t * half + i) * 2; /* (cos, sin) pairs */
    if (!vec) {
        float c = a[0], s = inverse ? -a[1] : a[1];
        float x1 = ld_act(x, o + i, bf), x2 = ld_act(x, o + i + half, bf);
        st_act(x, o + i, x1 * c - x2 * s, bf);
        st_act(x, o + i + half, x2 * c + x1 * s, bf);
        return;
    }
    float x1[VEC], x2[VEC], cs2[2 * VEC], y1[VEC], y2[VEC];
    ld8_act(x, o + i, x1, bf), ld8_act(x, o + i + half, x2, bf);
    ld8f(a, cs2), ld8f(a + VEC, cs2 + VEC);
    for (int j = 0; j < VEC; j++) {
        float c = cs2[2 * j], s = inverse ? -cs2[2 * j + 1] : cs2[2 * j + 1];
        y1[j] = x1[j] * c - x2[j] * s;
        y2[j] = x2[j] * c + x1[j] * s;
    }
    st8_act(x, o + i, y1, bf), st8_act(x, o + i + half, y2, bf);
}

/* x (rows, nh, hd) and, when y, y (rows, nh2, hd) in one launch: row r at
 * position pos0 + r % T. Unit u: `vec` consecutive pairs (VEC with 16-byte
 * accesses, else 1) of one head; x's units first, then y's. The same
 * arithmetic per pair in both paths (the same bits). */
__global__ static void k_rope(void *x, int nh, void *y, int nh2, int bf, const float *cs, int T,
                              int hd, int pos0, int inverse, int vec, size_t ux, size_t units)
{
    int half = hd / 2, w = vec ? VEC : 1, hu = half / w; /* units per head */
    GRID_STRIDE(u, units)
    {
        void *p = x;
        int heads = nh;
        size_t v = u;
        if (u >= ux)
            p = y, heads = nh2, v = u - ux;
        int i = (int)(v % hu) * w;
        size_t rest = v / hu; /* row * heads + h */
        int t = (int)((rest / heads) % T) + pos0;
        rope_pairs(p, bf, cs, rest * hd, i, half, t, inverse, vec);
    }
}

/* RoPE of x (rows, nh, hd) and of y (rows, nh2, hd) when y (one launch). */
static void rope_rows(void *x, int nh, void *y, int nh2, int bf, int rows, int T, int hd,
                      float theta, int pos0, int inverse)
{
    int half = hd / 2;
    int vec = half % VEC == 0 && al16(x) && al16(y);
    size_t hu = (size_t)(vec ? half / VEC : half);
    size_t ux = (size_t)rows * nh * hu, units = ux + (y ? (size_t)rows * nh2 * hu : 0);
    if (!units)
        return;
    const float *cs = rope_table(pos0 + T, hd, theta);
    k_rope<<<ew_blocks(units), EW_THREADS>>>(x, nh, y, nh2, bf, cs, T, hd, pos0, inverse, vec, ux,
                                             units);
    LAUNCHED("k_rope");
}

void cuda_rope(void *x, hpt_dtype dtype, int B, int T, int nh, int hd, float theta,
                      int inverse)
{
    rope_rows(x, nh, NULL, 0, dtype == HPT_DTYPE_BF16, B * T, T, hd, theta, 0, inverse);
}

/* backend.h rope_qk: q's and k's pairs in one launch (k_rope). */
void cuda_rope_qk(void *q, void *k, hpt_dtype dtype, int B, int T, int H, int KV, int hd,
                  float theta, int inverse)
{
    rope_rows(q, H, k, KV, dtype == HPT_DTYPE_BF16, B * T, T, hd, theta, 0, inverse);
}

void cuda_rope_at(void *x, int n, int nh, int hd, float theta, int pos0)
{
    rope_rows(x, nh, NULL, 0, g_bf16, n, n, hd, theta, pos0, 0);
}

/* ------------------------------------------------------------- SwiGLU */

/* silu(g) * u (Shazeer 2020, eq. 6), the CPU's expression. */
__device__ static inline float swiglu(float g, float u) { return g / (1.0f + expf(-g)) * u; }

/* d/dgate and d/dup of swiglu for the gradient d. */
__device__ static inline void swiglu_grad(float *dg, float *du, float d, float g, float u)
{
    float sg = 1.0f / (1.0f + expf(-g));
    *du = d * (g * sg);
    *dg = d * u * (sg + g * sg * (1.0f - sg));
}

/* Elements of the vector part (nv chunks of VEC, 16-byte accesses) and of
 * the scalar rest of n elements; vec = 0: all scalar. */
static inline size_t vec_chunks(size_t n, int vec) { return vec ? n / VEC : 0; }

/* out (n) = swiglu(gate, up), all act: the first nv chunks of VEC with
 * 16-byte loads and stores, the rest (n - nv*VEC < VEC, or everything when
 * unaligned) one element at a time. */
__global__ static void k_swiglu_forward(void *out, const void *gate, const void *up, int bf,
                                        size_t n, size_t nv)
{
    GRID_STRIDE(u, nv)
    {
        float g[VEC], v[VEC];
        ld8_act(gate, u * VEC, g, bf), ld8_act(up, u * VEC, v, bf);
        for (int j = 0; j < VEC; j++)
            g[j] = swiglu(g[j], v[j]);
        st8_act(out, u * VEC, g, bf);
    }
    GRID_STRIDE(r, n - nv * VEC)
    {
        size_t i = nv * VEC + r;
        st_act(out, i, swiglu(ld_act(gate, i, bf), ld_act(up, i, bf)), bf);
    }
}

/* dgate, dup (n) = the gradients for dout (fp32), gate and up act; dgate
 * and dup fp32, or bf16 when obf (rounded as st_act: bitwise to_bf16 of
 * the fp32 values); chunks as k_swiglu_forward. */
__global__ static void k_swiglu_backward(void *dgate, void *dup, int obf, const float *dout,
                                         const void *gate, const void *up, int bf, size_t n,
                                         size_t nv)
{
    GRID_STRIDE(u, nv)
    {
        float g[VEC], v[VEC], d[VEC], dg[VEC], du[VEC];
        ld8_act(gate, u * VEC, g, bf), ld8_act(up, u * VEC, v, bf), ld8f(dout + u * VEC, d);
        for (int j = 0; j < VEC; j++)
            swiglu_grad(&dg[j], &du[j], d[j], g[j], v[j]);
        st8_act(dgate, u * VEC, dg, obf), st8_act(dup, u * VEC, du, obf);
    }
    GRID_STRIDE(r, n - nv * VEC)
    {
        size_t i = nv * VEC + r;
        float dg, du;
        swiglu_grad(&dg, &du, dout[i], ld_act(gate, i, bf), ld_act(up, i, bf));
        st_act(dgate, i, dg, obf), st_act(dup, i, du, obf);
    }
}

void cuda_swiglu_forward(void *out, const void *gate, const void *up, size_t n)
{
    if (!n)
        return;
    size_t nv = vec_chunks(n, al16(out) && al16(gate) && al16(up));
    k_swiglu_forward<<<ew_blocks(nv + n - nv * VEC), EW_THREADS>>>(out, gate, up, g_bf16, n, nv);
    LAUNCHED("k_swiglu_forward");
}

/* k_swiglu_backward over n elements, dgate and dup fp32 or (obf) bf16. */
static void swiglu_backward_launch(void *dgate, void *dup, int obf, const float *dout,
                                   const void *gate, const void *up, size_t n)
{
    if (!n)
        return;
    size_t nv = vec_chunks(n, al16(dgate) && al16(dup) && al16(dout) && al16(gate) && al16(up));
    k_swiglu_backward<<<ew_blocks(nv + n - nv * VEC), EW_THREADS>>>(dgate, dup, obf, dout, gate,
                                                                    up, g_bf16, n, nv);
    LAUNCHED("k_swiglu_backward");
}

void cuda_swiglu_backward(float *dgate, float *dup, const float *dout, const void *gate,
                          const void *up, size_t n)
{
    swiglu_backward_launch(dgate, dup, 0, dout, gate, up, n);
}

/* backend.h swiglu_backward_act: dgate, dup in the activation dtype. */
void cuda_swiglu_backward_act(void *dgate, void *dup, const float *dout, const void *gate,
                              const void *up, size_t n)
{
    swiglu_backward_launch(dgate, dup, g_bf16, dout, gate, up, n);
}

/* --------------------------------------------------------- elementwise */

__global__ static void k_add(float *out, const float *a, const float *b, size_t n)
{
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ static void k_scale(float *x, float s, size_t n)
{
    GRID_STRIDE(i, n) x[i] *= s;
}

void cuda_add(float *out, const float *a, const float *b, size_t n)
{
    work_mark_dirty(out);
    if (!n)
        return;
    k_add<<<ew_blocks(n), EW_THREADS>>>(out, a, b, n);
    LAUNCHED("k_add");
}

void cuda_scale(float *x, float s, size_t n)
{
    work_mark_dirty(x);
    if (!n)
        return;
    k_scale<<<ew_blocks(n), EW_THREADS>>>(x, s, n);
    LAUNCHED("k_scale");
}


/* Up to SUMSQ_LIST ranges by value (a kernel parameter: ~1.3 KiB, no
 * upload); range i owns blocks [first[i], first[i + 1]) of the launch. */
typedef struct {
    const float *x[SUMSQ_LIST];
    size_t n[SUMSQ_LIST];
    unsigned first[SUMSQ_LIST + 1];
} sumsq_ranges;

/* Block b of grid (first[m]): block b - first[i] of the range i that owns
 * b, a grid-stride loop over that range's nb = first[i + 1] - first[i]
 * blocks (min(ew_blocks(n), SUMSQ_BLOCKS)): per-block double partial sums,
 * into part[b]. */
__global__ static void k_sumsq_list(double *part, sumsq_ranges r, int m)
{
    unsigned b = blockIdx.x;
    int lo = 0, hi = m - 1; /* the last i with first[i] <= b */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (r.first[mid] <= b)
            lo = mid;
        else
            hi = mid - 1;
    }
    const float *x = r.x[lo];
    size_t n = r.n[lo], nb = r.first[lo + 1] - r.first[lo];
    double acc = 0.0;
    for (size_t j = (size_t)(b - r.first[lo]) * blockDim.x + threadIdx.x; j < n;
         j += nb * blockDim.x)
        acc += (double)x[j] * x[j];
    acc = block_sum_d(acc);
    if (threadIdx.x == 0)
        part[b] = acc;
}

/* Block i (1024 threads): k_sum_d over range i's partials, into out[i]. */
__global__ static void __launch_bounds__(1024) k_sum_list(double *out, const double *part, sumsq_ranges r)
{
    int i = blockIdx.x;
    double acc = 0.0;
    for (unsigned j = r.first[i] + threadIdx.x; j < r.first[i + 1]; j += blockDim.x)
        acc += part[j];
    acc = block_sum_d(acc);
    if (threadIdx.x == 0)
        out[i] = acc;
}

/* acc + the k ranges' sums of squares, added in order on the host: per
 * range, per-block double partial sums, then one block sums them in order;
 * one download per SUMSQ_LIST ranges. A range's value depends on its length
 * only, not on the other ranges of the call (cuda_sumsq is the one-range
 * case). */
double cuda_sumsq_list(double acc, const float *const *x, const size_t *n, int k)
{
    double *part = dscratch((size_t)SUMSQ_LIST * SUMSQ_BLOCKS + SUMSQ_LIST);
    double *res = part + (size_t)SUMSQ_LIST * SUMSQ_BLOCKS, h[SUMSQ_LIST];
    for (int i0 = 0; i0 < k; i0 += SUMSQ_LIST) {
        int kk = k - i0 < SUMSQ_LIST ? k - i0 : SUMSQ_LIST, m = 0;
        sumsq_ranges r;
        memset(&r, 0, sizeof r);
        for (int i = 0; i < kk; i++)
            if (n[i0 + i]) { /* empty ranges add 0.0 */
                unsigned nb = ew_blocks(n[i0 + i]);
                r.x[m] = x[i0 + i], r.n[m] = n[i0 + i];
                r.first[m + 1] = r.first[m] + (nb > SUMSQ_BLOCKS ? SUMSQ_BLOCKS : nb);
                m++;
            }
        if (!m)
            continue;
        k_sumsq_list<<<r.first[m], EW_THREADS>>>(part, r, m);
        LAUNCHED("k_sumsq_list");
        k_sum_list<<<m, 1024>>>(res, part, r);
        LAUNCHED("k_sum_list");
        memcpy_d2h(h, res, sizeof(double) * m);
        for (int i = 0; i < m; i++)
            acc += h[i];
    }
    return acc;
}

/* backend.h sumsq_list_async: cuda_sumsq_list's kernels, k_sum_list
 * writing each range's sum to out (device) instead of the host. */
void cuda_sumsq_list_async(double *out, const float *const *x, const size_t *n, int k)
{
    double *part = dscratch((size_t)SUMSQ_LIST * SUMSQ_BLOCKS + SUMSQ_LIST);
    for (int i0 = 0; i0 < k; i0 += SUMSQ_LIST) {
        int m = k - i0 < SUMSQ_LIST ? k - i0 : SUMSQ_LIST;
        sumsq_ranges r;
        memset(&r, 0, sizeof r);
        for (int i = 0; i < m; i++) {
            HPT_CHECK(n[i0 + i] > 0);
            unsigned nb = ew_blocks(n[i0 + i]);
            r.x[i] = x[i0 + i], r.n[i] = n[i0 + i];
            r.first[i + 1] = r.first[i] + (nb > SUMSQ_BLOCKS ? SUMSQ_BLOCKS : nb);
        }
        k_sumsq_list<<<r.first[m], EW_THREADS>>>(part, r, m);
        LAUNCHED("k_sumsq_list");
        k_sum_list<<<m, 1024>>>(out + i0, part, r);
        LAUNCHED("k_sum_list");
    }
}

double cuda_sumsq(const float *x, size_t n) { return cuda_sumsq_list(0.0, &x, &n, 1); }

/* ------------------------------------------------------- cross-entropy */

/* One block per row n; loss[n] = lse - logit[target]. The target logit is
 * read by every thread before any write (block_max synchronises). */
__global__ static void k_ce_fused(float *logits, const int32_t *targets, double *loss, int V,
                                  float grad_scale)
{
    size_t n = blockIdx.x;
    float *row = logits + n * V;
    int tg = targets[n];
    float target = row[tg], mx = -INFINITY, sum = 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x)
        mx = fmaxf(mx, row[j]);
    mx = block_max(mx);
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        float e = expf(row[j] - mx);
        row[j] = e;
        sum += e;
    }
    sum = block_sum(sum);
    float k = grad_scale / sum;
    for (int j = threadIdx.x; j < V; j += blockDim.x)
        row[j] *= k;
    __syncthreads();
    if (threadIdx.x == 0) {
        row[tg] -= grad_scale;
        loss[n] = (double)(mx + logf(sum)) - target;
    }
}

__global__ static void k_ce_loss(const float *logits, const int32_t *targets, double *loss, int V)
{
    size_t n = blockIdx.x;
    const float *row = logits + n * V;
    float mx = -INFINITY, sum = 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x)
        mx = fmaxf(mx, row[j]);
    mx = block_max(mx);
    for (int j = threadIdx.x; j < V; j += blockDim.x)
        sum += expf(row[j] - mx);
    sum = block_sum(sum);
    if (threadIdx.x == 0)
        loss[n] = (double)(mx + logf(sum)) - row[targets[n]];
}

double cuda_crossentropy_fused(float *logits, const int32_t *targets, int N, int V,
                                      float grad_scale)
{
    if (N <= 0)
        return 0.0;
    double *loss = dscratch((size_t)N + 1);
    k_ce_fused<<<N, ROW_THREADS>>>(logits, targets, loss, V, grad_scale);
    LAUNCHED("k_ce_fused");
    return sum_to_host(loss, (size_t)N, loss + N);
}

double cuda_crossentropy_loss(const float *logits, const int32_t *targets, int N, int V)
{
    if (N <= 0)
        return 0.0;
    double *loss = dscratch((size_t)N + 1);
    k_ce_loss<<<N, ROW_THREADS>>>(logits, targets, loss, V);
    LAUNCHED("k_ce_loss");
    return sum_to_host(loss, (size_t)N, loss + N);
}

/* ---------------------------------------- vocab-parallel cross-entropy */

__global__ static void k_vocab_max(float *mx, const float *logits, int Vl, int nvalid)
{
    size_t n = blockIdx.x;
    const float *row = logits + n * Vl;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < nvalid; j += blockDim.x)
        m = fmaxf(m, row[j]);
    m = block_max(m);
    if (threadIdx.x == 0)
        mx[n] = m;
}

__global__ static void k_vocab_sumexp(float *sumexp, float *tlogit, const float *logits,
                                      const int32_t *targets, const float *mx, int Vl, int nvalid,
                                      int v0)
{
    size_t n = blockIdx.x;
    const float *row = logits + n * Vl;
    float s = 0.0f, m = mx[n];
    for (int j = threadIdx.x; j < nvalid; j += blockDim.x)
        s += expf(row[j] - m);
    s = block_sum(s);
    if (threadIdx.x == 0) {
        int t = targets[n] - v0;
        sumexp[n] = s;
        tlogit[n] = t >= 0 && t < nvalid ? row[t] : 0.0f;
    }
}

__global__ static void k_vocab_ce_finish(float *logits, const int32_t *targets, const float *mx,
                                         const float *sumexp, const float *tlogit, double *loss,
                                         int Vl, int nvalid, int v0, float grad_scale)
{
    size_t n = blockIdx.x;
    float lse = mx[n] + logf(sumexp[n]);
    if (threadIdx.x == 0)
        loss[n] = (double)lse - tlogit[n];
    if (grad_scale == 0.0f) /* block-uniform */
        return;
    float *row = logits + n * Vl;
    for (int j = threadIdx.x; j < Vl; j += blockDim.x)
        row[j] = j < nvalid ? expf(row[j] - lse) * grad_scale : 0.0f;
    __syncthreads();
    int t = targets[n] - v0;
    if (threadIdx.x == 0 && t >= 0 && t < nvalid)
        row[t] -= grad_scale;
}

void cuda_vocab_max(float *mx, const float *logits, int N, int Vl, int nvalid)
{
    if (N <= 0)
        return;
    k_vocab_max<<<N, ROW_THREADS>>>(mx, logits, Vl, nvalid);
    LAUNCHED("k_vocab_max");
}

void cuda_vocab_sumexp(float *sumexp, float *tlogit, const float *logits,
                              const int32_t *targets, const float *mx, int N, int Vl, int nvalid,
                              int v0)
{
    if (N <= 0)
        return;
    k_vocab_sumexp<<<N, ROW_THREADS>>>(sumexp, tlogit, logits, targets, mx, Vl, nvalid, v0);
    LAUNCHED("k_vocab_sumexp");
}

double cuda_vocab_ce_finish(float *logits, const int32_t *targets, const float *mx,
                                   const float *sumexp, const float *tlogit, int N, int Vl,
                                   int nvalid, int v0, float grad_scale)
{
    if (N <= 0)
        return 0.0;
    double *loss = dscratch((size_t)N + 1);
    k_vocab_ce_finish<<<N, ROW_THREADS>>>(logits, targets, mx, sumexp, tlogit, loss, Vl, nvalid,
                                          v0, grad_scale);
    LAUNCHED("k_vocab_ce_finish");
    return sum_to_host(loss, (size_t)N, loss + N);
}

/* -------------------------------------------------------------- AdamW */

/* The CPU's expression per element; the bias corrections are computed on
 * the host exactly as in backend_cpu.c. */
__global__ static void k_adamw(float *p, const float *grad, float *m, float *v, size_t n, float b1,
                               float b2, float eps, float grad_scale, float step, float bc2_sqrt,
                               float decay)
{
    GRID_STRIDE(i, n)
    {
        float g = grad[i] * grad_scale;
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - step * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}

void cuda_adamw(float *p, const float *grad, float *m, float *v, size_t n, float lr,
                       float b1, float b2, float eps, float wd, float grad_scale, int t)
{
    /* Any optimizer step makes every working copy stale: with ZeRO-1 the
     * rest of the parameters arrive by an all-gather that does not pass
     * through this backend, right after the step on this rank's shard. */
    work_mark_all_dirty();
    if (!n)
        return;
    float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    float step = lr / bc1, bc2_sqrt = sqrtf(bc2), decay = 1.0f - lr * wd;
    k_adamw<<<ew_blocks(n), EW_THREADS>>>(p, grad, m, v, n, b1, b2, eps, grad_scale, step,
                                          bc2_sqrt, decay);
    LAUNCHED("k_adamw");
}


} // namespace hpt_cuda
