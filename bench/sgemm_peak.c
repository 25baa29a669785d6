/* sgemm_peak.c — the machine's practical SGEMM peak, the yardstick of
 * bench/bench_small.sh. Times OpenBLAS cblas_sgemm (row-major, C = A·B,
 * fp32) for square n = 1024, 1536, 2048 with the library's default thread
 * count (OPENBLAS_NUM_THREADS / OMP_NUM_THREADS if set, else all cores),
 * REPS timed repetitions per size after one untimed warm-up, and prints the
 * median GFLOP/s of each size (2·n³ FLOP per product) and then the best
 * median, the figure the benchmark calls "SGEMM peak":
 *
 *     OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64 | core Cooperlake | 2 threads
 *     n=1024 median 148.2 GFLOP/s (7 reps, min 140.1, max 151.0)
 *     ...
 *     sgemm_peak_gflops 151.3
 *
 * Not part of the automake build: bench_small.sh compiles it on the fly
 * (cc -O2 sgemm_peak.c -lopenblas). Usage: sgemm_peak [REPS] (default 7). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 7;
    if (reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: %s [REPS 1..1000]\n", argv[0]);
        return 2;
    }
    /* which kernel OpenBLAS picked (OPENBLAS_CORETYPE overrides its CPU
     * detection) and how many threads it runs */
    printf("%s | core %s | %d threads\n", openblas_get_config(), openblas_get_corename(),
           openblas_get_num_threads());
    static const int sizes[] = {1024, 1536, 2048};
    double best = 0.0;
    double *g = malloc(sizeof *g * reps);
    if (!g)
        return 1;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int n = sizes[s];
        size_t nn = (size_t)n * n;
        float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
        if (!a || !b || !c) {
            fprintf(stderr, "sgemm_peak: out of memory at n=%d\n", n);
            return 1;
        }
        for (size_t i = 0; i < nn; i++) {
            a[i] = (float)((i * 7 + 3) % 97) / 97.0f - 0.5f;
            b[i] = (float)((i * 13 + 5) % 89) / 89.0f - 0.5f;
            c[i] = 0.0f;
        }
        /* warm-up: thread pool start, page faults, caches */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        for (int r = 0; r < reps; r++) {
            double t0 = now_s();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f,
                        c, n);
            double dt = now_s() - t0;
            g[r] = 2.0 * n * (double)n * n / dt / 1e9;
        }
        double med = median(g, reps); /* sorts g */
        printf("n=%d median %.1f GFLOP/s (%d reps, min %.1f, max %.1f)\n", n, med, reps, g[0],
               g[reps - 1]);
        fflush(stdout);
        if (med > best)
            best = med;
        /* keep the result observable so the call cannot be elided */
        if (c[nn / 2] != c[nn / 2])
            fprintf(stderr, "sgemm_peak: NaN in result\n");
        free(a);
        free(b);
        free(c);
    }
    free(g);
    printf("sgemm_peak_gflops %.1f\n", best);
    return 0;
}
