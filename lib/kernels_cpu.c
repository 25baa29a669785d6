/* kernels_cpu.c — the CPU element-wise kernel tables (lib/kernels_cpu.h):
 * lib/kernels_cpu_impl.h compiled once for generic x86-64 and, with GCC on
 * x86-64, once each for AVX2+FMA and AVX-512 under `#pragma GCC target`;
 * the table is chosen at start-up from the CPU's features (or
 * HPT_CPU_KERNELS). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hpt_config.h"
#include "kernels_cpu.h"

#ifdef HAVE_LIBMVEC
/* glibc's libmvec has vector variants of expf for SSE2, AVX, AVX2 and
 * AVX-512 (_ZGVbN4v_expf ... _ZGVeN16v_expf; max error 1 ulp, glibc
 * manual "Errors in Math Functions"). <math.h> declares them only under
 * -ffast-math; declaring them here lets `omp simd` loops call them without
 * fast-math's reassociation, which would make sums depend on the vector
 * width. */
#pragma omp declare simd notinbranch
extern float expf(float);
#endif

#define KSUF generic
#define KSUF_NAME "generic"
#include "kernels_cpu_impl.h"
#undef KSUF
#undef KSUF_NAME

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HPT_KERNELS_X86 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define KSUF avx2
#define KSUF_NAME "avx2"
#include "kernels_cpu_impl.h"
#undef KSUF
#undef KSUF_NAME
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")
#define KSUF avx512
#define KSUF_NAME "avx512"
#include "kernels_cpu_impl.h"
#undef KSUF
#undef KSUF_NAME
#pragma GCC pop_options
#endif

/* Widest first. */
static const hpt_cpu_kernels *const tables[] = {
#ifdef HPT_KERNELS_X86
    &hpt_cpu_kernels_avx512,
    &hpt_cpu_kernels_avx2,
#endif
    &hpt_cpu_kernels_generic,
    NULL,
};

static int cpu_can_run(const hpt_cpu_kernels *k)
{
#ifdef HPT_KERNELS_X86
    __builtin_cpu_init();
    if (k == &hpt_cpu_kernels_avx512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (k == &hpt_cpu_kernels_avx2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return k == &hpt_cpu_kernels_generic;
}

const hpt_cpu_kernels *hpt_cpu_kernels_find(const char *name)
{
    for (int i = 0; tables[i]; i++)
        if (!strcmp(tables[i]->name, name))
            return cpu_can_run(tables[i]) ? tables[i] : NULL;
    return NULL;
}

static const hpt_cpu_kernels *widest(void)
{
    for (int i = 0; tables[i]; i++)
        if (cpu_can_run(tables[i]))
            return tables[i];
    return &hpt_cpu_kernels_generic;
}

static const hpt_cpu_kernels *chosen;

hpt_status hpt_cpu_kernels_init(void)
{
    const char *env = getenv("HPT_CPU_KERNELS");
    if (!env || !*env) {
        chosen = widest();
        return HPT_OK;
    }
    const hpt_cpu_kernels *k = hpt_cpu_kernels_find(env);
    if (!k) {
        char list[64] = "";
        for (int i = 0; tables[i]; i++)
            if (cpu_can_run(tables[i])) {
                strcat(list, *list ? ", " : "");
                strcat(list, tables[i]->name);
            }
        chosen = widest();
        return hpt_error_set(HPT_ERR_USAGE,
                             "HPT_CPU_KERNELS=%s: not a kernel set this build and CPU can run "
                             "(choose one of: %s)", env, list);
    }
    chosen = k;
    return HPT_OK;
}

const hpt_cpu_kernels *hpt_cpu_kernels_get(void)
{
    if (!chosen)
        chosen = widest();
    return chosen;
}
