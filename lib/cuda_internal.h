/* cuda_internal.h — what the CUDA backend's three files share:
 * lib/backend_cuda.cu (the table, device state, memory, scratch, cuBLAS
 * glue and the products), lib/attention_cuda.cu (attention) and
 * lib/kernels_cuda.cu (embedding, RMSNorm, RoPE, SwiGLU, element-wise,
 * sums of squares, cross-entropy, AdamW) — as lib/backend_cpu.c,
 * attention_cpu.c and kernels_cpu.c on the CPU side. Launch geometry, the
 * one templated block reduction, the bf16 operand helpers (device code
 * lives here: the files are compiled without relocatable device code), the
 * backend state and the functions one file calls in another. Internal: for
 * those .cu files only (nvcc); everything is in namespace hpt_cuda. The
 * slots' contracts (shapes, units) are backend.h's. */
#ifndef HPT_CUDA_INTERNAL_H
#define HPT_CUDA_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "cuda_util.h"

#define FULL_MASK 0xffffffffu
/* After a launch: checked, and with HPT_CUDA_SYNC=1 synchronised (counted
 * in g_host.sync). */
#define LAUNCHED(name)                                                                         \
    (hpt_cuda::g_host.sync += (unsigned)hpt_cuda::g_sync,                                      \
     hpt_cuda_launched((name), hpt_cuda::g_sync, __FILE__, __LINE__))

namespace hpt_cuda {

/* ------------------------------------------------ state (backend_cuda.cu) */

extern int g_device;                   /* CUDA device of this rank             */
extern int g_sync;                     /* HPT_CUDA_SYNC=1: sync after launches */
extern cublasHandle_t g_blas;
extern cublasComputeType_t g_compute;  /* CUBLAS_COMPUTE_32F or _FAST_TF32     */
extern int g_bf16;                     /* --precision bf16                     */
/* Host synchronisations since init (backend.h hpt_host_syncs; the
 * host_syncs slot): every call below that makes the host wait adds one. */
extern hpt_host_syncs g_host;

/* cudaMemcpy device -> host of `bytes`, counted in g_host.d2h: the one
 * way a result reaches the host (download, losses, sums). */
void memcpy_d2h(void *dst, const void *src, size_t bytes);

/* ------------------------------------------------------------- cuBLAS */

/* cublasGemmEx with a cublasComputeType_t (C++ also sees an inline
 * overload taking a cudaDataType). */
typedef cublasStatus_t (*gemm_ex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                     int, int, const void *, const void *, cudaDataType, int,
                                     const void *, cudaDataType, int, const void *, void *,
                                     cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

/* cublasGemmBatchedEx: arrays of device pointers to A_i, B_i, C_i. */
typedef cublasStatus_t (*gemm_batched_ex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                             int, int, int, const void *, const void *const *,
                                             cudaDataType, int, const void *const *, cudaDataType,
                                             int, const void *, void *const *, cudaDataType, int,
                                             int, cublasComputeType_t, cublasGemmAlgo_t);

/* The cuBLAS entry points used, resolved by load_cublas (backend_cuda.cu). */
struct cublas_api {
    decltype(&cublasCreate_v2) create;
    decltype(&cublasSetMathMode) set_math_mode;
    gemm_ex_fn gemm_ex;
    gemm_batched_ex_fn gemm_batched_ex;
    decltype(&cublasGetStatusString) status_string;
};
extern cublas_api g_cublas;

/* cuBLAS's message for a status (HPT_CUBLAS in cuda_util.h calls it). */
const char *hpt_cublas_error(cublasStatus_t s);

/* ------------------------------------------------- launch geometry */

#define EW_THREADS 256 /* element-wise kernels         */
#define ROW_THREADS 256 /* one block per row kernels    */

/* Blocks for a grid-stride loop over n > 0 elements. */
static inline unsigned ew_blocks(size_t n)
{
    size_t b = (n + EW_THREADS - 1) / EW_THREADS;
    return b > (1u << 20) ? (1u << 20) : (unsigned)b;
}

#define GRID_STRIDE(i, n)                                                                      \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                     \
         i += (size_t)gridDim.x * blockDim.x)

/* ------------------------------------------------ block reductions */

/* The one reduction of the backend: over the 32 lanes of a warp
 * (warp_reduce) and over a block (block_reduce: blockDim.x a multiple of
 * 32, at most 1024; every thread of the block must reach it, and every one
 * gets the result). `op` is sum_op or max_op; `identity` its neutral
 * element (0 or -INFINITY), which fills the slots of absent warps. The
 * order of the operations is fixed for a given blockDim, so results are
 * deterministic. Each (T, Op) instantiation has its own shared slots; the
 * leading __syncthreads lets a block call it again at once (the previous
 * call's readers are done with them). */
struct sum_op {
    template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct max_op {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T, typename Op> __device__ static inline T warp_reduce(T v, Op op)
{
    for (int o = 16; o > 0; o >>= 1)
        v = op(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

template <typename T, typename Op> __device__ static inline T block_reduce(T v, Op op, T identity)
{
    __shared__ T part[32];
    __shared__ T res;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_reduce(v, op);
    __syncthreads(); /* an earlier call's readers are done with part/res */
    if (lane == 0)
        part[w] = v;
    __syncthreads();
    if (w == 0) {
        v = warp_reduce(lane < nw ? part[lane] : identity, op);
        if (lane == 0)
            res = v;
    }
    __syncthreads();
    return res;
}

__device__ static inline float warp_sum(float v) { return warp_reduce(v, sum_op()); }
__device__ static inline float warp_max(float v) { return warp_reduce(v, max_op()); }
__device__ static inline float block_sum(float v) { return block_reduce(v, sum_op(), 0.0f); }
__device__ static inline float block_max(float v) { return block_reduce(v, max_op(), -INFINITY); }
__device__ static inline double block_sum_d(double v) { return block_reduce(v, sum_op(), 0.0); }

/* Dynamic shared memory of `bytes` for `kernel` (above 48 KiB needs an
 * opt-in; sm_80 allows 163 KiB, sm_90 227 KiB): attention_cuda.cu's flash
 * kernels and attention_mma.cu's. */
template <typename K> static inline void smem_opt_in(K kernel, size_t bytes)
{
    if (bytes > 48 * 1024)
        HPT_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)bytes));
}

/* ------------------------------------------------ 16-byte vectors */

/* The element-wise kernels move VEC elements per 16-byte access where the
 * pointers are 16-byte aligned and the length allows (8 bf16 = one uint4,
 * 8 floats = two float4), else one at a time in the same order with the
 * same arithmetic: the two paths give the same bits. */
#define VEC 8

/* 1 when p is 16-byte aligned (NULL counts as aligned: an absent operand). */
static inline int al16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* v[0..8) = p[0..8), p 16-byte aligned. */
__device__ static inline void ld8f(const float *p, float v[VEC])
{
    float4 a = ((const float4 *)p)[0], b = ((const float4 *)p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

/* p[0..8) = v[0..8), p 16-byte aligned. */
__device__ static inline void st8f(float *p, const float v[VEC])
{
    float4 a, b;
    a.x = v[0], a.y = v[1], a.z = v[2], a.w = v[3], b.x = v[4], b.y = v[5], b.z = v[6], b.w = v[7];
    ((float4 *)p)[0] = a, ((float4 *)p)[1] = b;
}

/* ------------------------------------------------ bf16 operands */

/* float32 -> bfloat16 bits, round to nearest even; a NaN stays a quiet NaN
 * with its sign. Bit for bit lib/bf16.h's hpt_bf16_from_f32 (the host
 * tests rely on it). */
__device__ static inline uint16_t bf16_bits(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Two floats as two bf16 (bf16_bits each) in one 32-bit word, lo in the
 * lower half: a bf16 pair as memory and the mma operands hold it. */
__device__ static inline uint32_t bf16x2(float lo, float hi)
{
    return (uint32_t)bf16_bits(lo) | (uint32_t)bf16_bits(hi) << 16;
}

/* bfloat16 bits -> float32, exact. */
__device__ static inline float bf16_float(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

/* Element i of an activation stored as bf16 (bf != 0) or float, in fp32. */
__device__ static inline float ld_act(const void *p, size_t i, int bf)
{
    return bf ? bf16_float(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

/* Store v as element i of an activation in bf16 (rounded to nearest even,
 * as bf16_bits) or float. */
__device__ static inline void st_act(void *p, size_t i, float v, int bf)
{
    if (bf)
        ((uint16_t *)p)[i] = bf16_bits(v);
    else
        ((float *)p)[i] = v;
}

/* Elements i .. i+7 of an activation (bf16 when bf, else float) in fp32:
 * one 16-byte load (bf16) or two; element i + 8 k 16-byte aligned. */
__device__ static inline void ld8_act(const void *p, size_t i, float v[VEC], int bf)
{
    if (!bf) {
        ld8f((const float *)p + i, v);
        return;
    }
    uint4 u = *(const uint4 *)((const uint16_t *)p + i);
    uint32_t w[4] = {u.x, u.y, u.z, u.w}; /* little-endian: element 2j in the low half */
    for (int j = 0; j < 4; j++)
        v[2 * j] = bf16_float((uint16_t)(w[j] & 0xffffu)), v[2 * j + 1] = bf16_float((uint16_t)(w[j] >> 16));
}

/* Store v[0..8) as elements i .. i+7 of an activation, as st_act does
 * one by one (bf16 rounded to nearest even). */
__device__ static inline void st8_act(void *p, size_t i, const float v[VEC], int bf)
{
    if (!bf) {
        st8f((float *)p + i, v);
        return;
    }
    uint32_t w[4];
    for (int j = 0; j < 4; j++)
        w[j] = bf16x2(v[2 * j], v[2 * j + 1]);
    uint4 u;
    u.x = w[0], u.y = w[1], u.z = w[2], u.w = w[3];
    *(uint4 *)((uint16_t *)p + i) = u;
}

/* out (n) bf16 := in (n) float32 (backend_cuda.cu). */
void to_bf16(uint16_t *out, const float *in, size_t n);

/* ------------------------------------------- memory (backend_cuda.cu) */

/* Device memory counted in mem_peak: NULL with the bytes asked for and
 * free in hpt_error_msg() when short; the table's alloc/free/memset0/upload. */
void *cuda_alloc(size_t bytes);
void cuda_free(void *p);
void cuda_memset0(void *dst, size_t bytes);
void cuda_upload(void *dst, const void *src, size_t bytes);
/* A backend write into the allocation holding dst (all: every one) makes
 * its bf16 working copy stale. */
void work_mark_dirty(const void *dst);
void work_mark_all_dirty(void);

/* A device scratch buffer that grows on demand and is kept: the ops'
 * (below) and cuda_reserve's, which sizes them all at start-up so that no
 * step allocates or frees device memory. */
typedef struct {
    void *p;
    size_t cap; /* bytes */
} scratch;

/* Grow s to at least `bytes`: 0, or -1 with the reason (the bytes asked
 * for and free) in hpt_error_msg(), s then empty. */
int scratch_grow(scratch *s, size_t bytes);
/* scratch_grow for an op: a failure mid-step aborts (cuda_reserve makes it
 * a start-up error instead). */
void *scratch_need(scratch *s, size_t bytes, const char *what);
extern scratch g_dscratch; /* doubles: reductions, losses, small tables */
/* Bytes of a dscratch of n doubles (at least 4096); the scratch itself. */
size_t dscratch_bytes(size_t n);
double *dscratch(size_t n);

/* ------------------------------------------------- attention_cuda.cu */

void cuda_attention_forward(void *out, float *saved, const void *q, const void *k, const void *v,
    int B, int T, int H, int KV, int hd);
void cuda_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
    const void *out, const float *saved, const void *q, const void *k, const void *v, int B, int T,
    int H, int KV, int hd);
size_t cuda_attention_floats(int B, int T, int H);
void cuda_attention_cached(void *out, const void *q, const void *kc, const void *vc, int n,
    int pos0, int H, int KV, int hd);
/* Context parallelism's ring attention blocks and rope_pos (lib/backend.h). */
void cuda_attention_block_forward(void *out, float *lse, const void *q, const void *k,
    const void *v, const hpt_attn_block *blk, int B, int H, int KV, int hd, int merge);
void cuda_attention_block_backward(float *dq, float *dk, float *dv, const float *D,
    const float *dout, const float *lse, const void *q, const void *k, const void *v,
    const hpt_attn_block *blk, int B, int H, int KV, int hd);
void cuda_attention_rowdot(float *D, const float *dout, const void *out, int B, int T, int H,
    int hd);
void cuda_rope_pos(void *x, hpt_dtype dtype, int B, int T, int nh, int hd, float theta,
    int inverse, const int *pos);
int att_use_blas(int hd);
int att_use_mma(int hd);
/* attention_mma.cu: the tensor-core kernels (bf16 q, k, v, out; shapes as
 * cuda_attention_forward/backward's; D (B,H,T) computed by the caller) and
 * the head dims they take. */
int mma_kernels_built(void);
void mma_attention_forward(void *out, float *lse, const void *q, const void *k, const void *v,
    int B, int T, int H, int KV, int hd);
/* dk, dv: (B,T,KV nsplit,hd) partial sums over nsplit parts of each GQA
 * group (hpt_cuda_mma_kv_split, backend.h), the gradients themselves when nsplit is 1. */
void mma_attention_backward(float *dq, float *dk, float *dv, const float *D, const float *dout,
    const float *lse, const void *q, const void *k, const void *v, int B, int T, int H, int KV,
    int hd, int nsplit);
size_t mma_backward_bytes(int B, int T, int H, int KV, int hd);
size_t att_backward_bytes(int B, int T, int H, int KV, int hd);
extern scratch g_att_scratch, g_att_ptrs; /* the cuBLAS path's chunk scratch, pointer arrays */

/* --------------------------------------------------- kernels_cuda.cu */

void cuda_embedding_forward(float *out, const int32_t *tokens, const float *wte, int N, int C,
    int v0, int Vl);
void cuda_embedding_backward(float *dwte, const float *dout, const int32_t *tokens, int N, int C,
    int v0, int Vl);
void cuda_rmsnorm_forward(void *out, float *rstd, const float *in, const float *w, int N, int C,
    float eps);
void cuda_rmsnorm_backward(float *din, float *dw, const float *dout, const float *in,
    const float *w, const float *rstd, int N, int C);
void cuda_add_rmsnorm_forward(float *out, void *norm_out, float *rstd, const float *x,
    const float *delta, const float *w, int N, int C, float eps);
void cuda_rope(void *x, hpt_dtype dtype, int B, int T, int nh, int hd, float theta, int inverse);
void cuda_rope_qk(void *q, void *k, hpt_dtype dtype, int B, int T, int H, int KV, int hd,
    float theta, int inverse);
void cuda_rope_at(void *x, int n, int nh, int hd, float theta, int pos0);
void cuda_swiglu_forward(void *out, const void *gate, const void *up, size_t n);
void cuda_swiglu_backward(float *dgate, float *dup, const float *dout, const void *gate,
    const void *up, size_t n);
void cuda_swiglu_backward_act(void *dgate, void *dup, const float *dout, const void *gate,
    const void *up, size_t n);
void cuda_add(float *out, const float *a, const float *b, size_t n);
void cuda_scale(float *x, float s, size_t n);
double cuda_sumsq(const float *x, size_t n);
double cuda_sumsq_list(double acc, const float *const *x, const size_t *n, int k);
void cuda_sumsq_list_async(double *out, const float *const *x, const size_t *n, int k);
/* Grow the embedding backward's scratch for N positions and a shard of V
 * rows (cuda_reserve): 0, or -1 with the reason in hpt_error_msg(). */
int embed_scratch_reserve(size_t n, size_t v);
double cuda_crossentropy_fused(float *logits, const int32_t *targets, int N, int V,
    float grad_scale);
double cuda_crossentropy_loss(const float *logits, const int32_t *targets, int N, int V);
void cuda_vocab_max(float *mx, const float *logits, int N, int Vl, int nvalid);
void cuda_vocab_sumexp(float *sumexp, float *tlogit, const float *logits, const int32_t *targets,
    const float *mx, int N, int Vl, int nvalid, int v0);
double cuda_vocab_ce_finish(float *logits, const int32_t *targets, const float *mx,
    const float *sumexp, const float *tlogit, int N, int Vl, int nvalid, int v0, float grad_scale);
void cuda_adamw(float *p, const float *grad, float *m, float *v, size_t n, float lr, float b1,
    float b2, float eps, float wd, float grad_scale, int t);
int rmsnorm_dw_slices(int N);
const float *rope_table_try(int npos, int hd, float theta);
#define SUMSQ_BLOCKS 1024 /* partial sums per range, at most */
#define SUMSQ_LIST 64     /* ranges per sumsq_list launch    */

} // namespace hpt_cuda

#endif
