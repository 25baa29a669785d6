/* attention_cuda.cu — the CUDA backend's causal grouped-query attention
 * (slots attention_forward, attention_backward, attention_cached of
 * backend.h; the CPU's is lib/attention_cpu.c): FlashAttention-2 style
 * kernels (Dao et al. 2022; Dao 2023, algorithms 1 and 2) in fp32 mode,
 * and in bf16 and tf32 modes the same maths in query chunks through
 * cuBLAS's batched products. See backend_cuda.cu's opening comment for
 * the precision rules; shared helpers: cuda_internal.h. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

namespace hpt_cuda {

/* ---------------------------------------------------------- attention */

/* Tiles: a block has ATT_WARPS warps; each warp owns ATT_RPW rows (query
 * rows in the forward and dQ kernels, key rows in the dK/dV kernel); the
 * other side is streamed through shared memory in tiles of 32 rows, one
 * per lane. Rows in shared memory are padded to hd+1 floats, so a lane
 * reading "its" row and all lanes reading one row are both free of bank
 * conflicts. Each lane holds elements e = lane + 32u (u < U) of a row's
 * accumulators: U = ceil(hd/32) <= 8, i.e. hd <= 256. */
#define ATT_WARPS 4
#define ATT_RPW 4
#define ATT_ROWS (ATT_WARPS * ATT_RPW) /* rows owned by a block: 16 */
#define ATT_TILE 32                    /* streamed rows per tile       */
#define ATT_MAX_HD 256

/* Forward, online softmax (Dao et al. 2022, algorithm 1; Milakov &
 * Gimelshein 2018). Queries (B,Tq,H,hd) at positions pos0 .. pos0+Tq-1,
 * keys/values (B,Tk,KV,hd) at positions 0 .. Tk-1, Tk >= pos0 + Tq; query
 * at position p attends to keys [0, p]. out (B,Tq,H,hd) overwritten; lse
 * (B,H,Tq) = log sum_s exp(score) of the scaled scores, if not NULL.
 * Grid (ceil(Tq/ATT_ROWS) * B, H), ATT_WARPS*32 threads, dynamic shared
 * memory (ATT_ROWS + 2*ATT_TILE) * (hd+1) floats. */
template <int U>
__global__ static void __launch_bounds__(ATT_WARPS * 32)
    k_flash_forward(void *out, float *lse, const void *q, const void *k, const void *v, int bf,
                    int Tq, int Tk, int pos0, int H, int KV, int hd, float scale)
{
    extern __shared__ float sm[];
    const int HDP = hd + 1;
    float *Qs = sm, *Ks = Qs + ATT_ROWS * HDP, *Vs = Ks + ATT_TILE * HDP;
    /* grid (tiles * B, H): B folded into x, whose limit is 2^31 - 1, not
     * 65535 as for y and z */
    const int tiles = (Tq + ATT_ROWS - 1) / ATT_ROWS;
    const int b = blockIdx.x / tiles, h = blockIdx.y, q0 = (blockIdx.x % tiles) * ATT_ROWS;
    const int kvh = h / (H / KV), lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const size_t ldq = (size_t)H * hd, ldk = (size_t)KV * hd;
    const size_t qb = (size_t)b * Tq * ldq + (size_t)h * hd; /* element offsets */
    const size_t kb = (size_t)b * Tk * ldk + (size_t)kvh * hd;
    for (int i = threadIdx.x; i < ATT_ROWS * hd; i += blockDim.x) {
        int r = i / hd, e = i % hd, t = q0 + r;
        Qs[r * HDP + e] = t < Tq ? ld_act(q, qb + (size_t)t * ldq + e, bf) : 0.0f;
    }
    float m[ATT_RPW], l[ATT_RPW], acc[ATT_RPW][U];
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int u = 0; u < U; u++)
            acc[r][u] = 0.0f;
    }
    int qlast = min(q0 + ATT_ROWS, Tq) - 1;
    int kend = pos0 + qlast + 1; /* keys [0, kend) are visible to some row */
    for (int k0 = 0; k0 < kend; k0 += ATT_TILE) {
        __syncthreads(); /* the previous tile is consumed (first: Qs is loaded) */
        for (int i = threadIdx.x; i < ATT_TILE * hd; i += blockDim.x) {
            int j = i / hd, e = i % hd, s = k0 + j;
            Ks[j * HDP + e] = s < Tk ? ld_act(k, kb + (size_t)s * ldk + e, bf) : 0.0f;
            Vs[j * HDP + e] = s < Tk ? ld_act(v, kb + (size_t)s * ldk + e, bf) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < ATT_RPW; r++) {
            int rl = warp * ATT_RPW + r, t = q0 + rl, tpos = pos0 + t;
            if (t >= Tq || k0 > tpos) /* warp-uniform */
                continue;
            const float *qr = Qs + rl * HDP, *kr = Ks + lane * HDP;
            float sc = 0.0f;
            for (int e = 0; e < hd; e++)
                sc += qr[e] * kr[e];
            int valid = k0 + lane <= tpos;
            sc = valid ? sc * scale : -INFINITY;
            float mnew = fmaxf(m[r], warp_max(sc)); /* finite: key 0 is in the first tile */
            float p = valid ? expf(sc - mnew) : 0.0f;
            float alpha = expf(m[r] - mnew);
            l[r] = l[r] * alpha + warp_sum(p);
            m[r] = mnew;
#pragma unroll
            for (int u = 0; u < U; u++)
                acc[r][u] *= alpha;
            for (int j = 0; j < ATT_TILE; j++) {
                float pj = __shfl_sync(FULL_MASK, p, j);
                const float *vr = Vs + j * HDP;
#pragma unroll
                for (int u = 0; u < U; u++) {
                    int e = lane + 32 * u;
                    if (e < hd)
                        acc[r][u] += pj * vr[e];
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        int t = q0 + warp * ATT_RPW + r;
        if (t >= Tq)
            continue;
        float inv = 1.0f / l[r];
        size_t o = ((size_t)b * Tq + t) * ldq + (size_t)h * hd;
#pragma unroll
        for (int u = 0; u < U; u++) {
            int e = lane + 32 * u;
            if (e < hd)
                st_act(out, o + e, acc[r][u] * inv, bf);
        }
        if (lse && lane == 0)
            lse[((size_t)b * H + h) * Tq + t] = m[r] + logf(l[r]);
    }
}

/* D (B,H,T) = rowsum(dout * out) = sum_s P dP (Dao 2023, algorithm 2,
 * line 4); one warp per (b, t, h) row. dout in bf16 (dbf = 1) or float
 * (dbf = 0; dbf = 2: float, each element rounded to bf16 first, as the
 * tensor-core kernels round it for dP, so D and dP agree), out an
 * activation (bf16 when bf). */
__global__ static void k_attention_rowdot(float *D, const void *dout, int dbf, const void *out,
                                          int bf, int T, int H, int hd, size_t rows)
{
    size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (row >= rows)
        return;
    float s = 0.0f;
    for (int e = lane; e < hd; e += 32) {
        float d = ld_act(dout, row * hd + e, dbf == 1);
        s += (dbf == 2 ? bf16_float(bf16_bits(d)) : d) * ld_act(out, row * hd + e, bf);
    }
    s = warp_sum(s);
    int h = (int)(row % H);
    size_t bt = row / H;
    int t = (int)(bt % T), b = (int)(bt / T);
    if (lane == 0)
        D[((size_t)b * H + h) * T + t] = s;
}

/* dK, dV (B,T,KV,hd), overwritten. A block owns ATT_ROWS keys of kv head
 * g and streams, for each query head of g's group, the query tiles at or
 * after its first key: P = exp(scale q.k - lse), dP = dout.v,
 * dS = P (dP - D) scale; dV += P^T dout, dK += dS^T Q. Grid
 * (ceil(T/ATT_ROWS) * B, KV); shared (2*ATT_ROWS + 2*ATT_TILE)*(hd+1) + 64
 * floats. */
template <int U>
__global__ static void __launch_bounds__(ATT_WARPS * 32)
    k_flash_dkdv(float *dk, float *dv, const float *dout, const float *lse, const float *D,
                 const void *q, const void *k, const void *v, int bf, int T, int H, int KV, int hd,
                 float scale)
{
    extern __shared__ float sm[];
    const int HDP = hd + 1;
    float *Kr = sm, *Vr = Kr + ATT_ROWS * HDP, *Qt = Vr + ATT_ROWS * HDP;
    float *dOt = Qt + ATT_TILE * HDP, *Lt = dOt + ATT_TILE * HDP, *Dt = Lt + ATT_TILE;
    const int tiles = (T + ATT_ROWS - 1) / ATT_ROWS; /* grid (tiles * B, KV) */
    const int b = blockIdx.x / tiles, g = blockIdx.y, s0 = (blockIdx.x % tiles) * ATT_ROWS;
    const int group = H / KV;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const size_t ldq = (size_t)H * hd, ldk = (size_t)KV * hd;
    const size_t kb = (size_t)b * T * ldk + (size_t)g * hd; /* element offset */
    for (int i = threadIdx.x; i < ATT_ROWS * hd; i += blockDim.x) {
        int r = i / hd, e = i % hd, s = s0 + r;
        Kr[r * HDP + e] = s < T ? ld_act(k, kb + (size_t)s * ldk + e, bf) : 0.0f;
        Vr[r * HDP + e] = s < T ? ld_act(v, kb + (size_t)s * ldk + e, bf) : 0.0f;
    }
    float dka[ATT_RPW][U], dva[ATT_RPW][U];
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++)
#pragma unroll
        for (int u = 0; u < U; u++)
            dka[r][u] = dva[r][u] = 0.0f;
    for (int h = g * group; h < (g + 1) * group; h++) {
        const size_t qb = (size_t)b * T * ldq + (size_t)h * hd;
        const float *ob = dout + qb;
        const float *lb = lse + ((size_t)b * H + h) * T, *db = D + ((size_t)b * H + h) * T;
        for (int t0 = s0 / ATT_TILE * ATT_TILE; t0 < T; t0 += ATT_TILE) {
            __syncthreads(); /* the previous tile is consumed (first: Kr/Vr loaded) */
            for (int i = threadIdx.x; i < ATT_TILE * hd; i += blockDim.x) {
                int j = i / hd, e = i % hd, t = t0 + j;
                Qt[j * HDP + e] = t < T ? ld_act(q, qb + (size_t)t * ldq + e, bf) : 0.0f;
                dOt[j * HDP + e] = t < T ? ob[(size_t)t * ldq + e] : 0.0f;
            }
            if (threadIdx.x < ATT_TILE) {
                int t = t0 + threadIdx.x;
                Lt[threadIdx.x] = t < T ? lb[t] : 0.0f;
                Dt[threadIdx.x] = t < T ? db[t] : 0.0f;
            }
            __syncthreads();
#pragma unroll
            for (int r = 0; r < ATT_RPW; r++) {
                int rl = warp * ATT_RPW + r, s = s0 + rl;
                if (s >= T || t0 + ATT_TILE - 1 < s) /* warp-uniform */
                    continue;
                int t = t0 + lane, valid = t >= s && t < T;
                const float *qr = Qt + lane * HDP, *gr = dOt + lane * HDP;
                const float *kr = Kr + rl * HDP, *vr = Vr + rl * HDP;
                float sc = 0.0f, dp = 0.0f;
                for (int e = 0; e < hd; e++) {
                    sc += qr[e] * kr[e];
                    dp += gr[e] * vr[e];
                }
                float p = valid ? expf(sc * scale - Lt[lane]) : 0.0f;
                float ds = valid ? p * (dp - Dt[lane]) * scale : 0.0f;
                /* unrolled in full (U = 1), this loop spilled 156 bytes of
                 * registers (ptxas -v, sm_90) */
#pragma unroll 8
                for (int j = 0; j < ATT_TILE; j++) {
                    float pj = __shfl_sync(FULL_MASK, p, j);
                    float dsj = __shfl_sync(FULL_MASK, ds, j);
#pragma unroll
                    for (int u = 0; u < U; u++) {
                        int e = lane + 32 * u;
                        if (e < hd) {
                            dva[r][u] += pj * dOt[j * HDP + e];
                            dka[r][u] += dsj * Qt[j * HDP + e];
                        }
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        int s = s0 + warp * ATT_RPW + r;
        if (s >= T)
            continue;
        size_t o = ((size_t)b * T + s) * ldk + (size_t)g * hd;
#pragma unroll
        for (int u = 0; u < U; u++) {
            int e = lane + 32 * u;
            if (e < hd) {
                dk[o + e] = dka[r][u];
                dv[o + e] = dva[r][u];
            }
        }
    }
}

/* dQ (B,T,H,hd), overwritten: dQ = dS K over keys 0..t. A block owns
 * ATT_ROWS query rows of head h and streams key tiles. Grid
 * (ceil(T/ATT_ROWS) * B, H); shared (2*ATT_ROWS + 2*ATT_TILE)*(hd+1) floats. */
template <int U>
__global__ static void __launch_bounds__(ATT_WARPS * 32)
    k_flash_dq(float *dq, const float *dout, const float *lse, const float *D, const void *q,
               const void *k, const void *v, int bf, int T, int H, int KV, int hd, float scale)
{
    extern __shared__ float sm[];
    const int HDP = hd + 1;
    float *Qs = sm, *dOs = Qs + ATT_ROWS * HDP, *Kt = dOs + ATT_ROWS * HDP;
    float *Vt = Kt + ATT_TILE * HDP;
    const int tiles = (T + ATT_ROWS - 1) / ATT_ROWS; /* grid (tiles * B, H) */
    const int b = blockIdx.x / tiles, h = blockIdx.y, t0 = (blockIdx.x % tiles) * ATT_ROWS;
    const int kvh = h / (H / KV);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const size_t ldq = (size_t)H * hd, ldk = (size_t)KV * hd;
    const size_t qb = (size_t)b * T * ldq + (size_t)h * hd; /* element offsets */
    const float *ob = dout + qb;
    const size_t kb = (size_t)b * T * ldk + (size_t)kvh * hd;
    for (int i = threadIdx.x; i < ATT_ROWS * hd; i += blockDim.x) {
        int r = i / hd, e = i % hd, t = t0 + r;
        Qs[r * HDP + e] = t < T ? ld_act(q, qb + (size_t)t * ldq + e, bf) : 0.0f;
        dOs[r * HDP + e] = t < T ? ob[(size_t)t * ldq + e] : 0.0f;
    }
    float L[ATT_RPW], Dr[ATT_RPW], acc[ATT_RPW][U];
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        int t = t0 + warp * ATT_RPW + r;
        L[r] = t < T ? lse[((size_t)b * H + h) * T + t] : 0.0f;
        Dr[r] = t < T ? D[((size_t)b * H + h) * T + t] : 0.0f;
#pragma unroll
        for (int u = 0; u < U; u++)
            acc[r][u] = 0.0f;
    }
    int tlast = min(t0 + ATT_ROWS, T) - 1;
    for (int k0 = 0; k0 <= tlast; k0 += ATT_TILE) {
        __syncthreads();
        for (int i = threadIdx.x; i < ATT_TILE * hd; i += blockDim.x) {
            int j = i / hd, e = i % hd, s = k0 + j;
            Kt[j * HDP + e] = s < T ? ld_act(k, kb + (size_t)s * ldk + e, bf) : 0.0f;
            Vt[j * HDP + e] = s < T ? ld_act(v, kb + (size_t)s * ldk + e, bf) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < ATT_RPW; r++) {
            int rl = warp * ATT_RPW + r, t = t0 + rl;
            if (t >= T || k0 > t) /* warp-uniform */
                continue;
            int valid = k0 + lane <= t;
            const float *qr = Qs + rl * HDP, *gr = dOs + rl * HDP;
            const float *kr = Kt + lane * HDP, *vr = Vt + lane * HDP;
            float sc = 0.0f, dp = 0.0f;
            for (int e = 0; e < hd; e++) {
                sc += qr[e] * kr[e];
                dp += gr[e] * vr[e];
            }
            float p = valid ? expf(sc * scale - L[r]) : 0.0f;
            float ds = valid ? p * (dp - Dr[r]) * scale : 0.0f;
            for (int j = 0; j < ATT_TILE; j++) {
                float dsj = __shfl_sync(FULL_MASK, ds, j);
#pragma unroll
                for (int u = 0; u < U; u++) {
                    int e = lane + 32 * u;
                    if (e < hd)
                        acc[r][u] += dsj * Kt[j * HDP + e];
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        int t = t0 + warp * ATT_RPW + r;
        if (t >= T)
            continue;
        float *o = dq + ((size_t)b * T + t) * ldq + (size_t)h * hd;
#pragma unroll
        for (int u = 0; u < U; u++) {
            int e = lane + 32 * u;
            if (e < hd)
                o[e] = acc[r][u];
        }
    }
}


static void check_heads(int H, int KV, int hd)
{
    if (hd <= 0 || hd > ATT_MAX_HD || KV <= 0 || H % KV)
        HPT_FATAL("cuda attention: head_dim %d (1..%d supported), %d heads, %d kv heads (must "
                  "divide the heads)", hd, ATT_MAX_HD, H, KV);
}

template <int U>
static void flash_forward(void *out, float *lse, const void *q, const void *k, const void *v,
                          int B, int Tq, int Tk, int pos0, int H, int KV, int hd)
{
    size_t smem = sizeof(float) * (ATT_ROWS + 2 * ATT_TILE) * (size_t)(hd + 1);
    smem_opt_in(k_flash_forward<U>, smem);
    dim3 grid((unsigned)((Tq + ATT_ROWS - 1) / ATT_ROWS) * (unsigned)B, H);
    k_flash_forward<U><<<grid, ATT_WARPS * 32, smem>>>(out, lse, q, k, v, g_bf16, Tq, Tk, pos0, H, KV, hd,
                                                       1.0f / sqrtf((float)hd));
    LAUNCHED("k_flash_forward");
}

static void attention_fwd(void *out, float *lse, const void *q, const void *k, const void *v,
                          int B, int Tq, int Tk, int pos0, int H, int KV, int hd)
{
    check_heads(H, KV, hd);
    if (B <= 0 || Tq <= 0 || H <= 0)
        return;
    switch ((hd + 31) / 32) {
    case 1: flash_forward<1>(out, lse, q, k, v, B, Tq, Tk, pos0, H, KV, hd); break;
    case 2: flash_forward<2>(out, lse, q, k, v, B, Tq, Tk, pos0, H, KV, hd); break;
    case 3: case 4: flash_forward<4>(out, lse, q, k, v, B, Tq, Tk, pos0, H, KV, hd); break;
    default: flash_forward<8>(out, lse, q, k, v, B, Tq, Tk, pos0, H, KV, hd); break;
    }
}

/* ------------------------ attention through cuBLAS (bf16 and tf32 modes)
 *
 * In bf16 and tf32 modes the attention core runs on the tensor cores
 * through cuBLAS's batched products instead of the fp32 kernels above
 * (which use the CUDA cores: at T = 2048 they would cost more than all the
 * model's GEMMs together); fp32 mode (the exactness mode, no tensor cores)
 * keeps the kernels. The queries are cut into chunks of Tc rows; for
 * a chunk [t0, t1) and every (b, h) at once (cublasGemmBatchedEx, one
 * entry per head, GQA by pointing the entries of a group at one kv head):
 *   forward   S = scale Q_c K^T over keys [0, t1)          (fp32, scratch)
 *             P = softmax(S) with the causal mask, lse      (P bf16, as FA2)
 *             O_c = P V                                     (bf16 out)
 *   backward  S again, P = exp(S - lse), dP = dO_c V^T,
 *             dS = P (dP - D) scale                         (Dao 2023, alg. 2)
 *             dV += P^T dO_c, dK += dS^T Q_c  (per query head of a group,
 *             so no two entries of one call write the same dK/dV rows),
 *             dQ_c = dS K.
 * bf16 mode: operands enter as bf16 (q, k, v, out are bf16 activations; dO
 * is rounded to bf16 once per call; P and dS are stored in bf16), fp32
 * accumulation. tf32 mode: every operand is fp32 (CUBLAS_COMPUTE_32F_FAST
 * _TF32, as the model's products), P overwrites S and dS overwrites dP. In
 * both S, dP, lse, D, dQ, dK, dV are fp32. Only the chunk's scores are
 * held: a scratch of 12 (bf16) or 8 (tf32) bytes per score, B H Tc Tp
 * scores (Tp = T rounded up to 16), plus dO in bf16 (2 B T H hd bytes,
 * bf16 only) and with GQA per-head dK, dV (8 B T H hd), grown on demand
 * and kept (counted in mem_peak); Tc is the largest multiple of 16 (at
 * least 128 rows while they fit 2 GiB, at least 16, at most T) whose scores
 * fit ATT_CHUNK_BYTES. The saved state
 * is the same row log-sum-exp as the kernels', so attention_saved and
 * attention_scratch_floats do not change. HPT_CUDA_ATT_CHUNK=R forces R
 * query rows per chunk (tests); HPT_CUDA_ATTENTION=flash keeps the fp32
 * kernels (for comparison). */

#define ATT_CHUNK_BYTES ((size_t)512 << 20)
/* ... but never fewer rows than ATT_MIN_ROWS (nor than T) while that fits
 * ATT_MIN_ROWS_BYTES: a chunk is the m of its batched products, and 16-row
 * chunks (B 8 x H 32 x T 8192 would give them) run the tensor cores at a
 * fraction of their rate, in 512 launches per call (there: 80 rows, 1.9 GiB,
 * beside ~16 GiB per layer of activations); the bound keeps a very long
 * sequence (B 1 x H 32 x T 128K: 32 rows) from a scratch that would not fit.
 * hpt-plan counts the same. */
#define ATT_MIN_ROWS 128
#define ATT_MIN_ROWS_BYTES (4 * ATT_CHUNK_BYTES)

/* Bytes of scratch per score: S, dP fp32 and P, dS bf16 (bf16 mode), or
 * S/P and dP/dS fp32 in place (tf32). */
static int att_score_bytes(void) { return g_bf16 ? 12 : 8; }

/* Query rows per chunk for B sequences of T tokens and H (local) heads. */
static int att_chunk_rows(int B, int T, int H)
{
    const char *e = getenv("HPT_CUDA_ATT_CHUNK");
    long r = e && *e ? strtol(e, NULL, 10) : 0;
    if (r <= 0) {
        size_t per_row = (size_t)att_score_bytes() * B * H * (size_t)((T + 15) / 16 * 16);
        r = (long)(ATT_CHUNK_BYTES / per_row) / 16 * 16;
        if (r < ATT_MIN_ROWS) {
            long most = (long)(ATT_MIN_ROWS_BYTES / per_row) / 16 * 16;
            r = most < ATT_MIN_ROWS ? most : ATT_MIN_ROWS;
        }
        if (r < 16)
            r = 16;
    }
    if (r > 65535) /* the chunk kernels' grid.y (rows; B * H is in x) */
        r = 65535;
    return r > T ? T : (int)r;
}

/* The path HPT_CUDA_ATTENTION asks for (hpt_cuda_attention_path, backend.h:
 * 0, 'm', 'b' or 'f') in the current precision; set_precision refused a
 * bad value at start-up, so an error here (the variable changed since) is
 * fatal. */
static int att_env(void)
{
    int path;
    hpt_precision p = g_bf16 ? HPT_PRECISION_BF16
                      : g_compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? HPT_PRECISION_TF32
                                                                  : HPT_PRECISION_FP32;
    if (hpt_cuda_attention_path(p, &path))
        HPT_FATAL("%s", hpt_error_msg());
    return path;
}

/* 1 when the device runs mma.sync on bf16 (compute capability >= 8.0). */
static int att_mma_device(void)
{
    static int major = -1;
    if (major < 0 && cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, g_device))
        major = 0;
    return major >= 8;
}

/* bf16 mode runs the tensor-core kernels (attention_mma.cu) unless
 * HPT_CUDA_ATTENTION=blas or flash, for head dims 16, 32, 64, 96, 128
 * (hpt_cuda_mma_head_dim_ok) on compute capability 8.0 or later with kernels built
 * for it (mma_kernels_built); the callers also require 16-byte aligned
 * operands (att_aligned). */
int att_use_mma(int hd)
{
    int e = att_env();
    return g_bf16 && e != 'b' && e != 'f' && hpt_cuda_mma_head_dim_ok(hd) && att_mma_device() &&
           mma_kernels_built();
}

/* bf16 mode (where the tensor-core kernels do not run) and tf32 mode use
 * the cuBLAS path unless HPT_CUDA_ATTENTION=flash, or unless a head's row
 * is not a multiple of 16 bytes (hd * 2 in bf16, hd * 4 in tf32):
 * cublasGemmBatchedEx cannot see the pointers it is given
 * (they live in device memory) and may read bf16/tf32 operands with 16-byte
 * loads, so every per-head pointer must be 16-byte aligned (cuBLAS
 * documentation, cublasGemmBatchedEx); the flash kernels have no such need. */
int att_use_blas(int hd)
{
    int esz = g_bf16 ? 2 : 4;
    return (g_bf16 || g_compute == CUBLAS_COMPUTE_32F_FAST_TF32) && att_env() != 'f' &&
           !att_use_mma(hd) && (size_t)hd * esz % 16 == 0;
}

/* 1 when every operand of the tensor-core kernels is 16-byte aligned (their
 * 16-byte tile loads). */
static int att_aligned(const void *a, const void *b, const void *c, const void *d)
{
    return al16(a) && al16(b) && al16(c) && al16(d);
}

/* HPT_CUDA_ATTENTION=mma asks for the tensor-core kernels: where they
 * cannot run (mma = 0) that is a fatal error naming why, not a silent
 * fallback (the default path falls back; tests/gpu/gpu-train-mma.sh relies
 * on the refusal to know the kernels ran). */
static void att_mma_required(int mma, int hd, int aligned)
{
    if (mma || att_env() != 'm')
        return;
    HPT_FATAL("HPT_CUDA_ATTENTION=mma: the tensor-core attention cannot run here: %s",
              !hpt_cuda_mma_head_dim_ok(hd) ? "head_dim not one of 16, 32, 64, 96, 128"
              : !att_mma_device()  ? "the device's compute capability is below 8.0"
              : !mma_kernels_built() ? "hpt's kernels were not built for sm_80 or later "
                                       "(configure --with-cuda-arch)"
              : !aligned           ? "an operand is not 16-byte aligned"
                                   : "not in bf16 mode");
}

/* Operand type and compute type of the attention's products: bf16 with
 * fp32 compute (bf16 mode), fp32 with tf32 compute (tf32 mode). */
static cudaDataType att_et(void) { return g_bf16 ? CUDA_R_16BF : CUDA_R_32F; }
static int att_esz(void) { return g_bf16 ? 2 : 4; }

/* One operand of a batched product: entry i = b * nj + j points at
 * base + (b * bstride + ((j * mul + add) / div) * hstride) * esize bytes. */
struct bat_operand {
    const char *base;
    size_t bstride, hstride; /* elements */
    int mul, add, div, esize;
};

static bat_operand bat(const void *base, size_t bstride, size_t hstride, int mul, int add, int div,
                       int esize)
{
    bat_operand o = {(const char *)base, bstride, hstride, mul, add, div, esize};
    return o;
}

__device__ static const void *bat_ptr(const bat_operand &o, int b, int j)
{
    return o.base + ((size_t)b * o.bstride + (size_t)((j * o.mul + o.add) / o.div) * o.hstride) *
                        (size_t)o.esize;
}

/* ptrs[0..n), [n..2n), [2n..3n) = the entries of A, B, C; n = nb * nj. */
__global__ static void k_batch_ptrs(const void **ptrs, bat_operand a, bat_operand b, bat_operand c,
                                    int nb, int nj)
{
    int n = nb * nj;
    GRID_STRIDE(i, (size_t)n)
    {
        int bi = (int)(i / nj), j = (int)(i % nj);
        ptrs[i] = bat_ptr(a, bi, j);
        ptrs[n + i] = bat_ptr(b, bi, j);
        ptrs[2 * n + i] = bat_ptr(c, bi, j);
    }
}

/* The attention path's device scratch, grown on demand and kept: `bytes`
 * of it, at least 16-byte aligned pieces carved by the caller. */
scratch g_att_scratch, g_att_ptrs;

static char *att_scratch(size_t bytes)
{
    return (char *)scratch_need(&g_att_scratch, bytes, "attention scratch");
}

/* Pointer arrays for up to n entries (3n pointers), grown on demand. Safe to
 * reuse call after call: everything runs on the legacy default stream. */
static const void **att_ptrs(size_t n)
{
    return (const void **)scratch_need(&g_att_ptrs, 3 * n * sizeof(void *), "attention pointers");
}

/* C_i (m,n; ldc) = alpha op(A_i) op(B_i) + beta C_i for the nb * nj entries
 * (cuBLAS's column-major terms), A and B of the attention's operand type
 * (att_et: bf16, or fp32 in tf32 mode), C of type ct, fp32 accumulation. */
static void gemm_bat(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                     bat_operand A, int lda, bat_operand B, int ldb, float beta, bat_operand C,
                     cudaDataType ct, int ldc, int nb, int nj)
{
    int cnt = nb * nj;
    if (m <= 0 || n <= 0 || cnt <= 0)
        return;
    const void **p = att_ptrs((size_t)cnt);
    k_batch_ptrs<<<(cnt + 127) / 128, 128>>>(p, A, B, C, nb, nj);
    LAUNCHED("k_batch_ptrs");
    HPT_CUBLAS(g_cublas.gemm_batched_ex(g_blas, ta, tb, m, n, k, &alpha, p, att_et(), lda, p + cnt,
                                        att_et(), ldb, &beta, (void *const *)(p + 2 * cnt), ct,
                                        ldc, cnt, g_compute, CUBLAS_GEMM_DEFAULT));
}

#define ATT_ROW_THREADS 128

/* Forward softmax of one chunk: block (bh, r) takes score row r (query
 * position tp = t0 + r) of entry bh: S[bh*per + r*ld + s], s < nk. Writes
 * P = exp(S - m) / l for s <= tp and 0 for tp < s < nk (bf16 when bf, else
 * fp32, possibly over S itself: each element is read, then written, by one
 * thread after the reductions; same layout) and lse[bh*T + tp] = m + log l. */
__global__ static void k_chunk_softmax(void *P, int bf, float *lse, const float *S, int nk, int ld,
                                       int t0, size_t per, int T)
{
    const size_t row = (size_t)blockIdx.x * per + (size_t)blockIdx.y * ld;
    const int tp = t0 + blockIdx.y;
    const float *s = S + row;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j <= tp; j += blockDim.x)
        mx = fmaxf(mx, s[j]);
    mx = block_max(mx);
    float l = 0.0f;
    for (int j = threadIdx.x; j <= tp; j += blockDim.x)
        l += expf(s[j] - mx);
    l = block_sum(l);
    float inv = 1.0f / l;
    for (int j = threadIdx.x; j < nk; j += blockDim.x)
        st_act(P, row + j, j <= tp ? expf(s[j] - mx) * inv : 0.0f, bf);
    if (threadIdx.x == 0)
        lse[(size_t)blockIdx.x * T + tp] = mx + logf(l);
}

/* Backward of one chunk's softmax, same layout: P = exp(S - lse) (0 past
 * the causal edge), dS = P (dP - D) scale; both written as bf16 when bf,
 * else fp32 (P may be S and dS may be dP: each element is read, then
 * written, by one thread). */
__global__ static void k_chunk_dsoftmax(void *P, void *dS, int bf, const float *S, const float *dP,
                                        const float *lse, const float *D, int nk, int ld, int t0,
                                        size_t per, int T, float scale)
{
    const size_t row = (size_t)blockIdx.x * per + (size_t)blockIdx.y * ld;
    const int tp = t0 + blockIdx.y;
    const float L = lse[(size_t)blockIdx.x * T + tp], Dr = D[(size_t)blockIdx.x * T + tp];
    for (int j = threadIdx.x; j < nk; j += blockDim.x) {
        float p = j <= tp ? expf(S[row + j] - L) : 0.0f, ds = p * (dP[row + j] - Dr) * scale;
        st_act(P, row + j, p, bf);
        st_act(dS, row + j, ds, bf);
    }
}

/* Geometry of one call: chunk rows Tc, the padded score row Tp (ld of a
 * chunk's rows is nk rounded up to 8, at most Tp) and the per-entry
 * stride per = Tc * Tp elements. */
struct att_geom {
    int Tc, Tp;
    size_t per;
};

static att_geom att_geometry(int B, int T, int H)
{
    att_geom g;
    g.Tc = att_chunk_rows(B, T, H);
    g.Tp = (T + 15) / 16 * 16;
    g.per = (size_t)g.Tc * g.Tp;
    return g;
}

/* dk, dv (B,T,KV,hd) = the sums over each group of grp query heads of
 * dKh, dVh (B,T,H,hd), H = KV grp; n = B T KV hd. */
__global__ static void k_group_sum(float *dk, float *dv, const float *dKh, const float *dVh,
                                   size_t n, int grp, int hd)
{
    GRID_STRIDE(i, n)
    {
        size_t row = i / hd, e = i % hd, j = row * grp * hd + e;
        float a = 0.0f, c = 0.0f;
        for (int r = 0; r < grp; r++, j += hd)
            a += dKh[j], c += dVh[j];
        dk[i] = a;
        dv[i] = c;
    }
}

static size_t round256(size_t bytes) { return (bytes + 255) / 256 * 256; }

/* The next piece of `bytes` bytes at *at in buf, 256-byte aligned. */
static char *carve_bytes(char *buf, size_t *at, size_t bytes)
{
    char *p = buf + *at;
    *at += round256(bytes);
    return p;
}

/* The pieces of the attention scratch for one call, bytes, in carving
 * order: the chunk's S and dP (fp32) for every (b, h); P and dS (bf16 in
 * bf16 mode; 0 in tf32 mode, where they overwrite S and dP); dO in bf16
 * (bf16 mode); with GQA dK and dV per query head (fp32). */
static void att_pieces(size_t sz[7], int B, int T, int H, int KV, int hd)
{
    att_geom g = att_geometry(B, T, H);
    size_t n = (size_t)B * H * g.per, nqe = (size_t)B * T * H * hd;
    sz[0] = sz[1] = n * 4;
    sz[2] = sz[3] = g_bf16 ? n * 2 : 0;
    sz[4] = g_bf16 ? nqe * 2 : 0;
    sz[5] = sz[6] = H > KV ? nqe * 4 : 0;
}

/* Scratch bytes of blas_attention_backward (the forward uses its first
 * pieces), each piece 256-byte aligned. */
size_t att_backward_bytes(int B, int T, int H, int KV, int hd)
{
    size_t sz[7], at = 0;
    att_pieces(sz, B, T, H, KV, hd);
    for (int i = 0; i < 7; i++)
        at += round256(sz[i]);
    return at;
}

/* Scratch bytes of the tensor-core backward: with the GQA group split over
 * hpt_cuda_mma_kv_split parts > 1, partial dK and dV (B,T,KV parts,hd) fp32, each
 * 256-byte aligned; else none. */
size_t mma_backward_bytes(int B, int T, int H, int KV, int hd)
{
    int ns = hpt_cuda_mma_kv_split(B, T, H, KV);
    return ns > 1 ? 2 * round256((size_t)4 * B * T * KV * hd * ns) : 0;
}

/* S (per entry (b, h), rows [0, nq), ld) = scale Q[t0..t0+nq) K[0..nk)^T:
 * column-major S^T (nk, nq) = Kc^T (nk, hd) Qc (hd, nq). */
static void att_scores(float *S, const void *q, const void *k, int B, int T, int H, int KV, int hd,
                       int t0, int nq, int nk, int ld, size_t per)
{
    size_t ldq = (size_t)H * hd, ldk = (size_t)KV * hd;
    int es = att_esz();
    gemm_bat(CUBLAS_OP_T, CUBLAS_OP_N, nk, nq, hd, 1.0f / sqrtf((float)hd),
             bat(k, T * ldk, hd, 1, 0, H / KV, es), (int)ldk,
             bat((const char *)q + t0 * ldq * es, T * ldq, hd, 1, 0, 1, es), (int)ldq, 0.0f,
             bat(S, H * per, per, 1, 0, 1, 4), CUDA_R_32F, ld, B, H);
}

static void blas_attention_forward(void *out, float *lse, const void *q, const void *k,
                                   const void *v, int B, int T, int H, int KV, int hd)
{
    att_geom g = att_geometry(B, T, H);
    size_t ldq = (size_t)H * hd, ldk = (size_t)KV * hd, sz[7], at = 0;
    att_pieces(sz, B, T, H, KV, hd);
    char *scr = att_scratch(att_backward_bytes(B, T, H, KV, hd)); /* one size: no regrowth */
    float *S = (float *)carve_bytes(scr, &at, sz[0]);
    carve_bytes(scr, &at, sz[1]);
    void *P = g_bf16 ? (void *)carve_bytes(scr, &at, sz[2]) : (void *)S; /* tf32: over S */
    int es = att_esz();
    for (int t0 = 0; t0 < T; t0 += g.Tc) {
        int nq = min(g.Tc, T - t0), nk = t0 + nq, ld = (nk + 7) / 8 * 8;
        att_scores(S, q, k, B, T, H, KV, hd, t0, nq, nk, ld, g.per);
        k_chunk_softmax<<<dim3(B * H, nq), ATT_ROW_THREADS>>>(P, g_bf16, lse, S, nk, ld, t0, g.per,
                                                              T);
        LAUNCHED("k_chunk_softmax");
        /* O_c: column-major Oc (hd, nq) = Vc (hd, nk) Pc (nk, nq) */
        gemm_bat(CUBLAS_OP_N, CUBLAS_OP_N, hd, nq, nk, 1.0f, bat(v, T * ldk, hd, 1, 0, H / KV, es),
                 (int)ldk, bat(P, H * g.per, g.per, 1, 0, 1, es), ld, 0.0f,
                 bat((char *)out + t0 * ldq * es, T * ldq, hd, 1, 0, 1, es), att_et(), (int)ldq, B,
                 H);
    }
}

static void blas_attention_backward(float *dq, float *dk, float *dv, float *D, const float *dout,
                                    const void *out, const float *lse, const void *q,
                                    const void *k, const void *v, int B, int T, int H, int KV,
                                    int hd)
{
    att_geom g = att_geometry(B, T, H);
    const int grp = H / KV, es = att_esz();
    const float scale = 1.0f / sqrtf((float)hd);
    size_t ldq = (size_t)H * hd, ldk = (size_t)KV * hd, nqe = (size_t)B * T * ldq, sz[7], at = 0;
    att_pieces(sz, B, T, H, KV, hd);
    char *scr = att_scratch(att_backward_bytes(B, T, H, KV, hd));
    float *S = (float *)carve_bytes(scr, &at, sz[0]), *dP = (float *)carve_bytes(scr, &at, sz[1]);
    /* bf16: P, dS and dO rounded to bf16 in their own pieces; tf32: P over
     * S, dS over dP, dO as given */
    void *P = g_bf16 ? (void *)carve_bytes(scr, &at, sz[2]) : (void *)S;
    void *dS = g_bf16 ? (void *)carve_bytes(scr, &at, sz[3]) : (void *)dP;
    const void *dO = dout;
    if (g_bf16) {
        uint16_t *dOb = (uint16_t *)carve_bytes(scr, &at, sz[4]);
        to_bf16(dOb, dout, nqe);
        dO = dOb;
    }
    /* dK, dV per query head (B,T,H,hd), summed over each group at the end;
     * without GQA the outputs themselves */
    float *dKh = grp > 1 ? (float *)carve_bytes(scr, &at, sz[5]) : dk;
    float *dVh = grp > 1 ? (float *)carve_bytes(scr, &at, sz[6]) : dv;
    size_t rows = (size_t)B * T * H;
    k_attention_rowdot<<<(unsigned)((rows + 3) / 4), 128>>>(D, dO, g_bf16, out, g_bf16, T, H, hd,
                                                            rows);
    LAUNCHED("k_attention_rowdot");
    cuda_memset0(dKh, sizeof(float) * nqe);
    cuda_memset0(dVh, sizeof(float) * nqe);
    for (int t0 = 0; t0 < T; t0 += g.Tc) {
        int nq = min(g.Tc, T - t0), nk = t0 + nq, ld = (nk + 7) / 8 * 8;
        const char *qc = (const char *)q + t0 * ldq * es, *dOc = (const char *)dO + t0 * ldq * es;
        att_scores(S, q, k, B, T, H, KV, hd, t0, nq, nk, ld, g.per);
        /* dP^T (nk, nq) = Vc^T (nk, hd) dOc (hd, nq) */
        gemm_bat(CUBLAS_OP_T, CUBLAS_OP_N, nk, nq, hd, 1.0f, bat(v, T * ldk, hd, 1, 0, grp, es),
                 (int)ldk, bat(dOc, T * ldq, hd, 1, 0, 1, es), (int)ldq, 0.0f,
                 bat(dP, H * g.per, g.per, 1, 0, 1, 4), CUDA_R_32F, ld, B, H);
        k_chunk_dsoftmax<<<dim3(B * H, nq), ATT_ROW_THREADS>>>(P, dS, g_bf16, S, dP, lse, D, nk, ld,
                                                               t0, g.per, T, scale);
        LAUNCHED("k_chunk_dsoftmax");
        /* per query head: dVh, dKh (hd, nk) += dOc / Qc (hd, nq) (Pc / dSc (nk, nq))^T */
        gemm_bat(CUBLAS_OP_N, CUBLAS_OP_T, hd, nk, nq, 1.0f, bat(dOc, T * ldq, hd, 1, 0, 1, es),
                 (int)ldq, bat(P, H * g.per, g.per, 1, 0, 1, es), ld, 1.0f,
                 bat(dVh, T * ldq, hd, 1, 0, 1, 4), CUDA_R_32F, (int)ldq, B, H);
        gemm_bat(CUBLAS_OP_N, CUBLAS_OP_T, hd, nk, nq, 1.0f, bat(qc, T * ldq, hd, 1, 0, 1, es),
                 (int)ldq, bat(dS, H * g.per, g.per, 1, 0, 1, es), ld, 1.0f,
                 bat(dKh, T * ldq, hd, 1, 0, 1, 4), CUDA_R_32F, (int)ldq, B, H);
        /* dQ_c: column-major dQc (hd, nq) = Kc (hd, nk) dSc (nk, nq) */
        gemm_bat(CUBLAS_OP_N, CUBLAS_OP_N, hd, nq, nk, 1.0f, bat(k, T * ldk, hd, 1, 0, grp, es),
                 (int)ldk, bat(dS, H * g.per, g.per, 1, 0, 1, es), ld, 0.0f,
                 bat(dq + t0 * ldq, T * ldq, hd, 1, 0, 1, 4), CUDA_R_32F, (int)ldq, B, H);
    }
    if (grp > 1) {
        size_t nke = (size_t)B * T * ldk;
        k_group_sum<<<ew_blocks(nke), EW_THREADS>>>(dk, dv, dKh, dVh, nke, grp, hd);
        LAUNCHED("k_group_sum");
    }
}

/* saved = the row log-sum-exp (B,H,T). */
void cuda_attention_forward(void *out, float *saved, const void *q, const void *k,
                                   const void *v, int B, int T, int H, int KV, int hd)
{
    int aligned = att_aligned(out, q, k, v), mma = att_use_mma(hd) && aligned;
    att_mma_required(mma, hd, aligned);
    if (mma || att_use_blas(hd)) {
        check_heads(H, KV, hd);
        if (B <= 0 || T <= 0 || H <= 0)
            return;
        if (mma)
            mma_attention_forward(out, saved, q, k, v, B, T, H, KV, hd);
        else
            blas_attention_forward(out, saved, q, k, v, B, T, H, KV, hd);
        return;
    }
    /* the flash kernels: fp32 mode, HPT_CUDA_ATTENTION=flash, rows that are
     * not 16-byte multiples, or tensor-core operands that are not aligned */
    attention_fwd(out, saved, q, k, v, B, T, T, 0, H, KV, hd);
}

size_t cuda_attention_floats(int B, int T, int H) { return (size_t)B * H * T; }

template <int U>
static void flash_backward(float *dq, float *dk, float *dv, const float *D, const float *dout,
                           const float *lse, const void *q, const void *k, const void *v, int B,
                           int T, int H, int KV, int hd)
{
    float scale = 1.0f / sqrtf((float)hd);
    size_t smem = sizeof(float) * ((2 * ATT_ROWS + 2 * ATT_TILE) * (size_t)(hd + 1) + 2 * ATT_TILE);
    smem_opt_in(k_flash_dkdv<U>, smem);
    dim3 gk((unsigned)((T + ATT_ROWS - 1) / ATT_ROWS) * (unsigned)B, KV);
    k_flash_dkdv<U><<<gk, ATT_WARPS * 32, smem>>>(dk, dv, dout, lse, D, q, k, v, g_bf16, T, H, KV,
                                                  hd,
                                                  scale);
    LAUNCHED("k_flash_dkdv");
    smem = sizeof(float) * (2 * ATT_ROWS + 2 * ATT_TILE) * (size_t)(hd + 1);
    smem_opt_in(k_flash_dq<U>, smem);
    dim3 gq((unsigned)((T + ATT_ROWS - 1) / ATT_ROWS) * (unsigned)B, H);
    k_flash_dq<U><<<gq, ATT_WARPS * 32, smem>>>(dq, dout, lse, D, q, k, v, g_bf16, T, H, KV, hd,
                                                scale);
    LAUNCHED("k_flash_dq");
}

/* scratch holds D (B,H,T). */
void cuda_attention_backward(float *dq, float *dk, float *dv, float *scratch,
                                    const float *dout, const void *out, const float *saved,
                                    const void *q, const void *k, const void *v, int B, int T,
                                    int H, int KV, int hd)
{
    check_heads(H, KV, hd);
    if (B <= 0 || T <= 0 || H <= 0)
        return;
    int aligned = att_aligned(q, k, v, dout), mma = att_use_mma(hd) && aligned;
    att_mma_required(mma, hd, aligned);
    if (att_use_blas(hd)) {
        blas_attention_backward(dq, dk, dv, scratch, dout, out, saved, q, k, v, B, T, H, KV, hd);
        return;
    }
    size_t rows = (size_t)B * T * H;
    k_attention_rowdot<<<(unsigned)((rows + 3) / 4), 128>>>(scratch, dout, mma ? 2 : 0, out,
                                                            g_bf16, T, H, hd, rows);
    LAUNCHED("k_attention_rowdot");
    if (mma) {
        int ns = hpt_cuda_mma_kv_split(B, T, H, KV);
        if (ns == 1) {
            mma_attention_backward(dq, dk, dv, scratch, dout, saved, q, k, v, B, T, H, KV, hd, 1);
            return;
        }
        /* the group's query heads split over ns block rows: partial dK, dV
         * (B,T,KV ns,hd) summed into dk, dv */
        size_t nke = (size_t)B * T * KV * hd, at = 0;
        char *scr = att_scratch(mma_backward_bytes(B, T, H, KV, hd));
        float *dKp = (float *)carve_bytes(scr, &at, 4 * nke * ns);
        float *dVp = (float *)carve_bytes(scr, &at, 4 * nke * ns);
        mma_attention_backward(dq, dKp, dVp, scratch, dout, saved, q, k, v, B, T, H, KV, hd, ns);
        k_group_sum<<<ew_blocks(nke), EW_THREADS>>>(dk, dv, dKp, dVp, nke, ns, hd);
        LAUNCHED("k_group_sum");
        return;
    }
    switch ((hd + 31) / 32) {
    case 1: flash_backward<1>(dq, dk, dv, scratch, dout, saved, q, k, v, B, T, H, KV, hd); break;
    case 2: flash_backward<2>(dq, dk, dv, scratch, dout, saved, q, k, v, B, T, H, KV, hd); break;
    case 3: case 4:
        flash_backward<4>(dq, dk, dv, scratch, dout, saved, q, k, v, B, T, H, KV, hd);
        break;
    default: flash_backward<8>(dq, dk, dv, scratch, dout, saved, q, k, v, B, T, H, KV, hd); break;
    }
}

/* n new queries at positions pos0 .. pos0+n-1 against the cache (one
 * sequence): the forward kernel with B = 1, Tk = pos0 + n, no lse. */
void cuda_attention_cached(void *out, const void *q, const void *kc, const void *vc,
                                  int n, int pos0, int H, int KV, int hd)
{
    attention_fwd(out, NULL, q, kc, vc, 1, n, pos0 + n, pos0, H, KV, hd);
}

/* -------------------------------------------- ring attention blocks */

/* Context parallelism's block ops (lib/backend.h, hpt_attn_block; Liu et
 * al. 2023 "Ring Attention", the causal rule on global positions as
 * attention_cpu.c's block ops): one warp per row, keys (forward, dQ) or
 * queries (dK/dV) streamed from global memory one at a time, each score a
 * warp reduction over hd; lane l holds elements l + 32u (u < 8, hd <= 256)
 * of the row's accumulators. A straightforward, correct path (checked
 * against the CPU backend in tests/unit/test_backend_cuda.c, group
 * "ring", on the emulation; never run on a GPU), not a tuned one: it reads
 * each key row once per query row. */
#define RB_U (ATT_MAX_HD / 32)

/* The query row a warp of the forward or dQ kernel owns (row r of the
 * B x H x nq rows of block g, warp-uniform): q/out element offset qo, its
 * kv head's first key element kb, the lse/D index li, and lim, the block's
 * keys [0, lim) it sees. */
typedef struct {
    size_t qo, kb, li;
    int lim;
} rb_qrow;

__device__ static inline rb_qrow rb_query_row(size_t r, const hpt_attn_block &g, int H, int KV,
                                              int hd)
{
    const int i = (int)(r % g.nq), h = (int)(r / g.nq % H), b = (int)(r / g.nq / H);
    const size_t ldq = (size_t)H * hd, ldk = (size_t)KV * hd;
    rb_qrow q;
    q.qo = ((size_t)b * g.Tq + g.q_off + i) * ldq + (size_t)h * hd;
    q.kb = ((size_t)b * g.Tk + g.k_off) * ldk + (size_t)(h / (H / KV)) * hd;
    q.li = ((size_t)b * H + h) * g.Tq + g.q_off + i;
    q.lim = min(g.nk, g.q_pos0 + i - g.k_pos0 + 1);
    return q;
}

/* Forward of one block for rows of q: grid ceil(B H nq / ATT_WARPS),
 * ATT_WARPS warps per block. merge as attention_block_forward's. */
__global__ static void __launch_bounds__(ATT_WARPS * 32)
    k_block_forward(void *out, float *lse, const void *q, const void *k, const void *v, int bf,
                    hpt_attn_block g, int B, int H, int KV, int hd, float scale, int merge)
{
    const int lane = threadIdx.x & 31;
    const size_t row = (size_t)blockIdx.x * ATT_WARPS + (threadIdx.x >> 5);
    if (row >= (size_t)B * H * g.nq) /* warp-uniform */
        return;
    const rb_qrow qr = rb_query_row(row, g, H, KV, hd);
    const size_t ldk = (size_t)KV * hd, qo = qr.qo, kb = qr.kb;
    const int lim = qr.lim; /* keys [0, lim) visible */
    float qv[RB_U], acc[RB_U];
#pragma unroll
    for (int u = 0; u < RB_U; u++) {
        int e = lane + 32 * u;
        qv[u] = e < hd ? ld_act(q, qo + e, bf) : 0.0f;
        acc[u] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int k0 = 0; k0 < lim; k0 += 32) {
        int n = min(32, lim - k0);
        float sc = -INFINITY;
        for (int j = 0; j < n; j++) {
            float d = 0.0f;
#pragma unroll
            for (int u = 0; u < RB_U; u++) {
                int e = lane + 32 * u;
                if (e < hd)
                    d += qv[u] * ld_act(k, kb + (size_t)(k0 + j) * ldk + e, bf);
            }
            d = warp_sum(d);
            if (lane == j)
                sc = d * scale;
        }
        float mnew = fmaxf(m, warp_max(sc)); /* finite: n >= 1 */
        float p = lane < n ? expf(sc - mnew) : 0.0f;
        float alpha = expf(m - mnew);
        l = l * alpha + warp_sum(p);
        m = mnew;
#pragma unroll
        for (int u = 0; u < RB_U; u++)
            acc[u] *= alpha;
        for (int j = 0; j < n; j++) {
            float pj = __shfl_sync(FULL_MASK, p, j);
#pragma unroll
            for (int u = 0; u < RB_U; u++) {
                int e = lane + 32 * u;
                if (e < hd)
                    acc[u] += pj * ld_act(v, kb + (size_t)(k0 + j) * ldk + e, bf);
            }
        }
    }
    const size_t li = qr.li;
    const float L0 = lse[li]; /* read by every lane before lane 0 writes */
    __syncwarp();
    /* l = 0 only for a row without a key here (else l >= 1) */
    const float lb = l != 0.0f ? m + logf(l) : -INFINITY, inv = 1.0f / l;
    if (!merge || L0 == -INFINITY) {
#pragma unroll
        for (int u = 0; u < RB_U; u++) {
            int e = lane + 32 * u;
            if (e < hd)
                st_act(out, qo + e, l != 0.0f ? acc[u] * inv : 0.0f, bf);
        }
        if (lane == 0)
            lse[li] = lb;
    } else if (lb != -INFINITY) { /* L = logaddexp(L0, lb) */
        float mx = fmaxf(L0, lb), L = mx + log1pf(expf(fminf(L0, lb) - mx));
        float a = expf(L0 - L), c = expf(lb - L) * inv;
#pragma unroll
        for (int u = 0; u < RB_U; u++) {
            int e = lane + 32 * u;
            if (e < hd)
                st_act(out, qo + e, a * ld_act(out, qo + e, bf) + c * acc[u], bf);
        }
        if (lane == 0)
            lse[li] = L;
    }
}

/* dQ of one block: a warp per query row; dq += scale sum_j dS_j k_j with
 * P = exp(scale q.k - lse), dS = P (dout.v - D) (Dao 2023, algorithm 2). */
__global__ static void __launch_bounds__(ATT_WARPS * 32)
    k_block_dq(float *dq, const float *D, const float *dout, const float *lse, const void *q,
               const void *k, const void *v, int bf, hpt_attn_block g, int B, int H, int KV,
               int hd, float scale)
{
    const int lane = threadIdx.x & 31;
    const size_t row = (size_t)blockIdx.x * ATT_WARPS + (threadIdx.x >> 5);
    if (row >= (size_t)B * H * g.nq) /* warp-uniform */
        return;
    const rb_qrow qr = rb_query_row(row, g, H, KV, hd);
    const size_t ldk = (size_t)KV * hd, qo = qr.qo, kb = qr.kb, li = qr.li;
    const int lim = qr.lim;
    const float L = lse[li], Di = D[li];
    float qv[RB_U], dov[RB_U], acc[RB_U];
#pragma unroll
    for (int u = 0; u < RB_U; u++) {
        int e = lane + 32 * u;
        qv[u] = e < hd ? ld_act(q, qo + e, bf) : 0.0f;
        dov[u] = e < hd ? dout[qo + e] : 0.0f;
        acc[u] = 0.0f;
    }
    for (int j = 0; j < lim; j++) {
        const size_t ko = kb + (size_t)j * ldk;
        float s = 0.0f, dp = 0.0f;
#pragma unroll
        for (int u = 0; u < RB_U; u++) {
            int e = lane + 32 * u;
            if (e < hd) {
                s += qv[u] * ld_act(k, ko + e, bf);
                dp += dov[u] * ld_act(v, ko + e, bf);
            }
        }
        float p = expf(warp_sum(s) * scale - L), ds = p * (warp_sum(dp) - Di) * scale;
#pragma unroll
        for (int u = 0; u < RB_U; u++) {
            int e = lane + 32 * u;
            if (e < hd)
                acc[u] += ds * ld_act(k, ko + e, bf);
        }
    }
#pragma unroll
    for (int u = 0; u < RB_U; u++) {
        int e = lane + 32 * u;
        if (e < hd)
            dq[qo + e] += acc[u];
    }
}

/* dK, dV of one block: a warp per (b, kv head, key row), over the query
 * heads of its group and the query rows that see the key; dv += P dout,
 * dk += scale dS q. */
__global__ static void __launch_bounds__(ATT_WARPS * 32)
    k_block_dkdv(float *dk, float *dv, const float *D, const float *dout, const float *lse,
                 const void *q, const void *k, const void *v, int bf, hpt_attn_block g, int B,
                 int H, int KV, int hd, float scale)
{
    const int lane = threadIdx.x & 31;
    const size_t row = (size_t)blockIdx.x * ATT_WARPS + (threadIdx.x >> 5);
    if (row >= (size_t)B * KV * g.nk)
        return;
    const int s = (int)(row % g.nk), kvh = (int)(row / g.nk % KV), b = (int)(row / g.nk / KV);
    const int G = H / KV;
    const size_t ldq = (size_t)H * hd, ldk = (size_t)KV * hd;
    const size_t ko = ((size_t)b * g.Tk + g.k_off + s) * ldk + (size_t)kvh * hd;
    const int i0 = max(0, g.k_pos0 + s - g.q_pos0); /* first query row that sees it */
    float kv[RB_U], vv[RB_U], dka[RB_U], dva[RB_U];
#pragma unroll
    for (int u = 0; u < RB_U; u++) {
        int e = lane + 32 * u;
        kv[u] = e < hd ? ld_act(k, ko + e, bf) : 0.0f;
        vv[u] = e < hd ? ld_act(v, ko + e, bf) : 0.0f;
        dka[u] = dva[u] = 0.0f;
    }
    for (int gh = 0; gh < G; gh++) {
        const int h = kvh * G + gh;
        for (int i = i0; i < g.nq; i++) {
            const size_t qo = ((size_t)b * g.Tq + g.q_off + i) * ldq + (size_t)h * hd;
            const size_t li = ((size_t)b * H + h) * g.Tq + g.q_off + i;
            float sc = 0.0f, dp = 0.0f;
#pragma unroll
            for (int u = 0; u < RB_U; u++) {
                int e = lane + 32 * u;
                if (e < hd) {
                    sc += kv[u] * ld_act(q, qo + e, bf);
                    dp += vv[u] * dout[qo + e];
                }
            }
            float p = expf(warp_sum(sc) * scale - lse[li]);
            float ds = p * (warp_sum(dp) - D[li]) * scale;
#pragma unroll
            for (int u = 0; u < RB_U; u++) {
                int e = lane + 32 * u;
                if (e < hd) {
                    dva[u] += p * dout[qo + e];
                    dka[u] += ds * ld_act(q, qo + e, bf);
                }
            }
        }
    }
#pragma unroll
    for (int u = 0; u < RB_U; u++) {
        int e = lane + 32 * u;
        if (e < hd) {
            dk[ko + e] += dka[u];
            dv[ko + e] += dva[u];
        }
    }
}

static unsigned warp_rows_blocks(size_t rows)
{
    return (unsigned)((rows + ATT_WARPS - 1) / ATT_WARPS);
}

void cuda_attention_block_forward(void *out, float *lse, const void *q, const void *k,
                                  const void *v, const hpt_attn_block *blk, int B, int H, int KV,
                                  int hd, int merge)
{
    check_heads(H, KV, hd);
    size_t rows = (size_t)B * H * blk->nq;
    if (!rows || blk->nk <= 0)
        return;
    k_block_forward<<<warp_rows_blocks(rows), ATT_WARPS * 32>>>(
        out, lse, q, k, v, g_bf16, *blk, B, H, KV, hd, 1.0f / sqrtf((float)hd), merge);
    LAUNCHED("k_block_forward");
}

void cuda_attention_block_backward(float *dq, float *dk, float *dv, const float *D,
                                   const float *dout, const float *lse, const void *q,
                                   const void *k, const void *v, const hpt_attn_block *blk, int B,
                                   int H, int KV, int hd)
{
    check_heads(H, KV, hd);
    if (blk->nq <= 0 || blk->nk <= 0 || B <= 0)
        return;
    float scale = 1.0f / sqrtf((float)hd);
    k_block_dq<<<warp_rows_blocks((size_t)B * H * blk->nq), ATT_WARPS * 32>>>(
        dq, D, dout, lse, q, k, v, g_bf16, *blk, B, H, KV, hd, scale);
    LAUNCHED("k_block_dq");
    k_block_dkdv<<<warp_rows_blocks((size_t)B * KV * blk->nk), ATT_WARPS * 32>>>(
        dk, dv, D, dout, lse, q, k, v, g_bf16, *blk, B, H, KV, hd, scale);
    LAUNCHED("k_block_dkdv");
}

void cuda_attention_rowdot(float *D, const float *dout, const void *out, int B, int T, int H,
                           int hd)
{
    size_t rows = (size_t)B * T * H;
    if (!rows)
        return;
    k_attention_rowdot<<<(unsigned)((rows + 3) / 4), 128>>>(D, dout, 0, out, g_bf16, T, H, hd,
                                                             rows);
    LAUNCHED("k_attention_rowdot");
}

/* rope with the position of every row given (context parallelism's zigzag
 * chunks): x (B,T,nh,hd), row t of each sequence at position pos[t]; the
 * angles from the same table as cuda_rope (bitwise its rotation of that
 * position). One thread per pair. */
__global__ static void k_rope_pos(void *x, int bf, const float *cs, const int *pos, int T, int nh,
                                  int hd, int inverse, size_t pairs)
{
    int half = hd / 2;
    GRID_STRIDE(p, pairs)
    {
        int i = (int)(p % half);
        size_t rest = p / half; /* (b * T + t) * nh + h */
        int t = pos[(rest / nh) % T];
        float c = cs[((size_t)t * half + i) * 2], s = cs[((size_t)t * half + i) * 2 + 1];
        if (inverse)
            s = -s;
        size_t o = rest * hd;
        float x1 = ld_act(x, o + i, bf), x2 = ld_act(x, o + i + half, bf);
        st_act(x, o + i, x1 * c - x2 * s, bf);
        st_act(x, o + i + half, x2 * c + x1 * s, bf);
    }
}

void cuda_rope_pos(void *x, hpt_dtype dtype, int B, int T, int nh, int hd, float theta,
                   int inverse, const int *pos)
{
    /* the positions on the device, uploaded when they change (a rank's
     * chunks are the same every layer and step: once) */
    static int *dpos, *hpos, cap;
    static int n;
    size_t pairs = (size_t)B * T * nh * (hd / 2);
    if (!pairs)
        return;
    if (T > cap) {
        cuda_free(dpos);
        free(hpos);
        dpos = (int *)cuda_alloc(sizeof(int) * (size_t)T);
        hpos = (int *)malloc(sizeof(int) * (size_t)T);
        if (!dpos || !hpos)
            HPT_FATAL("cuda rope_pos: out of memory for %d positions", T);
        cap = T;
        n = 0;
    }
    int maxp = 0;
    for (int t = 0; t < T; t++)
        maxp = pos[t] > maxp ? pos[t] : maxp;
    if (n != T || memcmp(hpos, pos, sizeof(int) * (size_t)T)) {
        cuda_upload(dpos, pos, sizeof(int) * (size_t)T);
        memcpy(hpos, pos, sizeof(int) * (size_t)T);
        n = T;
    }
    const float *cs = rope_table_try(maxp + 1, hd, theta);
    if (!cs)
        hpt_fatal(__FILE__, __LINE__, HPT_ERR_USAGE, "RoPE table: %s", hpt_error_msg());
    k_rope_pos<<<ew_blocks(pairs), EW_THREADS>>>(x, dtype == HPT_DTYPE_BF16, cs, dpos, T, nh, hd,
                                                 inverse, pairs);
    LAUNCHED("k_rope_pos");
}

} // namespace hpt_cuda
