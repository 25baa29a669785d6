/* gemm_ceiling.c — how fast the products of one `small` training step run
 * through the CPU backend, as a fraction of the SGEMM line: the ceiling of
 * bench_small.sh's "% of SGEMM peak" (a step cannot beat its own products),
 * and the tiled work split (lib/backend_cpu.c gemm_grid_for) against the
 * static split it replaced (one row block per thread, kept here verbatim).
 *
 * For every product of a `small` layer (C = 384, I = 1152, H = 6, KV = 2,
 * head dim 64: q, k, v, o, gate, up, down, as lib/model.c calls them) and
 * the LM head (V = 8192), batch·seq = N tokens, it times
 * the forward (out = in·wᵀ) and the backward (din = dout·w, dw += doutᵀ·in)
 * with the backend's matmul_forward/matmul_backward and with the static
 * split, interleaved, REPS times after a warm-up, and prints the medians,
 * then the step's product time (8 layers + head) and its GFLOP/s. With the
 * SGEMM line from bench/sgemm_peak.c (PEAK, GFLOP/s) it prints the ceiling
 * in %. FLOPs: 2·N·Ic·O per product, three products per weight matrix.
 *
 * Built and run by bench/gemm_ceiling.sh. Usage: gemm_ceiling N REPS [PEAK] */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "bench_util.h"

/* The split before issue 18: rows [lo, hi) of n for the calling thread. */
static void thread_rows(int n, int *lo, int *hi)
{
    int nt = omp_get_num_threads(), id = omp_get_thread_num();
    *lo = (int)((long long)n * id / nt);
    *hi = (int)((long long)n * (id + 1) / nt);
}

static void static_forward(float *out, const float *in, const float *w, int N, int Ic, int O)
{
#pragma omp parallel
    {
        int lo, hi;
        thread_rows(N, &lo, &hi);
        if (hi > lo)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, hi - lo, O, Ic, 1.0f,
                        in + (size_t)lo * Ic, Ic, w, Ic, 0.0f, out + (size_t)lo * O, O);
    }
}

static void static_backward(float *din, float *dw, const float *dout, const float *in,
                            const float *w, int N, int Ic, int O)
{
#pragma omp parallel
    {
        int lo, hi;
        thread_rows(N, &lo, &hi);
        if (hi > lo)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, hi - lo, Ic, O, 1.0f,
                        dout + (size_t)lo * O, O, w, Ic, 0.0f, din + (size_t)lo * Ic, Ic);
        thread_rows(O, &lo, &hi);
        if (hi > lo)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hi - lo, Ic, N, 1.0f, dout + lo,
                        O, in, Ic, 1.0f, dw + (size_t)lo * Ic, Ic);
    }
}

static float *rnd(size_t n)
{
    float *p = malloc(sizeof(float) * n);
    if (!p) {
        fprintf(stderr, "gemm_ceiling: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    return p;
}

int main(int argc, char **argv)
{
    int N = argc > 1 ? atoi(argv[1]) : 1024, reps = argc > 2 ? atoi(argv[2]) : 9;
    double peak = argc > 3 ? atof(argv[3]) : 0.0;
    if (N < 1 || reps < 1) {
        fprintf(stderr, "usage: gemm_ceiling N REPS [PEAK_GFLOPS]\n");
        return 2;
    }
    const hpt_backend *be = &hpt_backend_cpu;
    if (be->init() != HPT_OK) {
        fprintf(stderr, "gemm_ceiling: backend init failed\n");
        return 1;
    }
    enum { SC = 384, SI = 1152, SH = 6, SKV = 2, SHD = 64, SV = 8192, SL = 8 }; /* small */
    /* name, Ic, O, how many per step */
    static const struct {
        const char *name;
        int Ic, O, count;
    } sh[] = {{"q", SC, SH * SHD, SL},     {"k, v", SC, SKV * SHD, 2 * SL},
              {"o", SH * SHD, SC, SL},     {"gate, up", SC, SI, 2 * SL},
              {"down", SI, SC, SL},        {"lm head", SC, SV, 1}};
    printf("N = %d tokens, %d threads, medians of %d interleaved reps (ms)\n", N,
           omp_get_max_threads(), reps);
    printf("%-9s %5s %5s   %9s %9s   %9s %9s\n", "product", "Ic", "O", "fwd tiled", "static",
           "bwd tiled", "static");
    double step[2] = {0, 0}, flops = 0;
    double *t = malloc(sizeof(double) * 4 * reps);
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        int Ic = sh[s].Ic, O = sh[s].O;
        float *in = rnd((size_t)N * Ic), *w = rnd((size_t)O * Ic), *out = rnd((size_t)N * O);
        float *din = rnd((size_t)N * Ic), *dw = rnd((size_t)O * Ic);
        double med[4];
        for (int r = -1; r < reps; r++) {
            double t0 = now_s();
            be->matmul_forward(out, HPT_DTYPE_F32, in, w, N, Ic, O);
            double t1 = now_s();
            static_forward(out, in, w, N, Ic, O);
            double t2 = now_s();
            be->matmul_backward(din, dw, out, in, w, N, Ic, O, 0);
            double t3 = now_s();
            static_backward(din, dw, out, in, w, N, Ic, O);
            double t4 = now_s();
            if (r >= 0) {
                t[0 * reps + r] = t1 - t0, t[1 * reps + r] = t2 - t1;
                t[2 * reps + r] = t3 - t2, t[3 * reps + r] = t4 - t3;
            }
        }
        for (int k = 0; k < 4; k++) {
            qsort(t + k * reps, reps, sizeof(double), cmp_double);
            med[k] = t[k * reps + reps / 2] * 1e3;
        }
        printf("%-9s %5d %5d   %9.3f %9.3f   %9.3f %9.3f\n", sh[s].name, Ic, O, med[0], med[1],
               med[2], med[3]);
        step[0] += sh[s].count * (med[0] + med[2]);
        step[1] += sh[s].count * (med[1] + med[3]);
        flops += sh[s].count * 3.0 * 2.0 * N * (double)Ic * O;
        free(in), free(w), free(out), free(din), free(dw);
    }
    printf("step's products: %.1f GFLOP; tiled %.1f ms (%.1f GFLOP/s), static %.1f ms (%.1f GFLOP/s)\n",
           flops / 1e9, step[0], flops / step[0] / 1e6, step[1], flops / step[1] / 1e6);
    if (peak > 0)
        printf("ceiling (products alone) as %% of the SGEMM line %.1f GFLOP/s: tiled %.1f%%, "
               "static %.1f%%\n",
               peak, 100 * flops / step[0] / 1e6 / peak, 100 * flops / step[1] / 1e6 / peak);
    free(t);
    return 0;
}
