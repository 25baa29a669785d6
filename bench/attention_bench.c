/* attention_bench.c — the CPU backend's attention (lib/attention_cpu.c:
 * tiled online softmax, saves B*H*T floats, causal tiles skipped) side by
 * side with the kernel it replaced (below, verbatim from lib/backend_cpu.c
 * before issue 18: full (T,T) scores per head with SGEMM, saves P and dS,
 * B*H*T*T floats each). Same inputs, alternated, REPS repetitions of
 * forward + backward; prints the median ms of each, the ratio, the memory
 * of the saved state + scratch, and the largest difference of the outputs
 * and gradients between the two.
 * Usage: attention_bench B T H KV HD [REPS]   (built by bench/attention.sh) */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention_cpu.h"
#include "bench_util.h"
#include "error.h"

/* ------------------------------------------------ the previous kernel */

static void causal_softmax(float *S, int T)
{
    for (int t = 0; t < T; t++) {
        float *row = S + (size_t)t * T;
        float mx = -INFINITY, sum = 0.0f;
        for (int s = 0; s <= t; s++)
            mx = row[s] > mx ? row[s] : mx;
        for (int s = 0; s <= t; s++) {
            row[s] = expf(row[s] - mx);
            sum += row[s];
        }
        float inv = 1.0f / sum;
        for (int s = 0; s <= t; s++)
            row[s] *= inv;
        for (int s = t + 1; s < T; s++)
            row[s] = 0.0f;
    }
}

static void old_forward(float *out, float *probs, const float *q, const float *k, const float *v,
                        int B, int T, int H, int KV, int hd)
{
    float scale = 1.0f / sqrtf((float)hd);
    int group = H / KV, ldq = H * hd, ldk = KV * hd;
#pragma omp parallel for schedule(static)
    for (int bk = 0; bk < B * KV; bk++) {
        int b = bk / KV, kvh = bk % KV;
        const float *kh = k + (size_t)b * T * ldk + kvh * hd;
        const float *vh = v + (size_t)b * T * ldk + kvh * hd;
        for (int h = kvh * group; h < (kvh + 1) * group; h++) {
            const float *qh = q + (size_t)b * T * ldq + h * hd;
            float *P = probs + ((size_t)b * H + h) * T * T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, scale, qh, ldq, kh, ldk,
                        0.0f, P, T);
            causal_softmax(P, T);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1.0f, P, T, vh, ldk,
                        0.0f, out + (size_t)b * T * ldq + h * hd, ldq);
        }
    }
}

static void softmax_backward(float *dP, const float *P, int T, float scale)
{
    for (int t = 0; t < T; t++) {
        float *d = dP + (size_t)t * T;
        const float *p = P + (size_t)t * T;
        float dot = 0.0f;
        for (int s = 0; s <= t; s++)
            dot += p[s] * d[s];
        for (int s = 0; s <= t; s++)
            d[s] = p[s] * (d[s] - dot) * scale;
        for (int s = t + 1; s < T; s++)
            d[s] = 0.0f;
    }
}

static void old_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                         const float *probs, const float *q, const float *k, const float *v,
                         int B, int T, int H, int KV, int hd)
{
    float scale = 1.0f / sqrtf((float)hd);
    int group = H / KV, ldq = H * hd, ldk = KV * hd;
#pragma omp parallel for schedule(static)
    for (int bk = 0; bk < B * KV; bk++) {
        int b = bk / KV, kvh = bk % KV;
        size_t ko = (size_t)b * T * ldk + kvh * hd;
        for (int t = 0; t < T; t++) {
            memset(dk + ko + (size_t)t * ldk, 0, sizeof(float) * hd);
            memset(dv + ko + (size_t)t * ldk, 0, sizeof(float) * hd);
        }
        for (int h = kvh * group; h < (kvh + 1) * group; h++) {
            size_t qo = (size_t)b * T * ldq + h * hd;
            const float *P = probs + ((size_t)b * H + h) * T * T;
            float *dS = scratch + ((size_t)b * H + h) * T * T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1.0f, dout + qo, ldq,
                        v + ko, ldk, 0.0f, dS, T);
            softmax_backward(dS, P, T, scale);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1.0f, dS, T, k + ko,
                        ldk, 0.0f, dq + qo, ldq);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, dS, T, q + qo,
                        ldq, 1.0f, dk + ko, ldk);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, P, T, dout + qo,
                        ldq, 1.0f, dv + ko, ldk);
        }
    }
}

/* ------------------------------------------------------------- harness */

static float *buf(size_t n, unsigned *seed, float a)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    if (!p)
        hpt_fatal(__FILE__, __LINE__, 1, "out of memory (%zu floats)", n);
    for (size_t i = 0; i < n; i++)
        p[i] = a * (2.0f * (float)rand_r(seed) / (float)RAND_MAX - 1.0f);
    return p;
}

/* max |a - b| / max |b| */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: attention_bench B T H KV HD [REPS]\n");
        return 2;
    }
    int B = atoi(argv[1]), T = atoi(argv[2]), H = atoi(argv[3]), KV = atoi(argv[4]);
    int hd = atoi(argv[5]), reps = argc > 6 ? atoi(argv[6]) : 5;
    openblas_set_num_threads(1); /* as hpt's cpu_init: one OpenMP pool */
    unsigned seed = 42;
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd;
    size_t nold = (size_t)B * H * T * T, nnew = hpt_attn_cpu_floats(B, T, H);
    float *q = buf(nq, &seed, 2), *k = buf(nk, &seed, 2), *v = buf(nk, &seed, 1);
    float *dout = buf(nq, &seed, 1);
    float *o[2], *dq[2], *dk[2], *dv[2], *sv[2], *sc[2];
    size_t ns[2] = {nold, nnew};
    for (int w = 0; w < 2; w++) {
        o[w] = buf(nq, &seed, 0), dq[w] = buf(nq, &seed, 0);
        dk[w] = buf(nk, &seed, 0), dv[w] = buf(nk, &seed, 0);
        sv[w] = buf(ns[w], &seed, 0), sc[w] = buf(ns[w], &seed, 0);
    }
    double *t[2] = {malloc(sizeof(double) * reps), malloc(sizeof(double) * reps)};
    for (int r = -1; r < reps; r++) /* r = -1: warm-up */
        for (int w = 0; w < 2; w++) {
            double t0 = now_s() * 1e3;
            if (w == 0) {
                old_forward(o[0], sv[0], q, k, v, B, T, H, KV, hd);
                old_backward(dq[0], dk[0], dv[0], sc[0], dout, sv[0], q, k, v, B, T, H, KV, hd);
            } else {
                hpt_attn_cpu_forward(o[1], sv[1], q, k, v, B, T, H, KV, hd);
                hpt_attn_cpu_backward(dq[1], dk[1], dv[1], sc[1], dout, o[1], sv[1], q, k, v, B,
                                      T, H, KV, hd);
            }
            if (r >= 0)
                t[w][r] = now_s() * 1e3 - t0;
        }
    double mo = median(t[0], reps), mn = median(t[1], reps);
    double diff = fmax(fmax(rel_diff(o[1], o[0], nq), rel_diff(dq[1], dq[0], nq)),
                       fmax(rel_diff(dk[1], dk[0], nk), rel_diff(dv[1], dv[0], nk)));
    printf("B=%d T=%d H=%d KV=%d hd=%d threads=%d reps=%d | old %.2f ms, %.1f MiB saved+scratch | "
           "new %.2f ms, %.3f MiB | old/new %.2fx | max rel diff %.1e\n",
           B, T, H, KV, hd, omp_get_max_threads(), reps, mo, 2.0 * nold * 4 / 1048576.0, mn,
           2.0 * nnew * 4 / 1048576.0, mo / mn, diff);
    return 0;
}
