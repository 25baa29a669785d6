/* backend.c — registry of compute backends. The only place that knows
 * which backends were compiled in. */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

#include "hpt_config.h"

static const hpt_backend *const registry[] = {
    &hpt_backend_cpu,
#ifdef HAVE_CUDA
    &hpt_backend_cuda,
#endif
    NULL,
};

const hpt_backend *const *hpt_backend_list(void) { return registry; }

int hpt_backend_compiled(const char *name)
{
    for (const hpt_backend *const *b = registry; *b; b++)
        if (strcmp((*b)->name, name) == 0)
            return 1;
    return 0;
}

hpt_status hpt_backend_get(const char *name, const hpt_backend **out)
{
    char names[256] = "";
    for (const hpt_backend *const *b = registry; *b; b++) {
        if (strcmp((*b)->name, name) == 0) {
            hpt_status st = (*b)->init ? (*b)->init() : HPT_OK;
            if (st)
                return st;
            *out = *b;
            return HPT_OK;
        }
        strncat(names, names[0] ? ", " : "", sizeof names - strlen(names) - 1);
        strncat(names, (*b)->name, sizeof names - strlen(names) - 1);
    }
    if (strcmp(name, "cuda") == 0) /* hpt has one, this build lacks it */
        return hpt_error_set(HPT_ERR_USAGE, "--backend cuda: this hpt was built without the CUDA "
                             "backend (compiled in: %s): configure found no CUDA toolkit or was "
                             "given --with-cuda=no; rebuild with ./configure --with-cuda=yes "
                             "(or --with-cuda=DIR)", names);
    return hpt_error_set(HPT_ERR_USAGE, "--backend %s: unknown compute backend (compiled in: %s)",
                         name, names);
}

static const char *const precision_names[] = {
    [HPT_PRECISION_FP32] = "fp32",
    [HPT_PRECISION_TF32] = "tf32",
    [HPT_PRECISION_BF16] = "bf16",
};

hpt_status hpt_precision_parse(const char *s, hpt_precision *out)
{
    for (int p = HPT_PRECISION_FP32; p <= HPT_PRECISION_BF16; p++)
        if (!strcmp(s, precision_names[p])) {
            *out = (hpt_precision)p;
            return HPT_OK;
        }
    return hpt_error_set(HPT_ERR_USAGE, "--precision '%s': expected fp32, tf32 or bf16", s);
}

const char *hpt_precision_name(hpt_precision p)
{
    return p >= HPT_PRECISION_FP32 && p <= HPT_PRECISION_BF16 ? precision_names[p] : "?";
}

hpt_status hpt_cuda_attention_path(hpt_precision p, int *path)
{
    const char *e = getenv("HPT_CUDA_ATTENTION");
    *path = 0;
    if (!e || !*e)
        return HPT_OK;
    if (strcmp(e, "mma") && strcmp(e, "blas") && strcmp(e, "flash"))
        return hpt_error_set(HPT_ERR_USAGE, "HPT_CUDA_ATTENTION=%s: expected mma (bf16: the "
                             "tensor-core kernels), blas (cuBLAS chunks) or flash (fp32 kernels)",
                             e);
    if (e[0] == 'm' && p != HPT_PRECISION_BF16)
        return hpt_error_set(HPT_ERR_USAGE, "HPT_CUDA_ATTENTION=mma: the tensor-core attention "
                             "takes bf16 operands; use it with --precision bf16 (this run: %s)",
                             hpt_precision_name(p));
    *path = e[0];
    return HPT_OK;
}

int hpt_cuda_mma_head_dim_ok(int hd)
{
    return hd == 16 || hd == 32 || hd == 64 || hd == 96 || hd == 128;
}

int hpt_cuda_mma_kv_split(int B, int T, int H, int KV)
{
    int grp = H / KV;
    const char *e = getenv("HPT_CUDA_MMA_BLOCKS");
    long want = e && atol(e) > 0 ? atol(e) : 256;
    long base = (long)((T + 63) / 64) * B * KV; /* attention_mma.cu MMA_ROWS */
    for (int d = 1; d < grp; d++)
        if (grp % d == 0 && base * d >= want)
            return d;
    return grp;
}

hpt_status hpt_backend_set_precision(const hpt_backend *be, hpt_precision p)
{
    if (be->set_precision)
        return be->set_precision(p);
    if (p == HPT_PRECISION_FP32)
        return HPT_OK;
    return hpt_error_set(HPT_ERR_USAGE, "--precision %s: the %s backend computes in fp32 only",
                         hpt_precision_name(p), be->name);
}

hpt_dtype hpt_backend_act_dtype(const hpt_backend *be)
{
    return be->act_dtype ? be->act_dtype() : HPT_DTYPE_F32;
}
