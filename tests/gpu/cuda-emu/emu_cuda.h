/* emu_cuda.h — a CPU emulation of the subset of the CUDA runtime and cuBLAS
 * that lib/backend_cuda.cu uses, to run its kernels and host code on a
 * machine without a GPU (tests/gpu/cuda-emu/run.sh, `make check-cuda-emu`).
 *
 * Blocks run one at a time; each CUDA thread is a std::thread; __syncthreads
 * is a std::barrier over the block, warp shuffles exchange through a
 * per-warp slot array between two barriers of the warp (a shuffle that not
 * all 32 lanes reach deadlocks, as it would be undefined on a GPU); dynamic
 * shared memory starts as NaN, so a read of an unwritten element shows up;
 * cudaMalloc memory starts as NaN bytes (0xff). cuBLAS GEMM is a plain
 * column-major triple loop with cuBLAS's argument conventions (leading
 * dimensions checked): fp32 operands accumulate in double; bf16 operands
 * (CUDA_R_16BF, uint16 bits widened exactly as lib/bf16.h) accumulate in
 * float with an fp32 C or a bf16 C (alpha*acc + beta*C in fp32, rounded to
 * nearest even), as cublasGemmEx with CUBLAS_COMPUTE_32F (the
 * summation order of the real library differs; other type combinations
 * abort). What it cannot show: races between
 * threads that a real GPU would expose (atomics are a mutex), timing,
 * shared-memory limits, register pressure, device math ulps. */
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>
#include <algorithm>
#include <type_traits>
#include <cstdio>
#include "bf16.h"
using std::min;
using std::max;
struct dim3 { unsigned x, y, z; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
/* the 16-byte vector types of the element-wise kernels' loads and stores */
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
inline thread_local int emu_tid;
inline float *emu_smem;
inline std::barrier<> *emu_bar;
struct emu_warp { uint64_t slot[32]; std::barrier<> *bar; };
inline std::vector<emu_warp> emu_warps;
#define __global__
#define __device__
#define __host__
#define __launch_bounds__(x)
#define __shared__ static
#define __syncthreads() emu_bar->arrive_and_wait()
#define __syncwarp() emu_warps[emu_tid >> 5].bar->arrive_and_wait()
template <class T> T __shfl_sync(unsigned, T v, int src)
{
    emu_warp &w = emu_warps[emu_tid >> 5];
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof v);
    w.slot[emu_tid & 31] = bits;
    w.bar->arrive_and_wait();
    T r;
    bits = w.slot[src & 31];
    memcpy(&r, &bits, sizeof r);
    w.bar->arrive_and_wait();
    return r;
}
template <class T> T __shfl_xor_sync(unsigned m, T v, int x) { return __shfl_sync(m, v, (emu_tid & 31) ^ x); }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, sizeof u); return u; }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, sizeof f); return f; }
inline std::mutex emu_atomic;
inline float atomicAdd(float *p, float v) { std::lock_guard<std::mutex> g(emu_atomic); float o = *p; *p = o + v; return o; }
inline int atomicAdd(int *p, int v) { std::lock_guard<std::mutex> g(emu_atomic); int o = *p; *p = o + v; return o; }
/* Run f as kernel grid g x block b: nt = |b| threads, reused for every block
 * (blocks one after another, separated by block barriers). */
inline void emu_run(dim3 g, dim3 b, size_t smem, const std::function<void()> &f)
{
    gridDim = g; blockDim = b;
    int nt = b.x * b.y * b.z;
    if (nt % 32 || nt > 1024 || !g.x || !g.y || !g.z || g.y > 65535 || g.z > 65535) { fprintf(stderr, "emu: bad launch %u %u %u x %d\n", g.x, g.y, g.z, nt); abort(); }
    std::vector<float> sm(smem / 4 + 4);
    emu_smem = sm.data();
    std::barrier<> bar(nt);
    emu_bar = &bar;
    emu_warps.assign(nt / 32, emu_warp{});
    for (auto &w : emu_warps) w.bar = new std::barrier<>(32);
    size_t nb = (size_t)g.x * g.y * g.z;
    std::vector<std::thread> th;
    for (int t = 0; t < nt; t++)
        th.emplace_back([&, t] {
            threadIdx = dim3(t % b.x, (t / b.x) % b.y, t / (b.x * b.y));
            emu_tid = t;
            for (size_t i = 0; i < nb; i++) {
                if (t == 0) /* unwritten shared memory reads as NaN */
                    for (auto &v : sm) v = NAN;
                bar.arrive_and_wait();
                blockIdx = dim3(i % g.x, (i / g.x) % g.y, i / ((size_t)g.x * g.y));
                f();
                bar.arrive_and_wait();
            }
        });
    for (auto &t : th) t.join();
    for (auto &w : emu_warps) delete w.bar;
}
struct emu_cfg {
    dim3 g, b; size_t smem;
    emu_cfg(dim3 g_, dim3 b_, size_t s = 0) : g(g_), b(b_), smem(s) {}
    template <class... P> void run(void (*k)(P...), std::type_identity_t<P>... a) { emu_run(g, b, smem, [&] { k(a...); }); }
};
/* ---- runtime */
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorInvalidValue = 1,
       cudaErrorInsufficientDriver = 35, cudaErrorNoDevice = 100 };
#define CUDART_VERSION 13000 /* the toolkit CI compiles with */
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
enum cudaMemoryType { cudaMemoryTypeUnregistered, cudaMemoryTypeHost, cudaMemoryTypeDevice, cudaMemoryTypeManaged };
struct cudaPointerAttributes { cudaMemoryType type; };
enum { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
inline std::map<uintptr_t, size_t> emu_allocs;
inline const char *cudaGetErrorString(cudaError_t e) { return e ? "emu error" : "no error"; }
inline const char *cudaGetErrorName(cudaError_t e) { return e ? "emuError" : "cudaSuccess"; }
inline cudaError_t cudaGetLastError(void) { return 0; }
inline cudaError_t cudaDeviceSynchronize(void) { return 0; }
typedef struct emu_stream *cudaStream_t;
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return 0; }
inline cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return 0; }
inline cudaError_t cudaSetDevice(int) { return 0; }
inline cudaError_t cudaMalloc(void **p, size_t n) { *p = aligned_alloc(256, (n + 255) / 256 * 256); memset(*p, 0xff, n); emu_allocs[(uintptr_t)*p] = n; return 0; }
inline cudaError_t cudaFree(void *p) { if (p) { emu_allocs.erase((uintptr_t)p); free(p); } return 0; }
inline cudaError_t cudaMemset(void *p, int v, size_t n) { memset(p, v, n); return 0; }
inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) { memmove(d, s, n); return 0; }
/* enqueued copies: overlapping ranges are undefined on a GPU, an error here */
inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t = 0)
{
    if ((char *)d < (const char *)s + n && (const char *)s < (char *)d + n) return cudaErrorInvalidValue;
    memcpy(d, s, n); return 0;
}
inline cudaError_t cudaMemGetInfo(size_t *f, size_t *t) { *f = 1; *t = 2; return 0; }
/* page-locking: host memory stays host memory; the emulator counts pins */
enum { cudaHostRegisterDefault = 0 };
inline std::map<uintptr_t, size_t> emu_pinned;
inline cudaError_t cudaHostRegister(void *p, size_t n, unsigned) { if (!p || !n || emu_pinned.count((uintptr_t)p)) return cudaErrorInvalidValue; emu_pinned[(uintptr_t)p] = n; return 0; }
inline cudaError_t cudaHostUnregister(void *p) { return emu_pinned.erase((uintptr_t)p) ? 0 : cudaErrorInvalidValue; }
inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p)
{
    a->type = cudaMemoryTypeUnregistered;
    auto it = emu_allocs.upper_bound((uintptr_t)p);
    if (it != emu_allocs.begin()) { --it; if ((uintptr_t)p < it->first + it->second) a->type = cudaMemoryTypeDevice; }
    return 0;
}
template <class K> cudaError_t cudaFuncSetAttribute(K, int, int) { return 0; }
/* ---- cuBLAS (column-major, double accumulation) */
typedef void *cublasHandle_t;
typedef int cublasStatus_t;
enum { CUBLAS_STATUS_SUCCESS = 0 };
typedef enum { CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32 } cublasComputeType_t;
typedef enum { CUBLAS_OP_N, CUBLAS_OP_T } cublasOperation_t;
typedef enum { CUDA_R_32F, CUDA_R_16BF } cudaDataType;
typedef enum { CUBLAS_GEMM_DEFAULT } cublasGemmAlgo_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16 } cublasMath_t;
#define CUBLAS_VER_MAJOR 13
inline cublasStatus_t cublasCreate_v2(cublasHandle_t *h) { *h = (void *)1; return 0; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return 0; }
inline const char *cublasGetStatusString(cublasStatus_t) { return "emu"; }
/* Element (i, p) of op(A) for a column-major A of type t. */
inline double emu_elem(const void *A, cudaDataType t, cublasOperation_t op, int i, int p, int ld)
{
    size_t at = op == CUBLAS_OP_N ? i + (size_t)p * ld : p + (size_t)i * ld;
    return t == CUDA_R_16BF ? hpt_bf16_to_f32(((const hpt_bf16 *)A)[at]) : ((const float *)A)[at];
}
inline cublasStatus_t emu_gemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                               const void *alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt,
                               int ldb, const void *beta, void *C, cudaDataType ct, int ldc, cublasComputeType_t comp, cublasGemmAlgo_t)
{
    float al = *(const float *)alpha, be = *(const float *)beta;
    if (lda < (ta == CUBLAS_OP_N ? m : k) || ldb < (tb == CUBLAS_OP_N ? k : n) || ldc < m) { fprintf(stderr, "emu gemm: bad ld\n"); abort(); }
    int bf = at == CUDA_R_16BF;
    if (bt != at || (ct != CUDA_R_32F && !(bf && ct == CUDA_R_16BF)) || (bf && comp != CUBLAS_COMPUTE_32F)) { fprintf(stderr, "emu gemm: unsupported types\n"); abort(); }
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            float sf = 0.0f; /* bf16: products exact in float, fp32 accumulation */
            for (int p = 0; p < k; p++) {
                double x = emu_elem(A, at, ta, i, p, lda), y = emu_elem(B, bt, tb, p, j, ldb);
                if (bf)
                    sf += (float)x * (float)y;
                else
                    s += x * y;
            }
            if (bf)
                s = sf;
            size_t ci = i + (size_t)j * ldc;
            if (ct == CUDA_R_16BF) { /* fp32 result, then rounded */
                hpt_bf16 *cb = (hpt_bf16 *)C;
                float r = al * (float)s + (be != 0.0f ? be * hpt_bf16_to_f32(cb[ci]) : 0.0f);
                cb[ci] = hpt_bf16_from_f32(r);
                continue;
            }
            float *cc = (float *)C + ci;
            *cc = (float)(al * s + (be != 0.0f ? be * *cc : 0.0));
        }
    return 0;
}
/* cublasGemmBatchedEx: emu_gemm on each (A_i, B_i, C_i) of the pointer
 * arrays (device memory is host memory here). */
inline cublasStatus_t emu_gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                       int k, const void *alpha, const void *const A[], cudaDataType at, int lda,
                                       const void *const B[], cudaDataType bt, int ldb, const void *beta,
                                       void *const C[], cudaDataType ct, int ldc, int count,
                                       cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
    if (count < 0) { fprintf(stderr, "emu gemm batched: bad count\n"); abort(); }
    for (int i = 0; i < count; i++)
        emu_gemm(h, ta, tb, m, n, k, alpha, A[i], at, lda, B[i], bt, ldb, beta, C[i], ct, ldc, comp, algo);
    return 0;
}
#define RTLD_NOW 2
#define RTLD_LOCAL 0
inline void *dlopen(const char *, int) { return (void *)1; }
inline const char *dlerror(void) { return "emu"; }
inline int dlclose(void *) { return 0; }
inline void *dlsym(void *, const char *s)
{
    if (!strcmp(s, "cublasCreate_v2")) return (void *)&cublasCreate_v2;
    if (!strcmp(s, "cublasSetMathMode")) return (void *)&cublasSetMathMode;
    if (!strcmp(s, "cublasGemmEx")) return (void *)&emu_gemm;
    if (!strcmp(s, "cublasGemmBatchedEx")) return (void *)&emu_gemm_batched;
    if (!strcmp(s, "cublasGetStatusString")) return (void *)&cublasGetStatusString;
    return nullptr;
}
