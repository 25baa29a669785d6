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
struct emu_warp { uint64_t slot[32]; uint32_t ma[32][4], mb[32][2]; std::barrier<> *bar; };
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
/* mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (lib/attention_mma.cu
 * mma_bf16): each lane posts its A registers a[4] and B registers b0, b1,
 * then computes its own four D elements from every lane's by the PTX ISA's
 * fragment layouts (lane 4g + t: A(r, k) in lane 4(r % 8) + (k % 8)/2,
 * register r/8 + 2(k/8), half k % 2; B(k, n) in lane 4n + (k % 8)/2,
 * register k/8; D row g (+8), cols 2t, 2t+1), products of bf16 exact in
 * float, summed in k order, then added to d. */
#define HPT_CUDA_EMU 1
inline float emu_bf16_half(uint32_t r, int hi) { uint32_t u = (hi ? r >> 16 : r & 0xffffu) << 16; float f; memcpy(&f, &u, 4); return f; }
inline void emu_mma_m16n8k16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    emu_warp &w = emu_warps[emu_tid >> 5];
    int lane = emu_tid & 31, g = lane >> 2, t = lane & 3;
    memcpy(w.ma[lane], a, sizeof w.ma[lane]);
    w.mb[lane][0] = b0, w.mb[lane][1] = b1;
    w.bar->arrive_and_wait();
    for (int c = 0; c < 4; c++) {
        int r = g + 8 * (c >> 1), n = 2 * t + (c & 1);
        float s = 0.0f;
        for (int k = 0; k < 16; k++)
            s += emu_bf16_half(w.ma[4 * (r % 8) + (k % 8) / 2][r / 8 + 2 * (k / 8)], k % 2) *
                 emu_bf16_half(w.mb[4 * n + (k % 8) / 2][k / 8], k % 2);
        d[c] += s;
    }
    w.bar->arrive_and_wait();
}
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
/* an H100/H200 (compute capability 9.0) */
enum cudaDeviceAttr { cudaDevAttrComputeCapabilityMajor = 75 };
inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr, int) { *v = 9; return 0; }
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
inline int emu_vmm_mapped(uintptr_t p); /* (below: the driver API) */
inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p)
{
    a->type = cudaMemoryTypeUnregistered;
    auto it = emu_allocs.upper_bound((uintptr_t)p);
    if (it != emu_allocs.begin()) { --it; if ((uintptr_t)p < it->first + it->second) a->type = cudaMemoryTypeDevice; }
    if (emu_vmm_mapped((uintptr_t)p)) a->type = cudaMemoryTypeDevice; /* as the driver says of a mapped granule */
    return 0;
}
template <class K> cudaError_t cudaFuncSetAttribute(K, int, int) { return 0; }
/* the kernels' image: built for sm_90 (PTX ISA version 9.0 as 90) */
struct cudaFuncAttributes { int ptxVersion, binaryVersion; };
template <class K> cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, K) { a->ptxVersion = a->binaryVersion = 90; return 0; }
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
/* ---- driver API: virtual memory management (lib/backend_cuda.cu's
 * alloc_virtual, commit, decommit; ZeRO-3's parameter block), reached as
 * on a GPU through cudaGetDriverEntryPointByVersion. A reservation is an
 * mmap'ed PROT_NONE range; a mapped granule gets fresh pages filled with
 * NaN bytes (0xff, as cudaMalloc here) and stays PROT_NONE until
 * cuMemSetAccess; cuMemUnmap puts fresh PROT_NONE pages back, so a read or
 * write of an unmapped granule is a segmentation fault (a use after drop
 * shows up). Granularity 64 KiB, smaller than a GPU's 2 MiB so that tests
 * stay small. emu_vmm_phys: bytes of physical allocations alive (created
 * and not yet freed: released and unmapped). HPT_CUDA_EMU_NO_VMM=1: the
 * device reports no virtual memory management. HPT_CUDA_EMU_VMM_LIMIT=N:
 * cuMemCreate fails with CUDA_ERROR_OUT_OF_MEMORY past N bytes of them. The calls check their
 * arguments as the CUDA 13 headers document them (cuda.h): flags that must
 * be 0, the location a device (the one device, ordinal 0), an alignment a
 * power of two, handle types known, an entry point asked for with a
 * version that has it; misuse returns CUDA_ERROR_INVALID_VALUE (or
 * CUDA_ERROR_INVALID_DEVICE) as a GPU would, which the backend's callers
 * turn into a fatal error naming the call. */
#include <sys/mman.h>
#define CUDA_VERSION 13000
typedef int CUresult;
enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_OUT_OF_MEMORY = 2, CUDA_ERROR_INVALID_DEVICE = 101 };
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef enum { CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102 } CUdevice_attribute;
typedef enum { CU_MEM_ALLOCATION_TYPE_INVALID = 0, CU_MEM_ALLOCATION_TYPE_PINNED = 1 } CUmemAllocationType;
typedef enum { CU_MEM_LOCATION_TYPE_INVALID = 0, CU_MEM_LOCATION_TYPE_DEVICE = 1 } CUmemLocationType;
typedef enum { CU_MEM_ACCESS_FLAGS_PROT_NONE = 0, CU_MEM_ACCESS_FLAGS_PROT_READ = 1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 } CUmemAccess_flags;
typedef enum { CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1 } CUmemAllocationGranularity_flags;
/* CU_MEM_HANDLE_TYPE_NONE 0, POSIX_FILE_DESCRIPTOR 1, WIN32 2, WIN32_KMT 4, FABRIC 8 */
constexpr int EMU_HANDLE_TYPES = 0xf;
struct CUmemLocation { CUmemLocationType type; int id; };
struct CUmemAllocationProp { CUmemAllocationType type; int requestedHandleTypes; CUmemLocation location; void *win32HandleMetaData; struct { unsigned char compressionType, gpuDirectRDMACapable; unsigned short usage; unsigned char reserved[4]; } allocFlags; };
struct CUmemAccessDesc { CUmemLocation location; CUmemAccess_flags flags; };
enum cudaDriverEntryPointQueryResult { cudaDriverEntryPointSuccess = 0, cudaDriverEntryPointSymbolNotFound = 1, cudaDriverEntryPointVersionNotSufficent = 2 };
enum { cudaEnableDefault = 0, cudaEnableLegacyStream = 1, cudaEnablePerThreadDefaultStream = 2 };
constexpr size_t EMU_GRAN = 65536;
struct emu_phys { size_t size; int maps; int released; };
inline std::map<CUmemGenericAllocationHandle, emu_phys> emu_handles;
inline CUmemGenericAllocationHandle emu_next_handle = 1;
inline std::map<uintptr_t, size_t> emu_reserved;        /* base -> bytes */
inline std::map<uintptr_t, CUmemGenericAllocationHandle> emu_maps; /* granule address -> handle */
inline size_t emu_vmm_phys;
inline void emu_phys_drop(CUmemGenericAllocationHandle h)
{
    emu_phys &p = emu_handles[h];
    if (p.released && !p.maps) { emu_vmm_phys -= p.size; emu_handles.erase(h); }
}
/* 1 when [a, a + n) lies in one reservation, n a multiple of the granule */
inline int emu_in_reserved(uintptr_t a, size_t n)
{
    auto it = emu_reserved.upper_bound(a);
    if (it == emu_reserved.begin() || n % EMU_GRAN || a % EMU_GRAN) return 0;
    --it;
    return a + n <= it->first + it->second;
}
/* a device location: the one device (ordinal 0) */
inline int emu_dev_loc(const CUmemLocation &l) { return l.type == CU_MEM_LOCATION_TYPE_DEVICE && l.id == 0; }
inline int emu_vmm_mapped(uintptr_t p) { return emu_maps.count(p / EMU_GRAN * EMU_GRAN) != 0; }
inline CUresult cuDeviceGet(CUdevice *d, int ordinal) { if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE; *d = ordinal; return 0; }
inline CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    const char *e = getenv("HPT_CUDA_EMU_NO_VMM");
    *v = a == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED && !(e && !strcmp(e, "1"));
    return 0;
}
inline CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *p, CUmemAllocationGranularity_flags o)
{
    if (!g || !p || p->type != CU_MEM_ALLOCATION_TYPE_PINNED || !emu_dev_loc(p->location) ||
        (p->requestedHandleTypes & ~EMU_HANDLE_TYPES) || (o != CU_MEM_ALLOC_GRANULARITY_MINIMUM && o != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    *g = EMU_GRAN; return 0;
}
inline CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t align, CUdeviceptr, unsigned long long flags)
{
    if (!p || !n || n % EMU_GRAN || (align && (align % EMU_GRAN || (align & (align - 1)))) || flags) return CUDA_ERROR_INVALID_VALUE;
    char *m = (char *)mmap(NULL, n + EMU_GRAN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t a = ((uintptr_t)m + EMU_GRAN - 1) / EMU_GRAN * EMU_GRAN; /* granule-aligned inside */
    emu_reserved[a] = n;
    *p = a; return 0;
}
inline CUresult cuMemAddressFree(CUdeviceptr p, size_t n)
{
    auto it = emu_reserved.find((uintptr_t)p);
    if (it == emu_reserved.end() || it->second != n) return CUDA_ERROR_INVALID_VALUE;
    for (uintptr_t a = p; a < p + n; a += EMU_GRAN) if (emu_maps.count(a)) return CUDA_ERROR_INVALID_VALUE; /* still mapped */
    munmap((void *)p, n); /* (the alignment slack stays reserved) */
    emu_reserved.erase(it); return 0;
}
inline CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *p, unsigned long long flags)
{
    if (!h || !p || !n || n % EMU_GRAN || p->type != CU_MEM_ALLOCATION_TYPE_PINNED || !emu_dev_loc(p->location) ||
        (p->requestedHandleTypes & ~EMU_HANDLE_TYPES) || flags) /* flags: "currently must be zero" */
        return CUDA_ERROR_INVALID_VALUE;
    const char *lim = getenv("HPT_CUDA_EMU_VMM_LIMIT"); /* device memory running out */
    if (lim && *lim && emu_vmm_phys + n > strtoull(lim, nullptr, 10)) return CUDA_ERROR_OUT_OF_MEMORY;
    *h = emu_next_handle++;
    emu_handles[*h] = emu_phys{n, 0, 0};
    emu_vmm_phys += n; return 0;
}
inline CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
    auto it = emu_handles.find(h);
    if (it == emu_handles.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
    it->second.released = 1; emu_phys_drop(h); return 0;
}
/* whole handles only (offset 0, size = the handle's), one granule at a
 * time in the map table */
inline CUresult cuMemMap(CUdeviceptr p, size_t n, size_t off, CUmemGenericAllocationHandle h, unsigned long long flags)
{
    auto it = emu_handles.find(h);
    if (it == emu_handles.end() || it->second.released || off || n != it->second.size || !emu_in_reserved(p, n) || flags) return CUDA_ERROR_INVALID_VALUE;
    for (uintptr_t a = p; a < p + n; a += EMU_GRAN) if (emu_maps.count(a)) return CUDA_ERROR_INVALID_VALUE; /* mapped already */
    void *m = mmap((void *)p, n, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    memset(m, 0xff, n);
    mprotect(m, n, PROT_NONE); /* no access before cuMemSetAccess */
    for (uintptr_t a = p; a < p + n; a += EMU_GRAN) emu_maps[a] = h;
    it->second.maps++; return 0;
}
inline CUresult cuMemSetAccess(CUdeviceptr p, size_t n, const CUmemAccessDesc *d, size_t count)
{
    if (!d || count != 1 || !emu_dev_loc(d->location) || d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE || !emu_in_reserved(p, n)) return CUDA_ERROR_INVALID_VALUE;
    for (uintptr_t a = p; a < p + n; a += EMU_GRAN) if (!emu_maps.count(a)) return CUDA_ERROR_INVALID_VALUE; /* not mapped */
    mprotect((void *)p, n, PROT_READ | PROT_WRITE); return 0;
}
/* the whole range of one cuMemMap call (a sub-range is an error, as on a GPU) */
inline CUresult cuMemUnmap(CUdeviceptr p, size_t n)
{
    auto it = emu_maps.find((uintptr_t)p);
    if (it == emu_maps.end() || emu_handles[it->second].size != n) return CUDA_ERROR_INVALID_VALUE;
    CUmemGenericAllocationHandle h = it->second;
    for (uintptr_t a = p; a < p + n; a += EMU_GRAN) emu_maps.erase(a);
    mmap((void *)p, n, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    emu_handles[h].maps--; emu_phys_drop(h); return 0;
}
/* ver: the CUDA version whose ABI of the symbol is wanted (the virtual
 * memory calls exist since CUDA 10.2, 10020); q may be NULL */
inline cudaError_t cudaGetDriverEntryPointByVersion(const char *sym, void **fn, unsigned ver, unsigned long long flags, cudaDriverEntryPointQueryResult *q = nullptr)
{
    cudaDriverEntryPointQueryResult q0;
    if (!q) q = &q0;
    if (!sym || !fn || flags > cudaEnablePerThreadDefaultStream) return cudaErrorInvalidValue;
    const struct { const char *name; void *f; } t[] = {
        {"cuDeviceGet", (void *)&cuDeviceGet}, {"cuDeviceGetAttribute", (void *)&cuDeviceGetAttribute},
        {"cuMemGetAllocationGranularity", (void *)&cuMemGetAllocationGranularity},
        {"cuMemAddressReserve", (void *)&cuMemAddressReserve}, {"cuMemAddressFree", (void *)&cuMemAddressFree},
        {"cuMemCreate", (void *)&cuMemCreate}, {"cuMemRelease", (void *)&cuMemRelease},
        {"cuMemMap", (void *)&cuMemMap}, {"cuMemUnmap", (void *)&cuMemUnmap}, {"cuMemSetAccess", (void *)&cuMemSetAccess}};
    *fn = nullptr;
    *q = ver > CUDA_VERSION || ver < 10020 ? cudaDriverEntryPointVersionNotSufficent : cudaDriverEntryPointSymbolNotFound;
    for (auto &e : t)
        if (!strcmp(e.name, sym) && ver <= CUDA_VERSION && ver >= 10020) { *fn = e.f; *q = cudaDriverEntryPointSuccess; }
    return 0;
}
