/* backend_cuda.cu — the CUDA compute backend: its table, device state,
 * memory and scratch, cuBLAS (loaded at run time) and the matrix products;
 * attention is lib/attention_cuda.cu, the other kernels
 * lib/kernels_cuda.cu, what they share lib/cuda_internal.h (as
 * backend_cpu.c, attention_cpu.c and kernels_cpu.c). Shapes and maths of every slot: see
 * backend.h; the semantics (overwrite vs accumulate, what is saved) are
 * those of backend_cpu.c, against which tests/unit/test_backend_cuda checks
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
 * - ZeRO-3's parameter block (alloc_virtual, commit, decommit): CUDA virtual
 *   memory management, granules mapped and unmapped as units are gathered
 *   and dropped ("virtual memory" below); the driver API through the
 *   runtime's entry-point query, so no libcuda link.
 * - cuBLAS is loaded by init (dlopen), not linked: linking it costs every
 *   process ~215 MiB of resident memory at start-up (the relocations of
 *   libcublasLt, measured), CPU runs included.
 * All work runs on the legacy default stream; upload/download and the
 * host-returning reductions synchronise with it, and are counted (with
 * explicit synchronisations and device allocations: the host_syncs slot,
 * g_host) so a test can hold a training step to its expected number.
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
#include <vector>

#include <cuda.h> /* the driver API's types; its entry points come through the runtime */

#include "backend.h"
#include "cuda_internal.h"
#include "hpt_config.h"

namespace hpt_cuda {

/* ------------------------------------------------------------- cuBLAS */

#define HPT_STR2(x) #x
#define HPT_STR(x) HPT_STR2(x)

cublas_api g_cublas; /* the entry points used, resolved by load_cublas */

const char *hpt_cublas_error(cublasStatus_t s)
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
int g_device;               /* CUDA device of this rank             */
int g_sync;                 /* HPT_CUDA_SYNC=1: sync after launches  */
cublasHandle_t g_blas;
cublasComputeType_t g_compute = CUBLAS_COMPUTE_32F;
int g_bf16;                 /* --precision bf16                     */
hpt_host_syncs g_host;      /* host synchronisations since init      */
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

void work_mark_all_dirty(void);

/* FP32 and TF32: fp32 operands; BF16: bf16 operands (working copies of the
 * weights), CUBLAS_COMPUTE_32F in both fp32 and bf16 modes. */
static hpt_status cuda_set_precision(hpt_precision p)
{
    int path;
    hpt_status st = hpt_cuda_attention_path(p, &path); /* refused here, at start-up */
    if (st)
        return st;
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

void *cuda_alloc(size_t bytes)
{
    HPT_CHECK(g_ready);
    if (bytes == 0)
        bytes = 64;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    g_host.alloc++;
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

static int vmm_free(void *p);

void cuda_free(void *p)
{
    if (!p)
        return;
    auto it = g_sizes->find((uintptr_t)p);
    HPT_CHECK(it != g_sizes->end());
    int mapped = vmm_free(p); /* alloc_virtual's: its granules uncounted there */
    if (!mapped)
        g_cur -= it->second;
    g_sizes->erase(it);
    auto w = g_work->find((uintptr_t)p);
    if (w != g_work->end()) { /* its bf16 working copy goes with it */
        g_cur -= w->second.bytes;
        HPT_CUDA(cudaFree(w->second.bf));
        g_host.alloc++;
        g_work->erase(w);
    }
    if (mapped)
        return;
    HPT_CUDA(cudaFree(p));
    g_host.alloc++;
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
void work_mark_dirty(const void *dst)
{
    if (!g_work || g_work->empty())
        return;
    size_t bytes;
    uintptr_t base = alloc_of(dst, &bytes);
    auto w = base ? g_work->find(base) : g_work->end();
    if (w != g_work->end())
        w->second.dirty = 1;
}

void work_mark_all_dirty(void)
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
static int vmm_holds(const void *p);

static int cuda_is_device(const void *p)
{
    cudaPointerAttributes a;
    if (!p)
        return 0;
    if (vmm_holds(p)) /* alloc_virtual's, mapped or not */
        return 1;
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

void cuda_memset0(void *dst, size_t bytes)
{
    work_mark_dirty(dst);
    if (bytes)
        HPT_CUDA(cudaMemset(dst, 0, bytes));
}

void cuda_upload(void *dst, const void *src, size_t bytes)
{
    work_mark_dirty(dst);
    if (bytes) {
        HPT_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
        g_host.h2d++;
    }
}

void memcpy_d2h(void *dst, const void *src, size_t bytes)
{
    HPT_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    g_host.d2h++;
}

static void cuda_download(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        memcpy_d2h(dst, src, bytes);
}

/* The host_syncs slot: the counters since init. */
static void cuda_host_syncs(hpt_host_syncs *out) { *out = g_host; }

/* memmove semantics, as on the CPU, enqueued on the compute stream (the
 * legacy default stream) with no host synchronisation and no allocation
 * inside a step. Overlapping ranges (cudaMemcpy's are undefined for them)
 * go in pieces of the distance between them, in the direction that reads
 * each piece before it is overwritten — when that takes at most
 * COPY_PIECES copies — else through g_copy_scratch (grown on demand, kept;
 * its growth is cuda_alloc's, counted there). */
enum { COPY_PIECES = 16 };
static scratch g_copy_scratch;

static void copy_async(void *dst, const void *src, size_t bytes)
{
    HPT_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0));
}

static void cuda_copy(void *dst, const void *src, size_t bytes)
{
    work_mark_dirty(dst);
    if (!bytes || dst == src)
        return;
    char *d = (char *)dst;
    const char *s = (const char *)src;
    if (!(d < s + bytes && s < d + bytes)) {
        copy_async(dst, src, bytes);
        return;
    }
    size_t gap = d > s ? (size_t)(d - s) : (size_t)(s - d);
    if ((bytes + gap - 1) / gap > COPY_PIECES) {
        void *t = scratch_need(&g_copy_scratch, bytes, "overlapping device copy");
        copy_async(t, src, bytes);
        copy_async(dst, t, bytes);
        return;
    }
    for (size_t done = 0; done < bytes;) { /* pieces of `gap` bytes never overlap */
        size_t k = bytes - done < gap ? bytes - done : gap;
        size_t at = d < s ? done : bytes - done - k; /* forward: from the front */
        copy_async(d + at, s + at, k);
        done += k;
    }
}

/* Grow s to at least `bytes`: 0, or -1 with the reason (the bytes asked
 * for and free) in hpt_error_msg(), s then empty. */
int scratch_grow(scratch *s, size_t bytes)
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
void *scratch_need(scratch *s, size_t bytes, const char *what)
{
    if (scratch_grow(s, bytes))
        hpt_fatal(__FILE__, __LINE__, HPT_ERR_USAGE, "%s: %s", what, hpt_error_msg());
    return s->p;
}

scratch g_dscratch; /* doubles: reductions, losses, small tables */

/* Bytes of a dscratch of n doubles (at least 4096). */
size_t dscratch_bytes(size_t n) { return sizeof(double) * (n < 4096 ? 4096 : n); }

/* Device scratch of at least n doubles (grown on demand; internal). */
double *dscratch(size_t n)
{
    return (double *)scratch_need(&g_dscratch, dscratch_bytes(n), "device scratch");
}

/* ---------------------------------- virtual memory (ZeRO-3's parameters) */

/* The slots alloc_virtual, commit, decommit and committed (backend.h):
 * ZeRO-3's parameter block (lib/train_zero3.c), of which a rank keeps its
 * own shard and the units in use, through CUDA's virtual memory management
 * (CUDA C++ Programming Guide, "Virtual Memory Management"; PyTorch's
 * expandable segments use the same calls). The block's address range is
 * reserved once (cuMemAddressReserve, whole granules of the minimum
 * allocation granularity, cuMemGetAllocationGranularity) and backed granule
 * by granule: each granule its own physical allocation (cuMemCreate),
 * mapped (cuMemMap), made readable and writable by this device
 * (cuMemSetAccess), its handle released at once (the mapping keeps the
 * memory until cuMemUnmap, which frees it). A granule's reference count is
 * the number of commits not yet decommitted that overlap it: ZeRO-3
 * commits the own block once for good and each unit's foreign parts
 * before its gather, so a granule shared by two units, or by a unit and
 * the own block, stays mapped while either needs it. The driver's entry
 * points come through the runtime (cudaGetDriverEntryPointByVersion), so
 * hpt links no libcuda. Without virtual memory management (the device
 * attribute, a driver without the entry points, or HPT_CUDA_VMM=0)
 * alloc_virtual is cuda_alloc, said once on stderr, and the block is held
 * whole. Tested on the CPU emulation (tests/gpu/cuda-emu, group vmm) and by
 * tests/gpu/gpu-zero3-memory.sh on a GPU. */

struct vmm_api {
    decltype(&cuDeviceGet) device_get;
    decltype(&cuDeviceGetAttribute) attribute;
    decltype(&cuMemGetAllocationGranularity) granularity;
    decltype(&cuMemAddressReserve) reserve;
    decltype(&cuMemAddressFree) address_free;
    decltype(&cuMemCreate) create;
    decltype(&cuMemRelease) release;
    decltype(&cuMemMap) map;
    decltype(&cuMemUnmap) unmap;
    decltype(&cuMemSetAccess) set_access;
};
static vmm_api g_vmm;
static CUdevice g_vmm_dev;
static size_t g_gran;        /* bytes of a granule; 0: no virtual memory management */
static char g_vmm_why[256];  /* why not, when g_gran is 0                 */

/* One allocation from alloc_virtual; ngran 0: held whole (cuda_alloc). */
struct vmm_block {
    size_t bytes, ngran;
    std::vector<int> refs;     /* per granule: commits not yet decommitted */
    std::vector<char> mapped;  /* per granule: backed by physical memory   */
};
static std::map<uintptr_t, vmm_block> *g_vmm_blocks;
static size_t g_vmm_now, g_vmm_peak; /* bytes backing the blocks          */
static int g_vmm_granular;           /* blocks backed granule by granule  */

/* Resolve the driver's entry points and ask the device: 1 with g_gran
 * set, else 0 with the reason in g_vmm_why. Once per process. */
static int vmm_probe(void)
{
    static int probed;
    if (probed++)
        return g_gran != 0;
    const struct {
        void **slot;
        const char *sym;
    } syms[] = {{(void **)&g_vmm.device_get, "cuDeviceGet"},
                {(void **)&g_vmm.attribute, "cuDeviceGetAttribute"},
                {(void **)&g_vmm.granularity, "cuMemGetAllocationGranularity"},
                {(void **)&g_vmm.reserve, "cuMemAddressReserve"},
                {(void **)&g_vmm.address_free, "cuMemAddressFree"},
                {(void **)&g_vmm.create, "cuMemCreate"},
                {(void **)&g_vmm.release, "cuMemRelease"},
                {(void **)&g_vmm.map, "cuMemMap"},
                {(void **)&g_vmm.unmap, "cuMemUnmap"},
                {(void **)&g_vmm.set_access, "cuMemSetAccess"}};
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        *syms[i].slot = NULL;
#if CUDART_VERSION >= 12050
        cudaError_t e = cudaGetDriverEntryPointByVersion(syms[i].sym, syms[i].slot, CUDA_VERSION,
                                                         cudaEnableDefault, &q);
#else
        cudaError_t e = cudaGetDriverEntryPoint(syms[i].sym, syms[i].slot, cudaEnableDefault, &q);
#endif
        if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !*syms[i].slot) {
            (void)cudaGetLastError();
            snprintf(g_vmm_why, sizeof g_vmm_why, "the driver gives no %s for CUDA %d",
                     syms[i].sym, CUDA_VERSION);
            return 0;
        }
    }
    int ok = 0;
    if (g_vmm.device_get(&g_vmm_dev, g_device) != CUDA_SUCCESS ||
        g_vmm.attribute(&ok, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, g_vmm_dev) !=
            CUDA_SUCCESS || !ok) {
        snprintf(g_vmm_why, sizeof g_vmm_why, "CUDA device %d reports no virtual memory "
                 "management (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)", g_device);
        return 0;
    }
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = g_vmm_dev;
    size_t g = 0;
    if (g_vmm.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || !g) {
        snprintf(g_vmm_why, sizeof g_vmm_why, "cuMemGetAllocationGranularity failed on CUDA "
                 "device %d", g_device);
        return 0;
    }
    g_gran = g;
    return 1;
}

/* The block holding p (mapped or not), its base in *base; NULL if none. */
static vmm_block *vmm_block_of(const void *p, uintptr_t *base)
{
    if (!g_vmm_blocks)
        return NULL;
    auto it = g_vmm_blocks->upper_bound((uintptr_t)p);
    if (it == g_vmm_blocks->begin())
        return NULL;
    --it;
    size_t span = it->second.ngran ? it->second.ngran * g_gran : it->second.bytes;
    if ((uintptr_t)p >= it->first + span)
        return NULL;
    *base = it->first;
    return &it->second;
}

/* 1 when p lies in an allocation from alloc_virtual. */
static int vmm_holds(const void *p)
{
    uintptr_t base;
    return vmm_block_of(p, &base) != NULL;
}

static void vmm_count(ptrdiff_t bytes)
{
    g_vmm_now += bytes;
    g_vmm_peak = g_vmm_now > g_vmm_peak ? g_vmm_now : g_vmm_peak;
    g_cur += bytes;
    g_peak = g_cur > g_peak ? g_cur : g_peak;
}

/* Back granule i of the block at base: 0, or -1 with the bytes asked for
 * and free in hpt_error_msg() when the device is out of memory. Other
 * driver errors abort, naming the call and its CUresult. */
static int vmm_map(uintptr_t base, vmm_block *b, size_t i)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = g_vmm_dev;
    CUmemGenericAllocationHandle h;
    CUresult r = g_vmm.create(&h, g_gran, &prop, 0);
    g_host.alloc++;
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        hpt_error_set(HPT_ERR_USAGE, "cuMemCreate of a %zu-byte granule on CUDA device %d: out of "
                      "device memory (%.1f MiB free of %.1f MiB)", g_gran, g_device,
                      fr / 1048576.0, tot / 1048576.0);
        return -1;
    }
    CUdeviceptr at = (CUdeviceptr)(base + i * g_gran);
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = g_vmm_dev;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (r != CUDA_SUCCESS || (r = g_vmm.map(at, g_gran, 0, h, 0)) != CUDA_SUCCESS ||
        (r = g_vmm.set_access(at, g_gran, &acc, 1)) != CUDA_SUCCESS ||
        (r = g_vmm.release(h)) != CUDA_SUCCESS)
        hpt_fatal(__FILE__, __LINE__, HPT_ERR_INTERNAL, "backing granule %zu of a %zu-byte "
                  "block on CUDA device %d (cuMemCreate, cuMemMap, cuMemSetAccess, "
                  "cuMemRelease): CUresult %d", i, b->bytes, g_device, (int)r);
    b->mapped[i] = 1;
    vmm_count((ptrdiff_t)g_gran);
    return 0;
}

static void vmm_unmap(uintptr_t base, vmm_block *b, size_t i)
{
    CUresult r = g_vmm.unmap((CUdeviceptr)(base + i * g_gran), g_gran);
    g_host.alloc++;
    if (r != CUDA_SUCCESS)
        hpt_fatal(__FILE__, __LINE__, HPT_ERR_INTERNAL, "cuMemUnmap of granule %zu of a "
                  "%zu-byte block on CUDA device %d: CUresult %d", i, b->bytes, g_device, (int)r);
    b->mapped[i] = 0;
    vmm_count(-(ptrdiff_t)g_gran);
}

/* The alloc_virtual slot. */
static void *cuda_alloc_virtual(size_t bytes)
{
    HPT_CHECK(g_ready);
    if (!g_vmm_blocks)
        g_vmm_blocks = new std::map<uintptr_t, vmm_block>();
    const char *env = getenv("HPT_CUDA_VMM");
    int off = env && !strcmp(env, "0");
    if (off || !vmm_probe()) { /* held whole, as cuda_alloc */
        static int said;
        if (!said++)
            fprintf(stderr, "hpt: cuda backend: %s: ZeRO-3's parameter block is held whole on "
                    "the device (no memory saved)\n", off ? "HPT_CUDA_VMM=0" : g_vmm_why);
        void *p = cuda_alloc(bytes);
        if (p) {
            (*g_vmm_blocks)[(uintptr_t)p] = vmm_block{bytes ? bytes : 64, 0, {}, {}};
            g_vmm_now += bytes ? bytes : 64; /* (g_cur counted by cuda_alloc) */
            g_vmm_peak = g_vmm_now > g_vmm_peak ? g_vmm_now : g_vmm_peak;
        }
        return p;
    }
    size_t n = (bytes ? bytes + g_gran - 1 : g_gran) / g_gran;
    CUdeviceptr base = 0;
    CUresult r = g_vmm.reserve(&base, n * g_gran, g_gran, 0, 0);
    if (r != CUDA_SUCCESS) {
        hpt_error_set(HPT_ERR_USAGE, "cuMemAddressReserve of %zu bytes on CUDA device %d: "
                      "CUresult %d", n * g_gran, g_device, (int)r);
        return NULL;
    }
    vmm_block &b = (*g_vmm_blocks)[(uintptr_t)base];
    b.bytes = bytes;
    b.ngran = n;
    b.refs.assign(n, 0);
    b.mapped.assign(n, 0);
    (*g_sizes)[(uintptr_t)base] = bytes; /* alloc_of finds it: the bf16 working copy */
    g_vmm_granular++;
    for (size_t i = 0; i < n; i++)
        if (vmm_map((uintptr_t)base, &b, i)) {
            char why[512];
            snprintf(why, sizeof why, "%s", hpt_error_msg());
            cuda_free((void *)base);
            hpt_error_set(HPT_ERR_USAGE, "%s", why);
            return NULL;
        }
    if (bytes)
        HPT_CUDA(cudaMemset((void *)base, 0, bytes));
    return (void *)base;
}

/* cuda_free's part: unmap and unreserve a block of alloc_virtual's (its
 * granules uncounted). Returns 1 when p was one with granules (nothing
 * left to free), 0 otherwise (a block held whole is forgotten here and
 * freed by the caller as any cuda_alloc). */
static int vmm_free(void *p)
{
    uintptr_t base;
    vmm_block *b = vmm_block_of(p, &base);
    if (!b || base != (uintptr_t)p)
        return 0;
    int granules = b->ngran != 0;
    if (!granules)
        g_vmm_now -= b->bytes;
    else {
        HPT_CUDA(cudaDeviceSynchronize()); /* no kernel still reads it */
        g_host.sync++;
        for (size_t i = 0; i < b->ngran; i++)
            if (b->mapped[i])
                vmm_unmap(base, b, i);
        CUresult r = g_vmm.address_free((CUdeviceptr)base, b->ngran * g_gran);
        if (r != CUDA_SUCCESS)
            hpt_fatal(__FILE__, __LINE__, HPT_ERR_INTERNAL, "cuMemAddressFree of %zu bytes: "
                      "CUresult %d", b->ngran * g_gran, (int)r);
        g_vmm_granular--;
    }
    g_vmm_blocks->erase(base);
    return granules;
}

/* Granules [*i0, *i1) of block b (base) that bytes [p, p + bytes) overlap. */
static void vmm_span(uintptr_t base, const void *p, size_t bytes, size_t *i0, size_t *i1)
{
    *i0 = ((uintptr_t)p - base) / g_gran;
    *i1 = ((uintptr_t)p + bytes - 1 - base) / g_gran + 1;
}

/* The commit slot: map what is missing first (undone on failure), then
 * count one reference on every granule of the range. */
static hpt_status cuda_commit(void *p, size_t bytes)
{
    uintptr_t base;
    vmm_block *b = bytes ? vmm_block_of(p, &base) : NULL;
    if (!b || !b->ngran)
        return HPT_OK;
    HPT_CHECK((uintptr_t)p + bytes <= base + b->ngran * g_gran);
    size_t i0, i1;
    vmm_span(base, p, bytes, &i0, &i1);
    for (size_t i = i0; i < i1; i++)
        if (!b->mapped[i] && vmm_map(base, b, i)) {
            for (size_t j = i0; j < i; j++) /* the ones this call mapped */
                if (!b->refs[j] && b->mapped[j])
                    vmm_unmap(base, b, j);
            return HPT_ERR_USAGE; /* (message: vmm_map's) */
        }
    for (size_t i = i0; i < i1; i++)
        b->refs[i]++;
    return HPT_OK;
}

/* The decommit slot: one reference less on every granule of the range;
 * those left with none unmapped, after the legacy default stream (every
 * kernel of this backend, and through its waits the gathers that wrote
 * the range) has finished: one host synchronisation per call that unmaps,
 * counted in g_host.sync. */
static void cuda_decommit(void *p, size_t bytes)
{
    uintptr_t base;
    vmm_block *b = bytes ? vmm_block_of(p, &base) : NULL;
    if (!b || !b->ngran)
        return;
    HPT_CHECK((uintptr_t)p + bytes <= base + b->ngran * g_gran);
    size_t i0, i1;
    vmm_span(base, p, bytes, &i0, &i1);
    int synced = 0;
    for (size_t i = i0; i < i1; i++) {
        if (b->refs[i] > 0)
            b->refs[i]--;
        if (b->refs[i] || !b->mapped[i])
            continue;
        if (!synced++) {
            HPT_CUDA(cudaStreamSynchronize(0));
            g_host.sync++;
        }
        vmm_unmap(base, b, i);
    }
}

/* The committed slot. */
static void cuda_committed(hpt_commit_stats *out, int reset)
{
    out->now = g_vmm_now;
    out->peak = g_vmm_peak;
    out->granule = g_vmm_granular ? g_gran : 0;
    if (reset)
        g_vmm_peak = g_vmm_now;
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
/* out (n) bf16 := in (n) float32. */
__global__ static void k_to_bf16(uint16_t *out, const float *in, size_t n)
{
    GRID_STRIDE(i, n) out[i] = bf16_bits(in[i]);
}

void to_bf16(uint16_t *out, const float *in, size_t n)
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
    g_host.alloc++;
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
    if (vmm_holds(w)) { /* ZeRO-3's block: parts unmapped, parts gathered by
                         * the communication backend behind the dirty flag's
                         * back: the weight's own range, at every use */
        uint16_t *bw = c->bf + (w - (const float *)base);
        to_bf16(bw, w, n);
        return bw;
    }
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
/* The bf16-mode products of matmul_backward from db, the output gradient
 * already in bf16 (rounded from fp32 here, or written so by its kernel). */
static void matmul_backward_bf16(float *din, float *dw, const uint16_t *db, const void *in,
                                 const float *w, int N, int Ic, int O, int accum_din)
{
    if (din)
        gemm_bf16(CUBLAS_OP_N, CUBLAS_OP_N, Ic, N, O, weight_bf16(w, (size_t)O * Ic), Ic, db, O,
                  accum_din ? 1.0f : 0.0f, din, CUDA_R_32F, Ic);
    if (dw)
        gemm_bf16(CUBLAS_OP_N, CUBLAS_OP_T, Ic, O, N, in, Ic, db, O, 1.0f, dw, CUDA_R_32F, Ic);
}

static void cuda_matmul_backward(float *din, float *dw, const float *dout, const void *in,
                                 const float *w, int N, int Ic, int O, int accum_din)
{
    if (g_bf16) { /* in: bf16 activation; dout (fp32 gradient) rounded to bf16 */
        matmul_backward_bf16(din, dw, act_bf16(0, dout, (size_t)N * O), in, w, N, Ic, O,
                             accum_din);
        return;
    }
    if (din)
        gemm(CUBLAS_OP_N, CUBLAS_OP_N, Ic, N, O, w, Ic, dout, O, accum_din ? 1.0f : 0.0f, din, Ic);
    if (dw)
        gemm(CUBLAS_OP_N, CUBLAS_OP_T, Ic, O, N, (const float *)in, Ic, dout, O, 1.0f, dw, Ic);
}

/* backend.h matmul_backward_act: dout in the activation dtype (bf16 mode:
 * bf16, no cast pass), else as matmul_backward. */
static void cuda_matmul_backward_act(float *din, float *dw, const void *dout, const void *in,
                                     const float *w, int N, int Ic, int O, int accum_din)
{
    if (g_bf16)
        matmul_backward_bf16(din, dw, (const uint16_t *)dout, in, w, N, Ic, O, accum_din);
    else
        cuda_matmul_backward(din, dw, (const float *)dout, in, w, N, Ic, O, accum_din);
}

/* ---------------------------------------------------------------- table */

/* ------------------------------------------------------------ reserve */

/* Every scratch the ops will ask for with these shapes, at its final size:
 * dscratch (the cross-entropy losses N + 1, the RMSNorm dw slices,
 * sumsq_list's partials), in bf16 mode the working copy of the weights and
 * the gradient operand of matmul_backward (N x widest), on the cuBLAS
 * attention path its chunk scratch and pointer arrays, and the RoPE table
 * of T positions, and the embedding backward's chains (N positions, the
 * shard's embed_rows). */
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
    if (!bad && s->H > 0 && att_use_mma(s->hd))
        bad = scratch_grow(&g_att_scratch, mma_backward_bytes(s->B, s->T, s->H, s->KV, s->hd));
    if (!bad && s->H > 0 && att_use_blas(s->hd)) {
        bad = scratch_grow(&g_att_scratch, att_backward_bytes(s->B, s->T, s->H, s->KV, s->hd));
        if (!bad)
            bad = scratch_grow(&g_att_ptrs, 3 * (size_t)s->B * s->H * sizeof(void *));
    }
    if (!bad && s->hd > 0)
        bad = !rope_table_try(s->T, s->hd, s->theta);
    if (!bad && s->embed_rows > 0)
        bad = embed_scratch_reserve(N, (size_t)s->embed_rows);
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
    b.alloc_virtual = cuda_alloc_virtual; /* ZeRO-3's parameter block */
    b.commit = cuda_commit;
    b.decommit = cuda_decommit;
    b.committed = cuda_committed;
    b.matmul_forward = cuda_matmul_forward;
    b.matmul_backward = cuda_matmul_backward;
    b.embedding_forward = cuda_embedding_forward;
    b.embedding_backward = cuda_embedding_backward;
    b.rmsnorm_forward = cuda_rmsnorm_forward;
    b.rmsnorm_backward = cuda_rmsnorm_backward;
    b.add_rmsnorm_forward = cuda_add_rmsnorm_forward;
    b.swiglu_backward_act = cuda_swiglu_backward_act;
    b.matmul_backward_act = cuda_matmul_backward_act;
    b.rope = cuda_rope;
    b.rope_qk = cuda_rope_qk;
    b.attention_forward = cuda_attention_forward;
    b.attention_saved_floats = cuda_attention_floats;
    b.attention_backward = cuda_attention_backward;
    b.attention_scratch_floats = cuda_attention_floats;
    b.rope_at = cuda_rope_at;
    b.attention_cached = cuda_attention_cached;
    b.rope_pos = cuda_rope_pos; /* context parallelism (lib/attention_ring.c) */
    b.attention_block_forward = cuda_attention_block_forward;
    b.attention_block_backward = cuda_attention_block_backward;
    b.attention_rowdot = cuda_attention_rowdot;
    b.swiglu_forward = cuda_swiglu_forward;
    b.swiglu_backward = cuda_swiglu_backward;
    b.add = cuda_add;
    b.scale = cuda_scale;
    b.sumsq = cuda_sumsq;
    b.sumsq_list = cuda_sumsq_list;
    b.sumsq_list_async = cuda_sumsq_list_async;
    b.crossentropy_fused = cuda_crossentropy_fused;
    b.crossentropy_loss = cuda_crossentropy_loss;
    b.vocab_max = cuda_vocab_max;
    b.vocab_sumexp = cuda_vocab_sumexp;
    b.vocab_ce_finish = cuda_vocab_ce_finish;
    b.adamw = cuda_adamw;
    b.host_syncs = cuda_host_syncs;
    return b;
}

} // namespace hpt_cuda

/* C++ has no designated initialisers for this struct before C++20: the
 * table is filled by make_table during static initialisation, before
 * main() runs. */
extern "C" const hpt_backend hpt_backend_cuda = hpt_cuda::make_table();
