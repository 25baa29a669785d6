/* test_generate.c — checks of lib/generate.c without a corpus.
 *
 * 1. Key/value cache: a random tiny model, untied and tied (matrices scaled to std 0.2 so
 *    attention is far from uniform and RoPE positions matter) runs a
 *    sequence of T tokens with hpt_model_forward (full recompute, the
 *    training kernels) and with hpt_gen_step in several chunkings (prefill
 *    of k tokens then one at a time; chunks of 3; everything at once). The
 *    logits of every position must agree: ‖a−b‖/‖b‖ ≤ CACHE_TOL = 1e-5 per
 *    position (float32 rounding in different summation orders is ~1e-7; a
 *    wrong position, a stale or misplaced cache row changes them by O(1)).
 * 2. Sampling (hpt_sample): greedy, top-k = 1 and a tiny top-p equal the
 *    argmax; a draw is a pure function of (seed, draw index); over N_DRAWS
 *    counter-based draws the frequencies of p = (1,2,3,4)/10 match, also
 *    at temperature 2 (p ∝ sqrt) and cut by top-k = 2 or top-p = 0.45 (both
 *    keep {4, 3}/7), within FREQ_TOL = 0.015 (5 standard deviations of a
 *    frequency near 0.5 over 40000 draws is 0.0125; the draws are
 *    deterministic, so this never flakes). Invalid options are refused.
 * Exit status 1 when any check fails.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../helpers/expect.h"
#include "generate.h"

#define T_SEQ 40
#define CACHE_TOL 1e-5
#define N_DRAWS 40000
#define FREQ_TOL 0.015

static double rel_err(const float *a, const float *b, int n)
{
    double d = 0, r = 0;
    for (int i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return sqrt(d / (r > 1e-300 ? r : 1e-300));
}

/* Scale every matrix of m by s (norm weights stay 1). */
static void scale_matrices(hpt_model *m, float s)
{
    float *host = malloc(sizeof(float) * m->nparams);
    m->be->download(host, m->params, sizeof(float) * m->nparams);
    for (int i = 0; i < m->ntensors; i++) {
        const hpt_tensor *t = &m->tensors[i];
        for (int64_t e = 0; t->is_matrix && e < t->rows * t->cols; e++)
            host[t->offset + e] *= s;
    }
    m->be->upload(m->params, host, sizeof(float) * m->nparams);
    free(host);
}

/* Run tokens with chunk sizes from `chunks` (repeating the last) and
 * compare each chunk's last logits with ref (T_SEQ, V). */
static void check_chunking(const hpt_model *m, const int32_t *tok, const float *ref,
                           const int *chunks, int nchunks, const char *name)
{
    int V = m->cfg.vocab_size, pos = 0, k = 0;
    double worst = 0;
    hpt_gen_state g;
    float *logits = malloc(sizeof(float) * V);
    if (!EXPECT(hpt_gen_init(&g, m, T_SEQ) == HPT_OK, "%s", hpt_error_msg()))
        return;
    while (pos < T_SEQ) {
        int n = chunks[k < nchunks ? k : nchunks - 1];
        n = pos + n > T_SEQ ? T_SEQ - pos : n;
        k++;
        EXPECT(hpt_gen_step(&g, tok + pos, n, logits) == HPT_OK, "%s", hpt_error_msg());
        pos += n;
        double e = rel_err(logits, ref + (size_t)(pos - 1) * V, V);
        worst = e > worst ? e : worst;
        if (!EXPECT(e <= CACHE_TOL, "%s: position %d: logits differ from the full forward by "
                    "%.3g", name, pos - 1, e))
            break; /* the first is enough */
    }
    if (g.pos == T_SEQ)
        EXPECT(hpt_gen_step(&g, tok, 1, logits) == HPT_ERR_USAGE, "%s: a step past ctx must fail",
           name);
    printf("%s: worst relative logit error %.3g (tolerance %g)\n", name, worst,
           CACHE_TOL);
    hpt_gen_free(&g);
    free(logits);
}

static void test_cache(int tie)
{
    hpt_config cfg;
    hpt_model m;
    const hpt_backend *be;
    EXPECT(hpt_backend_get("cpu", &be) == HPT_OK, "cpu backend");
    EXPECT(hpt_config_preset("tiny", &cfg) == HPT_OK, "tiny preset");
    cfg.vocab_size = 512; /* smaller head: faster, same code paths */
    cfg.tie_word_embeddings = tie;
    printf("%s embeddings:\n", tie ? "tied" : "untied");
    if (!EXPECT(hpt_model_init(&m, &cfg, be, 1, T_SEQ, 7) == HPT_OK, "%s", hpt_error_msg()))
        return;
    scale_matrices(&m, 10.0f);
    int V = cfg.vocab_size;
    int32_t tok[T_SEQ], tgt[T_SEQ];
    for (int i = 0; i < T_SEQ; i++) {
        tok[i] = (int32_t)((i * 7919u + 13u) % (unsigned)V);
        tgt[i] = 0;
    }
    hpt_model_forward(&m, tok, tgt, 0.0f, 0); /* evaluation: logits stay logits */
    float *ref = malloc(sizeof(float) * T_SEQ * V);
    be->download(ref, m.logits, sizeof(float) * T_SEQ * V);

    int prefill5[] = {5, 1}, ones[] = {1}, threes[] = {3}, all[] = {T_SEQ};
    check_chunking(&m, tok, ref, prefill5, 2, "prefill 5 then 1 at a time");
    check_chunking(&m, tok, ref, ones, 1, "1 at a time");
    check_chunking(&m, tok, ref, threes, 1, "chunks of 3");
    check_chunking(&m, tok, ref, all, 1, "all at once");

    /* a position-blind cache would pass with a shifted sequence; it must not */
    hpt_gen_state g;
    float *logits = malloc(sizeof(float) * V);
    EXPECT(hpt_gen_init(&g, &m, T_SEQ) == HPT_OK, "%s", hpt_error_msg());
    hpt_gen_step(&g, tok + 1, 4, logits);
    EXPECT(rel_err(logits, ref + 4 * (size_t)V, V) > 1e-2,
           "logits after tokens 1..4 equal those after 0..4");
    int32_t bad = V;
    EXPECT(hpt_gen_step(&g, &bad, 1, logits) == HPT_ERR_DATA, "token %d accepted", bad);
    hpt_gen_free(&g);
    EXPECT(hpt_gen_init(&g, &m, cfg.max_position_embeddings + 1) == HPT_ERR_USAGE,
           "ctx beyond max_position_embeddings accepted");
    free(logits);
    free(ref);
    hpt_model_free(&m);
}

/* Frequencies of N_DRAWS draws over 4 tokens against p[4]. */
static void check_freq(const float *logits, const hpt_sample_opts *o, const double *p,
                       const char *name)
{
    int count[4] = {0};
    for (int d = 0; d < N_DRAWS; d++) {
        int32_t t = hpt_sample(logits, 4, o, (uint64_t)d);
        if (EXPECT(t >= 0 && t < 4, "%s: token %d", name, t))
            count[t]++;
    }
    double worst = 0;
    for (int i = 0; i < 4; i++) {
        double e = fabs((double)count[i] / N_DRAWS - p[i]);
        worst = e > worst ? e : worst;
        EXPECT(e <= FREQ_TOL, "%s: token %d drawn %.4f of the time, expected %.4f", name, i,
               (double)count[i] / N_DRAWS, p[i]);
    }
    printf("%s: largest frequency error %.4f (tolerance %g)\n", name, worst, FREQ_TOL);
}

static void test_sample(void)
{
    float logits[4];
    for (int i = 0; i < 4; i++)
        logits[i] = logf((float)(i + 1)); /* p = (1,2,3,4)/10 */
    hpt_sample_opts o;
    hpt_sample_opts_default(&o);
    EXPECT(hpt_sample_opts_check(&o) == HPT_OK, "defaults valid");
    double p[4] = {0.1, 0.2, 0.3, 0.4};
    check_freq(logits, &o, p, "temperature 1");
    o.temperature = 2.0f;
    double s = 1 + sqrt(2) + sqrt(3) + 2, p2[4] = {1 / s, sqrt(2) / s, sqrt(3) / s, 2 / s};
    check_freq(logits, &o, p2, "temperature 2");
    o.temperature = 1.0f;
    o.top_k = 2;
    double pk[4] = {0, 0, 3.0 / 7, 4.0 / 7};
    check_freq(logits, &o, pk, "top-k 2");
    o.top_k = 0;
    o.top_p = 0.45f;
    check_freq(logits, &o, pk, "top-p 0.45");

    /* argmax cases, determinism */
    float flat[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f, 0.0f};
    hpt_sample_opts g = o;
    g.top_p = 1.0f;
    g.temperature = 0.0f;
    EXPECT(hpt_sample(flat, 6, &g, 0) == 1, "greedy: first of equal maxima");
    g.temperature = 1.0f;
    g.top_k = 1;
    for (int d = 0; d < 100; d++)
        EXPECT(hpt_sample(flat, 6, &g, (uint64_t)d) == 1, "top-k 1 is the argmax (draw %d)", d);
    g.top_k = 0;
    g.top_p = 1e-6f;
    for (int d = 0; d < 100; d++)
        EXPECT(hpt_sample(flat, 6, &g, (uint64_t)d) == 1, "top-p 1e-6 is the argmax (draw %d)",
               d);
    g.top_p = 1.0f;
    int differ = 0;
    hpt_sample_opts g2 = g;
    g2.seed = g.seed + 1;
    for (int d = 0; d < 100; d++) {
        EXPECT(hpt_sample(flat, 6, &g, (uint64_t)d) == hpt_sample(flat, 6, &g, (uint64_t)d),
               "same seed and draw, same token");
        differ += hpt_sample(flat, 6, &g, (uint64_t)d) != hpt_sample(flat, 6, &g2, (uint64_t)d);
    }
    EXPECT(differ > 10, "another seed changed only %d of 100 draws", differ);

    hpt_sample_opts bad;
    hpt_sample_opts_default(&bad);
    bad.temperature = -0.5f;
    EXPECT(hpt_sample_opts_check(&bad) == HPT_ERR_USAGE, "negative temperature accepted");
    hpt_sample_opts_default(&bad);
    bad.top_p = 0.0f;
    EXPECT(hpt_sample_opts_check(&bad) == HPT_ERR_USAGE, "top-p 0 accepted");
    bad.top_p = 1.5f;
    EXPECT(hpt_sample_opts_check(&bad) == HPT_ERR_USAGE, "top-p 1.5 accepted");
    hpt_sample_opts_default(&bad);
    bad.top_k = -1;
    EXPECT(hpt_sample_opts_check(&bad) == HPT_ERR_USAGE, "top-k -1 accepted");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_cache(0);
    test_cache(1);
    test_sample();
    MPI_Finalize();
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
