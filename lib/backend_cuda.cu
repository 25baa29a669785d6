/* backend_cuda.cu — the CUDA compute backend: cuBLAS for every matrix
 * product, own kernels for the rest. Shapes and maths of every slot: see
 * backend.h; the semantics (overwrite vs accumulate, what is saved) are
 * those of backend_cpu.c, against which tests/test_backend_cuda checks
 * each op.
 *
 * - Precision: fp32 products (CUBLAS_COMPUTE_32F: no tensor cores), tf32
 *   (CUBLAS_COMPUTE_32F_FAST_TF32) or bf16 mixed precision (Micikevicius et
 *   al. 2018; Megatron-LM's bf16 mode): every product takes bfloat16
 *   operands (CUDA_R_16BF, rounded to nearest even as lib/bf16.h) with fp32
 *   accumulation and an fp32 result (CUBLAS_COMPUTE_32F). Weights stay fp32
 *   masters; a bf16 working copy of each buffer used as a weight is kept
 *   and refreshed lazily after any backend write into it (see "bf16 working
 *   copies" below). Activations (the seam's `void *` pointers, act_dtype)
 *   are stored in bf16 in this mode: GEMMs read them as bf16 operands and
 *   write q, k, v, gate, up in bf16 (CUDA_R_16BF C, fp32 accumulation);
 *   norms, RoPE, attention and SwiGLU read and write them in bf16 and
 *   compute in fp32 (ld_act/st_act). The float pointers (residual stream,
 *   partial sums, logits, gradients of activations, statistics) stay fp32;
 *   a float operand of a product (an activation gradient) is rounded to
 *   bf16 in a scratch buffer.
 * - Attention: FlashAttention-2 style kernels (Dao et al. 2022; Dao 2023,
 *   algorithms 1 and 2): the forward keeps an online softmax per query row
 *   and saves only the row log-sum-exp (B,H,T); the backward recomputes
 *   the probabilities from it, one kernel for dK/dV (a block owns a tile
 *   of keys of one kv head and loops over the query heads of its GQA
 *   group, so no atomics) and one for dQ. In bf16 and tf32 modes the same
 *   maths runs in query chunks through cuBLAS's batched products on the
 *   tensor cores ("attention through cuBLAS"), with the same saved
 *   log-sum-exp; fp32 mode (no tensor cores) keeps the kernels.
 *   The (B,H,T,T) matrix is never stored.
 * - Reductions whose result goes to the host (sum of squares, losses) are
 *   accumulated in double, per block then in a fixed order, so they are
 *   deterministic.
 * - Device placement: the node-local MPI rank modulo the visible devices
 *   (several ranks may share one GPU).
 * - Every CUDA and cuBLAS call is checked (cuda_util.h): a failure names
 *   the call, file:line and CUDA's error string and aborts all ranks.
 * - cuBLAS is loaded by init (dlopen), not linked: linking it costs every
 *   process ~215 MiB of resident memory at start-up (the relocations of
 *   libcublasLt, measured), CPU runs included.
 * All work runs on the legacy default stream; upload/download and the
 * host-returning reductions synchronise with it.
 */
#include <dlfcn.h>
#include <unistd.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <unordered_map>

#include "backend.h"
#include "cuda_util.h"
#include "hpt_config.h"

#define FULL_MASK 0xffffffffu
#define LAUNCHED(name) hpt_cuda_launched((name), g_sync, __FILE__, __LINE__)

/* ------------------------------------------------------------- cuBLAS */

#define HPT_STR2(x) #x
#define HPT_STR(x) HPT_STR2(x)

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

/* The cuBLAS entry points used, resolved by load_cublas. */
static struct {
    decltype(&cublasCreate_v2) create;
    decltype(&cublasSetMathMode) set_math_mode;
    gemm_ex_fn gemm_ex;
    gemm_batched_ex_fn gemm_batched_ex;
    decltype(&cublasGetStatusString) status_string;
} g_cublas;

static const char *hpt_cublas_error(cublasStatus_t s)
{
    return g_cublas.status_string ? g_cublas.status_string(s) : "cuBLAS not loaded";
}

/* dlopen the cuBLAS of the toolkit configure found (its major version;
 * the executable's run path, LD_LIBRARY_PATH, then the toolkit's library
 * directory). Errors: HPT_ERR_USAGE with dlerror's reason in `why`. */
static hpt_status load_cublas(char *why, size_t n)
{
    const char *names[] = {"libcublas.so." HPT_STR(CUBLAS_VER_MAJOR),
#ifdef HPT_CUDA_LIBDIR
                           HPT_CUDA_LIBDIR "/libcublas.so." HPT_STR(CUBLAS_VER_MAJOR),
#endif
                           "libcublas.so"};
    void *h = NULL;
    const char *err = "";
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++)
        if (!(h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL)))
            err = dlerror();
    if (!h) {
        snprintf(why, n, "--backend cuda: cannot load cuBLAS (%s)", err);
        return HPT_ERR_USAGE;
    }
    const struct {
        void **slot;
        const char *sym;
    } syms[] = {{(void **)&g_cublas.create, "cublasCreate_v2"},
                {(void **)&g_cublas.set_math_mode, "cublasSetMathMode"},
                {(void **)&g_cublas.gemm_ex, "cublasGemmEx"},
                {(void **)&g_cublas.gemm_batched_ex, "cublasGemmBatchedEx"},
                {(void **)&g_cublas.status_string, "cublasGetStatusString"}};
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].slot = dlsym(h, syms[i].sym))) {
            snprintf(why, n, "--backend cuda: %s has no %s (cuBLAS older than the toolkit "
                     "hpt was built with?)", names[0], syms[i].sym);
            return HPT_ERR_USAGE;
        }
    return HPT_OK;
}

/* ------------------------------------------------------------- state */

static int g_ready;                /* init succeeded                       */
static int g_device;               /* CUDA device of this rank             */
static int g_sync;                 /* HPT_CUDA_SYNC=1: sync after launches  */
static cublasHandle_t g_blas;
static cublasComputeType_t g_compute = CUBLAS_COMPUTE_32F;
static int g_bf16;                 /* --precision bf16                     */
static size_t g_cur, g_peak;       /* bytes allocated now / at peak        */
/* alloc sizes by base address (ordered: which allocation holds a pointer) */
static std::map<uintptr_t, size_t> *g_sizes;

/* bf16 working copy of one allocation used as a matmul weight: `bf` holds
 * bf16(x) of all its floats; dirty = a backend write into the allocation
 * happened since the last conversion. Keyed by the allocation's base. */
struct working_copy {
    uint16_t *bf;
    size_t bytes; /* bytes of bf */
    int dirty;
};
static std::unordered_map<uintptr_t, working_copy> *g_work;

/* Node-local rank: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) when MPI is
 * initialised (collective over MPI_COMM_WORLD), else the launcher's
 * environment (MPICH hydra, Slurm, Open MPI), else 0. */
static int local_rank(void)
{
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (inited && !fin) {
        MPI_Comm node;
        int r = 0;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &r);
        MPI_Comm_free(&node);
        return r;
    }
    const char *vars[] = {"MPI_LOCALRANKID", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *e = getenv(vars[i]);
        if (e && *e)
            return atoi(e);
    }
    return 0;
}

/* Pick the device, create the cuBLAS handle. Idempotent: a second call
 * returns the first call's verdict (and message). */
static hpt_status cuda_init(void)
{
    static int done;
    static hpt_status verdict;
    static char why[512];
    if (done)
        return verdict ? hpt_error_set(verdict, "%s", why) : HPT_OK;
    done = 1;
    int lr = local_rank(), n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        (void)cudaGetLastError(); /* not sticky: clear it */
        /* A GPU whose driver this CUDA runtime cannot use (too old) is not
         * "no GPU": say so, so that the GPU tests fail instead of skipping.
         * That is cudaErrorInsufficientDriver with the device node and the
         * user-space driver (libcuda) both present; without them (no driver,
         * or a CPU-only container on a GPU host, whose /proc still shows the
         * host's kernel driver), with no device in CUDA_VISIBLE_DEVICES or
         * all devices busy, there is no GPU to use here. */
        int mismatch = e == cudaErrorInsufficientDriver && access("/dev/nvidiactl", F_OK) == 0;
        if (mismatch) {
            void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
            mismatch = h != NULL;
            if (h)
                dlclose(h);
        }
        char drv[160] = "unreadable";
        FILE *f = mismatch ? fopen("/proc/driver/nvidia/version", "r") : NULL;
        if (f) {
            if (!fgets(drv, sizeof drv, f))
                snprintf(drv, sizeof drv, "unreadable");
            fclose(f);
            drv[strcspn(drv, "\n")] = 0;
        }
        if (mismatch)
            snprintf(why, sizeof why, "--backend cuda: the CUDA runtime (%d) cannot use this "
                     "machine's NVIDIA driver (cudaGetDeviceCount: %s; /proc/driver/nvidia/version: "
                     "%s)", CUDART_VERSION, cudaGetErrorString(e), drv);
        else
            snprintf(why, sizeof why, "--backend cuda: no CUDA device visible (cudaGetDeviceCount: %s)",
                     e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        verdict = HPT_ERR_USAGE;
        return hpt_error_set(verdict, "%s", why);
    }
    if ((verdict = load_cublas(why, sizeof why)))
        return hpt_error_set(verdict, "%s", why);
    const char *s = getenv("HPT_CUDA_SYNC");
    g_sync = s && atoi(s) > 0;
    g_device = lr % n;
    HPT_CUDA(cudaSetDevice(g_device));
    HPT_CUBLAS(g_cublas.create(&g_blas));
    /* bf16-output products reduce in fp32 too: without the flag cuBLAS may
     * add split-K partial sums in the output type (cublas_api.h,
     * CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) */
    HPT_CUBLAS(g_cublas.set_math_mode(
        g_blas, (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    g_sizes = new std::map<uintptr_t, size_t>();
    g_work = new std::unordered_map<uintptr_t, working_copy>();
    g_ready = 1;
    return HPT_OK;
}

static void work_mark_all_dirty(void);

/* FP32 and TF32: fp32 operands; BF16: bf16 operands (working copies of the
 * weights), CUBLAS_COMPUTE_32F in both fp32 and bf16 modes. */
static hpt_status cuda_set_precision(hpt_precision p)
{
    switch (p) {
    case HPT_PRECISION_FP32: g_compute = CUBLAS_COMPUTE_32F; g_bf16 = 0; return HPT_OK;
    case HPT_PRECISION_TF32: g_compute = CUBLAS_COMPUTE_32F_FAST_TF32; g_bf16 = 0; return HPT_OK;
    case HPT_PRECISION_BF16:
        g_compute = CUBLAS_COMPUTE_32F;
        g_bf16 = 1;
        work_mark_all_dirty();
        return HPT_OK;
    default:
        return hpt_error_set(HPT_ERR_USAGE, "--precision %s: unknown to the cuda backend",
                             hpt_precision_name(p));
    }
}

static size_t cuda_mem_peak(void) { return g_peak; }

/* bf16 mode stores the activations in bf16 (backend.h, act_dtype). */
static hpt_dtype cuda_act_dtype(void) { return g_bf16 ? HPT_DTYPE_BF16 : HPT_DTYPE_F32; }

/* ------------------------------------------------------------- memory */

static void *cuda_alloc(size_t bytes)
{
    HPT_CHECK(g_ready);
    if (bytes == 0)
        bytes = 64;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        hpt_error_set(HPT_ERR_USAGE, "cudaMalloc of %zu bytes (%.1f MiB) on CUDA device %d: out of "
                      "device memory (%.1f MiB free of %.1f MiB)", bytes, bytes / 1048576.0,
                      g_device, fr / 1048576.0, tot / 1048576.0);
        return NULL;
    }
    if (e != cudaSuccess)
        hpt_fatal(__FILE__, __LINE__, HPT_ERR_INTERNAL, "cudaMalloc of %zu bytes: %s", bytes,
                  cudaGetErrorString(e));
    HPT_CUDA(cudaMemset(p, 0, bytes));
    (*g_sizes)[(uintptr_t)p] = bytes;
    g_cur += bytes;
    g_peak = g_cur > g_peak ? g_cur : g_peak;
    return p;
}

static void cuda_free(void *p)
{
    if (!p)
        return;
    auto it = g_sizes->find((uintptr_t)p);
    HPT_CHECK(it != g_sizes->end());
    g_cur -= it->second;
    g_sizes->erase(it);
    auto w = g_work->find((uintptr_t)p);
    if (w != g_work->end()) { /* its bf16 working copy goes with it */
        g_cur -= w->second.bytes;
        HPT_CUDA(cudaFree(w->second.bf));
        g_work->erase(w);
    }
    HPT_CUDA(cudaFree(p));
}

/* Base and bytes of the allocation (from cuda_alloc) that holds p; 0 when
 * p is in none. */
static uintptr_t alloc_of(const void *p, size_t *bytes)
{
    auto it = g_sizes->upper_bound((uintptr_t)p);
    if (it == g_sizes->begin())
        return 0;
    --it;
    if ((uintptr_t)p >= it->first + it->second)
        return 0;
    *bytes = it->second;
    return it->first;
}

/* A backend write into [dst, ...) happened: the working copy of its
 * allocation (if any) is stale. Called by every slot that may write a
 * parameter (upload, copy, memset0, add, scale, adamw). */
static void work_mark_dirty(const void *dst)
{
    if (!g_work || g_work->empty())
        return;
    size_t bytes;
    uintptr_t base = alloc_of(dst, &bytes);
    auto w = base ? g_work->find(base) : g_work->end();
    if (w != g_work->end())
        w->second.dirty = 1;
}

static void work_mark_all_dirty(void)
{
    if (g_work)
        for (auto &w : *g_work)
            w.second.dirty = 1;
}

/* A host pointer is not an error for cudaPointerGetAttributes since CUDA
 * 11 (type "unregistered"); older runtimes fail with cudaErrorInvalidValue:
 * clear that one. Any other error (a kernel's earlier fault, sticky) is
 * fatal here: taken for a host pointer, a device buffer would be handed to
 * MPI and crash there instead of naming the fault. */
static int cuda_is_device(const void *p)
{
    cudaPointerAttributes a;
    if (!p)
        return 0;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e == cudaErrorInvalidValue) {
        (void)cudaGetLastError();
        return 0;
    }
    HPT_CUDA(e);
    return a.type == cudaMemoryTypeDevice;
}

static int cuda_host_pin(void *p, size_t bytes)
{
    if (!p || !bytes || cudaHostRegister(p, bytes, cudaHostRegisterDefault) != cudaSuccess) {
        (void)cudaGetLastError(); /* e.g. the locked-memory limit: stay pageable */
        return -1;
    }
    return 0;
}

static void cuda_host_unpin(void *p)
{
    if (p && cudaHostUnregister(p) != cudaSuccess)
        (void)cudaGetLastError();
}

static void cuda_memset0(void *dst, size_t bytes)
{
    work_mark_dirty(dst);
    if (bytes)
        HPT_CUDA(cudaMemset(dst, 0, bytes));
}

static void cuda_upload(void *dst, const void *src, size_t bytes)
{
    work_mark_dirty(dst);
    if (bytes)
        HPT_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

static void cuda_download(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        HPT_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

/* memmove semantics, as on the CPU: overlapping ranges go through a
 * temporary buffer (cudaMemcpy's are undefined for them). */
static void cuda_copy(void *dst, const void *src, size_t bytes)
{
    work_mark_dirty(dst);
    if (!bytes || dst == src)
        return;
    const char *d = (const char *)dst, *s = (const char *)src;
    if (d < s + bytes && s < d + bytes) {
        void *t = NULL;
        HPT_CUDA(cudaMalloc(&t, bytes));
        HPT_CUDA(cudaMemcpy(t, src, bytes, cudaMemcpyDeviceToDevice));
        HPT_CUDA(cudaMemcpy(dst, t, bytes, cudaMemcpyDeviceToDevice));
        HPT_CUDA(cudaFree(t));
        return;
    }
    HPT_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}

/* A device scratch buffer that grows on demand and is kept: the ops'
 * (below) and cuda_reserve's, which sizes them all at start-up so that no
 * step allocates or frees device memory. */
typedef struct {
    void *p;
    size_t cap; /* bytes */
} scratch;

/* Grow s to at least `bytes`: 0, or -1 with the reason (the bytes asked
 * for and free) in hpt_error_msg(), s then empty. */
static int scratch_grow(scratch *s, size_t bytes)
{
    if (bytes <= s->cap)
        return 0;
    cuda_free(s->p);
    s->p = cuda_alloc(bytes);
    s->cap = s->p ? bytes : 0;
    return s->p ? 0 : -1;
}

/* scratch_grow for an op: a failure mid-step aborts (cuda_reserve makes it
 * a start-up error instead). */
static void *scratch_need(scratch *s, size_t bytes, const char *what)
{
    if (scratch_grow(s, bytes))
        hpt_fatal(__FILE__, __LINE__, HPT_ERR_USAGE, "%s: %s", what, hpt_error_msg());
    return s->p;
}

static scratch g_dscratch; /* doubles: reductions, losses, small tables */

/* Bytes of a dscratch of n doubles (at least 4096). */
static size_t dscratch_bytes(size_t n) { return sizeof(double) * (n < 4096 ? 4096 : n); }

/* Device scratch of at least n doubles (grown on demand; internal). */
static double *dscratch(size_t n)
{
    return (double *)scratch_need(&g_dscratch, dscratch_bytes(n), "device scratch");
}

/* ------------------------------------------------- launch geometry */

#define EW_THREADS 256 /* element-wise kernels         */
#define ROW_THREADS 256 /* one block per row kernels    */

/* Blocks for a grid-stride loop over n > 0 elements. */
static unsigned ew_blocks(size_t n)
{
    size_t b = (n + EW_THREADS - 1) / EW_THREADS;
    return b > (1u << 20) ? (1u << 20) : (unsigned)b;
}

#define GRID_STRIDE(i, n)                                                                      \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                     \
         i += (size_t)gridDim.x * blockDim.x)

/* ------------------------------------------------ block reductions */

__device__ static float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ static float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

__device__ static double warp_sum_d(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

/* Block-wide sum / max (blockDim.x a multiple of 32), returned to every
 * thread. Must be reached by all threads of the block. */
__device__ static float block_sum(float v)
{
    __shared__ float part[32];
    __shared__ float res;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads(); /* an earlier call's readers are done with part/res */
    if (lane == 0)
        part[w] = v;
    __syncthreads();
    if (w == 0) {
        v = warp_sum(lane < nw ? part[lane] : 0.0f);
        if (lane == 0)
            res = v;
    }
    __syncthreads();
    return res;
}

__device__ static float block_max(float v)
{
    __shared__ float part[32];
    __shared__ float res;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0)
        part[w] = v;
    __syncthreads();
    if (w == 0) {
        v = warp_max(lane < nw ? part[lane] : -INFINITY);
        if (lane == 0)
            res = v;
    }
    __syncthreads();
    return res;
}

__device__ static double block_sum_d(double v)
{
    __shared__ double part[32];
    __shared__ double res;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum_d(v);
    __syncthreads();
    if (lane == 0)
        part[w] = v;
    __syncthreads();
    if (w == 0) {
        v = warp_sum_d(lane < nw ? part[lane] : 0.0);
        if (lane == 0)
            res = v;
    }
    __syncthreads();
    return res;
}

/* *out = sum of x[0..n) (one block, fixed order for a given n). */
__global__ static void k_sum_d(double *out, const double *x, size_t n)
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
    HPT_CUDA(cudaMemcpy(&h, res, sizeof h, cudaMemcpyDeviceToHost));
    return h;
}

/* ------------------------------------------------------------- linear */

/* Row-major C (m',n') = op(A) op(B) in cuBLAS's column-major terms: see the
 * callers. Always fp32 storage and accumulation; g_compute picks tf32. */
static void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    const float alpha = 1.0f;
    HPT_CUBLAS(g_cublas.gemm_ex(g_blas, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, B,
                                CUDA_R_32F, ldb, &beta, C, CUDA_R_32F, ldc, g_compute,
                                CUBLAS_GEMM_DEFAULT));
}

/* ------------------------------------------------ bf16 operands */

/* float32 -> bfloat16 bits, round to nearest even; a NaN stays a quiet NaN
 * with its sign. Bit for bit lib/bf16.h's hpt_bf16_from_f32 (the host
 * tests rely on it). */
__device__ static uint16_t bf16_bits(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
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

/* out (n) bf16 := in (n) float32. */
__global__ static void k_to_bf16(uint16_t *out, const float *in, size_t n)
{
    GRID_STRIDE(i, n) out[i] = bf16_bits(in[i]);
}

static void to_bf16(uint16_t *out, const float *in, size_t n)
{
    if (!n)
        return;
    k_to_bf16<<<ew_blocks(n), EW_THREADS>>>(out, in, n);
    LAUNCHED("k_to_bf16");
}

/* Device scratch k (0 or 1) of at least n bf16 values for a float operand
 * of a product, grown on demand (internal; contents live until the next
 * call with the same k). Since the activations are stored in bf16 only the
 * gradient operand of matmul_backward uses one (k = 0). */
static scratch g_bf16_scratch[2];

/* Bytes of a bf16 scratch of n values (at least 4096). */
static size_t bf16_scratch_bytes(size_t n) { return sizeof(uint16_t) * (n < 4096 ? 4096 : n); }

static uint16_t *bf16_scratch(int k, size_t n)
{
    return (uint16_t *)scratch_need(&g_bf16_scratch[k], bf16_scratch_bytes(n), "bf16 scratch");
}

/* bf16(x) for n floats (an activation gradient), in scratch k. */
static const uint16_t *act_bf16(int k, const float *x, size_t n)
{
    uint16_t *b = bf16_scratch(k, n);
    to_bf16(b, x, n);
    return b;
}

/* bf16 working copy of the weight w (n floats): the allocation holding w
 * gets a bf16 twin on first use (counted in mem_peak), converted whole
 * again only when a backend write marked it dirty (after an optimizer
 * step: once per step, not once per micro-batch). Returns the twin's
 * element matching w. A weight outside any allocation is a caller bug. */
/* The working copy of the allocation at `base` (`bytes` of fp32), created
 * (stale) when missing; NULL with the bytes asked for and free in
 * hpt_error_msg() when the device memory is short. */
static working_copy *work_of(uintptr_t base, size_t bytes)
{
    auto it = g_work->find(base);
    if (it != g_work->end())
        return &it->second;
    working_copy c = {NULL, bytes / sizeof(float) * sizeof(uint16_t), 1};
    cudaError_t e = cudaMalloc((void **)&c.bf, c.bytes ? c.bytes : 64);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        hpt_error_set(HPT_ERR_USAGE, "cudaMalloc of %zu bytes (%.1f MiB) for the bf16 working copy "
                      "of the weights on CUDA device %d: out of device memory (%.1f MiB free of "
                      "%.1f MiB)", c.bytes, c.bytes / 1048576.0, g_device, fr / 1048576.0,
                      tot / 1048576.0);
        return NULL;
    }
    if (e != cudaSuccess)
        hpt_fatal(__FILE__, __LINE__, HPT_ERR_INTERNAL, "cudaMalloc of %zu bytes for the bf16 "
                  "working copy of the weights: %s", c.bytes, cudaGetErrorString(e));
    g_cur += c.bytes;
    g_peak = g_cur > g_peak ? g_cur : g_peak;
    return &g_work->emplace(base, c).first->second;
}

static const uint16_t *weight_bf16(const float *w, size_t n)
{
    size_t bytes = 0;
    uintptr_t base = alloc_of(w, &bytes);
    HPT_CHECK(base != 0 && (uintptr_t)(w + n) <= base + bytes);
    working_copy *c = work_of(base, bytes);
    if (!c)
        hpt_fatal(__FILE__, __LINE__, HPT_ERR_USAGE, "%s", hpt_error_msg());
    if (c->dirty) {
        to_bf16(c->bf, (const float *)base, bytes / sizeof(float));
        c->dirty = 0;
    }
    return c->bf + (w - (const float *)base);
}

/* As gemm with bf16 A and B (CUDA_R_16BF), fp32 accumulation and C of
 * type ct (CUDA_R_32F, or CUDA_R_16BF: the fp32 result rounded by cuBLAS). */
static void gemm_bf16(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                      const void *A, int lda, const void *B, int ldb, float beta, void *C,
                      cudaDataType ct, int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    const float alpha = 1.0f;
    HPT_CUBLAS(g_cublas.gemm_ex(g_blas, ta, tb, m, n, k, &alpha, A, CUDA_R_16BF, lda, B,
                                CUDA_R_16BF, ldb, &beta, C, ct, ldc, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
}

/* out (N,O) = in (N,Ic) w (O,Ic)^T. Column-major view: out^T (O,N) =
 * w (as the Ic x O matrix w^T, transposed) times in^T (Ic x N). */
static void cuda_matmul_forward(void *out, hpt_dtype out_dtype, const void *in, const float *w,
                                int N, int Ic, int O)
{
    if (g_bf16) { /* in: bf16 activation; out: bf16 activation or fp32 */
        const uint16_t *wb = weight_bf16(w, (size_t)O * Ic);
        gemm_bf16(CUBLAS_OP_T, CUBLAS_OP_N, O, N, Ic, wb, Ic, in, Ic, 0.0f, out,
                  out_dtype == HPT_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F, O);
        return;
    }
    HPT_CHECK(out_dtype == HPT_DTYPE_F32); /* fp32 and tf32: float activations */
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, O, N, Ic, w, Ic, (const float *)in, Ic, 0.0f, (float *)out, O);
}

/* din (N,Ic) (+)= dout (N,O) w (O,Ic): din^T (Ic,N) = w^T (Ic,O) dout^T (O,N).
 * dw (O,Ic) += dout^T in: dw^T (Ic,O) = in^T (Ic,N) (dout^T (O,N))^T.
 * bf16 mode: dout, in and w enter as bf16; din and dw stay fp32 (dw is
 * accumulated in fp32 across micro-batches, Megatron's main_grad). */
static void cuda_matmul_backward(float *din, float *dw, const float *dout, const void *in,
                                 const float *w, int N, int Ic, int O, int accum_din)
{
    if (g_bf16) { /* in: bf16 activation; dout (fp32 gradient) rounded to bf16 */
        const uint16_t *db = act_bf16(0, dout, (size_t)N * O);
        if (din)
            gemm_bf16(CUBLAS_OP_N, CUBLAS_OP_N, Ic, N, O, weight_bf16(w, (size_t)O * Ic), Ic, db, O,
                      accum_din ? 1.0f : 0.0f, din, CUDA_R_32F, Ic);
        gemm_bf16(CUBLAS_OP_N, CUBLAS_OP_T, Ic, O, N, in, Ic, db, O, 1.0f, dw, CUDA_R_32F, Ic);
        return;
    }
    if (din)
        gemm(CUBLAS_OP_N, CUBLAS_OP_N, Ic, N, O, w, Ic, dout, O, accum_din ? 1.0f : 0.0f, din, Ic);
    gemm(CUBLAS_OP_N, CUBLAS_OP_T, Ic, O, N, (const float *)in, Ic, dout, O, 1.0f, dw, Ic);
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

/* Repeated tokens without atomics (whose order, and so whose rounding,
 * changes from run to run): for each position n (one thread each) nxt[n] =
 * the next position m > n with the same token (-1: none) and head[n] = 1
 * when no earlier position has it. The tokens pass through shared memory a
 * tile at a time; O(N^2 / blockDim) loads, N^2 compares (N = 8192: ~0.1 ms
 * on an H100-class GPU). */
__global__ static void k_embed_chain(int *nxt, int *head, const int32_t *tokens, int N)
{
    __shared__ int32_t tile[EW_THREADS];
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    int32_t t = n < N ? tokens[n] : 0;
    int nx = -1, first = 1;
    for (int m0 = 0; m0 < N; m0 += blockDim.x) {
        __syncthreads(); /* the previous tile is read */
        if (m0 + (int)threadIdx.x < N)
            tile[threadIdx.x] = tokens[m0 + threadIdx.x];
        __syncthreads();
        int lim = N - m0 < (int)blockDim.x ? N - m0 : (int)blockDim.x;
        for (int j = 0; j < lim; j++)
            if (tile[j] == t) {
                int m = m0 + j;
                if (m < n)
                    first = 0;
                else if (m > n && nx < 0)
                    nx = m;
            }
    }
    if (n < N)
        nxt[n] = nx, head[n] = first;
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

static void cuda_embedding_forward(float *out, const int32_t *tokens, const float *wte, int N,
                                   int C, int v0, int Vl)
{
    size_t total = (size_t)N * C;
    if (!total)
        return;
    k_embedding_forward<<<ew_blocks(total), EW_THREADS>>>(out, tokens, wte, C, v0, Vl, total);
    LAUNCHED("k_embedding_forward");
}

static void cuda_embedding_backward(float *dwte, const float *dout, const int32_t *tokens, int N,
                                    int C, int v0, int Vl)
{
    if (N <= 0 || C <= 0)
        return;
    int *nxt = (int *)dscratch((size_t)N), *head = nxt + N; /* 2N ints in N doubles */
    k_embed_chain<<<(N + EW_THREADS - 1) / EW_THREADS, EW_THREADS>>>(nxt, head, tokens, N);
    LAUNCHED("k_embed_chain");
    int gx = N < 4096 ? N : 4096; /* blocks striding over the positions */
    k_embedding_backward<<<dim3(gx, (C + EW_THREADS - 1) / EW_THREADS), EW_THREADS>>>(
        dwte, dout, tokens, nxt, head, N, C, v0, Vl);
    LAUNCHED("k_embedding_backward");
}

/* ------------------------------------------------------------ RMSNorm */

/* One block per row n. */
__global__ static void k_rmsnorm_forward(void *out, int bf, float *rstd, const float *in,
                                         const float *w, int C, float eps)
{
    size_t n = blockIdx.x;
    const float *x = in + n * C;
    float ss = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        ss += x[c] * x[c];
    ss = block_sum(ss);
    float r = 1.0f / sqrtf(ss / C + eps);
    if (threadIdx.x == 0)
        rstd[n] = r;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        st_act(out, n * C + c, x[c] * r * w[c], bf);
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
static int rmsnorm_dw_slices(int N)
{
    int S = (N + 127) / 128;
    return S < 1 ? 1 : S > 64 ? 64 : S;
}

static void cuda_rmsnorm_forward(void *out, float *rstd, const float *in, const float *w, int N,
                                 int C, float eps)
{
    if (N <= 0)
        return;
    k_rmsnorm_forward<<<N, ROW_THREADS>>>(out, g_bf16, rstd, in, w, C, eps);
    LAUNCHED("k_rmsnorm_forward");
}

static void cuda_rmsnorm_backward(float *din, float *dw, const float *dout, const float *in,
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
static const float *rope_table_try(int npos, int hd, float theta)
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

/* x (rows, nh, hd), row r at position pos0 + r % T; one thread per pair. */
__global__ static void k_rope(void *x, int bf, const float *cs, int T, int nh, int hd, int pos0,
                              int inverse, size_t pairs)
{
    int half = hd / 2;
    GRID_STRIDE(p, pairs)
    {
        int i = (int)(p % half);
        size_t rest = p / half; /* row * nh + h */
        int t = (int)((rest / nh) % T) + pos0;
        float c = cs[((size_t)t * half + i) * 2], s = cs[((size_t)t * half + i) * 2 + 1];
        if (inverse)
            s = -s;
        size_t o = rest * hd;
        float x1 = ld_act(x, o + i, bf), x2 = ld_act(x, o + i + half, bf);
        st_act(x, o + i, x1 * c - x2 * s, bf);
        st_act(x, o + i + half, x2 * c + x1 * s, bf);
    }
}

static void rope_rows(void *x, int bf, int rows, int T, int nh, int hd, float theta, int pos0,
                      int inverse)
{
    size_t pairs = (size_t)rows * nh * (hd / 2);
    if (!pairs)
        return;
    const float *cs = rope_table(pos0 + T, hd, theta);
    k_rope<<<ew_blocks(pairs), EW_THREADS>>>(x, bf, cs, T, nh, hd, pos0, inverse, pairs);
    LAUNCHED("k_rope");
}

static void cuda_rope(void *x, hpt_dtype dtype, int B, int T, int nh, int hd, float theta,
                      int inverse)
{
    rope_rows(x, dtype == HPT_DTYPE_BF16, B * T, T, nh, hd, theta, 0, inverse);
}

static void cuda_rope_at(void *x, int n, int nh, int hd, float theta, int pos0)
{
    rope_rows(x, g_bf16, n, n, nh, hd, theta, pos0, 0);
}

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
 * line 4); one warp per (b, t, h) row. dout in bf16 (dbf) or float, out
 * an activation (bf16 when bf). */
__global__ static void k_attention_rowdot(float *D, const void *dout, int dbf, const void *out,
                                          int bf, int T, int H, int hd, size_t rows)
{
    size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (row >= rows)
        return;
    float s = 0.0f;
    for (int e = lane; e < hd; e += 32)
        s += ld_act(dout, row * hd + e, dbf) * ld_act(out, row * hd + e, bf);
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

/* Dynamic shared memory of `bytes` for `kernel` (above 48 KiB needs an
 * opt-in; sm_80 allows 163 KiB, sm_90 227 KiB). */
template <typename K> static void smem_opt_in(K kernel, size_t bytes)
{
    if (bytes > 48 * 1024)
        HPT_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)bytes));
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

/* bf16 and tf32 modes use the cuBLAS path unless HPT_CUDA_ATTENTION=flash,
 * or unless a head's row is not a multiple of 16 bytes (hd * 2 in bf16, hd
 * * 4 in tf32): cublasGemmBatchedEx cannot see the pointers it is given
 * (they live in device memory) and may read bf16/tf32 operands with 16-byte
 * loads, so every per-head pointer must be 16-byte aligned (cuBLAS
 * documentation, cublasGemmBatchedEx); the flash kernels have no such need. */
static int att_use_blas(int hd)
{
    const char *e = getenv("HPT_CUDA_ATTENTION");
    int esz = g_bf16 ? 2 : 4;
    return (g_bf16 || g_compute == CUBLAS_COMPUTE_32F_FAST_TF32) && !(e && !strcmp(e, "flash")) &&
           (size_t)hd * esz % 16 == 0;
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
static scratch g_att_scratch, g_att_ptrs;

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
static size_t att_backward_bytes(int B, int T, int H, int KV, int hd)
{
    size_t sz[7], at = 0;
    att_pieces(sz, B, T, H, KV, hd);
    for (int i = 0; i < 7; i++)
        at += round256(sz[i]);
    return at;
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
static void cuda_attention_forward(void *out, float *saved, const void *q, const void *k,
                                   const void *v, int B, int T, int H, int KV, int hd)
{
    if (att_use_blas(hd)) {
        check_heads(H, KV, hd);
        if (B > 0 && T > 0 && H > 0)
            blas_attention_forward(out, saved, q, k, v, B, T, H, KV, hd);
        return;
    }
    attention_fwd(out, saved, q, k, v, B, T, T, 0, H, KV, hd);
}

static size_t cuda_attention_floats(int B, int T, int H) { return (size_t)B * H * T; }

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
static void cuda_attention_backward(float *dq, float *dk, float *dv, float *scratch,
                                    const float *dout, const void *out, const float *saved,
                                    const void *q, const void *k, const void *v, int B, int T,
                                    int H, int KV, int hd)
{
    check_heads(H, KV, hd);
    if (B <= 0 || T <= 0 || H <= 0)
        return;
    if (att_use_blas(hd)) {
        blas_attention_backward(dq, dk, dv, scratch, dout, out, saved, q, k, v, B, T, H, KV, hd);
        return;
    }
    size_t rows = (size_t)B * T * H;
    k_attention_rowdot<<<(unsigned)((rows + 3) / 4), 128>>>(scratch, dout, 0, out, g_bf16, T, H,
                                                                   hd, rows);
    LAUNCHED("k_attention_rowdot");
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
static void cuda_attention_cached(void *out, const void *q, const void *kc, const void *vc,
                                  int n, int pos0, int H, int KV, int hd)
{
    attention_fwd(out, NULL, q, kc, vc, 1, n, pos0 + n, pos0, H, KV, hd);
}

/* ------------------------------------------------------------- SwiGLU */

__global__ static void k_swiglu_forward(void *out, const void *gate, const void *up, int bf,
                                        size_t n)
{
    GRID_STRIDE(i, n)
    {
        float g = ld_act(gate, i, bf);
        st_act(out, i, g / (1.0f + expf(-g)) * ld_act(up, i, bf), bf);
    }
}

__global__ static void k_swiglu_backward(float *dgate, float *dup, const float *dout,
                                         const void *gate, const void *up, int bf, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float g = ld_act(gate, i, bf), sg = 1.0f / (1.0f + expf(-g));
        float silu = g * sg, d = dout[i];
        dup[i] = d * silu;
        dgate[i] = d * ld_act(up, i, bf) * (sg + g * sg * (1.0f - sg));
    }
}

static void cuda_swiglu_forward(void *out, const void *gate, const void *up, size_t n)
{
    if (!n)
        return;
    k_swiglu_forward<<<ew_blocks(n), EW_THREADS>>>(out, gate, up, g_bf16, n);
    LAUNCHED("k_swiglu_forward");
}

static void cuda_swiglu_backward(float *dgate, float *dup, const float *dout, const void *gate,
                                 const void *up, size_t n)
{
    if (!n)
        return;
    k_swiglu_backward<<<ew_blocks(n), EW_THREADS>>>(dgate, dup, dout, gate, up, g_bf16, n);
    LAUNCHED("k_swiglu_backward");
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

static void cuda_add(float *out, const float *a, const float *b, size_t n)
{
    work_mark_dirty(out);
    if (!n)
        return;
    k_add<<<ew_blocks(n), EW_THREADS>>>(out, a, b, n);
    LAUNCHED("k_add");
}

static void cuda_scale(float *x, float s, size_t n)
{
    work_mark_dirty(x);
    if (!n)
        return;
    k_scale<<<ew_blocks(n), EW_THREADS>>>(x, s, n);
    LAUNCHED("k_scale");
}

#define SUMSQ_BLOCKS 1024 /* partial sums per range, at most */

/* Up to SUMSQ_LIST ranges by value (a kernel parameter: ~1.3 KiB, no
 * upload); range i owns blocks [first[i], first[i + 1]) of the launch. */
#define SUMSQ_LIST 64
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
__global__ static void k_sum_list(double *out, const double *part, sumsq_ranges r)
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
static double cuda_sumsq_list(double acc, const float *const *x, const size_t *n, int k)
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
        HPT_CUDA(cudaMemcpy(h, res, sizeof(double) * m, cudaMemcpyDeviceToHost));
        for (int i = 0; i < m; i++)
            acc += h[i];
    }
    return acc;
}

static double cuda_sumsq(const float *x, size_t n) { return cuda_sumsq_list(0.0, &x, &n, 1); }

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

static double cuda_crossentropy_fused(float *logits, const int32_t *targets, int N, int V,
                                      float grad_scale)
{
    if (N <= 0)
        return 0.0;
    double *loss = dscratch((size_t)N + 1);
    k_ce_fused<<<N, ROW_THREADS>>>(logits, targets, loss, V, grad_scale);
    LAUNCHED("k_ce_fused");
    return sum_to_host(loss, (size_t)N, loss + N);
}

static double cuda_crossentropy_loss(const float *logits, const int32_t *targets, int N, int V)
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

static void cuda_vocab_max(float *mx, const float *logits, int N, int Vl, int nvalid)
{
    if (N <= 0)
        return;
    k_vocab_max<<<N, ROW_THREADS>>>(mx, logits, Vl, nvalid);
    LAUNCHED("k_vocab_max");
}

static void cuda_vocab_sumexp(float *sumexp, float *tlogit, const float *logits,
                              const int32_t *targets, const float *mx, int N, int Vl, int nvalid,
                              int v0)
{
    if (N <= 0)
        return;
    k_vocab_sumexp<<<N, ROW_THREADS>>>(sumexp, tlogit, logits, targets, mx, Vl, nvalid, v0);
    LAUNCHED("k_vocab_sumexp");
}

static double cuda_vocab_ce_finish(float *logits, const int32_t *targets, const float *mx,
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

static void cuda_adamw(float *p, const float *grad, float *m, float *v, size_t n, float lr,
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

/* ---------------------------------------------------------------- table */

/* ------------------------------------------------------------ reserve */

/* Every scratch the ops will ask for with these shapes, at its final size:
 * dscratch (the cross-entropy losses N + 1, the embedding's 2N ints, the
 * RMSNorm dw slices, sumsq_list's partials), in bf16 mode the working copy
 * of the weights and the gradient operand of matmul_backward (N x widest),
 * on the cuBLAS attention path its chunk scratch and pointer arrays, and
 * the RoPE table of T positions. */
static hpt_status cuda_reserve(const hpt_backend_shapes *s)
{
    size_t N = (size_t)s->B * s->T;
    if (!N)
        return HPT_OK;
    size_t d = N + 1, S = (size_t)rmsnorm_dw_slices((int)N);
    d = d > (S * s->C + 1) / 2 ? d : (S * s->C + 1) / 2;
    d = d > (size_t)SUMSQ_LIST * SUMSQ_BLOCKS + SUMSQ_LIST ? d
                                                          : (size_t)SUMSQ_LIST * SUMSQ_BLOCKS + SUMSQ_LIST;
    int bad = scratch_grow(&g_dscratch, dscratch_bytes(d));
    if (!bad && g_bf16)
        bad = scratch_grow(&g_bf16_scratch[0], bf16_scratch_bytes(N * s->widest));
    size_t wbytes = 0;
    uintptr_t wbase = s->weights ? alloc_of(s->weights, &wbytes) : 0;
    if (!bad && g_bf16 && wbase)
        bad = !work_of(wbase, wbytes);
    if (!bad && s->H > 0 && att_use_blas(s->hd)) {
        bad = scratch_grow(&g_att_scratch, att_backward_bytes(s->B, s->T, s->H, s->KV, s->hd));
        if (!bad)
            bad = scratch_grow(&g_att_ptrs, 3 * (size_t)s->B * s->H * sizeof(void *));
    }
    if (!bad && s->hd > 0)
        bad = !rope_table_try(s->T, s->hd, s->theta);
    if (bad)
        return hpt_error_set(HPT_ERR_USAGE, "the cuda backend's scratch for micro-batch %d x %d: %s",
                             s->B, s->T, hpt_error_msg());
    return HPT_OK;
}

static hpt_backend make_table(void)
{
    hpt_backend b;
    memset(&b, 0, sizeof b);
    b.name = "cuda";
    b.init = cuda_init;
    b.set_precision = cuda_set_precision;
    b.mem_peak = cuda_mem_peak;
    b.reserve = cuda_reserve;
    b.act_dtype = cuda_act_dtype;
    b.alloc = cuda_alloc;
    b.free = cuda_free;
    b.is_device = cuda_is_device;
    b.host_pin = cuda_host_pin;
    b.host_unpin = cuda_host_unpin;
    b.memset0 = cuda_memset0;
    b.upload = cuda_upload;
    b.download = cuda_download;
    b.copy = cuda_copy;
    b.matmul_forward = cuda_matmul_forward;
    b.matmul_backward = cuda_matmul_backward;
    b.embedding_forward = cuda_embedding_forward;
    b.embedding_backward = cuda_embedding_backward;
    b.rmsnorm_forward = cuda_rmsnorm_forward;
    b.rmsnorm_backward = cuda_rmsnorm_backward;
    b.rope = cuda_rope;
    b.attention_forward = cuda_attention_forward;
    b.attention_saved_floats = cuda_attention_floats;
    b.attention_backward = cuda_attention_backward;
    b.attention_scratch_floats = cuda_attention_floats;
    b.rope_at = cuda_rope_at;
    b.attention_cached = cuda_attention_cached;
    b.swiglu_forward = cuda_swiglu_forward;
    b.swiglu_backward = cuda_swiglu_backward;
    b.add = cuda_add;
    b.scale = cuda_scale;
    b.sumsq = cuda_sumsq;
    b.sumsq_list = cuda_sumsq_list;
    b.crossentropy_fused = cuda_crossentropy_fused;
    b.crossentropy_loss = cuda_crossentropy_loss;
    b.vocab_max = cuda_vocab_max;
    b.vocab_sumexp = cuda_vocab_sumexp;
    b.vocab_ce_finish = cuda_vocab_ce_finish;
    b.adamw = cuda_adamw;
    return b;
}

/* C++ has no designated initialisers for this struct before C++20: the
 * table is filled by make_table during static initialisation, before
 * main() runs. */
extern "C" const hpt_backend hpt_backend_cuda = make_table();
