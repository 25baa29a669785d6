/* test_ops.c — gradient checks of every layer op of a compute backend, and
 * of the whole model's backward pass, by central finite differences.
 *
 * Method (each op): inputs from a fixed-seed PRNG, a random projection R of
 * the output, f(x) = sum(R * op(x)) summed in double from the float outputs.
 * The backward op given dout = R yields grad_x; for FD_DIRS random
 * directions d the analytic directional derivative <grad_x, d> is compared
 * with (f(x+εd) - f(x-εd)) / 2ε, for every input and weight of the op. The
 * analytic side uses the perturbation actually applied (x±εd rounded to
 * float), so rounding of the perturbed inputs does not enter the comparison.
 *
 * Error measure: |analytic - numeric| / max(|analytic|, |numeric|, floor)
 * with floor = 0.1 × the typical size of a directional derivative,
 * |grad|·|Δx| / (2ε sqrt(n)), so a chance cancellation in <grad, d> cannot
 * blow float noise up into a large relative error, while a real bug (a wrong
 * sign, term or index changes the derivative by the order of its size) still
 * measures near 1.
 *
 * Tolerances: OP_TOL = 1e-2 relative for the op gradient checks. With
 * ε = 1e-2 on O(1) inputs, float32 forward noise contributes ~1e-7/ε = 1e-5
 * and the O(ε²) truncation ~1e-5..1e-4 for these smooth ops; a correct op
 * measures below 1e-3 (5e-4 at most over 12 PRNG seeds; each line prints
 * its maximum). Forward results are
 * compared with double-precision references at REF_TOL = 1e-5 relative to
 * the largest reference value (float32 rounding over short sums is ~1e-7).
 * The whole-model tolerance is explained at MODEL_TOL.
 *
 * Each check prints "ok <name> ..." or "FAIL <name>: analytic X numeric Y
 * rel err Z"; the exit status is 1 if any check failed.
 *
 * All buffers go through the backend's alloc/upload/download, so the same
 * checks run on any backend: test_ops [backend]   (default "cpu").
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend.h"
#include "config.h"
#include "model.h"

#define FD_DIRS 3      /* random directions per gradient check            */
#define FD_EPS 1e-2    /* central-difference step for the op checks       */
#define OP_TOL 1e-2    /* relative tolerance of the op gradient checks    */
#define REF_TOL 1e-5   /* forward vs double reference, relative to max    */
#define GARBAGE 1e3f   /* prefill of outputs the contract says overwrite  */

static const hpt_backend *be;
static int n_fail, n_ok;
static double worst_op_err, worst_model_err; /* for the summary line */

/* ------------------------------------------------------------ utilities */

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

/* Uniform in [-1, 1) (splitmix64). */
static double urand(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-52 - 1.0;
}

/* Uniform integer in [0, n). */
static int irand(int n)
{
    int i = (int)((urand() + 1.0) * 0.5 * n);
    return i < n ? i : n - 1;
}

static float *fnew(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p)
        HPT_FATAL("out of memory (%zu floats)", n);
    return p;
}

/* n floats uniform in [-a, a). */
static float *frand(size_t n, double a)
{
    float *p = fnew(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(a * urand());
    return p;
}

static float *fdup(const float *x, size_t n)
{
    float *p = fnew(n);
    memcpy(p, x, sizeof(float) * n);
    return p;
}

static double *dnew(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    if (!p)
        HPT_FATAL("out of memory (%zu doubles)", n);
    return p;
}

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* out = a - b (elementwise, floats). */
static float *fsub(const float *a, const float *b, size_t n)
{
    float *p = fnew(n);
    for (size_t i = 0; i < n; i++)
        p[i] = a[i] - b[i];
    return p;
}

/* ------------------------------------------------------- device buffers */

#define FB(n) (sizeof(float) * (size_t)(n))
#define IB(n) (sizeof(int32_t) * (size_t)(n))

/* Device copy of `bytes` of host memory; NULL for a NULL host pointer. */
static void *dput(const void *h, size_t bytes)
{
    if (!h)
        return NULL;
    void *d = be->alloc(bytes);
    if (!d)
        HPT_FATAL("backend %s: alloc of %zu bytes failed", be->name, bytes);
    be->upload(d, h, bytes);
    return d;
}

/* Copy device memory back into host `h` and free it; no-op for NULL. */
static void dtake(void *h, void *d, size_t bytes)
{
    if (!d)
        return;
    be->download(h, d, bytes);
    be->free(d);
}

/* ------------------------------------------------------------ reporting */

static void pass(const char *name, const char *detail)
{
    n_ok++;
    printf("ok %s%s%s\n", name, detail[0] ? " " : "", detail);
}

static void fail(const char *name, double ana, double num, double err)
{
    n_fail++;
    printf("FAIL %s: analytic %.9g numeric %.9g rel err %.3g\n", name, ana, num, err);
}

/* Report a measured error against `tol`; `ana`/`num` are the worst pair. */
static void report(const char *name, double ana, double num, double err, double tol)
{
    char detail[64];
    if (err <= tol) {
        snprintf(detail, sizeof detail, "(max rel err %.1e, tol %.0e)", err, tol);
        pass(name, detail);
    } else {
        fail(name, ana, num, err);
    }
}

/* A yes/no property; `what` describes the failure. */
static void check_true(const char *name, int cond, const char *what)
{
    if (cond) {
        pass(name, "");
    } else {
        n_fail++;
        printf("FAIL %s: %s\n", name, what);
    }
}

static double rel_err(double a, double b, double floor_)
{
    double den = fmax(fmax(fabs(a), fabs(b)), floor_);
    double e = den > 0 ? fabs(a - b) / den : 0.0;
    return e == e ? e : INFINITY; /* NaN counts as the worst error */
}

/* Float result against a double reference: max abs difference over max
 * |ref|, at most tol. */
static void check_ref_tol(const char *name, const float *got, const double *ref, size_t n,
                          double tol)
{
    double maxref = 0.0, maxdiff = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        maxref = fmax(maxref, fabs(ref[i]));
        double d = fabs(got[i] - ref[i]);
        if (!(d <= maxdiff)) {
            maxdiff = d == d ? d : INFINITY;
            at = i;
        }
    }
    double err = maxref > 0 ? maxdiff / maxref : maxdiff;
    report(name, n ? got[at] : 0.0, n ? ref[at] : 0.0, err, tol);
}

static void check_ref(const char *name, const float *got, const double *ref, size_t n)
{
    check_ref_tol(name, got, ref, n, REF_TOL);
}

/* Two float arrays that must agree to `tol` relative to max |b|. */
static void check_same(const char *name, const float *a, const float *b, size_t n, double tol)
{
    double *ref = dnew(n);
    for (size_t i = 0; i < n; i++)
        ref[i] = b[i];
    check_ref_tol(name, a, ref, n, tol);
    free(ref);
}

/* --------------------------------------------- finite-difference harness */

/* The scalar objective of an op as a function of the inputs held in ctx. */
typedef double (*objective_fn)(void *ctx);

/* Check grad (n) of f with respect to x (n, an input f reads through ctx)
 * along FD_DIRS random directions. `scale` multiplies the numeric side (the
 * cross-entropy gradient carries grad_scale). x is restored bitwise. */
static void check_fd(const char *name, objective_fn f, void *ctx, float *x, size_t n,
                     const float *grad, double scale)
{
    float *x0 = fdup(x, n), *xp = fnew(n), *xm = fnew(n);
    double worst = 0.0, wa = 0.0, wn = 0.0;
    for (int k = 0; k < FD_DIRS; k++) {
        double ana = 0.0, gg = 0.0, dd = 0.0;
        for (size_t i = 0; i < n; i++) {
            double d = urand();
            xp[i] = (float)(x0[i] + FD_EPS * d);
            xm[i] = (float)(x0[i] - FD_EPS * d);
            double dx = ((double)xp[i] - xm[i]) / (2.0 * FD_EPS);
            ana += grad[i] * dx;
            gg += (double)grad[i] * grad[i];
            dd += dx * dx;
        }
        memcpy(x, xp, FB(n));
        double fp = f(ctx);
        memcpy(x, xm, FB(n));
        double fm = f(ctx);
        memcpy(x, x0, FB(n));
        double num = scale * (fp - fm) / (2.0 * FD_EPS);
        double err = rel_err(ana, num, 0.1 * sqrt(gg * dd / (double)n));
        if (!(err <= worst) || k == 0) {
            worst = err;
            wa = ana;
            wn = num;
        }
    }
    worst_op_err = fmax(worst_op_err, worst);
    report(name, wa, wn, worst, OP_TOL);
    free(x0);
    free(xp);
    free(xm);
}

/* ------------------------------------------------------- host op calls
 * Each wrapper uploads its host arguments, runs the op, downloads what the
 * op writes and frees the device copies. */

static void op_matmul_forward(float *out, const float *in, const float *w, int N, int Ic, int O)
{
    float *d_out = dput(out, FB(N * O)), *d_in = dput(in, FB(N * Ic)), *d_w = dput(w, FB(O * Ic));
    be->matmul_forward(d_out, HPT_DTYPE_F32, d_in, d_w, N, Ic, O);
    dtake(out, d_out, FB(N * O));
    be->free(d_in);
    be->free(d_w);
}

static void op_matmul_backward(float *din, float *dw, const float *dout, const float *in,
                               const float *w, int N, int Ic, int O, int accum_din)
{
    float *d_din = dput(din, FB(N * Ic)), *d_dw = dput(dw, FB(O * Ic));
    float *d_dout = dput(dout, FB(N * O)), *d_in = dput(in, FB(N * Ic)), *d_w = dput(w, FB(O * Ic));
    be->matmul_backward(d_din, d_dw, d_dout, d_in, d_w, N, Ic, O, accum_din);
    dtake(din, d_din, FB(N * Ic));
    dtake(dw, d_dw, FB(O * Ic));
    be->free(d_dout);
    be->free(d_in);
    be->free(d_w);
}

static void op_embedding_forward(float *out, const int32_t *tok, const float *wte, int V, int N,
                                 int C)
{
    float *d_out = dput(out, FB(N * C)), *d_wte = dput(wte, FB(V * C));
    int32_t *d_tok = dput(tok, IB(N));
    be->embedding_forward(d_out, d_tok, d_wte, N, C, 0, V);
    dtake(out, d_out, FB(N * C));
    be->free(d_wte);
    be->free(d_tok);
}

static void op_embedding_backward(float *dwte, const float *dout, const int32_t *tok, int V, int N,
                                  int C)
{
    float *d_dwte = dput(dwte, FB(V * C)), *d_dout = dput(dout, FB(N * C));
    int32_t *d_tok = dput(tok, IB(N));
    be->embedding_backward(d_dwte, d_dout, d_tok, N, C, 0, V);
    dtake(dwte, d_dwte, FB(V * C));
    be->free(d_dout);
    be->free(d_tok);
}

static void op_rmsnorm_forward(float *out, float *rstd, const float *in, const float *w, int N,
                               int C, float eps)
{
    float *d_out = dput(out, FB(N * C)), *d_rstd = dput(rstd, FB(N));
    float *d_in = dput(in, FB(N * C)), *d_w = dput(w, FB(C));
    be->rmsnorm_forward(d_out, d_rstd, d_in, d_w, N, C, eps);
    dtake(out, d_out, FB(N * C));
    dtake(rstd, d_rstd, FB(N));
    be->free(d_in);
    be->free(d_w);
}

static void op_rmsnorm_backward(float *din, float *dw, const float *dout, const float *in,
                                const float *w, const float *rstd, int N, int C)
{
    float *d_din = dput(din, FB(N * C)), *d_dw = dput(dw, FB(C)), *d_dout = dput(dout, FB(N * C));
    float *d_in = dput(in, FB(N * C)), *d_w = dput(w, FB(C)), *d_rstd = dput(rstd, FB(N));
    be->rmsnorm_backward(d_din, d_dw, d_dout, d_in, d_w, d_rstd, N, C);
    dtake(din, d_din, FB(N * C));
    dtake(dw, d_dw, FB(C));
    be->free(d_dout);
    be->free(d_in);
    be->free(d_w);
    be->free(d_rstd);
}

static void op_rope(float *x, int B, int T, int nh, int hd, float theta, int inverse)
{
    size_t n = (size_t)B * T * nh * hd;
    float *d_x = dput(x, FB(n));
    be->rope(d_x, HPT_DTYPE_F32, B, T, nh, hd, theta, inverse);
    dtake(x, d_x, FB(n));
}

/* saved: the backend's saved attention state, attention_saved_floats. */
static void op_attention_forward(float *out, float *saved, const float *q, const float *k,
                                 const float *v, int B, int T, int H, int KV, int hd)
{
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd;
    size_t np = be->attention_saved_floats(B, T, H);
    float *d_out = dput(out, FB(nq)), *d_saved = dput(saved, FB(np));
    float *d_q = dput(q, FB(nq)), *d_k = dput(k, FB(nk)), *d_v = dput(v, FB(nk));
    be->attention_forward(d_out, d_saved, d_q, d_k, d_v, B, T, H, KV, hd);
    dtake(out, d_out, FB(nq));
    dtake(saved, d_saved, FB(np));
    be->free(d_q);
    be->free(d_k);
    be->free(d_v);
}

static void op_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                  const float *out, const float *saved, const float *q,
                                  const float *k, const float *v, int B, int T, int H, int KV,
                                  int hd)
{
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd;
    size_t np = be->attention_saved_floats(B, T, H), ns = be->attention_scratch_floats(B, T, H);
    float *d_dq = dput(dq, FB(nq)), *d_dk = dput(dk, FB(nk)), *d_dv = dput(dv, FB(nk));
    float *d_scr = be->alloc(FB(ns)), *d_dout = dput(dout, FB(nq)), *d_saved = dput(saved, FB(np));
    float *d_out = dput(out, FB(nq));
    float *d_q = dput(q, FB(nq)), *d_k = dput(k, FB(nk)), *d_v = dput(v, FB(nk));
    HPT_CHECK(d_scr != NULL);
    be->attention_backward(d_dq, d_dk, d_dv, d_scr, d_dout, d_out, d_saved, d_q, d_k, d_v, B, T, H,
                           KV, hd);
    be->free(d_out);
    dtake(dq, d_dq, FB(nq));
    dtake(dk, d_dk, FB(nk));
    dtake(dv, d_dv, FB(nk));
    be->free(d_scr);
    be->free(d_dout);
    be->free(d_saved);
    be->free(d_q);
    be->free(d_k);
    be->free(d_v);
}

static void op_swiglu_forward(float *out, const float *gate, const float *up, size_t n)
{
    float *d_out = dput(out, FB(n)), *d_g = dput(gate, FB(n)), *d_u = dput(up, FB(n));
    be->swiglu_forward(d_out, d_g, d_u, n);
    dtake(out, d_out, FB(n));
    be->free(d_g);
    be->free(d_u);
}

static void op_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                               const float *up, size_t n)
{
    float *d_dg = dput(dgate, FB(n)), *d_du = dput(dup, FB(n)), *d_dout = dput(dout, FB(n));
    float *d_g = dput(gate, FB(n)), *d_u = dput(up, FB(n));
    be->swiglu_backward(d_dg, d_du, d_dout, d_g, d_u, n);
    dtake(dgate, d_dg, FB(n));
    dtake(dup, d_du, FB(n));
    be->free(d_dout);
    be->free(d_g);
    be->free(d_u);
}

static double op_sumsq(const float *x, size_t n)
{
    float *d_x = dput(x, FB(n ? n : 1));
    double s = be->sumsq(d_x, n);
    be->free(d_x);
    return s;
}

static double op_crossentropy_fused(float *logits, const int32_t *tg, int N, int V, float gs)
{
    float *d_l = dput(logits, FB(N * V));
    int32_t *d_t = dput(tg, IB(N));
    double loss = be->crossentropy_fused(d_l, d_t, N, V, gs);
    dtake(logits, d_l, FB(N * V));
    be->free(d_t);
    return loss;
}

/* Also downloads the logits into `after` (to check they are untouched). */
static double op_crossentropy_loss(const float *logits, float *after, const int32_t *tg, int N,
                                   int V)
{
    float *d_l = dput(logits, FB(N * V));
    int32_t *d_t = dput(tg, IB(N));
    double loss = be->crossentropy_loss(d_l, d_t, N, V);
    if (after)
        be->download(after, d_l, FB(N * V));
    be->free(d_l);
    be->free(d_t);
    return loss;
}

static void op_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                     float b2, float eps, float wd, float gs, int t)
{
    float *d_p = dput(p, FB(n)), *d_g = dput(g, FB(n));
    float *d_m = dput(m, FB(n)), *d_v = dput(v, FB(n));
    be->adamw(d_p, d_g, d_m, d_v, n, lr, b1, b2, eps, wd, gs, t);
    dtake(p, d_p, FB(n));
    dtake(m, d_m, FB(n));
    dtake(v, d_v, FB(n));
    be->free(d_g);
}

/* ------------------------------------------------------ memory and elementwise */

static void test_memory(void)
{
    enum { n = 37 };
    float *h = frand(n, 1.0), *back = fnew(n);
    float *d = be->alloc(FB(n)), *d2 = be->alloc(FB(n));
    HPT_CHECK(d && d2);
    be->download(back, d, FB(n));
    int zero = 1;
    for (int i = 0; i < n; i++)
        zero &= back[i] == 0.0f;
    be->upload(d, h, FB(n));
    be->copy(d2, d, FB(n));
    be->download(back, d2, FB(n));
    int same = memcmp(back, h, FB(n)) == 0;
    be->memset0(d2, FB(n));
    be->download(back, d2, FB(n));
    for (int i = 0; i < n; i++)
        zero &= back[i] == 0.0f;
    check_true("memory: alloc and memset0 zero-fill, upload/copy/download round-trip",
               zero && same, "a buffer was not zero or did not round-trip bitwise");
    be->free(d);
    be->free(d2);
    be->free(NULL);
    free(h);
    free(back);
}

static void test_elementwise(void)
{
    enum { n = 45 };
    float *a = frand(n, 2.0), *b = frand(n, 2.0), *out = fnew(n);
    /* add with out aliasing a */
    float *d_a = dput(a, FB(n)), *d_b = dput(b, FB(n));
    be->add(d_a, d_a, d_b, n);
    be->download(out, d_a, FB(n));
    int ok = 1;
    for (int i = 0; i < n; i++)
        ok &= out[i] == a[i] + b[i];
    check_true("add (out aliases a) equals a+b", ok, "an element differs from a[i]+b[i]");
    be->scale(d_b, -0.375f, n);
    be->download(out, d_b, FB(n));
    ok = 1;
    for (int i = 0; i < n; i++)
        ok &= out[i] == b[i] * -0.375f;
    check_true("scale equals x*s", ok, "an element differs from x[i]*s");
    be->free(d_a);
    be->free(d_b);
    free(a);
    free(b);
    free(out);
}

/* sumsq against a sequential double loop (1e-12 relative), for sizes below,
 * at and above the CPU backend's 64-way split, and thread-count
 * independence (bitwise) where OpenMP is available. */
static void test_sumsq(void)
{
    static const size_t sizes[] = {0, 5, 64, 1000, 100003};
    double worst = 0.0, wa = 0.0, wn = 0.0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *x = frand(n, 3.0);
        double ref = 0.0;
        for (size_t i = 0; i < n; i++)
            ref += (double)x[i] * x[i];
        double got = op_sumsq(x, n);
        double err = rel_err(got, ref, 1e-300);
        if (!(err <= worst)) {
            worst = err;
            wa = got;
            wn = ref;
        }
        free(x);
    }
    report("sumsq equals the sequential double sum", wa, wn, worst, 1e-12);
#ifdef _OPENMP
    {
        size_t n = 100003;
        float *x = frand(n, 3.0);
        int saved = omp_get_max_threads();
        omp_set_num_threads(1);
        double s1 = op_sumsq(x, n);
        omp_set_num_threads(2);
        double s2 = op_sumsq(x, n);
        omp_set_num_threads(3);
        double s3 = op_sumsq(x, n);
        omp_set_num_threads(saved);
        char what[128];
        snprintf(what, sizeof what, "1 thread %.17g, 2 threads %.17g, 3 threads %.17g", s1, s2,
                 s3);
        check_true("sumsq identical with 1, 2 and 3 OpenMP threads", s1 == s2 && s1 == s3, what);
        free(x);
    }
#endif
}

/* --------------------------------------------------------------- matmul */

typedef struct {
    float *in, *w, *out;
    const float *R;
    int N, Ic, O;
} matmul_ctx;

static double matmul_obj(void *p)
{
    matmul_ctx *c = p;
    op_matmul_forward(c->out, c->in, c->w, c->N, c->Ic, c->O);
    return dot(c->R, c->out, (size_t)c->N * c->O);
}

static void test_matmul(void)
{
    enum { N = 5, Ic = 7, O = 3 };
    matmul_ctx c = {frand(N * Ic, 1.0), frand(O * Ic, 1.0), fnew(N * O), NULL, N, Ic, O};
    float *R = frand(N * O, 1.0);
    c.R = R;

    /* forward against a double loop */
    double *ref = dnew(N * O);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++)
            for (int i = 0; i < Ic; i++)
                ref[n * O + o] += (double)c.in[n * Ic + i] * c.w[o * Ic + i];
    op_matmul_forward(c.out, c.in, c.w, N, Ic, O);
    check_ref("matmul forward vs double reference", c.out, ref, N * O);

    /* din is overwritten (prefilled with garbage), dw accumulates onto dw0 */
    float *din = fnew(N * Ic), *dw0 = frand(O * Ic, 1.0), *dw = fdup(dw0, O * Ic);
    for (int i = 0; i < N * Ic; i++)
        din[i] = GARBAGE;
    op_matmul_backward(din, dw, R, c.in, c.w, N, Ic, O, 0);
    float *gw = fsub(dw, dw0, O * Ic);
    check_fd("matmul din", matmul_obj, &c, c.in, N * Ic, din, 1.0);
    check_fd("matmul dw (accumulated onto existing dw)", matmul_obj, &c, c.w, O * Ic, gw, 1.0);

    /* accum_din = 1 adds onto what din holds */
    float *din0 = frand(N * Ic, 1.0), *din2 = fdup(din0, N * Ic), *dw2 = fnew(O * Ic);
    op_matmul_backward(din2, dw2, R, c.in, c.w, N, Ic, O, 1);
    float *added = fsub(din2, din0, N * Ic);
    check_same("matmul accum_din=1 adds dout@w onto din", added, din, N * Ic, 1e-6);

    /* din = NULL: dw still computed */
    float *dw3 = fnew(O * Ic);
    op_matmul_backward(NULL, dw3, R, c.in, c.w, N, Ic, O, 0);
    check_same("matmul din=NULL still accumulates dw", dw3, gw, O * Ic, 1e-6);

    free(c.in), free(c.w), free(c.out), free(R), free(ref), free(din), free(dw0), free(dw);
    free(gw), free(din0), free(din2), free(dw2), free(added), free(dw3);
}

/* The CPU backend splits a product into a grid of tiles handed out to the
 * threads (lib/backend_cpu.c gemm_grid_for). Shapes whose grids have
 * partial tiles down and across, on 1, 2, 3 and 7 threads: every element of
 * out, din and dw written (outputs prefilled with NaN) and equal to a
 * double reference; din accumulates when asked; dw always accumulates. */
static void test_matmul_tiles(void)
{
    static const int shapes[][3] = {{300, 37, 700}, {1000, 130, 270}, {65, 513, 1100}, {17, 64, 2100}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s][0], Ic = shapes[s][1], O = shapes[s][2];
        float *in = frand((size_t)N * Ic, 1.0), *w = frand((size_t)O * Ic, 1.0);
        float *dout = frand((size_t)N * O, 1.0), *din0 = frand((size_t)N * Ic, 1.0);
        float *dw0 = frand((size_t)O * Ic, 1.0);
        double *yref = dnew((size_t)N * O), *xref = dnew((size_t)N * Ic), *wref = dnew((size_t)O * Ic);
        for (int n = 0; n < N; n++)
            for (int o = 0; o < O; o++) {
                double a = 0;
                for (int i = 0; i < Ic; i++)
                    a += (double)in[(size_t)n * Ic + i] * w[(size_t)o * Ic + i];
                yref[(size_t)n * O + o] = a;
            }
        for (int n = 0; n < N; n++)
            for (int i = 0; i < Ic; i++) {
                double a = din0[(size_t)n * Ic + i];
                for (int o = 0; o < O; o++)
                    a += (double)dout[(size_t)n * O + o] * w[(size_t)o * Ic + i];
                xref[(size_t)n * Ic + i] = a;
            }
        for (int o = 0; o < O; o++)
            for (int i = 0; i < Ic; i++) {
                double a = dw0[(size_t)o * Ic + i];
                for (int n = 0; n < N; n++)
                    a += (double)dout[(size_t)n * O + o] * in[(size_t)n * Ic + i];
                wref[(size_t)o * Ic + i] = a;
            }
        float *y = fnew((size_t)N * O), *dx = fnew((size_t)N * Ic), *dw = fnew((size_t)O * Ic);
        for (int th = 1; th <= 7; th += th == 3 ? 4 : 1) {
#ifdef _OPENMP
            int before = omp_get_max_threads();
            omp_set_num_threads(th);
#endif
            for (size_t i = 0; i < (size_t)N * O; i++)
                y[i] = NAN;
            op_matmul_forward(y, in, w, N, Ic, O);
            memcpy(dx, din0, FB((size_t)N * Ic));
            memcpy(dw, dw0, FB((size_t)O * Ic));
            op_matmul_backward(dx, dw, dout, in, w, N, Ic, O, 1);
#ifdef _OPENMP
            omp_set_num_threads(before);
#endif
            char name[160];
            snprintf(name, sizeof name, "matmul %dx%dx%d on %d threads: forward", N, Ic, O, th);
            check_ref(name, y, yref, (size_t)N * O);
            snprintf(name, sizeof name, "matmul %dx%dx%d on %d threads: din accumulated", N, Ic, O, th);
            check_ref(name, dx, xref, (size_t)N * Ic);
            snprintf(name, sizeof name, "matmul %dx%dx%d on %d threads: dw accumulated", N, Ic, O, th);
            check_ref(name, dw, wref, (size_t)O * Ic);
            for (size_t i = 0; i < (size_t)N * Ic; i++)
                dx[i] = NAN;
            memcpy(dw, dw0, FB((size_t)O * Ic));
#ifdef _OPENMP
            omp_set_num_threads(th);
#endif
            op_matmul_backward(dx, dw, dout, in, w, N, Ic, O, 0);
#ifdef _OPENMP
            omp_set_num_threads(before);
#endif
            for (size_t i = 0; i < (size_t)N * Ic; i++)
                xref[i] -= din0[i];
            snprintf(name, sizeof name, "matmul %dx%dx%d on %d threads: din overwritten", N, Ic, O, th);
            check_ref(name, dx, xref, (size_t)N * Ic);
            for (size_t i = 0; i < (size_t)N * Ic; i++)
                xref[i] += din0[i];
        }
        free(in), free(w), free(dout), free(din0), free(dw0), free(yref), free(xref), free(wref);
        free(y), free(dx), free(dw);
    }
}

/* ------------------------------------------------------------ embedding */

typedef struct {
    float *wte, *out;
    const float *R;
    const int32_t *tok;
    int V, N, C;
} embed_ctx;

static double embed_obj(void *p)
{
    embed_ctx *c = p;
    op_embedding_forward(c->out, c->tok, c->wte, c->V, c->N, c->C);
    return dot(c->R, c->out, (size_t)c->N * c->C);
}

static void test_embedding(void)
{
    enum { V = 7, N = 10, C = 5 };
    int32_t tok[N];
    for (int n = 0; n < N; n++)
        tok[n] = irand(V - 1); /* row V-1 is never used */
    tok[3] = tok[7] = tok[0];  /* a token repeated three times */
    float *R = frand(N * C, 1.0);
    embed_ctx c = {frand(V * C, 1.0), fnew(N * C), R, tok, V, N, C};

    op_embedding_forward(c.out, tok, c.wte, V, N, C);
    int ok = 1;
    for (int n = 0; n < N; n++)
        ok &= memcmp(c.out + n * C, c.wte + tok[n] * C, FB(C)) == 0;
    check_true("embedding forward copies wte rows", ok, "an output row differs from wte[token]");

    float *dw0 = frand(V * C, 1.0), *dw = fdup(dw0, V * C);
    op_embedding_backward(dw, R, tok, V, N, C);
    float *g = fsub(dw, dw0, V * C);
    check_fd("embedding dwte (repeated tokens, accumulated)", embed_obj, &c, c.wte, V * C, g, 1.0);

    /* explicit sums for the repeated token and the unused row */
    double *ref = dnew(V * C);
    for (int n = 0; n < N; n++)
        for (int j = 0; j < C; j++)
            ref[tok[n] * C + j] += R[n * C + j];
    check_ref("embedding dwte rows are sums over repeated tokens", g, ref, V * C);
    check_true("embedding dwte leaves an unused row unchanged",
               memcmp(dw + (V - 1) * C, dw0 + (V - 1) * C, FB(C)) == 0,
               "row of a token not in the batch changed");
    free(R), free(c.wte), free(c.out), free(dw0), free(dw), free(g), free(ref);
}

/* -------------------------------------------------------------- RMSNorm */

typedef struct {
    float *in, *w, *out, *rstd;
    const float *R;
    int N, C;
    float eps;
} rms_ctx;

static double rms_obj(void *p)
{
    rms_ctx *c = p;
    op_rmsnorm_forward(c->out, c->rstd, c->in, c->w, c->N, c->C, c->eps);
    return dot(c->R, c->out, (size_t)c->N * c->C);
}

static void test_rmsnorm(void)
{
    enum { N = 4, C = 8 };
    float *R = frand(N * C, 1.0), *w = frand(C, 0.5);
    for (int i = 0; i < C; i++)
        w[i] += 1.0f;
    rms_ctx c = {frand(N * C, 1.0), w, fnew(N * C), fnew(N), R, N, C, 1e-5f};

    double *ref = dnew(N * C), *rref = dnew(N);
    for (int n = 0; n < N; n++) {
        double ss = 0.0;
        for (int j = 0; j < C; j++)
            ss += (double)c.in[n * C + j] * c.in[n * C + j];
        rref[n] = 1.0 / sqrt(ss / C + c.eps);
        for (int j = 0; j < C; j++)
            ref[n * C + j] = c.in[n * C + j] * rref[n] * w[j];
    }
    op_rmsnorm_forward(c.out, c.rstd, c.in, w, N, C, c.eps);
    check_ref("rmsnorm forward vs double reference", c.out, ref, N * C);
    check_ref("rmsnorm rstd vs double reference", c.rstd, rref, N);

    float *rstd = fdup(c.rstd, N);
    float *din0 = frand(N * C, 1.0), *din = fdup(din0, N * C);
    float *dw0 = frand(C, 1.0), *dw = fdup(dw0, C);
    op_rmsnorm_backward(din, dw, R, c.in, w, rstd, N, C);
    float *gin = fsub(din, din0, N * C), *gw = fsub(dw, dw0, C);
    check_fd("rmsnorm din (accumulated +=)", rms_obj, &c, c.in, N * C, gin, 1.0);
    check_fd("rmsnorm dw (accumulated +=)", rms_obj, &c, c.w, C, gw, 1.0);
    free(R), free(w), free(c.in), free(c.out), free(c.rstd), free(ref), free(rref), free(rstd);
    free(din0), free(din), free(dw0), free(dw), free(gin), free(gw);
}

/* ----------------------------------------------------------------- RoPE */

static void test_rope(void)
{
    /* Hand case: hd = 4, theta = 100, x = (1,2,3,4) at every (b, t). Pairs
     * are (0,2) with angle t*100^0 = t and (1,3) with angle t*100^(-1/2) =
     * t/10; position 0 is unrotated, position 1 is rotated by 1 and 0.1. */
    {
        enum { B = 2, T = 2, hd = 4 };
        float x[B * T * hd];
        for (int i = 0; i < B * T * hd; i++)
            x[i] = (float)(i % hd + 1);
        op_rope(x, B, T, 1, hd, 100.0f, 0);
        double c1 = cos(1.0), s1 = sin(1.0), c2 = cos(0.1), s2 = sin(0.1);
        double pos1[hd] = {1 * c1 - 3 * s1, 2 * c2 - 4 * s2, 3 * c1 + 1 * s1, 4 * c2 + 2 * s2};
        double ref[B * T * hd];
        for (int b = 0; b < B; b++)
            for (int i = 0; i < hd; i++) {
                ref[(b * T + 0) * hd + i] = i + 1;
                ref[(b * T + 1) * hd + i] = pos1[i];
            }
        check_ref("rope hand case (hd=4, pairs (i, i+hd/2), position 1, theta=100)", x, ref,
                  B * T * hd);
    }
    /* Adjoint, norm and inverse on a larger, multi-head case. */
    enum { B = 2, T = 5, nh = 3, hd = 8 };
    size_t n = (size_t)B * T * nh * hd;
    float theta = 10000.0f;
    float *x = frand(n, 1.0), *y = frand(n, 1.0), *rx = fdup(x, n), *iy = fdup(y, n);
    op_rope(rx, B, T, nh, hd, theta, 0);
    op_rope(iy, B, T, nh, hd, theta, 1);
    double a = dot(rx, y, n), b = dot(x, iy, n);
    report("rope inverse is the adjoint: <rope(x), y> == <x, rope_inverse(y)>", a, b,
           rel_err(a, b, 0.0), 1e-5);
    double worst = 0.0, wa = 0.0, wn = 0.0;
    for (size_t v = 0; v < n / hd; v++) {
        const float *xv = x + v * hd, *rv = rx + v * hd;
        double nx = sqrt(dot(xv, xv, hd)), nr = sqrt(dot(rv, rv, hd));
        double e = rel_err(nr, nx, 0.0);
        if (!(e <= worst)) {
            worst = e;
            wa = nr;
            wn = nx;
        }
    }
    report("rope preserves every head vector's norm", wa, wn, worst, 1e-5);
    float *back = fdup(rx, n);
    op_rope(back, B, T, nh, hd, theta, 1);
    check_same("rope inverse undoes rope", back, x, n, 1e-5);
    free(x), free(y), free(rx), free(iy), free(back);
}

/* ------------------------------------------------------------ attention */

typedef struct {
    float *q, *k, *v, *out, *saved;
    const float *R;
    int B, T, H, KV, hd;
} attn_ctx;

static double attn_obj(void *p)
{
    attn_ctx *c = p;
    op_attention_forward(c->out, c->saved, c->q, c->k, c->v, c->B, c->T, c->H, c->KV, c->hd);
    return dot(c->R, c->out, (size_t)c->B * c->T * c->H * c->hd);
}

/* Causal GQA attention in double: query head h reads kv head h / (H/KV).
 * lse (B,H,T): the log-sum-exp of each row's scaled scores. */
static void ref_attention(double *out, double *lse, const attn_ctx *c)
{
    int B = c->B, T = c->T, H = c->H, KV = c->KV, hd = c->hd, group = H / KV;
    double *P = dnew((size_t)T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *qv = c->q + ((size_t)(b * T + t) * H + h) * hd;
                double mx = -INFINITY, sum = 0.0;
                for (int s = 0; s <= t; s++) {
                    const float *kv = c->k + ((size_t)(b * T + s) * KV + h / group) * hd;
                    double sc = 0.0;
                    for (int i = 0; i < hd; i++)
                        sc += (double)qv[i] * kv[i];
                    P[s] = sc / sqrt((double)hd);
                    mx = fmax(mx, P[s]);
                }
                for (int s = 0; s <= t; s++)
                    sum += P[s] = exp(P[s] - mx);
                lse[((size_t)b * H + h) * T + t] = mx + log(sum);
                double *o = out + ((size_t)(b * T + t) * H + h) * hd;
                for (int i = 0; i < hd; i++) {
                    o[i] = 0.0;
                    for (int s = 0; s <= t; s++)
                        o[i] += P[s] / sum * c->v[((size_t)(b * T + s) * KV + h / group) * hd + i];
                }
            }
    free(P);
}

/* Perturbing k and v at position t of batch b leaves every output at
 * positions < t (and all of the other batch) bitwise unchanged, and does
 * change position t. Every t for short sequences; for long ones the first
 * and last positions of each tile (64) and a few inside. */
static void check_causality(attn_ctx *c, const float *out0)
{
    int B = c->B, T = c->T, H = c->H, KV = c->KV, hd = c->hd, ok = 1, moved = 1;
    size_t nk = (size_t)B * T * KV * hd, row = (size_t)H * hd;
    float *k0 = fdup(c->k, nk), *v0 = fdup(c->v, nk);
    for (int b = 0; b < B; b++)
        for (int t = 1; t < T; t++) {
            if (T > 16 && t % 64 != 0 && t % 64 != 63 && t != T - 1 && t % 37 != 5)
                continue;
            for (size_t i = 0; i < (size_t)KV * hd; i++) {
                c->k[(size_t)(b * T + t) * KV * hd + i] += (float)(3.0 * urand());
                c->v[(size_t)(b * T + t) * KV * hd + i] += (float)(3.0 * urand());
            }
            attn_obj(c);
            for (int bb = 0; bb < B; bb++)
                for (int s = 0; s < T; s++) {
                    int same = !memcmp(c->out + (bb * T + s) * row, out0 + (bb * T + s) * row,
                                       FB(row));
                    if (bb != b || s < t)
                        ok &= same;
                    else if (s == t)
                        moved &= !same;
                }
            memcpy(c->k, k0, FB(nk));
            memcpy(c->v, v0, FB(nk));
        }
    check_true("attention is causal (k/v at t leave outputs before t and other batches unchanged)",
               ok, "an output at an earlier position or another batch changed");
    check_true("attention output at t depends on k/v at t", moved,
               "perturbing k/v at t did not change the output at t");
    free(k0);
    free(v0);
}

/* The saved state's layout is private to a backend: the CPU backend's is
 * the per-row log-sum-exp (B,H,T) (lib/attention_cpu.c), checked against
 * the double reference; no (B,H,T,T) matrix is saved. */
static void check_saved_lse(const attn_ctx *c, const double *lref)
{
    size_t n = (size_t)c->B * c->H * c->T;
    check_true("attention (cpu) saves B*H*T floats (no T x T matrix)",
               be->attention_saved_floats(c->B, c->T, c->H) == n &&
                   be->attention_scratch_floats(c->B, c->T, c->H) == n,
               "attention_saved_floats or attention_scratch_floats is not B*H*T");
    check_ref("attention (cpu) saved log-sum-exp vs double reference", c->saved, lref, n);
}

/* Forward and backward of the CPU backend's attention with `threads`
 * OpenMP threads: out, saved state, dq, dk, dv concatenated into res. */
static void attn_run_threads(float *res, const attn_ctx *c, int threads)
{
    size_t nq = (size_t)c->B * c->T * c->H * c->hd, nk = (size_t)c->B * c->T * c->KV * c->hd;
    size_t np = be->attention_saved_floats(c->B, c->T, c->H);
#ifdef _OPENMP
    int before = omp_get_max_threads();
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    op_attention_forward(res, res + nq, c->q, c->k, c->v, c->B, c->T, c->H, c->KV, c->hd);
    op_attention_backward(res + nq + np, res + 2 * nq + np, res + 2 * nq + np + nk, c->R, res,
                          res + nq, c->q, c->k, c->v, c->B, c->T, c->H, c->KV, c->hd);
#ifdef _OPENMP
    omp_set_num_threads(before);
#endif
}

/* Results bitwise independent of the thread count (1, 2, 3, 7 threads):
 * parallel runs are compared with one rank and resumed runs bitwise. */
static void check_thread_independence(const attn_ctx *c, const char *tag)
{
    size_t nq = (size_t)c->B * c->T * c->H * c->hd, nk = (size_t)c->B * c->T * c->KV * c->hd;
    size_t n = 2 * nq + be->attention_saved_floats(c->B, c->T, c->H) + 2 * nk;
    float *one = fnew(n), *many = fnew(n);
    int same = 1;
    attn_run_threads(one, c, 1);
    for (int th = 2; th <= 7; th += th == 3 ? 4 : 1) {
        attn_run_threads(many, c, th);
        same &= !memcmp(one, many, FB(n));
    }
    char name[256];
    snprintf(name, sizeof name, "attention %s: out, saved state and gradients bitwise equal "
             "with 1, 2, 3 and 7 threads", tag);
    check_true(name, same, "a result depends on the number of threads");
    free(one), free(many);
}

/* One shape: forward vs the double reference, backward by finite
 * differences, causality; on the CPU backend also the saved log-sum-exp
 * and thread-count independence. */
static void test_attention_shape(int B, int T, int H, int KV, int hd)
{
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd;
    size_t np = be->attention_saved_floats(B, T, H);
    char tag[96], name[192];
    snprintf(tag, sizeof tag, "B=%d T=%d H=%d KV=%d (GQA %d) hd=%d", B, T, H, KV, H / KV, hd);
    float *R = frand(nq, 1.0);
    attn_ctx c = {frand(nq, 2.0), frand(nk, 2.0), frand(nk, 1.0), fnew(nq), fnew(np), R,
                  B, T, H, KV, hd};

    double *ref = dnew(nq), *lref = dnew((size_t)B * H * T);
    ref_attention(ref, lref, &c);
    attn_obj(&c);
    snprintf(name, sizeof name, "attention %s forward vs double GQA reference", tag);
    check_ref(name, c.out, ref, nq);
    if (!strcmp(be->name, "cpu")) {
        check_saved_lse(&c, lref);
        check_thread_independence(&c, tag);
    }

    float *out0 = fdup(c.out, nq), *saved = fdup(c.saved, np);
    float *dq = fnew(nq), *dk = fnew(nk), *dv = fnew(nk);
    for (size_t i = 0; i < nq; i++)
        dq[i] = GARBAGE;
    for (size_t i = 0; i < nk; i++)
        dk[i] = dv[i] = GARBAGE;
    op_attention_backward(dq, dk, dv, R, out0, saved, c.q, c.k, c.v, B, T, H, KV, hd);
    if (T == 1) {
        /* one key: the softmax is 1 whatever q and k, so dq = dk = 0 exactly
         * and the finite differences are exactly 0; the kernel's dS = P (dP
         * - D) leaves float rounding of dout.v - dout.out (~1e-7) */
        double mx = 0.0;
        for (size_t i = 0; i < nq; i++)
            mx = fmax(mx, fabs(dq[i]));
        for (size_t i = 0; i < nk; i++)
            mx = fmax(mx, fabs(dk[i]));
        snprintf(name, sizeof name, "attention %s dq, dk vanish (one key)", tag);
        report(name, mx, 0.0, mx, 1e-5);
    } else {
        snprintf(name, sizeof name, "attention %s dq", tag);
        check_fd(name, attn_obj, &c, c.q, nq, dq, 1.0);
        snprintf(name, sizeof name, "attention %s dk", tag);
        check_fd(name, attn_obj, &c, c.k, nk, dk, 1.0);
    }
    snprintf(name, sizeof name, "attention %s dv", tag);
    check_fd(name, attn_obj, &c, c.v, nk, dv, 1.0);
    check_causality(&c, out0);
    free(R), free(c.q), free(c.k), free(c.v), free(c.out), free(c.saved), free(ref), free(lref);
    free(out0), free(saved), free(dq), free(dk), free(dv);
}

/* A NaN key (either sign: the CPU kernel's exp works on the bits, and a
 * negative NaN once fell into its "below -87.3, gives 0" branch, silently
 * dropping the key; a positive one reached a float-to-int cast, undefined
 * behaviour that UBSan aborts on) must make every output row that sees it
 * NaN, forward and backward, and leave the forward rows before it finite:
 * a NaN weight must show in the loss. (dq rows before it may be NaN too:
 * dq = dS K over a whole tile, with 0 * NaN at the masked entries, as in
 * any masked-matrix reference.) B=1, T=70 (two tiles), H=2, KV=1, hd=4,
 * the NaN at t=3 of the one kv head. */
static void test_attention_nan(uint32_t nan_bits)
{
    enum { B = 1, T = 70, H = 2, KV = 1, hd = 4, TN = 3 };
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd;
    size_t np = be->attention_saved_floats(B, T, H);
    float *q = frand(nq, 2.0), *k = frand(nk, 2.0), *v = frand(nk, 1.0), *R = frand(nq, 1.0);
    float *out = fnew(nq), *saved = fnew(np), *dq = fnew(nq), *dk = fnew(nk), *dv = fnew(nk);
    float nanf_;
    memcpy(&nanf_, &nan_bits, sizeof nanf_);
    k[(size_t)TN * KV * hd + 1] = nanf_;
    op_attention_forward(out, saved, q, k, v, B, T, H, KV, hd);
    op_attention_backward(dq, dk, dv, R, out, saved, q, k, v, B, T, H, KV, hd);
    int bad_out = -1, bad_dq = -1; /* first row t breaking the rule */
    for (int t = 0; t < T && (bad_out < 0 || bad_dq < 0); t++)
        for (int j = 0; j < H * hd; j++) {
            size_t i = (size_t)t * H * hd + j;
            if (bad_out < 0 && (t < TN ? !isfinite(out[i]) : !isnan(out[i])))
                bad_out = t;
            if (bad_dq < 0 && t >= TN && !isnan(dq[i]))
                bad_dq = t;
        }
    char name[160], what[160];
    snprintf(name, sizeof name, "attention with a NaN key (bits 0x%08X) at t=%d: out NaN from t=%d "
             "on, finite before", (unsigned)nan_bits, TN, TN);
    snprintf(what, sizeof what, "row t=%d of out is %s", bad_out, bad_out < TN ? "not finite" : "not NaN");
    check_true(name, bad_out < 0, what);
    snprintf(name, sizeof name, "attention with a NaN key (bits 0x%08X) at t=%d: dq NaN from t=%d "
             "on", (unsigned)nan_bits, TN, TN);
    snprintf(what, sizeof what, "row t=%d of dq is not NaN", bad_dq);
    check_true(name, bad_dq < 0, what);
    free(q), free(k), free(v), free(R), free(out), free(saved), free(dq), free(dk), free(dv);
}

/* T = 1, 7, 64 (one whole tile), 257 (four tiles and one row) with GQA
 * ratios 1, 2, 3, 4. */
static void test_attention(void)
{
    test_attention_shape(2, 5, 4, 2, 4);
    test_attention_shape(2, 1, 4, 4, 8);
    test_attention_shape(2, 7, 3, 1, 8);
    test_attention_shape(1, 64, 4, 1, 8);
    test_attention_shape(1, 257, 3, 1, 8);
    test_attention_shape(2, 257, 4, 4, 4);
    test_attention_shape(1, 130, 6, 2, 16);
    test_attention_nan(0x7FC00000u); /* +NaN */
    test_attention_nan(0xFFC00000u); /* -NaN */
}

/* --------------------------------------------------------------- SwiGLU */

typedef struct {
    float *gate, *up, *out;
    const float *R;
    size_t n;
} swiglu_ctx;

static double swiglu_obj(void *p)
{
    swiglu_ctx *c = p;
    op_swiglu_forward(c->out, c->gate, c->up, c->n);
    return dot(c->R, c->out, c->n);
}

static void test_swiglu(void)
{
    enum { n = 40 };
    float *R = frand(n, 1.0);
    swiglu_ctx c = {frand(n, 4.0), frand(n, 2.0), fnew(n), R, n};
    double *ref = dnew(n);
    for (int i = 0; i < n; i++)
        ref[i] = c.gate[i] / (1.0 + exp(-(double)c.gate[i])) * c.up[i];
    op_swiglu_forward(c.out, c.gate, c.up, n);
    check_ref("swiglu forward vs double reference", c.out, ref, n);

    float *dg = fnew(n), *du = fnew(n);
    for (int i = 0; i < n; i++)
        dg[i] = du[i] = GARBAGE;
    op_swiglu_backward(dg, du, R, c.gate, c.up, n);
    check_fd("swiglu dgate", swiglu_obj, &c, c.gate, n, dg, 1.0);
    check_fd("swiglu dup", swiglu_obj, &c, c.up, n, du, 1.0);
    free(R), free(c.gate), free(c.up), free(c.out), free(ref), free(dg), free(du);
}

/* -------------------------------------------------------- cross-entropy */

typedef struct {
    float *logits;
    const int32_t *tg;
    int N, V;
} ce_ctx;

static double ce_obj(void *p)
{
    ce_ctx *c = p;
    return op_crossentropy_loss(c->logits, NULL, c->tg, c->N, c->V);
}

static void test_crossentropy(void)
{
    /* Hand case: sum over rows of log(sum_j exp(l_j)) - l_target, evaluated
     * in double with the max shifted out. The third row's logits are near
     * 1000, where float32's spacing is 6e-5: the tolerance is 1e-4 relative
     * on a loss of about 2.9 nats (3e-4 absolute), and 1e-4 relative on the
     * gradient (the log-sum-exp's 6e-5 rounding enters that row's softmax). */
    {
        enum { N = 3, V = 3 };
        float l[N * V] = {1, 2, 3, -1, 0.5f, 4, 1000, 1001, 999};
        int32_t tg[N] = {0, 2, 1};
        double ref = (3 + log(exp(-2.0) + exp(-1.0) + 1) - 1) +
                     (4 + log(exp(-5.0) + exp(-3.5) + 1) - 4) +
                     (1001 + log(exp(-1.0) + 1 + exp(-2.0)) - 1001);
        double got = op_crossentropy_loss(l, NULL, tg, N, V);
        report("crossentropy_loss equals hand-computed -log softmax (incl. logits ~1000)", got,
               ref, rel_err(got, ref, 0.0), 1e-4);
        /* gradient of the same case: (softmax - onehot) * grad_scale */
        float gs = 0.25f;
        double gref[N * V];
        for (int n = 0; n < N; n++) {
            double mx = fmax(fmax(l[n * V], l[n * V + 1]), l[n * V + 2]), s = 0.0;
            for (int j = 0; j < V; j++)
                s += exp(l[n * V + j] - mx);
            for (int j = 0; j < V; j++)
                gref[n * V + j] = (exp(l[n * V + j] - mx) / s - (j == tg[n])) * gs;
        }
        double fused = op_crossentropy_fused(l, tg, N, V, gs);
        check_ref_tol("crossentropy_fused gradient equals (softmax - onehot) * grad_scale", l,
                      gref, N * V, 1e-4);
        report("crossentropy_fused loss equals hand-computed value", fused, ref,
               rel_err(fused, ref, 0.0), 1e-4);
    }
    enum { N = 4, V = 11 };
    int32_t tg[N];
    for (int n = 0; n < N; n++)
        tg[n] = irand(V);
    ce_ctx c = {frand(N * V, 3.0), tg, N, V};
    float *after = fnew(N * V), *g = fdup(c.logits, N * V), gs = 0.37f;
    double loss = op_crossentropy_loss(c.logits, after, tg, N, V);
    check_true("crossentropy_loss leaves logits untouched",
               memcmp(after, c.logits, FB(N * V)) == 0, "the logits changed");
    double fused = op_crossentropy_fused(g, tg, N, V, gs);
    report("crossentropy_fused loss equals crossentropy_loss", fused, loss,
           rel_err(fused, loss, 0.0), 1e-6);
    check_fd("crossentropy_fused dlogits == FD of crossentropy_loss x grad_scale", ce_obj, &c,
             c.logits, N * V, g, gs);
    free(c.logits), free(after), free(g);
}

/* ---------------------------------------------------------------- AdamW */

/* One AdamW step in double (backend.h's formula). */
static void ref_adamw(double *p, double *m, double *v, const float *g, size_t n, double lr,
                      double b1, double b2, double eps, double wd, double gs, int t)
{
    double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
    for (size_t i = 0; i < n; i++) {
        double gi = g[i] * gs;
        m[i] = b1 * m[i] + (1.0 - b1) * gi;
        v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
        p[i] -= lr * (wd * p[i] + (m[i] / bc1) / (sqrt(v[i] / bc2) + eps));
    }
}

/* Compare one step at step t from (p, m, v). The update p' - p is compared
 * relative to its largest reference value (1e-4: float32 rounding of p ~ 1
 * against updates ~1e-2); m and v to 1e-6. eps = 1e-3 with gradients
 * ~1e-2 makes the place of eps matter, and weight decay is 10% of the
 * update, so either being wrong fails. */
static void adamw_case(int t, int fresh)
{
    enum { n = 6 };
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-3f, wd = 0.1f, gs = 0.5f;
    float *p = frand(n, 1.0), *g = frand(n, 2e-2), *m = fnew(n), *v = fnew(n);
    if (!fresh)
        for (int i = 0; i < n; i++) {
            m[i] = (float)(1e-2 * urand());
            v[i] = (float)(1e-4 * (urand() + 1.0));
        }
    double *rp = dnew(n), *rm = dnew(n), *rv = dnew(n), *rdelta = dnew(n);
    for (int i = 0; i < n; i++)
        rp[i] = p[i], rm[i] = m[i], rv[i] = v[i];
    ref_adamw(rp, rm, rv, g, n, lr, b1, b2, eps, wd, gs, t);
    float *p0 = fdup(p, n), *delta = fnew(n);
    op_adamw(p, g, m, v, n, lr, b1, b2, eps, wd, gs, t);
    for (int i = 0; i < n; i++) {
        delta[i] = p[i] - p0[i];
        rdelta[i] = rp[i] - p0[i];
    }
    char name[96];
    snprintf(name, sizeof name, "adamw step t=%d%s: update p'-p", t, fresh ? " (m=v=0)" : "");
    double maxr = 0.0, maxd = 0.0, wa = 0.0, wn = 0.0;
    for (int i = 0; i < n; i++) {
        maxr = fmax(maxr, fabs(rdelta[i]));
        if (!(fabs(delta[i] - rdelta[i]) <= maxd)) {
            maxd = fabs(delta[i] - rdelta[i]);
            wa = delta[i];
            wn = rdelta[i];
        }
    }
    report(name, wa, wn, maxd / maxr, 1e-4);
    /* m and v against the reference, relative to their largest value */
    double err_m = 0.0, max_m = 0.0, err_v = 0.0, max_v = 0.0;
    for (int i = 0; i < n; i++) {
        max_m = fmax(max_m, fabs(rm[i]));
        max_v = fmax(max_v, fabs(rv[i]));
        err_m = fmax(err_m, fabs(m[i] - rm[i]));
        err_v = fmax(err_v, fabs(v[i] - rv[i]));
    }
    snprintf(name, sizeof name, "adamw step t=%d: first moment m", t);
    report(name, m[0], rm[0], err_m / max_m, 1e-6);
    snprintf(name, sizeof name, "adamw step t=%d: second moment v", t);
    report(name, v[0], rv[0], err_v / max_v, 1e-6);
    free(p), free(g), free(m), free(v), free(rp), free(rm), free(rv), free(rdelta), free(p0);
    free(delta);
}

static void test_adamw(void)
{
    adamw_case(1, 1);
    adamw_case(3, 0);
}

/* ------------------------------------------------------ whole-model check */

/* Whole model: central differences of the mean loss f = loss/N in single
 * parameters, perturbed in the parameter block, against hpt_model_backward's
 * gradients of forward(train=1, grad_scale=1/N).
 *
 * MODEL_EPS = 1e-2 on parameters of size O(0.1..1). f ≈ 3.6 nats comes out
 * of a float32 network with about one ulp (2.4e-7) of rounding that does not
 * cancel between f(p+ε) and f(p-ε): ~1.2e-5 absolute noise in the
 * difference quotient (measured up to 1.6e-5). The O(ε²) truncation is
 * ~1e-3 relative (it reaches 6e-2 at ε = 1e-1); over 12 PRNG seeds a
 * correct model measured at most 4.3e-3. The error is taken relative to
 * max(|analytic|, |numeric|, MODEL_FLOOR) with MODEL_TOL = 2e-2:
 * 2% for gradients above 5e-3, and an absolute allowance of 1e-4 (about 6x
 * the noise) below. Sampled gradients range over 1e-3..3e-1; a wrong sign,
 * a missing term or a dropped contribution moves them by their own size. */
#define MODEL_EPS 1e-2f
#define MODEL_FLOOR 5e-3
#define MODEL_TOL 2e-2
#define MODEL_SAMPLES 4 /* elements checked per tensor                  */
#define MODEL_DRAWS 4   /* samples 1.. take the largest |grad| of this many */

/* Replace hpt's init (std 0.02, which makes the loss nearly flat) by
 * O(1)-activation values: matrices U(-sqrt(3/fan_in), +), the embedding
 * U(-1, 1), norm weights 1 + U(-0.2, 0.2). */
static void model_randomize(hpt_model *m)
{
    float *h = fnew(m->nparams);
    for (int i = 0; i < m->ntensors; i++) {
        const hpt_tensor *t = &m->tensors[i];
        double a = t->kind == HPT_TENSOR_EMBED ? 1.0 : sqrt(3.0 / (double)t->cols);
        for (int64_t e = 0; e < t->rows * t->cols; e++)
            h[t->offset + e] = t->is_matrix ? (float)(a * urand()) : (float)(1.0 + 0.2 * urand());
    }
    be->upload(m->params, h, FB(m->nparams));
    free(h);
}

static double model_mean_loss(hpt_model *m, const int32_t *in, const int32_t *tg)
{
    return hpt_model_forward(m, in, tg, 0.0f, 0) / (m->B * m->T);
}

static void set_param(hpt_model *m, size_t i, float v) { be->upload(m->params + i, &v, FB(1)); }

/* Central difference of the mean loss in parameter i, using the perturbation
 * actually representable in float. */
static double model_fd(hpt_model *m, size_t i, float p, const int32_t *in, const int32_t *tg)
{
    float pp = p + MODEL_EPS, pm = p - MODEL_EPS;
    set_param(m, i, pp);
    double fp = model_mean_loss(m, in, tg);
    set_param(m, i, pm);
    double fm = model_mean_loss(m, in, tg);
    set_param(m, i, p);
    return (fp - fm) / ((double)pp - pm);
}

/* FD against the gradient for MODEL_SAMPLES elements of tensor t; returns
 * the worst error and its (analytic, numeric) pair. params/grads: host
 * copies of the blocks. Sample 0 is uniform; the others take the largest
 * |grad| of MODEL_DRAWS draws, where the relative error says most. The
 * embedding's first two come from rows the input uses (other rows get only
 * the LM head's gradient when tied, and none when untied). */
static double model_check_tensor(hpt_model *m, const hpt_tensor *t, const float *params,
                                 const float *grads, const int32_t *in, const int32_t *tg,
                                 double *wa, double *wn)
{
    int N = m->B * m->T, count = (int)(t->rows * t->cols);
    double worst = 0.0;
    for (int s = 0; s < MODEL_SAMPLES; s++) {
        size_t i = 0;
        for (int d = 0; d < (s == 0 ? 1 : MODEL_DRAWS); d++) {
            size_t c = t->offset + (size_t)irand(count);
            if (t->kind == HPT_TENSOR_EMBED && s < 2)
                c = t->offset + (size_t)in[irand(N)] * t->cols + (size_t)irand((int)t->cols);
            if (d == 0 || fabsf(grads[c]) > fabsf(grads[i]))
                i = c;
        }
        double num = model_fd(m, i, params[i], in, tg), ana = grads[i];
        double err = rel_err(ana, num, MODEL_FLOOR);
        if (!(err <= worst) || s == 0) {
            worst = err;
            *wa = ana;
            *wn = num;
        }
    }
    return worst;
}

static void test_model(int tied)
{
    enum { B = 2, T = 6, N = B * T };
    hpt_config cfg = {.hidden_size = 16, .intermediate_size = 24, .num_hidden_layers = 2,
                      .num_attention_heads = 4, .num_key_value_heads = 2, .vocab_size = 37,
                      .max_position_embeddings = 16, .rms_norm_eps = 1e-5f,
                      .rope_theta = 10000.0f, .tie_word_embeddings = tied};
    hpt_model m;
    if (hpt_config_validate(&cfg, "test_ops") || hpt_model_init(&m, &cfg, be, B, T, 1234)) {
        n_fail++;
        printf("FAIL model init (%s): %s\n", tied ? "tied" : "untied", hpt_error_msg());
        return;
    }
    model_randomize(&m);
    int32_t in[N], tg[N];
    for (int n = 0; n < N; n++)
        in[n] = irand(cfg.vocab_size), tg[n] = irand(cfg.vocab_size);

    float *params = fnew(m.nparams), *grads = fnew(m.nparams), *grads2 = fnew(m.nparams);
    be->download(params, m.params, FB(m.nparams));
    hpt_model_zero_grad(&m);
    double loss_train = hpt_model_forward(&m, in, tg, 1.0f / N, 1) / N;
    hpt_model_backward(&m);
    be->download(grads, m.grads, FB(m.nparams));
    double loss_eval = model_mean_loss(&m, in, tg);
    char name[160];
    snprintf(name, sizeof name, "model (%s) train loss equals eval loss", tied ? "tied" : "untied");
    report(name, loss_train, loss_eval, rel_err(loss_train, loss_eval, 0.0), 1e-6);

    for (int ti = 0; ti < m.ntensors; ti++) {
        double wa = 0.0, wn = 0.0;
        double worst = model_check_tensor(&m, &m.tensors[ti], params, grads, in, tg, &wa, &wn);
        worst_model_err = fmax(worst_model_err, worst);
        snprintf(name, sizeof name, "model (%s) d loss / d %s", tied ? "tied" : "untied",
                 m.tensors[ti].name);
        report(name, wa, wn, worst, MODEL_TOL);
    }

    /* backward accumulates: a second forward+backward doubles the gradients */
    hpt_model_forward(&m, in, tg, 1.0f / N, 1);
    hpt_model_backward(&m);
    be->download(grads2, m.grads, FB(m.nparams));
    for (size_t i = 0; i < m.nparams; i++)
        grads2[i] *= 0.5f;
    snprintf(name, sizeof name, "model (%s) backward accumulates into grads",
             tied ? "tied" : "untied");
    check_same(name, grads2, grads, m.nparams, 1e-6);
    hpt_model_free(&m);
    free(params), free(grads), free(grads2);
}

/* Fused residual add + RMSNorm (backend slot add_rmsnorm_forward): the
 * model's forward calls it where a residual add feeds a norm (both adds of
 * every layer; the last one feeds the next layer's ln1 or the final norm).
 * With the slot and with a copy of the backend that lacks it (so the model
 * calls add and rmsnorm_forward), three training steps (forward, backward,
 * AdamW) and an evaluation give bitwise the same losses, gradients and
 * weights, with each recomputation mode (full and selective recompute
 * layers without the chain, from the kept activations). */
enum { FUSE_STEPS = 3, FUSE_MAX_PARAMS = 1 << 16 };

static void fused_run(const hpt_backend *b, int recompute, double *loss, float *params,
                      float *grads)
{
    enum { B = 2, T = 6, N = B * T };
    hpt_config cfg = {.hidden_size = 40, .intermediate_size = 24, .num_hidden_layers = 3,
                      .num_attention_heads = 4, .num_key_value_heads = 2, .vocab_size = 37,
                      .max_position_embeddings = 16, .rms_norm_eps = 1e-5f,
                      .rope_theta = 10000.0f};
    hpt_model_opts mo = {.recompute = recompute};
    hpt_model m;
    const hpt_backend *saved = be;
    be = b; /* model_randomize uploads through `be` */
    rng_state = 77;
    if (hpt_model_init_opts(&m, &cfg, b, &mo, B, T, 1234)) {
        be = saved;
        n_fail++;
        printf("FAIL fused model init: %s\n", hpt_error_msg());
        return;
    }
    if (m.nparams > FUSE_MAX_PARAMS)
        HPT_FATAL("fused model: %zu parameters exceed FUSE_MAX_PARAMS", m.nparams);
    model_randomize(&m);
    int32_t in[N], tg[N];
    for (int n = 0; n < N; n++)
        in[n] = irand(cfg.vocab_size), tg[n] = irand(cfg.vocab_size);
    float *mom = b->alloc(FB(m.nparams)), *var = b->alloc(FB(m.nparams));
    for (int t = 1; t <= FUSE_STEPS; t++) {
        hpt_model_zero_grad(&m);
        loss[t - 1] = hpt_model_forward(&m, in, tg, 1.0f / N, 1);
        hpt_model_backward(&m);
        b->adamw(m.params, m.grads, mom, var, m.nparams, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, t);
    }
    loss[FUSE_STEPS] = hpt_model_forward(&m, in, tg, 0.0f, 0);
    b->download(params, m.params, FB(m.nparams));
    b->download(grads, m.grads, FB(m.nparams));
    b->free(mom), b->free(var);
    hpt_model_free(&m);
    be = saved;
}

static void test_model_fused(void)
{
    static const char *const modes[] = {"none", "full", "selective"};
    if (!be->add_rmsnorm_forward) {
        printf("# skip model fused add + RMSNorm: backend %s has no add_rmsnorm_forward\n",
               be->name);
        return;
    }
    hpt_backend unfused = *be;
    unfused.add_rmsnorm_forward = NULL;
    size_t np = FUSE_MAX_PARAMS;
    float *p1 = fnew(np), *g1 = fnew(np), *p2 = fnew(np), *g2 = fnew(np);
    for (int r = 0; r < 3; r++) {
        double l1[FUSE_STEPS + 1], l2[FUSE_STEPS + 1];
        fused_run(be, r, l1, p1, g1);
        fused_run(&unfused, r, l2, p2, g2);
        char name[160];
        snprintf(name, sizeof name, "model fused add + RMSNorm bitwise equal to add then "
                 "RMSNorm (recompute %s, %d steps)", modes[r], FUSE_STEPS);
        check_true(name, !memcmp(l1, l2, sizeof l1) && !memcmp(p1, p2, FB(np)) &&
                   !memcmp(g1, g2, FB(np)), "losses, weights or gradients differ");
    }
    free(p1), free(g1), free(p2), free(g2);
}

/* ----------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const char *name = argc > 1 ? argv[1] : "cpu";
    if (hpt_backend_get(name, &be)) {
        fprintf(stderr, "test_ops: %s\n", hpt_error_msg());
        MPI_Finalize();
        return 2;
    }
    printf("# test_ops: backend %s\n", be->name);
    test_memory();
    test_elementwise();
    test_sumsq();
    test_matmul();
    test_matmul_tiles();
    test_embedding();
    test_rmsnorm();
    test_rope();
    test_attention();
    test_swiglu();
    test_crossentropy();
    test_adamw();
    test_model(0);
    test_model(1);
    test_model_fused();
    printf("# %d ok, %d failed; worst op FD rel err %.1e (tol %.0e), worst model FD rel err "
           "%.1e (tol %.0e)\n",
           n_ok, n_fail, worst_op_err, OP_TOL, worst_model_err, MODEL_TOL);
    MPI_Finalize();
    return n_fail ? 1 : 0;
}
