/* cuda_util.h — checking of CUDA runtime and cuBLAS calls (the CUDA
 * backend: lib/backend_cuda.cu, attention_cuda.cu, kernels_cuda.cu).
 *
 * Every call is wrapped: on failure the process prints "hpt: fatal:
 * file:line: <call>: <CUDA error string>" and aborts every rank through
 * hpt_fatal (MPI_Abort), never exiting one rank alone. Kernel launches are
 * checked with HPT_CUDA_LAUNCHED(name): configuration errors at once, and,
 * with HPT_CUDA_SYNC=1 in the environment, execution errors too (the
 * launch is synchronised, so the failing kernel is named instead of the
 * next memory copy). Only for .cu files compiled by nvcc.
 */
#ifndef HPT_CUDA_UTIL_H
#define HPT_CUDA_UTIL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "error.h"

#define HPT_CUDA(call)                                                                         \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess)                                                                 \
            hpt_fatal(__FILE__, __LINE__, HPT_ERR_INTERNAL, "%s: %s (%s)", #call,              \
                      cudaGetErrorString(e_), cudaGetErrorName(e_));                           \
    } while (0)

/* The includer provides `const char *hpt_cublas_error(cublasStatus_t)`
 * (defined in lib/backend_cuda.cu, which loads cuBLAS at run time;
 * declared in lib/cuda_internal.h). */
#define HPT_CUBLAS(call)                                                                       \
    do {                                                                                       \
        cublasStatus_t s_ = (call);                                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                       \
            hpt_fatal(__FILE__, __LINE__, HPT_ERR_INTERNAL, "%s: %s (cuBLAS status %d)", #call, \
                      hpt_cublas_error(s_), (int)s_);                                          \
    } while (0)

/* After a <<<...>>> launch of kernel `name` (a string). `sync`: nonzero to
 * wait for the kernel and report its execution errors here. */
static inline void hpt_cuda_launched(const char *name, int sync, const char *file, int line)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && sync) /* the kernels' (legacy) stream, not the device: NCCL's
                                   * non-blocking streams may wait on other ranks */
        e = cudaStreamSynchronize(0);
    if (e != cudaSuccess)
        hpt_fatal(file, line, HPT_ERR_INTERNAL, "kernel %s: %s (%s)", name, cudaGetErrorString(e),
                  cudaGetErrorName(e));
}

#endif
