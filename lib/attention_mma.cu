/* attention_mma.cu — the CUDA backend's fused causal grouped-query
 * attention on the tensor cores, bf16 mode's default path (selected in
 * lib/attention_cuda.cu: att_use_mma). FlashAttention-2 (Dao 2023,
 * algorithm 1 forward, algorithm 2 backward; online softmax: Milakov &
 * Gimelshein 2018) with every product a warp-level
 * mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (PTX ISA 8,
 * "Warp-level matrix multiply-accumulate": bf16 operands, fp32
 * accumulation; sm_80 and later). The scores and probabilities live in
 * registers only, never in device memory: the forward saves the row
 * log-sum-exp (B,H,T), the backward recomputes P from it. No scratch.
 *
 * Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16" with
 * .bf16): lane = 4 g + t (g = lane / 4 in 0..7, t = lane % 4).
 *   A (16 x 16, row): four 32-bit registers of two bf16 each (lower half
 *     the lower column): a0 (row g, cols 2t, 2t+1), a1 (row g+8, same
 *     cols), a2 (row g, cols 2t+8, 2t+9), a3 (row g+8, cols 2t+8, 2t+9).
 *   B (16 x 8, col): b0 (rows 2t, 2t+1 of col g), b1 (rows 2t+8, 2t+9).
 *   C, D (16 x 8, fp32): c0, c1 (row g, cols 2t, 2t+1), c2, c3 (row g+8).
 * A score tile S (16 rows x 16 keys, two C tiles) is thereby already the A
 * operand of the next product P V once packed to bf16 (FA2's register
 * reuse). Operands come from shared memory rows of bf16 padded to hd + 8
 * elements: 32-bit loads of a row's pair (A from a row-major tile; B when
 * the tile is B's transpose, K in S = Q K^T) and pairs of 16-bit loads
 * down a column (B = V in P V) are then free of bank conflicts.
 *
 * Tiles: a block of MMA_WARPS warps owns 64 rows (16 per warp: query rows
 * in the forward and dQ kernels, key rows in the dK/dV kernel) and streams
 * the other side in tiles of 64 rows (32 with hd 128 in the backward, to
 * bound the registers). Head dims 16, 32, 64, 96, 128 (MMA_HEAD_DIMS);
 * others keep the cuBLAS path. Precision: q, k, v, out bf16; dout fp32
 * rounded to bf16 as it enters shared memory (as the cuBLAS path does);
 * P and dS rounded to bf16 as operands; lse, D, every accumulator and dq,
 * dk, dv fp32. Checked against the CPU backend and against the cuBLAS
 * path in tests/unit/test_backend_cuda.c (group "bf16"), on the CPU
 * emulation of CUDA, where emu_mma_m16n8k16 (tests/gpu/cuda-emu) computes
 * each product from the lanes' registers by the layouts above. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda_internal.h"

namespace hpt_cuda {

#define MMA_WARPS 4
#define MMA_ROWS (16 * MMA_WARPS) /* rows a block owns          */
#define MMA_TILE 64               /* streamed rows per tile      */

/* Shared-memory row stride of a tile with head dim HD, in bf16 elements. */
#define MMA_LD(HD) ((HD) + 8)

/* d (16 x 8, fp32) += A (16 x 16, bf16) B (16 x 8, bf16), the fragments
 * as in the opening comment; every lane of the warp calls it. */
__device__ static inline void mma_bf16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
#if defined(HPT_CUDA_EMU)
    emu_mma_m16n8k16(d, a, b0, b1);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(__CUDA_ARCH__)
    __trap(); /* never launched: att_use_mma requires compute capability 8.0 */
#endif
}

__device__ static inline uint32_t pack_h(uint16_t lo, uint16_t hi)
{
    return (uint32_t)lo | (uint32_t)hi << 16;
}

/* The 32-bit register at element e of a bf16 tile (e even). */
__device__ static inline uint32_t ld32(const uint16_t *p, int e)
{
    return *(const uint32_t *)(p + e);
}

/* A fragment (rows r..r+15, cols c..c+15) of a row-major bf16 tile with
 * stride ld: a0..a3 as in the opening comment. */
__device__ static inline void frag_a(uint32_t a[4], const uint16_t *s, int ld, int r, int c, int g,
                                     int t)
{
    a[0] = ld32(s, (r + g) * ld + c + 2 * t);
    a[1] = ld32(s, (r + g + 8) * ld + c + 2 * t);
    a[2] = ld32(s, (r + g) * ld + c + 2 * t + 8);
    a[3] = ld32(s, (r + g + 8) * ld + c + 2 * t + 8);
}

/* The A fragment of the 16 x 16 block kk of a score-shaped accumulator
 * x[n-tile][4] (n-tiles 2kk and 2kk+1), rounded to bf16. */
__device__ static inline void frag_acc(uint32_t a[4], const float (*x)[4], int kk)
{
    a[0] = bf16x2(x[2 * kk][0], x[2 * kk][1]);
    a[1] = bf16x2(x[2 * kk][2], x[2 * kk][3]);
    a[2] = bf16x2(x[2 * kk + 1][0], x[2 * kk + 1][1]);
    a[3] = bf16x2(x[2 * kk + 1][2], x[2 * kk + 1][3]);
}

/* acc[n-tile j][4] (16 x HD) += A (16 x 16 per kk, from x) X (the tile's
 * rows 16kk.., all HD cols): B fragment (rows 16kk + 2t, +1, +8, +9 of
 * col 8j + g) read as pairs of 16-bit loads down a column. */
template <int HD, int NK>
__device__ static inline void mma_acc_rows(float (*acc)[4], const float (*x)[4], const uint16_t *s,
                                           int g, int t)
{
    const int ld = MMA_LD(HD);
#pragma unroll
    for (int kk = 0; kk < NK / 16; kk++) {
        uint32_t a[4];
        frag_acc(a, x, kk);
        const uint16_t *r0 = s + (16 * kk + 2 * t) * ld + g;
#pragma unroll
        for (int j = 0; j < HD / 8; j++) {
            uint32_t b0 = pack_h(r0[8 * j], r0[ld + 8 * j]);
            uint32_t b1 = pack_h(r0[8 * ld + 8 * j], r0[9 * ld + 8 * j]);
            mma_bf16(acc[j], a, b0, b1);
        }
    }
}

/* s[n-tile j][4] (16 x NK) += rows r.. of tile A (16 x HD) times the
 * transpose of tile X's first NK rows: B fragment (rows 16ks + 2t.. of col
 * 8j + g) = X's row 8j + g, one 32-bit load per register. */
template <int HD, int NK>
__device__ static inline void mma_rows_t(float (*s)[4], const uint16_t *A, int r, const uint16_t *X,
                                         int g, int t)
{
    const int ld = MMA_LD(HD);
#pragma unroll
    for (int ks = 0; ks < HD / 16; ks++) {
        uint32_t a[4];
        frag_a(a, A, ld, r, 16 * ks, g, t);
#pragma unroll
        for (int j = 0; j < NK / 8; j++) {
            int e = (8 * j + g) * ld + 16 * ks + 2 * t;
            mma_bf16(s[j], a, ld32(X, e), ld32(X, e + 8));
        }
    }
}

/* Rows r0 .. r0+rows-1 of a (.., T, heads, HD) bf16 tensor (row stride ld
 * elements, base at the sequence's first row and the head's first
 * element) into a shared tile, 16 bytes per access; rows at or past T
 * are zeros (a zero key or value contributes nothing once masked). */
template <int HD>
__device__ static inline void tile_load(uint16_t *s, const uint16_t *src, size_t ld, int r0,
                                        int rows, int T)
{
    const int per = HD / 8;
    for (int i = threadIdx.x; i < rows * per; i += blockDim.x) {
        int r = i / per, c = (i % per) * 8;
        uint4 x = {0u, 0u, 0u, 0u};
        if (r0 + r < T)
            x = *(const uint4 *)(src + (size_t)(r0 + r) * ld + c);
        *(uint4 *)(s + r * MMA_LD(HD) + c) = x;
    }
}

/* As tile_load from an fp32 tensor, rounded to bf16 (dout). */
template <int HD>
__device__ static inline void tile_load_f(uint16_t *s, const float *src, size_t ld, int r0,
                                          int rows, int T)
{
    const int per = HD / 8;
    for (int i = threadIdx.x; i < rows * per; i += blockDim.x) {
        int r = i / per, c = (i % per) * 8;
        float v[VEC] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (r0 + r < T)
            ld8f(src + (size_t)(r0 + r) * ld + c, v);
        uint4 x;
        x.x = bf16x2(v[0], v[1]), x.y = bf16x2(v[2], v[3]);
        x.z = bf16x2(v[4], v[5]), x.w = bf16x2(v[6], v[7]);
        *(uint4 *)(s + r * MMA_LD(HD) + c) = x;
    }
}

/* Row max / sum over the four lanes (t = 0..3) that share a row. */
__device__ static inline float quad_max(float v)
{
    v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, 1));
    return fmaxf(v, __shfl_xor_sync(FULL_MASK, v, 2));
}

__device__ static inline float quad_sum(float v)
{
    v += __shfl_xor_sync(FULL_MASK, v, 1);
    return v + __shfl_xor_sync(FULL_MASK, v, 2);
}

/* A warp's 16 x HD fp32 accumulator acc (C fragments: n-tile j, rows g
 * and g + 8, cols 2t, 2t+1) into rows row0 + g (+ 8) of dst (the
 * sequence's first row and the head's first column; row stride ld
 * elements); rows at or past T are left alone. */
template <int HD>
__device__ static inline void store_acc_rows(float *dst, size_t ld, const float (*acc)[4],
                                             int row0, int T, int g, int t)
{
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int row = row0 + g + 8 * i;
        if (row >= T)
            continue;
        float *o = dst + (size_t)row * ld + 2 * t;
#pragma unroll
        for (int j = 0; j < HD / 8; j++)
            o[8 * j] = acc[j][2 * i], o[8 * j + 1] = acc[j][2 * i + 1];
    }
}

/* Forward: out (B,T,H,HD) bf16, lse (B,H,T) = log sum_s exp(scale q.k_s)
 * over keys s <= t. q (B,T,H,HD), k, v (B,T,KV,HD) bf16. Grid
 * (ceil(T/64) B, H), the heaviest (last) query tiles first; shared memory
 * 3 64-row tiles (Q, K, V). Scores in the log2 domain (exp2f). */
template <int HD>
__global__ static void __launch_bounds__(MMA_WARPS * 32)
    k_mma_forward(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k,
                  const uint16_t *v, int T, int H, int KV, float scale)
{
    extern __shared__ float sm[];
    const int ld = MMA_LD(HD);
    uint16_t *Qs = (uint16_t *)sm, *Ks = Qs + MMA_ROWS * ld, *Vs = Ks + MMA_TILE * ld;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int tiles = (T + MMA_ROWS - 1) / MMA_ROWS;
    const int r0 = (tiles - 1 - (int)(blockIdx.x % tiles)) * MMA_ROWS, b = blockIdx.x / tiles;
    const int h = blockIdx.y, kvh = h / (H / KV), wr = 16 * w;
    const size_t ldq = (size_t)H * HD, ldk = (size_t)KV * HD;
    const uint16_t *qb = q + (size_t)b * T * ldq + (size_t)h * HD;
    const uint16_t *kb = k + (size_t)b * T * ldk + (size_t)kvh * HD;
    const uint16_t *vb = v + (size_t)b * T * ldk + (size_t)kvh * HD;
    const float sl2 = scale * (float)M_LOG2E;
    tile_load<HD>(Qs, qb, ldq, r0, MMA_ROWS, T);
    __syncthreads();
    uint32_t qf[HD / 16][4];
#pragma unroll
    for (int ks = 0; ks < HD / 16; ks++)
        frag_a(qf[ks], Qs, ld, wr, 16 * ks, g, t);
    float o[HD / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < HD / 8; j++)
        o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    const int kend = min(T, r0 + MMA_ROWS); /* causal: keys [0, kend) */
    for (int k0 = 0; k0 < kend; k0 += MMA_TILE) {
        __syncthreads(); /* the previous tile's readers are done */
        tile_load<HD>(Ks, kb, ldk, k0, MMA_TILE, T);
        tile_load<HD>(Vs, vb, ldk, k0, MMA_TILE, T);
        __syncthreads();
        if (k0 > r0 + wr + 15) /* every key past this warp's rows (warp-uniform) */
            continue;
        float s[MMA_TILE / 8][4];
#pragma unroll
        for (int j = 0; j < MMA_TILE / 8; j++) {
            s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < HD / 16; ks++) {
                int e = (8 * j + g) * ld + 16 * ks + 2 * t;
                mma_bf16(s[j], qf[ks], ld32(Ks, e), ld32(Ks, e + 8));
            }
        }
        float mx[2] = {m[0], m[1]};
#pragma unroll
        for (int j = 0; j < MMA_TILE / 8; j++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                int row = r0 + wr + g + 8 * (c >> 1), key = k0 + 8 * j + 2 * t + (c & 1);
                float x = key <= row && key < T ? s[j][c] * sl2 : -INFINITY;
                s[j][c] = x;
                mx[c >> 1] = fmaxf(mx[c >> 1], x);
            }
        float mu[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            mx[i] = quad_max(mx[i]);
            mu[i] = mx[i] == -INFINITY ? 0.0f : mx[i];
            float alpha = exp2f(m[i] - mu[i]);
            m[i] = mx[i];
            l[i] *= alpha;
#pragma unroll
            for (int j = 0; j < HD / 8; j++)
                o[j][2 * i] *= alpha, o[j][2 * i + 1] *= alpha;
        }
#pragma unroll
        for (int j = 0; j < MMA_TILE / 8; j++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                float p = exp2f(s[j][c] - mu[c >> 1]);
                l[c >> 1] += p;
                s[j][c] = p;
            }
        mma_acc_rows<HD, MMA_TILE>(o, s, Vs, g, t);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int row = r0 + wr + g + 8 * i;
        float L = quad_sum(l[i]);
        if (row >= T)
            continue;
        float inv = 1.0f / L;
        uint16_t *orow = out + ((size_t)b * T + row) * ldq + (size_t)h * HD + 2 * t;
#pragma unroll
        for (int j = 0; j < HD / 8; j++)
            *(uint32_t *)(orow + 8 * j) =
                bf16x2(o[j][2 * i] * inv, o[j][2 * i + 1] * inv);
        if (t == 0 && lse)
            lse[((size_t)b * H + h) * T + row] = (m[i] + log2f(L)) * (float)M_LN2;
    }
}

/* P and dS of a 16 x NK score tile in place: s holds the scores (rows of
 * this warp, cols the tile's), dp the products dO V^T (or their
 * transposes: `keyrows` says the rows are keys). p = exp(scale s - lse)
 * where the key is at or before the query, else 0; ds = p (dp - D) scale.
 * lse_c/D_c are per column (keyrows) or per row. */
template <int NK>
__device__ static inline void mma_dsoftmax(float (*s)[4], float (*dp)[4], int keyrows, int row0,
                                           int col0, int g, int t, const float *lse_c,
                                           const float *D_c, const float lse_r[2],
                                           const float D_r[2], float scale)
{
    const float sl2 = scale * (float)M_LOG2E;
#pragma unroll
    for (int j = 0; j < NK / 8; j++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
            int i = c >> 1, row = row0 + g + 8 * i, cc = 8 * j + 2 * t + (c & 1), col = col0 + cc;
            int ok = keyrows ? row <= col : col <= row;
            float L = keyrows ? lse_c[cc] : lse_r[i], Dv = keyrows ? D_c[cc] : D_r[i];
            float p = ok ? exp2f(s[j][c] * sl2 - L * (float)M_LOG2E) : 0.0f;
            s[j][c] = p;
            dp[j][c] = p * (dp[j][c] - Dv) * scale;
        }
}

/* One backward score tile of the warp's 16 rows (rows r.. of A and of Ad)
 * against NK rows of X and Xd: s = A X^T, dp = Ad Xd^T, then P and dS in
 * place (mma_dsoftmax; keyrows as there). The dK/dV kernel passes K, Q, V,
 * dO (transposed tiles: rows are keys), the dQ kernel Q, K, dO, V. */
template <int HD, int NK>
__device__ static inline void mma_p_ds(float (*s)[4], float (*dp)[4], const uint16_t *A,
                                       const uint16_t *X, const uint16_t *Ad, const uint16_t *Xd,
                                       int r, int keyrows, int row0, int col0, int g, int t,
                                       const float *lse_c, const float *D_c, const float lse_r[2],
                                       const float D_r[2], float scale)
{
#pragma unroll
    for (int j = 0; j < NK / 8; j++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            s[j][c] = dp[j][c] = 0.0f;
    mma_rows_t<HD, NK>(s, A, r, X, g, t);
    mma_rows_t<HD, NK>(dp, Ad, r, Xd, g, t);
    mma_dsoftmax<NK>(s, dp, keyrows, row0, col0, g, t, lse_c, D_c, lse_r, D_r, scale);
}

/* dK, dV fp32, overwritten: a block owns 64 keys of kv head kvh =
 * blockIdx.y / nsplit and streams, for each of the grp / nsplit query heads
 * of part blockIdx.y % nsplit of its group, the query tiles (BQ rows) from
 * its first key on: S^T = K Q^T, P^T, dP^T = V dO^T, dS^T; dV += P^T dO,
 * dK += dS^T Q. Written as (B,T,KV nsplit,HD), head blockIdx.y: with
 * nsplit 1 the gradients themselves (B,T,KV,HD), else per-part partial
 * sums the caller adds up (k_group_sum). D (B,H,T) = rowsum(dO o O), lse
 * (B,H,T). Grid (ceil(T/64) B, KV nsplit), the heaviest (first) key tiles
 * first; shared: K, V (64 rows), Q, dO (BQ rows), lse and D of the tile. */
template <int HD, int BQ>
__global__ static void __launch_bounds__(MMA_WARPS * 32)
    k_mma_dkdv(float *dk, float *dv, const float *dout, const float *lse, const float *D,
               const uint16_t *q, const uint16_t *k, const uint16_t *v, int T, int H, int KV,
               int nsplit, float scale)
{
    extern __shared__ float sm[];
    const int ld = MMA_LD(HD);
    uint16_t *Ks = (uint16_t *)sm, *Vs = Ks + MMA_ROWS * ld, *Qs = Vs + MMA_ROWS * ld,
             *dOs = Qs + BQ * ld;
    float *Ls = (float *)(dOs + BQ * ld), *Ds = Ls + BQ;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int tiles = (T + MMA_ROWS - 1) / MMA_ROWS;
    const int c0 = (int)(blockIdx.x % tiles) * MMA_ROWS, b = blockIdx.x / tiles;
    const int kvh = blockIdx.y / nsplit, hs = H / KV / nsplit, h0 = kvh * (H / KV) + blockIdx.y % nsplit * hs;
    const int wr = 16 * w;
    const size_t ldq = (size_t)H * HD, ldk = (size_t)KV * HD, ldo = ldk * nsplit;
    tile_load<HD>(Ks, k + (size_t)b * T * ldk + (size_t)kvh * HD, ldk, c0, MMA_ROWS, T);
    tile_load<HD>(Vs, v + (size_t)b * T * ldk + (size_t)kvh * HD, ldk, c0, MMA_ROWS, T);
    float dK[HD / 8][4], dV[HD / 8][4];
#pragma unroll
    for (int j = 0; j < HD / 8; j++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            dK[j][c] = dV[j][c] = 0.0f;
    const float none[2] = {0.0f, 0.0f};
    for (int hh = 0; hh < hs; hh++) {
        const int h = h0 + hh;
        const size_t hoff = (size_t)b * T * ldq + (size_t)h * HD, li = ((size_t)b * H + h) * T;
        for (int q0 = c0 / BQ * BQ; q0 < T; q0 += BQ) {
            __syncthreads(); /* the previous tile's readers are done */
            tile_load<HD>(Qs, q + hoff, ldq, q0, BQ, T);
            tile_load_f<HD>(dOs, dout + hoff, ldq, q0, BQ, T);
            for (int i = threadIdx.x; i < BQ; i += blockDim.x) {
                Ls[i] = q0 + i < T ? lse[li + q0 + i] : INFINITY; /* P = 0 past T */
                Ds[i] = q0 + i < T ? D[li + q0 + i] : 0.0f;
            }
            __syncthreads();
            if (q0 + BQ - 1 < c0 + wr) /* every query before this warp's keys */
                continue;
            float s[BQ / 8][4], dp[BQ / 8][4];
            mma_p_ds<HD, BQ>(s, dp, Ks, Qs, Vs, dOs, wr, 1, c0 + wr, q0, g, t, Ls, Ds, none, none,
                             scale);
            mma_acc_rows<HD, BQ>(dV, s, dOs, g, t);
            mma_acc_rows<HD, BQ>(dK, dp, Qs, g, t);
        }
    }
    size_t o = (size_t)b * T * ldo + (size_t)blockIdx.y * HD;
    store_acc_rows<HD>(dk + o, ldo, dK, c0 + wr, T, g, t);
    store_acc_rows<HD>(dv + o, ldo, dV, c0 + wr, T, g, t);
}

/* dQ (B,T,H,HD) fp32, overwritten: a block owns 64 query rows of head
 * blockIdx.y and streams the key tiles (BK rows) up to its last row:
 * S = Q K^T, P, dP = dO V^T, dS; dQ += dS K. Grid (ceil(T/64) B, H), the
 * heaviest (last) query tiles first; shared: Q, dO (64 rows), K, V (BK). */
template <int HD, int BK>
__global__ static void __launch_bounds__(MMA_WARPS * 32)
    k_mma_dq(float *dq, const float *dout, const float *lse, const float *D, const uint16_t *q,
             const uint16_t *k, const uint16_t *v, int T, int H, int KV, float scale)
{
    extern __shared__ float sm[];
    const int ld = MMA_LD(HD);
    uint16_t *Qs = (uint16_t *)sm, *dOs = Qs + MMA_ROWS * ld, *Ks = dOs + MMA_ROWS * ld,
             *Vs = Ks + BK * ld;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int tiles = (T + MMA_ROWS - 1) / MMA_ROWS;
    const int r0 = (tiles - 1 - (int)(blockIdx.x % tiles)) * MMA_ROWS, b = blockIdx.x / tiles;
    const int h = blockIdx.y, kvh = h / (H / KV), wr = 16 * w;
    const size_t ldq = (size_t)H * HD, ldk = (size_t)KV * HD;
    const size_t hoff = (size_t)b * T * ldq + (size_t)h * HD, li = ((size_t)b * H + h) * T;
    const uint16_t *kb = k + (size_t)b * T * ldk + (size_t)kvh * HD;
    const uint16_t *vb = v + (size_t)b * T * ldk + (size_t)kvh * HD;
    tile_load<HD>(Qs, q + hoff, ldq, r0, MMA_ROWS, T);
    tile_load_f<HD>(dOs, dout + hoff, ldq, r0, MMA_ROWS, T);
    float L[2], Dr[2];
    for (int i = 0; i < 2; i++) {
        int row = r0 + wr + g + 8 * i;
        L[i] = row < T ? lse[li + row] : INFINITY;
        Dr[i] = row < T ? D[li + row] : 0.0f;
    }
    float dQ[HD / 8][4];
#pragma unroll
    for (int j = 0; j < HD / 8; j++)
        dQ[j][0] = dQ[j][1] = dQ[j][2] = dQ[j][3] = 0.0f;
    const int kend = min(T, r0 + MMA_ROWS);
    for (int k0 = 0; k0 < kend; k0 += BK) {
        __syncthreads();
        tile_load<HD>(Ks, kb, ldk, k0, BK, T);
        tile_load<HD>(Vs, vb, ldk, k0, BK, T);
        __syncthreads();
        if (k0 > r0 + wr + 15)
            continue;
        float s[BK / 8][4], dp[BK / 8][4];
        mma_p_ds<HD, BK>(s, dp, Qs, Ks, dOs, Vs, wr, 0, r0 + wr, k0, g, t, NULL, NULL, L, Dr,
                         scale);
        mma_acc_rows<HD, BK>(dQ, dp, Ks, g, t);
    }
    store_acc_rows<HD>(dq + hoff, ldq, dQ, r0 + wr, T, g, t);
}

/* ------------------------------------------------------------- host */

/* Streamed rows per tile in the backward: 32 with hd 128 (the dK, dV or
 * dQ accumulators take 64 registers each), else 64. */
#define MMA_BWD_TILE(HD) ((HD) >= 128 ? 32 : 64)

template <int HD>
static void mma_forward(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k,
                        const uint16_t *v, int B, int T, int H, int KV)
{
    size_t smem = 2 * (size_t)MMA_LD(HD) * (MMA_ROWS + 2 * MMA_TILE);
    smem_opt_in(k_mma_forward<HD>, smem);
    dim3 grid((unsigned)((T + MMA_ROWS - 1) / MMA_ROWS) * (unsigned)B, (unsigned)H);
    k_mma_forward<HD><<<grid, MMA_WARPS * 32, smem>>>(out, lse, q, k, v, T, H, KV,
                                                      1.0f / sqrtf((float)HD));
    LAUNCHED("k_mma_forward");
}

template <int HD>
static void mma_backward(float *dq, float *dk, float *dv, const float *D, const float *dout,
                         const float *lse, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                         int B, int T, int H, int KV, int nsplit)
{
    const int BT = MMA_BWD_TILE(HD);
    const float scale = 1.0f / sqrtf((float)HD);
    const unsigned tiles = (unsigned)((T + MMA_ROWS - 1) / MMA_ROWS) * (unsigned)B;
    size_t smem = 2 * (size_t)MMA_LD(HD) * (2 * MMA_ROWS + 2 * BT) + 2 * sizeof(float) * BT;
    auto dkdv = k_mma_dkdv<HD, MMA_BWD_TILE(HD)>;
    smem_opt_in(dkdv, smem);
    dkdv<<<dim3(tiles, (unsigned)(KV * nsplit)), MMA_WARPS * 32, smem>>>(dk, dv, dout, lse, D, q, k,
                                                                         v, T, H, KV, nsplit,
                                                                         scale);
    LAUNCHED("k_mma_dkdv");
    smem = 2 * (size_t)MMA_LD(HD) * (2 * MMA_ROWS + 2 * BT);
    auto dq_kernel = k_mma_dq<HD, MMA_BWD_TILE(HD)>;
    smem_opt_in(dq_kernel, smem);
    dq_kernel<<<dim3(tiles, (unsigned)H), MMA_WARPS * 32, smem>>>(dq, dout, lse, D, q, k, v, T, H,
                                                                  KV, scale);
    LAUNCHED("k_mma_dq");
}

/* 1 when the kernels' image on this device was built for sm_80 or later:
 * a build for older architectures only (--with-cuda-arch=sm_75) JIT-runs
 * their PTX, where mma_bf16 is __trap(), so the dispatch must not pick them
 * even on an sm_80+ device. Asked once (cudaFuncGetAttributes). */
int mma_kernels_built(void)
{
    static int built = -1;
    if (built < 0) {
        cudaFuncAttributes a;
        built = cudaFuncGetAttributes(&a, k_mma_forward<64>) == cudaSuccess && a.ptxVersion >= 80;
        (void)cudaGetLastError();
    }
    return built;
}

void mma_attention_forward(void *out, float *lse, const void *q, const void *k, const void *v,
                           int B, int T, int H, int KV, int hd)
{
    uint16_t *o = (uint16_t *)out;
    const uint16_t *Q = (const uint16_t *)q, *K = (const uint16_t *)k, *V = (const uint16_t *)v;
    switch (hd) {
    case 16: mma_forward<16>(o, lse, Q, K, V, B, T, H, KV); break;
    case 32: mma_forward<32>(o, lse, Q, K, V, B, T, H, KV); break;
    case 64: mma_forward<64>(o, lse, Q, K, V, B, T, H, KV); break;
    case 96: mma_forward<96>(o, lse, Q, K, V, B, T, H, KV); break;
    case 128: mma_forward<128>(o, lse, Q, K, V, B, T, H, KV); break;
    default: HPT_FATAL("cuda attention (tensor cores): head_dim %d not one of 16, 32, 64, 96, 128",
                       hd);
    }
}

void mma_attention_backward(float *dq, float *dk, float *dv, const float *D, const float *dout,
                            const float *lse, const void *q, const void *k, const void *v, int B,
                            int T, int H, int KV, int hd, int nsplit)
{
    const uint16_t *Q = (const uint16_t *)q, *K = (const uint16_t *)k, *V = (const uint16_t *)v;
    switch (hd) {
    case 16: mma_backward<16>(dq, dk, dv, D, dout, lse, Q, K, V, B, T, H, KV, nsplit); break;
    case 32: mma_backward<32>(dq, dk, dv, D, dout, lse, Q, K, V, B, T, H, KV, nsplit); break;
    case 64: mma_backward<64>(dq, dk, dv, D, dout, lse, Q, K, V, B, T, H, KV, nsplit); break;
    case 96: mma_backward<96>(dq, dk, dv, D, dout, lse, Q, K, V, B, T, H, KV, nsplit); break;
    case 128: mma_backward<128>(dq, dk, dv, D, dout, lse, Q, K, V, B, T, H, KV, nsplit); break;
    default: HPT_FATAL("cuda attention (tensor cores): head_dim %d not one of 16, 32, 64, 96, 128",
                       hd);
    }
}

} /* namespace hpt_cuda */
