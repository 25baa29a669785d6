/* test_backend_cuda.c — every op of the cuda backend against the cpu
 * backend (the reference: its ops are checked by tests/unit/test_ops against
 * finite differences and double-precision references).
 *
 * Method: random non-zero inputs from a fixed-seed PRNG; the same call on
 * both backends; outputs the contract says are overwritten are poisoned
 * with NaN on the GPU before the call, so an element a kernel leaves
 * unwritten fails the comparison; accumulated outputs start from the same
 * random values on both sides. Shapes include T not a multiple of the
 * attention tiles (16 query rows, 32 keys), GQA ratios 1, 2 and 8, head_dim
 * 64 and 128, a vocabulary that is not a multiple of 8, padded
 * vocab-parallel columns.
 *
 * Error measure (ggml test-backend-ops): normalised mean squared error
 * NMSE = sum (gpu - cpu)^2 / sum cpu^2, tolerance 1e-5 for fp32 (float
 * rounding and summation order give ~1e-12; an indexing or masking bug
 * gives ~1); a non-finite GPU value fails. Scalars returned to the host
 * (losses, sum of squares) are compared by relative error, 1e-5.
 *
 * bf16 mode (--precision bf16, test_bf16 and test_bf16_training): products
 * against the CPU's fp32 products within NMSE 2e-2 (the issue's bound),
 * and against the CPU's products of the same operands rounded to bf16 on
 * the host (lib/bf16.h) within 1e-10 — which shows the GPU rounds exactly
 * those operands and accumulates in fp32; the working copies of the
 * weights follow every write to the fp32 masters (upload at an offset,
 * AdamW); a few training steps of a tiny model stay within 2e-2 of the
 * CPU's fp32 steps (losses relative, gradients and weights NMSE). bf16
 * activation storage (test_bf16_act_ops): in bf16 mode every `void *`
 * activation is bf16 (act_dtype); each op that reads or writes one (RMSNorm,
 * RoPE, attention and its cached form, SwiGLU, a product into bf16) is
 * checked against the fp32 CPU within 2e-2 with its bf16 outputs poisoned
 * with NaN, and an fp32 computation stored in bf16 against the CPU's result
 * rounded on the host within 1e-6 (round to nearest even, not truncation);
 * the tiny model's activation block is carved with 2-byte elements. bf16
 * attention goes through cuBLAS in query chunks (test_attention_blas):
 * at one chunk and at 16-, 7- and 5-row chunks against the CPU on the same
 * bf16-rounded operands and against the fp32 flash kernels, NMSE 2e-4; the
 * attention group runs the same path in tf32 mode (fp32 operands, NMSE
 * 1e-4). The tensor-core kernels, bf16 mode's default (group mma,
 * lib/attention_mma.cu): against the CPU on bf16-rounded operands and
 * against the cuBLAS chunks (NMSE 2e-4), not bitwise either of the other
 * paths, with the dK/dV kernel's GQA groups whole, split in parts
 * (HPT_CUDA_MMA_BLOCKS) and one head per block, each seen to run; HPT_CUDA_ATTENTION's bad values refused by set_precision. The
 * tiny model's bf16 training steps run them (hd 16).
 *
 * Fused and vectorised kernels (group fused): add_rmsnorm_forward,
 * rope_qk and SwiGLU's 16-byte accesses, each against the CPU and against
 * the same backend's unfused or element-by-element path bit for bit (odd
 * C, unaligned pointers, fp32 and bf16). Host synchronisations (group
 * sync): the host_syncs counters around a tiny bf16 model's training
 * steps stay at the expected read-backs. Virtual memory (group vmm):
 * ZeRO-3's parameter block committed and decommitted unit by unit as
 * lib/train_zero3.c does — the bytes backed move by whole granules, the
 * own shard's data survive, a granule two units share stays until both are
 * dropped, a dropped granule faults (on the emulation), bf16 products with
 * weights in a partly unmapped block, and the fallback (HPT_CUDA_VMM=0).
 *
 * Arguments: optional group names (memory matmul embedding rmsnorm rope
 * attention ring elementwise crossentropy adamw bf16 mma fused sync
 * reserve vmm) run only those groups. The sections follow the backend's files: lib/backend_cuda.cu
 * (memory, matmul, reserve), lib/attention_cuda.cu (attention),
 * lib/kernels_cuda.cu (embedding, rmsnorm, rope, elementwise,
 * crossentropy, adamw); bf16 (and attention's tf32 part) crosses all
 * three.
 *
 * Needs a GPU: when the cuda backend reports no visible device the test
 * prints "no CUDA device visible: <reason>" and exits 77 (skipped). Each
 * check prints "ok <name> nmse X" or "FAIL <name> ..."; exit status 1 if
 * any failed.
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attention_ring.h"
#include "backend.h"
#include "bf16.h"
#include "config.h"
#include "model.h"

#define TOL 1e-5      /* NMSE, fp32                                      */
#define TOL_TF32 1e-4 /* NMSE of the tf32 products (10-bit mantissas)    */
#define SCALAR_TOL 1e-5
#define TOL_BF16 2e-2 /* NMSE (and relative loss) of bf16 mode vs the fp32 CPU */
/* NMSE of bf16 products vs the CPU on the same bf16-rounded operands: only
 * the fp32 summation order differs (~1e-14 seen); operands left in fp32
 * or rounded otherwise (e.g. truncated) give ~1e-6 */
#define TOL_BF16_EXACT 1e-10
/* NMSE of a result stored in bf16 against the CPU's fp32 result on the
 * same inputs, rounded to bf16 on the host: equal up to the rare element
 * whose last-bit fp32 difference flips the rounding (one bf16 ulp, 2^-8
 * relative); truncation instead of rounding to nearest gives ~1e-5 */
#define TOL_BF16_STORE 1e-6

static const hpt_backend *cpu, *gpu;
static int n_fail, n_ok;

/* ------------------------------------------------------------ utilities */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

/* Uniform in [-1, 1) (splitmix64). */
static double urand(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-52 - 1.0;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        HPT_FATAL("out of memory (%zu bytes)", bytes);
    return p;
}

/* n floats uniform in [-a, a), none zero. */
static float *hrand(size_t n, double a)
{
    float *p = xmalloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) {
        double u = urand();
        p[i] = (float)(a * (u == 0.0 ? 0.5 : u));
    }
    return p;
}

static float *hdup(const float *x, size_t n)
{
    float *p = xmalloc(sizeof(float) * n);
    memcpy(p, x, sizeof(float) * n);
    return p;
}

static int32_t *itok(size_t n, int hi)
{
    int32_t *p = xmalloc(sizeof(int32_t) * n);
    for (size_t i = 0; i < n; i++) {
        int v = (int)((urand() + 1.0) * 0.5 * hi);
        p[i] = v < hi ? v : hi - 1;
    }
    return p;
}

/* GPU copy of host bytes. */
static void *dput(const void *h, size_t bytes)
{
    void *d = gpu->alloc(bytes);
    if (!d)
        HPT_FATAL("cuda alloc of %zu bytes: %s", bytes, hpt_error_msg());
    gpu->upload(d, h, bytes);
    return d;
}

/* GPU buffer of n floats, every one NaN (an unwritten output stays NaN). */
static float *dnan(size_t n)
{
    float *h = xmalloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++)
        h[i] = NAN;
    float *d = dput(h, sizeof(float) * n);
    free(h);
    return d;
}

/* Host copy of n device floats; the device buffer is freed. */
static float *dtake(float *d, size_t n)
{
    float *h = xmalloc(sizeof(float) * n);
    gpu->download(h, d, sizeof(float) * n);
    gpu->free(d);
    return h;
}

static void result(const char *name, int ok, const char *fmt, double v)
{
    if (ok)
        n_ok++;
    else
        n_fail++;
    printf("%s %s ", ok ? "ok" : "FAIL", name);
    printf(fmt, v);
    printf("\n");
}

/* NMSE of got (GPU) against ref (CPU); NaN/inf in got fails. */
static void cmp_tol(const char *name, const float *got, const float *ref, size_t n, double tol)
{
    double num = 0.0, den = 0.0;
    size_t bad = n;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) && bad == n)
            bad = i;
        double d = (double)got[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    if (bad < n) {
        printf("FAIL %s: element %zu of %zu is %g (unwritten or non-finite; cpu %g)\n", name, bad,
               n, got[bad], ref[bad]);
        n_fail++;
        return;
    }
    double e = den > 0 ? num / den : num;
    result(name, e <= tol, "nmse %.2e", e);
}

static void cmp(const char *name, const float *got, const float *ref, size_t n)
{
    cmp_tol(name, got, ref, n, TOL);
}

/* Relative error of a scalar against the CPU's within tol. */
static void cmp_tol_scalar(const char *name, double got, double ref, double tol)
{
    double e = fabs(got - ref) / fmax(fabs(ref), 1e-30);
    result(name, isfinite(got) && e <= tol, "rel err %.2e", e);
}

static void cmp_scalar(const char *name, double got, double ref)
{
    cmp_tol_scalar(name, got, ref, SCALAR_TOL);
}

#define FB(n) (sizeof(float) * (size_t)(n))

/* bf16 activations on the GPU (bf16 mode stores `void *` activations as
 * bf16): a device copy of x rounded to bf16; a device buffer of n bf16
 * NaNs; the host floats of n device bf16 values (buffer freed). */
static void *dput_bf16(const float *x, size_t n)
{
    hpt_bf16 *h = xmalloc(sizeof(hpt_bf16) * (n ? n : 1));
    hpt_bf16_from_f32_n(h, x, n);
    void *d = dput(h, sizeof(hpt_bf16) * n);
    free(h);
    return d;
}

static void *dnan_bf16(size_t n)
{
    hpt_bf16 *h = xmalloc(sizeof(hpt_bf16) * (n ? n : 1));
    for (size_t i = 0; i < n; i++)
        h[i] = 0x7fc0; /* quiet NaN */
    void *d = dput(h, sizeof(hpt_bf16) * n);
    free(h);
    return d;
}

static float *dtake_bf16(void *d, size_t n)
{
    hpt_bf16 *h = xmalloc(sizeof(hpt_bf16) * (n ? n : 1));
    float *f = xmalloc(FB(n ? n : 1));
    gpu->download(h, d, sizeof(hpt_bf16) * n);
    gpu->free(d);
    hpt_bf16_to_f32_n(f, h, n);
    free(h);
    return f;
}

/* Host floats of n device values at d (bf16 when bf, else float), which
 * may point inside an allocation (kept). */
static float *dget(const void *d, size_t n, int bf)
{
    float *f = xmalloc(FB(n ? n : 1));
    if (!bf) {
        gpu->download(f, d, FB(n));
        return f;
    }
    hpt_bf16 *h = xmalloc(sizeof(hpt_bf16) * (n ? n : 1));
    gpu->download(h, d, sizeof(hpt_bf16) * n);
    hpt_bf16_to_f32_n(f, h, n);
    free(h);
    return f;
}

/* Device buffer of off + n values (bf16 when bf, else float), NaN, with
 * x's n values from element off on (x NULL: all NaN); *at = element off. */
static void *dput_at(const float *x, size_t n, size_t off, int bf, void **at)
{
    void *d = bf ? dnan_bf16(n + off) : (void *)dnan(n + off);
    *at = (char *)d + off * (bf ? sizeof(hpt_bf16) : sizeof(float));
    if (x && bf) {
        hpt_bf16 *h = xmalloc(sizeof(hpt_bf16) * (n ? n : 1));
        hpt_bf16_from_f32_n(h, x, n);
        gpu->upload(*at, h, sizeof(hpt_bf16) * n);
        free(h);
    } else if (x) {
        gpu->upload(*at, x, FB(n));
    }
    return d;
}

/* got and ref equal bit for bit (n floats; converted bf16 values are
 * exact): reports the count of elements that differ. */
static void cmp_bits(const char *name, const float *got, const float *ref, size_t n)
{
    size_t diff = 0;
    for (size_t i = 0; i < n; i++)
        diff += memcmp(&got[i], &ref[i], sizeof(float)) != 0;
    char nm[240];
    snprintf(nm, sizeof nm, "%.200s (elements that differ:", name);
    result(nm, diff == 0, "%g)", (double)diff);
}

/* ======================================================================
 * lib/backend_cuda.cu: memory, the products through cuBLAS (reserve: below,
 * with the bf16 working copies it sizes)
 * ====================================================================== */

/* ------------------------------------------------------------- memory */

static void test_memory(void)
{
    size_t n = 1000;
    float *d = gpu->alloc(FB(n)), *z = xmalloc(FB(n)), *x = hrand(n, 1.0);
    gpu->download(z, d, FB(n));
    int zero = 1;
    for (size_t i = 0; i < n; i++)
        zero &= z[i] == 0.0f;
    result("memory: alloc is zero-filled", zero, "(%g)", 0.0);
    gpu->upload(d, x, FB(n));
    float *e = gpu->alloc(FB(n));
    gpu->copy(e, d, FB(n));
    gpu->download(z, e, FB(n));
    result("memory: upload, copy, download round-trip", !memcmp(z, x, FB(n)), "(%g)", 0.0);
    gpu->copy(d + 10, d, FB(n - 10)); /* overlapping: memmove semantics */
    gpu->download(z, d, FB(n));
    result("memory: copy of overlapping ranges (memmove)",
           !memcmp(z + 10, x, FB(n - 10)) && !memcmp(z, x, FB(10)), "(%g)", 0.0);
    /* overlapping by more than a sixteenth: in pieces, both directions */
    gpu->upload(d, x, FB(n));
    gpu->copy(d + 300, d, FB(n - 300));
    gpu->copy(d, d + 300, FB(n - 300));
    gpu->download(z, d, FB(n));
    result("memory: overlapping copies in pieces (forward, then backward)",
           !memcmp(z, x, FB(n - 300)) && !memcmp(z + n - 300, x + n - 600, FB(300)), "(%g)", 0.0);
    gpu->memset0(e, FB(n));
    gpu->download(z, e, FB(n));
    zero = 1;
    for (size_t i = 0; i < n; i++)
        zero &= z[i] == 0.0f;
    result("memory: memset0", zero, "(%g)", 0.0);
    result("memory: mem_peak counts the allocations", gpu->mem_peak && gpu->mem_peak() >= FB(2 * n),
           "%g bytes", gpu->mem_peak ? (double)gpu->mem_peak() : 0.0);
    result("memory: is_device (device buffer 1, host buffer 0)",
           gpu->is_device && gpu->is_device(d) && !gpu->is_device(x) && !gpu->is_device(NULL),
           "(%g)", 0.0);
    /* pinned host memory (the async checkpoint's staging buffer): a
     * downloaded buffer pinned equals one pageable; host memory stays host */
    float *pin = NULL;
    if (posix_memalign((void **)&pin, 4096, FB(n)))
        pin = NULL;
    int pinned = pin && gpu->host_pin && gpu->host_unpin && gpu->host_pin(pin, FB(n)) == 0;
    if (pinned) {
        gpu->upload(d, x, FB(n));
        gpu->download(pin, d, FB(n));
    }
    result("memory: host_pin, download into pinned memory, host_unpin",
           pinned && !memcmp(pin, x, FB(n)) && !gpu->is_device(pin), "(%g)", 0.0);
    if (pinned)
        gpu->host_unpin(pin);
    free(pin);
    gpu->free(d);
    gpu->free(e);
    gpu->free(NULL);
    free(z);
    free(x);
}

/* ------------------------------------------------------------- linear */

static void test_matmul_shape(int N, int Ic, int O, double tol, const char *tag)
{
    char name[160];
    float *in = hrand((size_t)N * Ic, 1.0), *w = hrand((size_t)O * Ic, 1.0);
    float *dout = hrand((size_t)N * O, 1.0), *dw0 = hrand((size_t)O * Ic, 1.0);
    float *din0 = hrand((size_t)N * Ic, 1.0);
    float *out = xmalloc(FB((size_t)N * O));
    cpu->matmul_forward(out, HPT_DTYPE_F32, in, w, N, Ic, O);
    float *d_in = dput(in, FB((size_t)N * Ic)), *d_w = dput(w, FB((size_t)O * Ic));
    float *d_dout = dput(dout, FB((size_t)N * O));
    float *d_out = dnan((size_t)N * O);
    gpu->matmul_forward(d_out, HPT_DTYPE_F32, d_in, d_w, N, Ic, O);
    float *g = dtake(d_out, (size_t)N * O);
    snprintf(name, sizeof name, "matmul_forward%s N=%d Ic=%d O=%d", tag, N, Ic, O);
    cmp_tol(name, g, out, (size_t)N * O, tol);
    free(g);
    for (int accum = 0; accum <= 2; accum++) { /* 2: din NULL */
        float *din = hdup(din0, (size_t)N * Ic), *dw = hdup(dw0, (size_t)O * Ic);
        cpu->matmul_backward(accum < 2 ? din : NULL, dw, dout, in, w, N, Ic, O, accum == 1);
        float *d_din = accum == 1 ? dput(din0, FB((size_t)N * Ic)) : dnan((size_t)N * Ic);
        float *d_dw = dput(dw0, FB((size_t)O * Ic));
        gpu->matmul_backward(accum < 2 ? d_din : NULL, d_dw, d_dout, d_in, d_w, N, Ic, O,
                             accum == 1);
        float *gdw = dtake(d_dw, (size_t)O * Ic), *gdin = dtake(d_din, (size_t)N * Ic);
        snprintf(name, sizeof name, "matmul_backward%s dw += (accumulated) N=%d Ic=%d O=%d%s", tag,
                 N, Ic, O, accum == 2 ? " din=NULL" : "");
        cmp_tol(name, gdw, dw, (size_t)O * Ic, tol);
        if (accum < 2) {
            snprintf(name, sizeof name, "matmul_backward%s din %s N=%d Ic=%d O=%d", tag,
                     accum ? "+= (accum_din)" : "= (overwritten)", N, Ic, O);
            cmp_tol(name, gdin, din, (size_t)N * Ic, tol);
        }
        free(din), free(dw), free(gdw), free(gdin);
    }
    gpu->free(d_in), gpu->free(d_w), gpu->free(d_dout);
    free(in), free(w), free(dout), free(dw0), free(din0), free(out);
}

static void test_matmul(void)
{
    test_matmul_shape(7, 33, 17, TOL, "");
    test_matmul_shape(64, 128, 96, TOL, "");
    test_matmul_shape(130, 256, 301, TOL, "");
    hpt_status st = hpt_backend_set_precision(gpu, HPT_PRECISION_TF32);
    result("set_precision tf32 accepted", st == HPT_OK, "(%g)", 0.0);
    test_matmul_shape(130, 256, 301, TOL_TF32, " (tf32)");
    st = hpt_backend_set_precision(gpu, HPT_PRECISION_FP32);
    result("set_precision fp32 accepted", st == HPT_OK, "(%g)", 0.0);
}

/* ======================================================================
 * lib/attention_cuda.cu: the flash kernels (fp32); the cuBLAS path is
 * test_attention_blas in the bf16/tf32 section
 * ====================================================================== */

/* ------------------------------------------------- attention cases */

/* One attention case: random q (B,T,H,hd), k, v (B,T,KV,hd) and dout
 * (B,T,H,hd), rounded to bf16 when round_bf16, and the CPU backend's out,
 * dq, dk, dv on them (the reference). Owned: att_case_free. */
typedef struct {
    int B, T, H, KV, hd;
    size_t nq, nk; /* elements of q (and out, dout, dq) and of k (v, dk, dv) */
    float *q, *k, *v, *dout, *out, *dq, *dk, *dv;
} att_case;

static att_case att_case_new(int B, int T, int H, int KV, int hd, int round_bf16)
{
    att_case c;
    memset(&c, 0, sizeof c);
    c.B = B, c.T = T, c.H = H, c.KV = KV, c.hd = hd;
    c.nq = (size_t)B * T * H * hd, c.nk = (size_t)B * T * KV * hd;
    c.q = hrand(c.nq, 2.0), c.k = hrand(c.nk, 2.0), c.v = hrand(c.nk, 1.0);
    c.dout = hrand(c.nq, 1.0);
    if (round_bf16)
        hpt_bf16_round(c.q, c.nq), hpt_bf16_round(c.k, c.nk), hpt_bf16_round(c.v, c.nk),
            hpt_bf16_round(c.dout, c.nq);
    size_t np = cpu->attention_saved_floats(B, T, H), ns = cpu->attention_scratch_floats(B, T, H);
    float *sv = xmalloc(FB(np)), *scr = xmalloc(FB(ns));
    c.out = xmalloc(FB(c.nq)), c.dq = xmalloc(FB(c.nq)), c.dk = xmalloc(FB(c.nk));
    c.dv = xmalloc(FB(c.nk));
    cpu->attention_forward(c.out, sv, c.q, c.k, c.v, B, T, H, KV, hd);
    cpu->attention_backward(c.dq, c.dk, c.dv, scr, c.dout, c.out, sv, c.q, c.k, c.v, B, T, H, KV,
                            hd);
    free(sv), free(scr);
    return c;
}

static void att_case_free(att_case *c)
{
    free(c->q), free(c->k), free(c->v), free(c->dout), free(c->out), free(c->dq), free(c->dk);
    free(c->dv);
}

/* The GPU backend's forward and backward on c's inputs: q, k, v and out in
 * the activation dtype (bf16 when bf, else fp32), dout fp32; every output
 * poisoned with NaN before the call. got[0..4) = out (as floats), dq, dk,
 * dv, host copies owned by the caller. */
static void att_gpu_run(const att_case *c, int bf, float *got[4])
{
    int B = c->B, T = c->T, H = c->H, KV = c->KV, hd = c->hd;
    size_t nq = c->nq, nk = c->nk;
    size_t gp = gpu->attention_saved_floats(B, T, H), gs = gpu->attention_scratch_floats(B, T, H);
    void *d_q = bf ? dput_bf16(c->q, nq) : dput(c->q, FB(nq));
    void *d_k = bf ? dput_bf16(c->k, nk) : dput(c->k, FB(nk));
    void *d_v = bf ? dput_bf16(c->v, nk) : dput(c->v, FB(nk));
    void *d_out = bf ? dnan_bf16(nq) : (void *)dnan(nq);
    float *d_dout = dput(c->dout, FB(nq)), *d_saved = dnan(gp), *d_scr = dnan(gs);
    float *d_dq = dnan(nq), *d_dk = dnan(nk), *d_dv = dnan(nk);
    gpu->attention_forward(d_out, d_saved, d_q, d_k, d_v, B, T, H, KV, hd);
    gpu->attention_backward(d_dq, d_dk, d_dv, d_scr, d_dout, d_out, d_saved, d_q, d_k, d_v, B, T,
                            H, KV, hd);
    got[0] = bf ? dtake_bf16(d_out, nq) : dtake((float *)d_out, nq);
    got[1] = dtake(d_dq, nq), got[2] = dtake(d_dk, nk), got[3] = dtake(d_dv, nk);
    gpu->free(d_q), gpu->free(d_k), gpu->free(d_v), gpu->free(d_dout), gpu->free(d_saved);
    gpu->free(d_scr);
}

/* ---------------------------------------------------------- attention */

static void test_attention(int B, int T, int H, int KV, int hd)
{
    char name[200];
    att_case c = att_case_new(B, T, H, KV, hd, 0);
    size_t nq = c.nq, nk = c.nk;
    float *gt[4];
    att_gpu_run(&c, 0, gt);
    snprintf(name, sizeof name, "attention_forward B=%d T=%d H=%d KV=%d (GQA %d) hd=%d", B, T, H,
             KV, H / KV, hd);
    cmp(name, gt[0], c.out, nq);
    const char *what[3] = {"dq", "dk", "dv"};
    const float *got[3] = {gt[1], gt[2], gt[3]}, *ref[3] = {c.dq, c.dk, c.dv};
    const float *dv = c.dv;
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "attention_backward %s B=%d T=%d H=%d KV=%d hd=%d", what[i], B,
                 T, H, KV, hd);
        if (T == 1 && i < 2) { /* one key: the softmax has no gradient with respect to its only
                                * score, so dq = dk = 0 up to rounding on both sides; the NMSE
                                * of two rounding noises says nothing (it failed on main) */
            size_t n = i ? nk : nq, bad = n;
            double g2 = 0.0, r2 = 0.0, v2 = 0.0;
            for (size_t j = 0; j < n; j++) {
                if (!isfinite(got[i][j]) && bad == n)
                    bad = j;
                g2 += (double)got[i][j] * got[i][j], r2 += (double)ref[i][j] * ref[i][j];
            }
            for (size_t j = 0; j < nk; j++)
                v2 += (double)dv[j] * dv[j];
            double e = sqrt(fmax(g2, r2) / fmax(v2, 1e-300)); /* relative to dv = dout's scale */
            if (bad < n)
                printf("FAIL %s: element %zu is %g (unwritten or non-finite)\n", name, bad,
                       got[i][bad]), n_fail++;
            else
                result(name, e <= 1e-4, "(zero up to rounding) rms / rms(dv) %.2e", e);
            continue;
        }
        cmp(name, got[i], ref[i], i ? nk : nq);
    }
    for (int i = 0; i < 4; i++)
        free(gt[i]);
    att_case_free(&c);
}

static void test_attention_cached(int n, int pos0, int H, int KV, int hd)
{
    char name[160];
    int S = pos0 + n;
    size_t nq = (size_t)n * H * hd, nk = (size_t)S * KV * hd;
    float *q = hrand(nq, 2.0), *kc = hrand(nk, 2.0), *vc = hrand(nk, 1.0), *out = xmalloc(FB(nq));
    cpu->attention_cached(out, q, kc, vc, n, pos0, H, KV, hd);
    float *d_q = dput(q, FB(nq)), *d_k = dput(kc, FB(nk)), *d_v = dput(vc, FB(nk));
    float *d_out = dnan(nq);
    gpu->attention_cached(d_out, d_q, d_k, d_v, n, pos0, H, KV, hd);
    float *g = dtake(d_out, nq);
    snprintf(name, sizeof name, "attention_cached n=%d pos0=%d H=%d KV=%d hd=%d", n, pos0, H, KV,
             hd);
    cmp(name, g, out, nq);
    gpu->free(d_q), gpu->free(d_k), gpu->free(d_v);
    free(q), free(kc), free(vc), free(out), free(g);
}

/* ======================================================================
 * bf16 and tf32 modes, across the three files: backend_cuda.cu's bf16
 * products, working copies and reserve, attention_cuda.cu's cuBLAS path,
 * the kernels' bf16 activations, a few training steps
 * ====================================================================== */

/* ----------------------------------------------------------- bf16 mode */

static float *bf16_copy(const float *x, size_t n)
{
    float *p = hdup(x, n);
    hpt_bf16_round(p, n);
    return p;
}

/* One bf16 product on both sides: the GPU in bf16 mode against the CPU on
 * fp32 operands (NMSE <= 2e-2) and on the same operands rounded to bf16
 * (NMSE <= 1e-10: exactly these operands, fp32 accumulation). */
static void bf16_pair(const char *name, const float *got, const float *ref32, const float *refbf,
                      size_t n)
{
    char nm[220];
    snprintf(nm, sizeof nm, "%s (bf16 vs fp32 cpu)", name);
    cmp_tol(nm, got, ref32, n, TOL_BF16);
    snprintf(nm, sizeof nm, "%s (bf16 vs cpu on bf16-rounded operands)", name);
    cmp_tol(nm, got, refbf, n, TOL_BF16_EXACT);
}

static void test_bf16_matmul(int N, int Ic, int O)
{
    char name[160];
    size_t ni = (size_t)N * Ic, nw = (size_t)O * Ic, no = (size_t)N * O;
    float *in = hrand(ni, 1.0), *w = hrand(nw, 1.0), *dout = hrand(no, 1.0), *dw0 = hrand(nw, 1.0);
    float *din0 = hrand(ni, 1.0);
    float *inb = bf16_copy(in, ni), *wb = bf16_copy(w, nw), *doutb = bf16_copy(dout, no);
    float *out = xmalloc(FB(no)), *outb = xmalloc(FB(no));
    cpu->matmul_forward(out, HPT_DTYPE_F32, in, w, N, Ic, O);
    cpu->matmul_forward(outb, HPT_DTYPE_F32, inb, wb, N, Ic, O);
    /* the input is an activation: stored in bf16 in this mode */
    void *d_in = dput_bf16(in, ni);
    float *d_w = dput(w, FB(nw)), *d_dout = dput(dout, FB(no));
    float *d_out = dnan(no);
    gpu->matmul_forward(d_out, HPT_DTYPE_F32, d_in, d_w, N, Ic, O);
    float *g = dtake(d_out, no);
    snprintf(name, sizeof name, "matmul_forward bf16 N=%d Ic=%d O=%d", N, Ic, O);
    bf16_pair(name, g, out, outb, no);
    void *d_outb = dnan_bf16(no); /* a bf16 activation output (q, k, v, gate, up) */
    gpu->matmul_forward(d_outb, HPT_DTYPE_BF16, d_in, d_w, N, Ic, O);
    float *gb = dtake_bf16(d_outb, no), *outbr = hdup(outb, no);
    hpt_bf16_round(outbr, no);
    snprintf(name, sizeof name, "matmul_forward bf16 into bf16 storage N=%d Ic=%d O=%d (vs fp32 "
             "cpu)", N, Ic, O);
    cmp_tol(name, gb, out, no, TOL_BF16);
    snprintf(name, sizeof name, "matmul_forward bf16 into bf16 storage N=%d Ic=%d O=%d (vs cpu on "
             "bf16 operands, result rounded)", N, Ic, O);
    cmp_tol(name, gb, outbr, no, TOL_BF16_STORE);
    free(gb), free(outbr);
    float *din = hdup(din0, ni), *dw = hdup(dw0, nw), *dinb = hdup(din0, ni), *dwb = hdup(dw0, nw);
    cpu->matmul_backward(din, dw, dout, in, w, N, Ic, O, 1);
    cpu->matmul_backward(dinb, dwb, doutb, inb, wb, N, Ic, O, 1);
    float *d_din = dput(din0, FB(ni)), *d_dw = dput(dw0, FB(nw));
    gpu->matmul_backward(d_din, d_dw, d_dout, d_in, d_w, N, Ic, O, 1);
    float *gdin = dtake(d_din, ni), *gdw = dtake(d_dw, nw);
    snprintf(name, sizeof name, "matmul_backward bf16 din += N=%d Ic=%d O=%d", N, Ic, O);
    bf16_pair(name, gdin, din, dinb, ni);
    snprintf(name, sizeof name, "matmul_backward bf16 dw += N=%d Ic=%d O=%d", N, Ic, O);
    bf16_pair(name, gdw, dw, dwb, nw);
    double e = 0.0, d2 = 0.0; /* the bf16 path really rounds: differs from fp32 */
    for (size_t i = 0; i < no; i++)
        e += ((double)g[i] - out[i]) * ((double)g[i] - out[i]), d2 += (double)out[i] * out[i];
    result("matmul_forward bf16 differs from fp32 (operands rounded)", e / d2 > 1e-8, "nmse %.2e",
           e / d2);
    gpu->free(d_in), gpu->free(d_w), gpu->free(d_dout);
    free(in), free(w), free(dout), free(dw0), free(din0), free(inb), free(wb), free(doutb);
    free(out), free(outb), free(g), free(din), free(dw), free(dinb), free(dwb), free(gdin), free(gdw);
}

/* Two weights in one allocation (as the model's parameter block): the
 * working copy serves a weight at an offset, and follows an upload into
 * the block and an AdamW step on it. */
static void test_bf16_working_copy(void)
{
    enum { N = 9, Ic = 40, O = 24 };
    size_t nw = (size_t)O * Ic, off = 7 + nw; /* second weight, odd offset */
    size_t nblk = off + nw;
    float *blk = hrand(nblk, 1.0), *in = hrand((size_t)N * Ic, 1.0);
    float *inb = bf16_copy(in, (size_t)N * Ic), *out = xmalloc(FB(N * O));
    float *d_blk = dput(blk, FB(nblk));
    void *d_in = dput_bf16(in, (size_t)N * Ic); /* an activation: bf16 */
    const char *what[3] = {"first use", "after an upload into the block",
                           "after an AdamW step on the block"};
    for (int phase = 0; phase < 3; phase++) {
        if (phase == 1) {
            float *nw2 = hrand(nw, 3.0);
            memcpy(blk + off, nw2, FB(nw));
            gpu->upload(d_blk + off, nw2, FB(nw));
            free(nw2);
        } else if (phase == 2) {
            float *gr = hrand(nblk, 1.0), *st = xmalloc(FB(2 * nblk));
            memset(st, 0, FB(2 * nblk));
            float *d_gr = dput(gr, FB(nblk)), *d_st = dput(st, FB(2 * nblk));
            cpu->adamw(blk, gr, st, st + nblk, nblk, 0.5f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1);
            gpu->adamw(d_blk, d_gr, d_st, d_st + nblk, nblk, 0.5f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1);
            gpu->free(d_gr), gpu->free(d_st);
            free(gr), free(st);
        }
        float *wb = bf16_copy(blk + off, nw), *d_out = dnan((size_t)N * O);
        cpu->matmul_forward(out, HPT_DTYPE_F32, inb, wb, N, Ic, O);
        gpu->matmul_forward(d_out, HPT_DTYPE_F32, d_in, d_blk + off, N, Ic, O);
        float *g = dtake(d_out, (size_t)N * O);
        char name[160];
        snprintf(name, sizeof name, "bf16 working copy of a weight at an offset: %s", what[phase]);
        cmp_tol(name, g, out, (size_t)N * O, TOL_BF16_EXACT);
        free(wb), free(g);
    }
    gpu->free(d_blk), gpu->free(d_in);
    free(blk), free(in), free(inb), free(out);
}

/* A few training steps of a tiny model (GQA, untied head) with AdamW over
 * the whole parameter block: the GPU in bf16 mode against the CPU in fp32.
 * Per step the mean loss within 2e-2 relative; after the first backward
 * the gradients, after the last step the weights, within NMSE 2e-2.
 * `recompute` (hpt_recompute) for both models: selective recomputation
 * refills the bf16 element-wise activations from the kept bf16 GEMM
 * outputs. */
/* The model reserves the backend's scratch at initialisation
 * (hpt_backend.reserve): training steps then allocate no device memory —
 * the peak held after init is the peak after two bf16 steps (forward with
 * the fused cross-entropy, backward through the cuBLAS attention, the bf16
 * gradient operands, the embedding chains and the RMSNorm slices, the
 * gradient norm, AdamW). Run first (its own group, "reserve"), before any
 * other test has grown a scratch, so that a missing reservation shows. */
static void test_reserve(void)
{
    enum { B = 2, T = 40, N = B * T }; /* N * 300 bf16 values > the 4096 minimum */
    hpt_status st = hpt_backend_set_precision(gpu, HPT_PRECISION_BF16);
    hpt_config cfg = {.hidden_size = 64, .intermediate_size = 176, .num_hidden_layers = 2,
                      .num_attention_heads = 4, .num_key_value_heads = 2, .vocab_size = 300,
                      .max_position_embeddings = 64, .rms_norm_eps = 1e-5f,
                      .rope_theta = 10000.0f, .tie_word_embeddings = 0};
    hpt_model_opts mo = {0};
    hpt_model mg;
    if (st || hpt_model_init_opts(&mg, &cfg, gpu, &mo, B, T, 7)) {
        printf("FAIL reserve: model init: %s\n", hpt_error_msg());
        n_fail++;
        return;
    }
    size_t np = mg.nparams;
    float *d_st = (float *)gpu->alloc(FB(2 * np));
    int32_t in[N], tg[N];
    for (int n = 0; n < N; n++) /* repeated tokens: the embedding chains have work */
        in[n] = (n * 7) % 23, tg[n] = (in[n] + 1) % cfg.vocab_size;
    size_t peak0 = gpu->mem_peak();
    double ss = 0;
    for (int step = 1; step <= 2; step++) {
        hpt_model_zero_grad(&mg);
        hpt_model_forward(&mg, in, tg, 1.0f / N, 1);
        hpt_model_backward(&mg);
        ss = hpt_model_grad_sumsq(&mg, mg.grads, 0, np);
        gpu->adamw(mg.params, mg.grads, d_st, d_st + np, np, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f,
                   step);
    }
    size_t peak1 = gpu->mem_peak();
    result("reserve: two bf16 training steps allocate no device memory (the scratch was reserved "
           "at model init; bytes the peak grew by:", peak1 == peak0 && isfinite(ss) && ss > 0,
           " %g)", (double)peak1 - (double)peak0);
    gpu->free(d_st);
    hpt_model_free(&mg);
    hpt_backend_set_precision(gpu, HPT_PRECISION_FP32);
}

static void test_bf16_training(int recompute, int STEPS)
{
    enum { B = 2, T = 12, N = B * T };
    hpt_model_opts mo = {.recompute = recompute};
    const char *rc = recompute == HPT_RECOMPUTE_SELECTIVE ? " (selective recomputation)"
                     : recompute == HPT_RECOMPUTE_FULL    ? " (full recomputation)" : "";
    hpt_config cfg = {.hidden_size = 64, .intermediate_size = 96, .num_hidden_layers = 2,
                      .num_attention_heads = 4, .num_key_value_heads = 2, .vocab_size = 67,
                      .max_position_embeddings = 16, .rms_norm_eps = 1e-5f,
                      .rope_theta = 10000.0f, .tie_word_embeddings = 0};
    hpt_model mc, mg;
    if (hpt_config_validate(&cfg, "test_backend_cuda") ||
        hpt_model_init_opts(&mc, &cfg, cpu, &mo, B, T, 7) ||
        hpt_model_init_opts(&mg, &cfg, gpu, &mo, B, T, 7)) {
        printf("FAIL bf16 training: model init: %s\n", hpt_error_msg());
        n_fail++;
        return;
    }
    char name[160];
    snprintf(name, sizeof name, "bf16 training%s: the model stores its activations in bf16 "
             "(act_elem 2, smaller block: %zu vs %zu bytes)", rc, mg.act_bytes, mc.act_bytes);
    result(name, mg.act == HPT_DTYPE_BF16 && mg.act_elem == 2 && mc.act_elem == 4 &&
           mg.act_bytes < mc.act_bytes, "(%g)", 0.0);
    size_t np = mc.nparams;
    float *sc = xmalloc(FB(2 * np)), *hg = xmalloc(FB(np)), *hp = xmalloc(FB(np));
    memset(sc, 0, FB(2 * np));
    float *d_st = dput(sc, FB(2 * np));
    int32_t in[N], tg[N];
    for (int n = 0; n < N; n++) /* a learnable pattern: next token = token + 1 */
        in[n] = (n * 5) % cfg.vocab_size, tg[n] = (in[n] + 1) % cfg.vocab_size;
    for (int step = 1; step <= STEPS; step++) {
        hpt_model_zero_grad(&mc);
        hpt_model_zero_grad(&mg);
        double lc = hpt_model_forward(&mc, in, tg, 1.0f / N, 1) / N;
        double lg = hpt_model_forward(&mg, in, tg, 1.0f / N, 1) / N;
        hpt_model_backward(&mc);
        hpt_model_backward(&mg);
        double e = fabs(lg - lc) / lc;
        snprintf(name, sizeof name, "bf16 training%s step %d: loss gpu %.5f cpu %.5f", rc, step, lg,
                 lc);
        result(name, isfinite(lg) && e <= TOL_BF16, "rel err %.2e", e);
        if (step == 1) {
            gpu->download(hg, mg.grads, FB(np));
            /* bf16 SwiGLU gradients (swiglu_backward_act, matmul_backward_act)
             * change no bit: the same step on a table without them (fp32
             * dgate, dup, rounded by matmul_backward) */
            hpt_backend g32 = *gpu;
            g32.swiglu_backward_act = NULL, g32.matmul_backward_act = NULL;
            hpt_model m32;
            if (hpt_model_init_opts(&m32, &cfg, &g32, &mo, B, T, 7) == HPT_OK) {
                float *h32 = xmalloc(FB(np));
                hpt_model_zero_grad(&m32);
                double l32 = hpt_model_forward(&m32, in, tg, 1.0f / N, 1) / N;
                hpt_model_backward(&m32);
                gpu->download(h32, m32.grads, FB(np));
                snprintf(name, sizeof name, "bf16 training%s: SwiGLU's gradients in bf16 (%s) "
                         "give step 1's loss and gradients bit for bit as fp32 ones", rc,
                         mg.mlp_grad_act && !m32.mlp_grad_act ? "used" : "NOT used");
                result(name, mg.mlp_grad_act && !m32.mlp_grad_act && l32 == lg &&
                       !memcmp(h32, hg, FB(np)), "(%g)", 0.0);
                hpt_model_free(&m32);
                free(h32);
            } else {
                printf("FAIL bf16 training: second model init: %s\n", hpt_error_msg());
                n_fail++;
            }
            snprintf(name, sizeof name, "bf16 training%s: gradients of step 1 (vs fp32 cpu)", rc);
            cmp_tol(name, hg, mc.grads, np, TOL_BF16);
            /* the gradient norm's sum of squares through the model: one
             * sumsq_list round trip on the GPU, the sumsq loop on the CPU */
            snprintf(name, sizeof name, "bf16 training%s: gradient sum of squares of step 1 "
                     "(hpt_model_grad_sumsq, vs fp32 cpu)", rc);
            cmp_tol_scalar(name, hpt_model_grad_sumsq(&mg, mg.grads, 0, np),
                           hpt_model_grad_sumsq(&mc, mc.grads, 0, np), TOL_BF16);
        }
        cpu->adamw(mc.params, mc.grads, sc, sc + np, np, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, step);
        gpu->adamw(mg.params, mg.grads, d_st, d_st + np, np, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f,
                   step);
    }
    gpu->download(hp, mg.params, FB(np));
    snprintf(name, sizeof name, "bf16 training%s: fp32 master weights after the steps (vs fp32 "
             "cpu)", rc);
    cmp_tol(name, hp, mc.params, np, TOL_BF16);
    double l0 = hpt_model_forward(&mc, in, tg, 0.0f, 0) / N;
    double l1 = hpt_model_forward(&mg, in, tg, 0.0f, 0) / N;
    snprintf(name, sizeof name, "bf16 training%s: eval loss after %d steps gpu %.5f cpu %.5f", rc,
             STEPS, l1, l0);
    result(name, fabs(l1 - l0) / l0 <= TOL_BF16, "rel err %.2e", fabs(l1 - l0) / l0);
    gpu->free(d_st);
    hpt_model_free(&mc);
    hpt_model_free(&mg);
    free(sc), free(hg), free(hp);
}

/* bf16 activation storage (issue 12 stage 2): every op with `void *`
 * activations, in bf16 mode, reads and writes them as bf16 and computes in
 * fp32: against the CPU on the fp32 inputs (NMSE <= 2e-2), bf16 outputs
 * poisoned with NaN before the call; a bf16 output of an fp32 computation
 * also against the CPU's result rounded to bf16 (NMSE <= 1e-4). */
static void test_bf16_act_ops(void)
{
    char name[200];
    result("act_dtype is bf16 in bf16 mode", hpt_backend_act_dtype(gpu) == HPT_DTYPE_BF16,
           "(%g)", 0.0);
    { /* RMSNorm: float input (the residual stream), bf16 output */
        enum { N = 33, C = 96 };
        float *in = hrand(N * C, 2.0), *w = hrand(C, 1.0), *out = xmalloc(FB(N * C));
        float *rstd = xmalloc(FB(N)), *d_in = dput(in, FB(N * C)), *d_w = dput(w, FB(C));
        float *d_rstd = dnan(N);
        void *d_out = dnan_bf16(N * C);
        cpu->rmsnorm_forward(out, rstd, in, w, N, C, 1e-5f);
        gpu->rmsnorm_forward(d_out, d_rstd, d_in, d_w, N, C, 1e-5f);
        float *g = dtake_bf16(d_out, N * C), *gr = dtake(d_rstd, N);
        cmp_tol("bf16 act: rmsnorm_forward out (bf16) vs fp32 cpu", g, out, N * C, TOL_BF16);
        hpt_bf16_round(out, N * C);
        cmp_tol("bf16 act: rmsnorm_forward out (bf16) vs cpu rounded", g, out, N * C,
                TOL_BF16_STORE);
        cmp_tol("bf16 act: rmsnorm_forward rstd (fp32)", gr, rstd, N, TOL);
        gpu->free(d_in), gpu->free(d_w);
        free(in), free(w), free(out), free(rstd), free(g), free(gr);
    }
    { /* RoPE on a bf16 activation (q, k) and on an fp32 gradient (dq, dk) */
        enum { B = 2, T = 37, NH = 3, HD = 64 };
        size_t n = (size_t)B * T * NH * HD;
        for (int inverse = 0; inverse <= 1; inverse++) {
            float *x = hrand(n, 1.0);
            void *d_x = dput_bf16(x, n);
            float *d_xf = dput(x, FB(n));
            float *xr = hdup(x, n);
            cpu->rope(x, HPT_DTYPE_F32, B, T, NH, HD, 10000.0f, inverse);
            gpu->rope(d_x, HPT_DTYPE_BF16, B, T, NH, HD, 10000.0f, inverse);
            gpu->rope(d_xf, HPT_DTYPE_F32, B, T, NH, HD, 10000.0f, inverse);
            float *g = dtake_bf16(d_x, n), *gf = dtake(d_xf, n);
            snprintf(name, sizeof name, "bf16 act: rope%s on bf16", inverse ? " (inverse)" : "");
            cmp_tol(name, g, x, n, TOL_BF16);
            snprintf(name, sizeof name, "bf16 act: rope%s on fp32 (gradient)",
                     inverse ? " (inverse)" : "");
            cmp_tol(name, gf, x, n, TOL);
            free(x), free(xr), free(g), free(gf);
        }
        int pos0 = 11, cnt = 5;
        size_t m = (size_t)cnt * NH * HD;
        float *x = hrand(m, 1.0);
        void *d_x = dput_bf16(x, m);
        cpu->rope_at(x, cnt, NH, HD, 500000.0f, pos0);
        gpu->rope_at(d_x, cnt, NH, HD, 500000.0f, pos0);
        float *g = dtake_bf16(d_x, m);
        cmp_tol("bf16 act: rope_at on bf16", g, x, m, TOL_BF16);
        free(x), free(g);
    }
    /* attention: q, k, v, out bf16; lse, D and the gradients fp32 */
    const int shapes[3][5] = {{2, 37, 4, 2, 64}, {1, 19, 8, 1, 128}, {1, 33, 2, 1, 80}};
    for (int sh = 0; sh < 3; sh++) {
        att_case c = att_case_new(shapes[sh][0], shapes[sh][1], shapes[sh][2], shapes[sh][3],
                                  shapes[sh][4], 0);
        float *got[4];
        att_gpu_run(&c, 1, got);
        const char *what[4] = {"attention_forward out (bf16)", "attention_backward dq (fp32)",
                               "attention_backward dk (fp32)", "attention_backward dv (fp32)"};
        const float *ref[4] = {c.out, c.dq, c.dk, c.dv};
        for (int i = 0; i < 4; i++) {
            snprintf(name, sizeof name, "bf16 act: %s B=%d T=%d H=%d KV=%d hd=%d", what[i], c.B,
                     c.T, c.H, c.KV, c.hd);
            cmp_tol(name, got[i], ref[i], i < 2 ? c.nq : c.nk, TOL_BF16);
            free(got[i]);
        }
        att_case_free(&c);
    }
    { /* attention against a bf16 key/value cache */
        int n = 5, pos0 = 13, H = 4, KV = 2, hd = 64, S = pos0 + n;
        size_t nq = (size_t)n * H * hd, nk = (size_t)S * KV * hd;
        float *q = hrand(nq, 2.0), *kc = hrand(nk, 2.0), *vc = hrand(nk, 1.0);
        float *out = xmalloc(FB(nq));
        cpu->attention_cached(out, q, kc, vc, n, pos0, H, KV, hd);
        void *d_q = dput_bf16(q, nq), *d_k = dput_bf16(kc, nk), *d_v = dput_bf16(vc, nk);
        void *d_out = dnan_bf16(nq);
        gpu->attention_cached(d_out, d_q, d_k, d_v, n, pos0, H, KV, hd);
        float *g = dtake_bf16(d_out, nq);
        cmp_tol("bf16 act: attention_cached (bf16 cache)", g, out, nq, TOL_BF16);
        gpu->free(d_q), gpu->free(d_k), gpu->free(d_v);
        free(q), free(kc), free(vc), free(out), free(g);
    }
    { /* SwiGLU: gate, up, h bf16; dout, dgate, dup fp32 */
        size_t n = 100003;
        float *gate = hrand(n, 4.0), *up = hrand(n, 1.0), *dout = hrand(n, 1.0);
        float *out = xmalloc(FB(n)), *dg = xmalloc(FB(n)), *du = xmalloc(FB(n));
        float *gateb = bf16_copy(gate, n), *upb = bf16_copy(up, n), *outb = xmalloc(FB(n));
        void *d_gate = dput_bf16(gate, n), *d_up = dput_bf16(up, n), *d_out = dnan_bf16(n);
        float *d_dout = dput(dout, FB(n)), *d_dg = dnan(n), *d_du = dnan(n);
        cpu->swiglu_forward(out, gate, up, n);
        cpu->swiglu_forward(outb, gateb, upb, n);
        hpt_bf16_round(outb, n);
        gpu->swiglu_forward(d_out, d_gate, d_up, n);
        float *g = dtake_bf16(d_out, n);
        cmp_tol("bf16 act: swiglu_forward (bf16) vs fp32 cpu", g, out, n, TOL_BF16);
        cmp_tol("bf16 act: swiglu_forward (bf16) vs cpu on bf16 inputs, rounded", g, outb, n,
                TOL_BF16_STORE);
        cpu->swiglu_backward(dg, du, dout, gate, up, n);
        gpu->swiglu_backward(d_dg, d_du, d_dout, d_gate, d_up, n);
        float *gdg = dtake(d_dg, n), *gdu = dtake(d_du, n);
        cmp_tol("bf16 act: swiglu_backward dgate (fp32)", gdg, dg, n, TOL_BF16);
        cmp_tol("bf16 act: swiglu_backward dup (fp32)", gdu, du, n, TOL_BF16);
        /* swiglu_backward_act (issue 28): dgate, dup written in bf16 are the
         * fp32 ones rounded (bit for bit), on the 16-byte path (n = 100003:
         * its scalar tail too) and on the scalar one (pointers off by one
         * element) */
        for (int off = 0; off < 2; off++) {
            size_t m = n - off;
            void *d_bg = dnan_bf16(n), *d_bu = dnan_bf16(n);
            float *d_fg = dnan(m), *d_fu = dnan(m);
            gpu->swiglu_backward_act((uint16_t *)d_bg + off, (uint16_t *)d_bu + off, d_dout + off,
                                     (const uint16_t *)d_gate + off, (const uint16_t *)d_up + off,
                                     m);
            gpu->swiglu_backward(d_fg, d_fu, d_dout + off, (const uint16_t *)d_gate + off,
                                 (const uint16_t *)d_up + off, m);
            float *bg = dtake_bf16(d_bg, n), *bu = dtake_bf16(d_bu, n); /* (frees d_bg, d_bu) */
            float *fg = dtake(d_fg, m), *fu = dtake(d_fu, m);
            hpt_bf16_round(fg, m), hpt_bf16_round(fu, m);
            char name[160];
            snprintf(name, sizeof name, "bf16 act: swiglu_backward_act dgate, dup (bf16) = "
                     "swiglu_backward's fp32 rounded, bit for bit (%s)",
                     off ? "unaligned: element by element" : "16-byte accesses");
            result(name, !memcmp(bg + off, fg, FB(m)) && !memcmp(bu + off, fu, FB(m)), "(%g)", 0.0);
            free(bg), free(bu), free(fg), free(fu);
        }
        gpu->free(d_gate), gpu->free(d_up), gpu->free(d_dout);
        free(gate), free(up), free(dout), free(out), free(dg), free(du), free(gateb), free(upb);
        free(outb), free(g), free(gdg), free(gdu);
    }
    { /* matmul_backward_act: a bf16 dout gives matmul_backward's products on
       * the fp32 dout it was rounded from, bit for bit (din and dw) */
        int N = 24, Ic = 40, O = 56;
        float *in = hrand((size_t)N * Ic, 1.0), *w = hrand((size_t)O * Ic, 0.5);
        float *dout = hrand((size_t)N * O, 1.0);
        hpt_bf16_round(dout, (size_t)N * O);
        void *d_in = dput_bf16(in, (size_t)N * Ic), *d_db = dput_bf16(dout, (size_t)N * O);
        float *d_w = dput(w, FB((size_t)O * Ic)), *d_do = dput(dout, FB((size_t)N * O));
        float *d_din[2], *d_dw[2], *got[2][2];
        for (int k = 0; k < 2; k++) {
            d_din[k] = dnan((size_t)N * Ic);
            d_dw[k] = dput(w, FB((size_t)O * Ic)); /* accumulated into */
        }
        gpu->matmul_backward(d_din[0], d_dw[0], d_do, d_in, d_w, N, Ic, O, 0);
        gpu->matmul_backward_act(d_din[1], d_dw[1], d_db, d_in, d_w, N, Ic, O, 0);
        for (int k = 0; k < 2; k++) /* (dtake frees them) */
            got[k][0] = dtake(d_din[k], (size_t)N * Ic), got[k][1] = dtake(d_dw[k], (size_t)O * Ic);
        result("bf16 act: matmul_backward_act (bf16 dout) = matmul_backward (its fp32 values), "
               "din and dw bit for bit",
               !memcmp(got[0][0], got[1][0], FB((size_t)N * Ic)) &&
                   !memcmp(got[0][1], got[1][1], FB((size_t)O * Ic)), "(%g)", 0.0);
        gpu->free(d_in), gpu->free(d_db), gpu->free(d_w), gpu->free(d_do);
        free(in), free(w), free(dout);
        for (int k = 0; k < 2; k++)
            free(got[k][0]), free(got[k][1]);
    }
}

/* Attention through cuBLAS (attention_cuda.cu, "attention through cuBLAS"),
 * in bf16 mode (bf = 1: q, k, v, out bf16) or tf32 mode (bf = 0: fp32,
 * tf32 products; HPT_CUDA_ATTENTION=blas, which bf16 mode needs since the
 * tensor-core kernels are its default): query chunks of R rows (HPT_CUDA_ATT_CHUNK; 0 = the
 * automatic size, one chunk at these T), every (b, h) in one batched
 * product. Against the CPU on the same (bf16: bf16-rounded) q, k, v and
 * dout (NMSE <= TOL_ATT_BLAS in bf16: only the rounding of P, dS and the
 * stored output remain; TOL_TF32 in tf32) and against the fp32 kernels of
 * the same backend (HPT_CUDA_ATTENTION=flash) on the same inputs; the two
 * paths must not be bitwise equal (the cuBLAS path ran) — unless a head's
 * row is not a multiple of 16 bytes, where the default path must be the
 * flash kernels' bit for bit. The caller sets
 * the precision. */
#define TOL_ATT_BLAS 2e-4
static void test_attention_blas(int bf, int B, int T, int H, int KV, int hd, int rows)
{
    char name[200], env[32];
    const char *mode = bf ? "bf16" : "tf32";
    double tol = bf ? TOL_ATT_BLAS : TOL_TF32;
    /* a head's row not a multiple of 16 bytes: the backend keeps the flash
     * kernels (cublasGemmBatchedEx's pointer alignment) */
    int blas = hd * (bf ? 2 : 4) % 16 == 0;
    const char *path = blas ? "via cuBLAS" : "(unaligned rows: flash)";
    att_case c = att_case_new(B, T, H, KV, hd, bf);
    float *got[2][4]; /* [default, flash][out, dq, dk, dv] */
    for (int p = 0; p < 2; p++) {
        snprintf(env, sizeof env, "%d", rows);
        setenv("HPT_CUDA_ATT_CHUNK", env, 1);
        setenv("HPT_CUDA_ATTENTION", p ? "flash" : "blas", 1);
        att_gpu_run(&c, bf, got[p]);
        unsetenv("HPT_CUDA_ATT_CHUNK");
        unsetenv("HPT_CUDA_ATTENTION");
    }
    const char *what[4] = {"out", "dq", "dk", "dv"};
    const float *ref[4] = {c.out, c.dq, c.dk, c.dv};
    size_t cnt[4] = {c.nq, c.nq, c.nk, c.nk};
    int differs = 0;
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s attention %s, %d-row chunks: %s B=%d T=%d H=%d KV=%d hd=%d "
                 "(vs cpu%s)", mode, path, rows, what[i], B, T, H, KV, hd,
                 bf ? " on bf16 operands" : "");
        cmp_tol(name, got[0][i], ref[i], cnt[i], tol);
        snprintf(name, sizeof name, "%s attention %s, %d-row chunks: %s B=%d T=%d H=%d KV=%d hd=%d "
                 "(vs the flash kernels)", mode, path, rows, what[i], B, T, H, KV, hd);
        cmp_tol(name, got[0][i], got[1][i], cnt[i], tol);
        differs |= memcmp(got[0][i], got[1][i], FB(cnt[i])) != 0;
    }
    if (blas)
        snprintf(name, sizeof name, "%s attention via cuBLAS, %d-row chunks: not the flash "
                 "kernels' result bit for bit (the cuBLAS path ran) B=%d T=%d", mode, rows, B, T);
    else
        snprintf(name, sizeof name, "%s attention, hd=%d (%d-byte rows): the flash kernels' result "
                 "bit for bit (not cuBLAS with unaligned pointers)", mode, hd, hd * (bf ? 2 : 4));
    result(name, differs == blas, "(%g)", 0.0);
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < 4; i++)
            free(got[p][i]);
    att_case_free(&c);
}

/* The tensor-core kernels (lib/attention_mma.cu), bf16 mode's default
 * path: against the CPU on the same bf16-rounded q, k, v and dout (NMSE <=
 * TOL_ATT_BLAS: P, dS, dout and the stored output are rounded to bf16 as in
 * the cuBLAS path), against the cuBLAS path (HPT_CUDA_ATTENTION=blas) on
 * the same inputs, and not bitwise equal to it nor to the flash kernels
 * (the tensor-core kernels ran). NaN-poisoned outputs (att_gpu_run). The
 * caller sets bf16 mode. */
static void test_attention_mma(int B, int T, int H, int KV, int hd)
{
    char name[200];
    att_case c = att_case_new(B, T, H, KV, hd, 1);
    float *got[3][4]; /* [default, blas, flash][out, dq, dk, dv] */
    const char *env[3] = {NULL, "blas", "flash"};
    for (int p = 0; p < 3; p++) {
        if (env[p])
            setenv("HPT_CUDA_ATTENTION", env[p], 1);
        att_gpu_run(&c, 1, got[p]);
        unsetenv("HPT_CUDA_ATTENTION");
    }
    const char *what[4] = {"out", "dq", "dk", "dv"};
    const float *ref[4] = {c.out, c.dq, c.dk, c.dv};
    size_t cnt[4] = {c.nq, c.nq, c.nk, c.nk};
    int same_blas = 1, same_flash = 1;
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "bf16 attention on the tensor cores: %s B=%d T=%d H=%d KV=%d "
                 "(GQA %d) hd=%d (vs cpu on bf16 operands)", what[i], B, T, H, KV, H / KV, hd);
        cmp_tol(name, got[0][i], ref[i], cnt[i], TOL_ATT_BLAS);
        snprintf(name, sizeof name, "bf16 attention on the tensor cores: %s B=%d T=%d H=%d KV=%d "
                 "hd=%d (vs the cuBLAS chunks)", what[i], B, T, H, KV, hd);
        cmp_tol(name, got[0][i], got[1][i], cnt[i], TOL_ATT_BLAS);
        same_blas &= memcmp(got[0][i], got[1][i], FB(cnt[i])) == 0;
        same_flash &= memcmp(got[0][i], got[2][i], FB(cnt[i])) == 0;
    }
    snprintf(name, sizeof name, "bf16 attention B=%d T=%d hd=%d: the default path is neither the "
             "cuBLAS chunks' nor the flash kernels' result bit for bit (the tensor-core kernels "
             "ran)", B, T, hd);
    result(name, !same_blas && !same_flash, "(%g)", 0.0);
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < 4; i++)
            free(got[p][i]);
    att_case_free(&c);
}

/* The dK/dV kernel's three ways with a GQA group of 8 (1 kv head, 2 query
 * tiles: 2 blocks without a split): one head per block (the default here),
 * 2 parts of 4 heads (HPT_CUDA_MMA_BLOCKS=4) and the whole group in one
 * block (=1): each within TOL_ATT_BLAS of the CPU, and their dK pairwise
 * not bit for bit equal (each sums the heads in another order: the three
 * ran). */
static void test_attention_mma_split(int B, int T, int H, int KV, int hd)
{
    att_case c = att_case_new(B, T, H, KV, hd, 1);
    const char *blocks[3] = {NULL, "4", "1"}, *how[3] = {"one head per block", "2 parts",
                                                        "the whole group"};
    float *got[3][4];
    char name[200];
    for (int p = 0; p < 3; p++) {
        if (blocks[p])
            setenv("HPT_CUDA_MMA_BLOCKS", blocks[p], 1);
        att_gpu_run(&c, 1, got[p]);
        unsetenv("HPT_CUDA_MMA_BLOCKS");
        snprintf(name, sizeof name, "tensor-core dK/dV, GQA %d split as %s: dk (vs cpu on bf16 "
                 "operands) B=%d T=%d hd=%d", H / KV, how[p], B, T, hd);
        cmp_tol(name, got[p][2], c.dk, c.nk, TOL_ATT_BLAS);
        snprintf(name, sizeof name, "tensor-core dK/dV, GQA %d split as %s: dv (vs cpu on bf16 "
                 "operands) B=%d T=%d hd=%d", H / KV, how[p], B, T, hd);
        cmp_tol(name, got[p][3], c.dv, c.nk, TOL_ATT_BLAS);
    }
    int differ = memcmp(got[0][2], got[1][2], FB(c.nk)) && memcmp(got[0][2], got[2][2], FB(c.nk)) &&
                 memcmp(got[1][2], got[2][2], FB(c.nk));
    result("tensor-core dK/dV: the three splits give three different dk bit patterns (each ran)",
           differ, "(%g)", 0.0);
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < 4; i++)
            free(got[p][i]);
    att_case_free(&c);
}

/* HPT_CUDA_ATTENTION's bad values: refused by set_precision with the
 * variable and the rule in the message (usage error), nothing changed. */
static void test_attention_env(void)
{
    struct { const char *val, *prec_name, *want; hpt_precision prec; } bad[] = {
        {"cudnn", "bf16", "HPT_CUDA_ATTENTION=cudnn: expected mma", HPT_PRECISION_BF16},
        {"mma", "fp32", "HPT_CUDA_ATTENTION=mma: the tensor-core attention takes bf16", HPT_PRECISION_FP32},
        {"mma", "tf32", "--precision bf16 (this run: tf32)", HPT_PRECISION_TF32},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[200];
        setenv("HPT_CUDA_ATTENTION", bad[i].val, 1);
        hpt_status st = hpt_backend_set_precision(gpu, bad[i].prec);
        unsetenv("HPT_CUDA_ATTENTION");
        snprintf(name, sizeof name, "HPT_CUDA_ATTENTION=%s with %s refused: '%s' (got '%s')",
                 bad[i].val, bad[i].prec_name, bad[i].want, hpt_error_msg());
        result(name, st == HPT_ERR_USAGE && strstr(hpt_error_msg(), bad[i].want), "(%g)",
               (double)st);
    }
}

static void test_bf16(void)
{
    hpt_status st = hpt_backend_set_precision(gpu, HPT_PRECISION_BF16);
    result("set_precision bf16 accepted", st == HPT_OK, "(%g)", 0.0);
    test_bf16_matmul(7, 33, 17);
    test_bf16_matmul(130, 256, 301);
    test_bf16_working_copy();
    test_bf16_act_ops();
    test_attention_blas(1, 2, 37, 4, 2, 64, 0);  /* one chunk */
    test_attention_blas(1, 2, 37, 4, 2, 64, 16); /* chunks of 16, 16, 5 */
    test_attention_blas(1, 1, 40, 8, 1, 128, 7); /* GQA 8, ragged chunks */
    test_attention_blas(1, 2, 21, 3, 3, 64, 5);  /* MHA */
    test_attention_blas(1, 1, 21, 2, 1, 12, 0);  /* hd 12: 24-byte rows, flash */
    test_bf16_training(HPT_RECOMPUTE_NONE, 4);
    setenv("HPT_CUDA_ATT_CHUNK", "5", 1); /* T = 12: attention in chunks of 5, 5, 2 rows */
    test_bf16_training(HPT_RECOMPUTE_SELECTIVE, 2);
    unsetenv("HPT_CUDA_ATT_CHUNK");
    st = hpt_backend_set_precision(gpu, HPT_PRECISION_FP32);
    result("set_precision fp32 accepted after bf16", st == HPT_OK, "(%g)", 0.0);
    result("act_dtype is fp32 again", hpt_backend_act_dtype(gpu) == HPT_DTYPE_F32, "(%g)", 0.0);
    test_matmul_shape(7, 33, 17, TOL, " (fp32 again after bf16)");
}

/* ======================================================================
 * lib/kernels_cuda.cu: embedding, RMSNorm, RoPE, SwiGLU, element-wise,
 * sums of squares, cross-entropy, AdamW
 * ====================================================================== */

/* ---------------------------------------------------------- embedding */

static void test_embedding(int N, int C, int V, int v0, int Vl)
{
    char name[160];
    int32_t *tok = itok((size_t)N, V);
    tok[1] = tok[0] = v0; /* a repeated row inside the range */
    float *wte = hrand((size_t)Vl * C, 1.0), *dout = hrand((size_t)N * C, 1.0);
    float *dwte = hrand((size_t)Vl * C, 1.0), *out = xmalloc(FB((size_t)N * C));
    int32_t *d_tok = dput(tok, sizeof(int32_t) * N);
    float *d_wte = dput(wte, FB((size_t)Vl * C)), *d_out = dnan((size_t)N * C);
    cpu->embedding_forward(out, tok, wte, N, C, v0, Vl);
    gpu->embedding_forward(d_out, d_tok, d_wte, N, C, v0, Vl);
    float *g = dtake(d_out, (size_t)N * C);
    snprintf(name, sizeof name, "embedding_forward N=%d C=%d rows [%d, %d) of %d", N, C, v0,
             v0 + Vl, V);
    cmp(name, g, out, (size_t)N * C);
    float *d_dwte = dput(dwte, FB((size_t)Vl * C)), *d_dout = dput(dout, FB((size_t)N * C));
    cpu->embedding_backward(dwte, dout, tok, N, C, v0, Vl);
    gpu->embedding_backward(d_dwte, d_dout, d_tok, N, C, v0, Vl);
    float *gd = dtake(d_dwte, (size_t)Vl * C);
    snprintf(name, sizeof name, "embedding_backward dwte += N=%d C=%d (repeated tokens)", N, C);
    cmp(name, gd, dwte, (size_t)Vl * C);
    /* no atomics: a repeated row sums its positions in order, as the CPU
     * does, so the result is the CPU's bit for bit and every run's */
    size_t diff = 0;
    for (size_t i = 0; i < (size_t)Vl * C; i++)
        diff += memcmp(&gd[i], &dwte[i], sizeof(float)) != 0;
    snprintf(name, sizeof name, "embedding_backward N=%d C=%d bit-identical to the CPU "
             "(elements that differ:", N, C);
    result(name, diff == 0, " %g)", (double)diff);
    gpu->free(d_tok), gpu->free(d_wte), gpu->free(d_dout);
    free(tok), free(wte), free(dout), free(dwte), free(out), free(g), free(gd);
}

/* ------------------------------------------------------------ RMSNorm */

static void test_rmsnorm(int N, int C)
{
    char name[160];
    float *in = hrand((size_t)N * C, 2.0), *w = hrand(C, 1.0), *dout = hrand((size_t)N * C, 1.0);
    float *din = hrand((size_t)N * C, 1.0), *dw = hrand(C, 1.0);
    float *out = xmalloc(FB((size_t)N * C)), *rstd = xmalloc(FB(N));
    float *d_in = dput(in, FB((size_t)N * C)), *d_w = dput(w, C * sizeof(float));
    float *d_out = dnan((size_t)N * C), *d_rstd = dnan(N);
    cpu->rmsnorm_forward(out, rstd, in, w, N, C, 1e-5f);
    gpu->rmsnorm_forward(d_out, d_rstd, d_in, d_w, N, C, 1e-5f);
    float *g = xmalloc(FB((size_t)N * C)), *gr = xmalloc(FB(N));
    gpu->download(g, d_out, FB((size_t)N * C));
    gpu->download(gr, d_rstd, FB(N));
    snprintf(name, sizeof name, "rmsnorm_forward out N=%d C=%d", N, C);
    cmp(name, g, out, (size_t)N * C);
    snprintf(name, sizeof name, "rmsnorm_forward rstd N=%d C=%d", N, C);
    cmp(name, gr, rstd, N);
    float *d_din = dput(din, FB((size_t)N * C)), *d_dw = dput(dw, FB(C));
    float *d_dout = dput(dout, FB((size_t)N * C));
    cpu->rmsnorm_backward(din, dw, dout, in, w, rstd, N, C);
    gpu->rmsnorm_backward(d_din, d_dw, d_dout, d_in, d_w, d_rstd, N, C);
    float *gdin = dtake(d_din, (size_t)N * C), *gdw = dtake(d_dw, C);
    snprintf(name, sizeof name, "rmsnorm_backward din += N=%d C=%d", N, C);
    cmp(name, gdin, din, (size_t)N * C);
    snprintf(name, sizeof name, "rmsnorm_backward dw += N=%d C=%d", N, C);
    cmp(name, gdw, dw, C);
    gpu->free(d_in), gpu->free(d_w), gpu->free(d_out), gpu->free(d_rstd), gpu->free(d_dout);
    free(in), free(w), free(dout), free(din), free(dw), free(out), free(rstd), free(g), free(gr);
    free(gdin), free(gdw);
}

/* --------------------------------------------------------------- RoPE */

static void test_rope(int B, int T, int nh, int hd)
{
    char name[160];
    size_t n = (size_t)B * T * nh * hd;
    for (int inverse = 0; inverse <= 1; inverse++) {
        float *x = hrand(n, 1.0), *d_x = dput(x, FB(n));
        cpu->rope(x, HPT_DTYPE_F32, B, T, nh, hd, 10000.0f, inverse);
        gpu->rope(d_x, HPT_DTYPE_F32, B, T, nh, hd, 10000.0f, inverse);
        float *g = dtake(d_x, n);
        snprintf(name, sizeof name, "rope%s B=%d T=%d nh=%d hd=%d", inverse ? " (inverse)" : "", B,
                 T, nh, hd);
        cmp(name, g, x, n);
        free(x), free(g);
    }
    int pos0 = 11, cnt = 5;
    size_t m = (size_t)cnt * nh * hd;
    float *x = hrand(m, 1.0), *d_x = dput(x, FB(m));
    cpu->rope_at(x, cnt, nh, hd, 500000.0f, pos0);
    gpu->rope_at(d_x, cnt, nh, hd, 500000.0f, pos0);
    float *g = dtake(d_x, m);
    snprintf(name, sizeof name, "rope_at n=%d pos0=%d nh=%d hd=%d", cnt, pos0, nh, hd);
    cmp(name, g, x, m);
    free(x), free(g);
}

/* ------------------------------------------- ring attention (CP) */

/* Context parallelism's block ops and rope_pos (lib/attention_ring.c):
 * rank `rank` of CP `cp` runs hpt_ring_step_forward/backward over every
 * owner's K/V chunks (the ring order) on both backends from the same
 * zigzag-local q, k, v, dout; out, lse, dq and each owner's dK/dV parts
 * compared (outputs poisoned with NaN on the GPU: an unwritten row fails),
 * and rope_pos at the rank's positions (test_ring_bf16: the same in bf16
 * mode). */
static void test_ring(int B, int T, int cp, int rank, int H, int KV, int hd)
{
    char name[200];
    int Tl = T / cp;
    size_t nq = (size_t)B * Tl * H * hd, nk = (size_t)B * Tl * KV * hd, nl = (size_t)B * H * Tl;
    float *q = hrand(nq, 1.0), *dout = hrand(nq, 1.0), *k[8], *v[8];
    float *d_q = dput(q, FB(nq)), *d_dout = dput(dout, FB(nq)), *d_k[8], *d_v[8];
    for (int o = 0; o < cp; o++) {
        k[o] = hrand(nk, 1.0), v[o] = hrand(nk, 1.0);
        d_k[o] = dput(k[o], FB(nk)), d_v[o] = dput(v[o], FB(nk));
    }
    float *out = xmalloc(FB(nq)), *lse = xmalloc(FB(nl)), *d_out = dnan(nq), *d_lse = dnan(nl);
    int sc[2] = {0, 0}, sg[2] = {0, 0};
    for (int s = 0; s < cp; s++) {
        int o = (rank - s + cp) % cp;
        hpt_ring_step_forward(cpu, out, lse, q, k[o], v[o], B, T, cp, rank, o, H, KV, hd, sc);
        hpt_ring_step_forward(gpu, d_out, d_lse, d_q, d_k[o], d_v[o], B, T, cp, rank, o, H, KV,
                              hd, sg);
    }
    snprintf(name, sizeof name, "ring forward B=%d T=%d CP=%d rank=%d H=%d KV=%d hd=%d", B, T,
             cp, rank, H, KV, hd);
    float *g_out = dtake(d_out, nq), *g_lse = dtake(d_lse, nl);
    cmp(name, g_out, out, nq);
    snprintf(name, sizeof name, "ring lse B=%d T=%d CP=%d rank=%d", B, T, cp, rank);
    cmp(name, g_lse, lse, nl);
    /* backward from each backend's own forward (as the trainer runs it) */
    float *D = xmalloc(FB(nl)), *dq = xmalloc(FB(nq)), *d_D = dnan(nl), *d_dq;
    float *d_o2 = dput(g_out, FB(nq)), *d_l2 = dput(g_lse, FB(nl));
    cpu->attention_rowdot(D, dout, out, B, Tl, H, hd);
    gpu->attention_rowdot(d_D, d_dout, d_o2, B, Tl, H, hd);
    float *g_D = dtake(d_D, nl);
    snprintf(name, sizeof name, "ring rowdot B=%d T=%d CP=%d", B, T, cp);
    cmp(name, g_D, D, nl);
    d_D = dput(g_D, FB(nl));
    memset(dq, 0, FB(nq));
    d_dq = dput(dq, FB(nq));
    for (int s = 0; s < cp; s++) {
        int o = (rank - s + cp) % cp;
        float *dk = xmalloc(FB(nk)), *dv = xmalloc(FB(nk));
        memset(dk, 0, FB(nk)), memset(dv, 0, FB(nk));
        float *d_dk = dput(dk, FB(nk)), *d_dv = dput(dv, FB(nk));
        hpt_ring_step_backward(cpu, dq, dk, dv, D, dout, lse, q, k[o], v[o], B, T, cp, rank, o, H,
                               KV, hd);
        hpt_ring_step_backward(gpu, d_dq, d_dk, d_dv, d_D, d_dout, d_l2, d_q, d_k[o], d_v[o], B, T,
                               cp, rank, o, H, KV, hd);
        float *g_dk = dtake(d_dk, nk), *g_dv = dtake(d_dv, nk);
        snprintf(name, sizeof name, "ring dK (owner %d) B=%d T=%d CP=%d rank=%d H=%d KV=%d", o, B,
                 T, cp, rank, H, KV);
        cmp(name, g_dk, dk, nk);
        snprintf(name, sizeof name, "ring dV (owner %d) B=%d T=%d CP=%d rank=%d", o, B, T, cp,
                 rank);
        cmp(name, g_dv, dv, nk);
        free(dk), free(dv), free(g_dk), free(g_dv);
    }
    float *g_dq = dtake(d_dq, nq);
    snprintf(name, sizeof name, "ring dQ B=%d T=%d CP=%d rank=%d H=%d KV=%d", B, T, cp, rank, H,
             KV);
    cmp(name, g_dq, dq, nq);
    /* rope at the rank's zigzag positions, forward and inverse */
    int *pos = xmalloc(sizeof(int) * (size_t)Tl);
    for (int t = 0; t < Tl; t++)
        pos[t] = hpt_cp_pos(t, T, cp, rank);
    for (int inverse = 0; inverse <= 1; inverse++) {
        float *x = hrand(nq, 1.0), *d_x = dput(x, FB(nq));
        cpu->rope_pos(x, HPT_DTYPE_F32, B, Tl, H, hd, 10000.0f, inverse, pos);
        gpu->rope_pos(d_x, HPT_DTYPE_F32, B, Tl, H, hd, 10000.0f, inverse, pos);
        float *g = dtake(d_x, nq);
        snprintf(name, sizeof name, "rope_pos%s T=%d CP=%d rank=%d", inverse ? " (inverse)" : "",
                 T, cp, rank);
        cmp(name, g, x, nq);
        free(x), free(g);
    }
    for (int o = 0; o < cp; o++)
        free(k[o]), free(v[o]), gpu->free(d_k[o]), gpu->free(d_v[o]);
    gpu->free(d_q), gpu->free(d_dout), gpu->free(d_o2), gpu->free(d_l2), gpu->free(d_D);
    free(q), free(dout), free(out), free(lse), free(g_out), free(g_lse), free(D), free(dq);
    free(g_D), free(g_dq), free(pos);
}

/* -------------------------------- ring attention (CP) in bf16 mode */

/* NMSE of the bf16 ring against the CPU on the same bf16-rounded q, k, v:
 * out is stored in bf16 after every merge (a few roundings of 2^-9
 * relative each), and the backward reads the GPU's bf16 out through D =
 * rowsum(dout * out): at most 8e-6 seen on the emulation, against the
 * whole-block errors (a block's share of the softmax) the test is for. */
#define TOL_BF16_RING 1e-4

/* Context parallelism with bf16 activations (--precision bf16 --cp N):
 * test_ring's steps with q, k, v and out as bf16 on the GPU (the ring
 * moves K/V blocks in the activation dtype; lse, dq and the dK/dV parts
 * stay fp32) against the CPU on the same values rounded to bf16, NMSE
 * TOL_BF16_RING; outputs poisoned with NaN. */
static void test_ring_bf16(int B, int T, int cp, int rank, int H, int KV, int hd)
{
    char name[200];
    int Tl = T / cp;
    size_t nq = (size_t)B * Tl * H * hd, nk = (size_t)B * Tl * KV * hd, nl = (size_t)B * H * Tl;
    hpt_status st = hpt_backend_set_precision(gpu, HPT_PRECISION_BF16);
    result("set_precision bf16 accepted (ring)", st == HPT_OK, "(%g)", 0.0);
    float *q = hrand(nq, 2.0), *dout = hrand(nq, 1.0), *k[8], *v[8];
    hpt_bf16_round(q, nq);
    void *d_q = dput_bf16(q, nq), *d_k[8], *d_v[8];
    float *d_dout = dput(dout, FB(nq));
    for (int o = 0; o < cp; o++) {
        k[o] = hrand(nk, 2.0), v[o] = hrand(nk, 1.0);
        hpt_bf16_round(k[o], nk), hpt_bf16_round(v[o], nk);
        d_k[o] = dput_bf16(k[o], nk), d_v[o] = dput_bf16(v[o], nk);
    }
    float *out = xmalloc(FB(nq)), *lse = xmalloc(FB(nl)), *d_lse = dnan(nl);
    void *d_out = dnan_bf16(nq);
    int sc[2] = {0, 0}, sg[2] = {0, 0};
    for (int s = 0; s < cp; s++) {
        int o = (rank - s + cp) % cp;
        hpt_ring_step_forward(cpu, out, lse, q, k[o], v[o], B, T, cp, rank, o, H, KV, hd, sc);
        hpt_ring_step_forward(gpu, d_out, d_lse, d_q, d_k[o], d_v[o], B, T, cp, rank, o, H, KV,
                              hd, sg);
    }
    float *g_out = dget(d_out, nq, 1), *g_lse = dget(d_lse, nl, 0);
    snprintf(name, sizeof name, "ring bf16 forward B=%d T=%d CP=%d rank=%d H=%d KV=%d hd=%d", B,
             T, cp, rank, H, KV, hd);
    cmp_tol(name, g_out, out, nq, TOL_BF16_RING);
    snprintf(name, sizeof name, "ring bf16 lse B=%d T=%d CP=%d rank=%d", B, T, cp, rank);
    cmp_tol(name, g_lse, lse, nl, TOL_BF16_RING);
    /* backward from each backend's own forward (the GPU's bf16 out) */
    float *D = xmalloc(FB(nl)), *dq = xmalloc(FB(nq)), *d_D = dnan(nl), *d_dq;
    cpu->attention_rowdot(D, dout, out, B, Tl, H, hd);
    gpu->attention_rowdot(d_D, d_dout, d_out, B, Tl, H, hd);
    float *g_D = dget(d_D, nl, 0);
    snprintf(name, sizeof name, "ring bf16 rowdot B=%d T=%d CP=%d", B, T, cp);
    cmp_tol(name, g_D, D, nl, TOL_BF16_RING);
    memset(dq, 0, FB(nq));
    d_dq = dput(dq, FB(nq));
    for (int s = 0; s < cp; s++) {
        int o = (rank - s + cp) % cp;
        float *dk = xmalloc(FB(nk)), *dv = xmalloc(FB(nk));
        memset(dk, 0, FB(nk)), memset(dv, 0, FB(nk));
        float *d_dk = dput(dk, FB(nk)), *d_dv = dput(dv, FB(nk));
        hpt_ring_step_backward(cpu, dq, dk, dv, D, dout, lse, q, k[o], v[o], B, T, cp, rank, o, H,
                               KV, hd);
        hpt_ring_step_backward(gpu, d_dq, d_dk, d_dv, d_D, d_dout, d_lse, d_q, d_k[o], d_v[o], B,
                               T, cp, rank, o, H, KV, hd);
        float *g_dk = dtake(d_dk, nk), *g_dv = dtake(d_dv, nk);
        snprintf(name, sizeof name, "ring bf16 dK (owner %d) B=%d T=%d CP=%d rank=%d H=%d KV=%d",
                 o, B, T, cp, rank, H, KV);
        cmp_tol(name, g_dk, dk, nk, TOL_BF16_RING);
        snprintf(name, sizeof name, "ring bf16 dV (owner %d) B=%d T=%d CP=%d rank=%d", o, B, T,
                 cp, rank);
        cmp_tol(name, g_dv, dv, nk, TOL_BF16_RING);
        free(dk), free(dv), free(g_dk), free(g_dv);
    }
    float *g_dq = dtake(d_dq, nq);
    snprintf(name, sizeof name, "ring bf16 dQ B=%d T=%d CP=%d rank=%d H=%d KV=%d", B, T, cp, rank,
             H, KV);
    cmp_tol(name, g_dq, dq, nq, TOL_BF16_RING);
    for (int o = 0; o < cp; o++)
        free(k[o]), free(v[o]), gpu->free(d_k[o]), gpu->free(d_v[o]);
    gpu->free(d_q), gpu->free(d_dout), gpu->free(d_out), gpu->free(d_lse), gpu->free(d_D);
    free(q), free(dout), free(out), free(lse), free(g_out), free(g_lse), free(D), free(dq);
    free(g_D), free(g_dq);
    hpt_backend_set_precision(gpu, HPT_PRECISION_FP32);
}

/* --------------------------------------------- SwiGLU and elementwise */

static void test_elementwise(size_t n)
{
    float *gate = hrand(n, 4.0), *up = hrand(n, 1.0), *dout = hrand(n, 1.0);
    float *out = xmalloc(FB(n)), *dg = xmalloc(FB(n)), *du = xmalloc(FB(n));
    float *d_gate = dput(gate, FB(n)), *d_up = dput(up, FB(n)), *d_dout = dput(dout, FB(n));
    float *d_out = dnan(n), *d_dg = dnan(n), *d_du = dnan(n);
    cpu->swiglu_forward(out, gate, up, n);
    gpu->swiglu_forward(d_out, d_gate, d_up, n);
    float *g = dtake(d_out, n);
    cmp("swiglu_forward", g, out, n);
    cpu->swiglu_backward(dg, du, dout, gate, up, n);
    gpu->swiglu_backward(d_dg, d_du, d_dout, d_gate, d_up, n);
    float *gdg = dtake(d_dg, n), *gdu = dtake(d_du, n);
    cmp("swiglu_backward dgate", gdg, dg, n);
    cmp("swiglu_backward dup", gdu, du, n);

    float *d_sum = dnan(n);
    cpu->add(out, gate, up, n);
    gpu->add(d_sum, d_gate, d_up, n);
    float *gs = dtake(d_sum, n);
    cmp("add", gs, out, n);
    gpu->add(d_gate, d_gate, d_up, n); /* out aliases a */
    float *ga = xmalloc(FB(n));
    gpu->download(ga, d_gate, FB(n));
    cmp("add (out aliases a)", ga, out, n);
    cpu->scale(out, -0.37f, n);
    gpu->scale(d_gate, -0.37f, n);
    gpu->download(ga, d_gate, FB(n));
    cmp("scale", ga, out, n);
    cmp_scalar("sumsq (double)", gpu->sumsq(d_up, n), cpu->sumsq(up, n));
    cmp_scalar("sumsq of 1 element", gpu->sumsq(d_up + 3, 1), cpu->sumsq(up + 3, 1));
    result("sumsq of 0 elements is 0", gpu->sumsq(d_up, 0) == 0.0, "(%g)", 0.0);
    gpu->free(d_gate), gpu->free(d_up), gpu->free(d_dout);
    free(gate), free(up), free(dout), free(out), free(dg), free(du), free(g), free(gdg), free(gdu);
    free(gs), free(ga);
}

/* sumsq_list (the gradient norm's one round trip): 70 ranges (two calls'
 * worth of the 64-range launches), empty, tiny and multi-block ones, equal
 * to the loop of sumsq calls bit for bit, and to the CPU's within the
 * tolerance. */
static void test_sumsq_list(void)
{
    enum { K = 70 };
    size_t total = 70000, off[K], len[K];
    float *h = hrand(total, 1.0), *d = dput(h, FB(total));
    const float *gx[K], *cx[K];
    for (int i = 0; i < K; i++) {
        len[i] = i == 3 ? 0 : i == 10 ? 40000 : (size_t)(i * 37 % 700) + 1;
        off[i] = (size_t)i * 331 % (total - len[i]);
        gx[i] = d + off[i], cx[i] = h + off[i];
    }
    double loop = 0.25, cref = 0.25;
    for (int i = 0; i < K; i++)
        loop += gpu->sumsq(gx[i], len[i]), cref += cpu->sumsq(cx[i], len[i]);
    double got = gpu->sumsq_list(0.25, gx, len, K);
    result("sumsq_list of 70 ranges = the loop of sumsq calls bit for bit", got == loop,
           "(difference %g)", got - loop);
    cmp_scalar("sumsq_list of 70 ranges (vs cpu)", got, cref);
    result("sumsq_list of no ranges returns acc", gpu->sumsq_list(1.5, gx, len, 0) == 1.5, "(%g)",
           0.0);
    /* sumsq_list_async (the DP buckets' sums left on the device): the
     * non-empty ranges' sums, added on the host in order, = sumsq_list */
    if (gpu->sumsq_list_async) {
        const float *ax[K];
        size_t an[K];
        int k = 0;
        for (int i = 0; i < K; i++)
            if (len[i])
                ax[k] = gx[i], an[k++] = len[i];
        double *dout = gpu->alloc(sizeof(double) * K), hs[K], acc = 0.25;
        gpu->sumsq_list_async(dout, ax, an, k);
        gpu->download(hs, dout, sizeof(double) * (size_t)k);
        for (int i = 0; i < k; i++)
            acc += hs[i];
        result("sumsq_list_async of 69 ranges, added in order = sumsq_list bit for bit",
               acc == got, "(difference %g)", acc - got);
        gpu->free(dout);
    }
    gpu->free(d);
    free(h);
}

/* ------------------------------------------------------- cross-entropy */

static void test_crossentropy(int N, int V)
{
    char name[160];
    size_t n = (size_t)N * V;
    float *logits = hrand(n, 4.0), *ref = hdup(logits, n);
    int32_t *tg = itok(N, V);
    float *d_l = dput(logits, FB(n));
    int32_t *d_tg = dput(tg, sizeof(int32_t) * N);
    snprintf(name, sizeof name, "crossentropy_loss N=%d V=%d", N, V);
    cmp_scalar(name, gpu->crossentropy_loss(d_l, d_tg, N, V), cpu->crossentropy_loss(ref, tg, N, V));
    float *g = xmalloc(FB(n));
    gpu->download(g, d_l, FB(n));
    result("crossentropy_loss leaves the logits unchanged", !memcmp(g, logits, FB(n)), "(%g)", 0.0);
    double lc = cpu->crossentropy_fused(ref, tg, N, V, 1.0f / N);
    double lg = gpu->crossentropy_fused(d_l, d_tg, N, V, 1.0f / N);
    snprintf(name, sizeof name, "crossentropy_fused loss N=%d V=%d", N, V);
    cmp_scalar(name, lg, lc);
    gpu->download(g, d_l, FB(n));
    snprintf(name, sizeof name, "crossentropy_fused dlogits N=%d V=%d", N, V);
    cmp(name, g, ref, n);
    gpu->free(d_l), gpu->free(d_tg);
    free(logits), free(ref), free(tg), free(g);
}

/* One TP rank's columns [v0, v0+Vl) of a vocabulary of V, nvalid real. */
static void test_vocab_parallel(int N, int V, int Vl, int v0, float grad_scale)
{
    char name[200];
    int nvalid = V - v0 < 0 ? 0 : V - v0 > Vl ? Vl : V - v0;
    size_t n = (size_t)N * Vl;
    float *logits = hrand(n, 4.0), *ref = hdup(logits, n);
    int32_t *tg = itok(N, V);
    float *mx = xmalloc(FB(N)), *se = xmalloc(FB(2 * N));
    float *d_l = dput(logits, FB(n)), *d_mx = dnan(N), *d_se = dnan(2 * (size_t)N);
    int32_t *d_tg = dput(tg, sizeof(int32_t) * N);
    cpu->vocab_max(mx, ref, N, Vl, nvalid);
    gpu->vocab_max(d_mx, d_l, N, Vl, nvalid);
    float *g = xmalloc(FB(n)), *gm = xmalloc(FB(N)), *gse = xmalloc(FB(2 * N));
    gpu->download(gm, d_mx, FB(N));
    snprintf(name, sizeof name, "vocab_max N=%d Vl=%d nvalid=%d", N, Vl, nvalid);
    cmp(name, gm, mx, N);
    cpu->vocab_sumexp(se, se + N, ref, tg, mx, N, Vl, nvalid, v0);
    gpu->vocab_sumexp(d_se, d_se + N, d_l, d_tg, d_mx, N, Vl, nvalid, v0);
    gpu->download(gse, d_se, FB(2 * N));
    snprintf(name, sizeof name, "vocab_sumexp sumexp and tlogit N=%d Vl=%d v0=%d", N, Vl, v0);
    cmp(name, gse, se, 2 * (size_t)N);
    double lc = cpu->vocab_ce_finish(ref, tg, mx, se, se + N, N, Vl, nvalid, v0, grad_scale);
    double lg = gpu->vocab_ce_finish(d_l, d_tg, d_mx, d_se, d_se + N, N, Vl, nvalid, v0,
                                     grad_scale);
    snprintf(name, sizeof name, "vocab_ce_finish loss (grad_scale %g) N=%d Vl=%d v0=%d",
             grad_scale, N, Vl, v0);
    cmp_scalar(name, lg, lc);
    gpu->download(g, d_l, FB(n));
    snprintf(name, sizeof name, "vocab_ce_finish dlogits (grad_scale %g, padding zeroed)",
             grad_scale);
    cmp(name, g, ref, n);
    gpu->free(d_l), gpu->free(d_mx), gpu->free(d_se), gpu->free(d_tg);
    free(logits), free(ref), free(tg), free(mx), free(se), free(g), free(gm), free(gse);
}

/* -------------------------------------------------------------- AdamW */

static void test_adamw(size_t n)
{
    float *p = hrand(n, 1.0), *grad = hrand(n, 1.0), *m = hrand(n, 0.1), *v = hrand(n, 0.1);
    for (size_t i = 0; i < n; i++)
        v[i] = fabsf(v[i]);
    float *d_p = dput(p, FB(n)), *d_g = dput(grad, FB(n)), *d_m = dput(m, FB(n));
    float *d_v = dput(v, FB(n));
    for (int t = 1; t <= 3; t++) {
        cpu->adamw(p, grad, m, v, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, t);
        gpu->adamw(d_p, d_g, d_m, d_v, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, t);
    }
    float *gp = dtake(d_p, n), *gm = dtake(d_m, n), *gv = dtake(d_v, n);
    cmp("adamw params (3 steps)", gp, p, n);
    cmp("adamw first moment", gm, m, n);
    cmp("adamw second moment", gv, v, n);
    gpu->free(d_g);
    free(p), free(grad), free(m), free(v), free(gp), free(gm), free(gv);
}

/* ======================================================================
 * Fused and vectorised element-wise kernels (lib/kernels_cuda.cu, issue
 * 28): add_rmsnorm_forward, rope_qk, SwiGLU's 16-byte accesses. Each
 * against the CPU backend and against the CUDA backend's own unfused or
 * aligned path bit for bit; the aligned path moves 16 bytes per access
 * (C a multiple of 8, aligned pointers), a pointer offset by one element
 * forces the element-by-element path, and the two must give the same bits.
 * ====================================================================== */

/* add_rmsnorm_forward in the current precision (bf16 mode: norm_out bf16)
 * against the CPU's (out = x + delta bit for bit, an IEEE add; norm_out
 * and rstd within TOL, or TOL_BF16 and, against the CPU's result rounded
 * to bf16, TOL_BF16_STORE) and against the CUDA add + rmsnorm_forward on
 * aligned buffers bit for bit; every output poisoned with NaN. off: every
 * pointer of the fused call `off` elements into its buffer (1: the
 * element-by-element path); alias: out = x. */
static void test_add_rmsnorm(int N, int C, int off, int alias)
{
    char name[220], tag[120];
    int bf = hpt_backend_act_dtype(gpu) == HPT_DTYPE_BF16;
    size_t n = (size_t)N * C;
    float *x = hrand(n, 2.0), *dl = hrand(n, 1.0), *w = hrand(C, 1.0);
    float *out = xmalloc(FB(n)), *nout = xmalloc(FB(n)), *rstd = xmalloc(FB(N));
    cpu->add_rmsnorm_forward(out, nout, rstd, x, dl, w, N, C, 1e-5f);
    void *px, *pd, *pw, *po, *pn, *pr;
    void *bx = dput_at(x, n, off, 0, &px), *bd = dput_at(dl, n, off, 0, &pd);
    void *bw = dput_at(w, C, off, 0, &pw), *bn = dput_at(NULL, n, off, bf, &pn);
    void *bo = alias ? NULL : dput_at(NULL, n, off, 0, &po), *br = dput_at(NULL, N, off, 0, &pr);
    if (alias)
        po = px;
    gpu->add_rmsnorm_forward(po, pn, pr, px, pd, pw, N, C, 1e-5f);
    float *go = dget(po, n, 0), *gn = dget(pn, n, bf), *gr = dget(pr, N, 0);
    /* the unfused ops on aligned buffers */
    float *e_x = dput(x, FB(n)), *e_d = dput(dl, FB(n)), *e_w = dput(w, FB(C));
    float *e_o = dnan(n), *e_r = dnan(N);
    void *e_n = bf ? dnan_bf16(n) : (void *)dnan(n);
    gpu->add(e_o, e_x, e_d, n);
    gpu->rmsnorm_forward(e_n, e_r, e_o, e_w, N, C, 1e-5f);
    float *uo = dtake(e_o, n), *un = bf ? dtake_bf16(e_n, n) : dtake(e_n, n), *ur = dtake(e_r, N);
    snprintf(tag, sizeof tag, "%s N=%d C=%d%s%s", bf ? " bf16" : "", N, C,
             off ? " (unaligned: element by element)" : C % 8 ? "" : " (16-byte accesses)",
             alias ? " out=x" : "");
    snprintf(name, sizeof name, "add_rmsnorm_forward%s: out = x + delta, the cpu's", tag);
    cmp_bits(name, go, out, n);
    snprintf(name, sizeof name, "add_rmsnorm_forward%s: norm_out (vs %s cpu)", tag,
             bf ? "fp32" : "the");
    cmp_tol(name, gn, nout, n, bf ? TOL_BF16 : TOL);
    if (bf) {
        hpt_bf16_round(nout, n);
        snprintf(name, sizeof name, "add_rmsnorm_forward%s: norm_out (vs cpu rounded)", tag);
        cmp_tol(name, gn, nout, n, TOL_BF16_STORE);
    }
    snprintf(name, sizeof name, "add_rmsnorm_forward%s: rstd", tag);
    cmp_tol(name, gr, rstd, N, TOL);
    const char *what[3] = {"out", "norm_out", "rstd"};
    const float *fu[3] = {go, gn, gr}, *un3[3] = {uo, un, ur};
    size_t cnt[3] = {n, n, (size_t)N};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "add_rmsnorm_forward%s: %s = cuda add + rmsnorm_forward's",
                 tag, what[i]);
        cmp_bits(name, fu[i], un3[i], cnt[i]);
    }
    gpu->free(bx), gpu->free(bd), gpu->free(bw), gpu->free(bn), gpu->free(bo), gpu->free(br);
    gpu->free(e_x), gpu->free(e_d), gpu->free(e_w);
    free(x), free(dl), free(w), free(out), free(nout), free(rstd), free(go), free(gn), free(gr);
    free(uo), free(un), free(ur);
}

/* rope_qk (q and k in one launch) stored as dt, forward and inverse:
 * against the CPU's rope of q and of k (fp32 inputs; TOL, or TOL_BF16 for
 * bf16 storage) and against the CUDA backend's two rope calls on aligned
 * buffers bit for bit. koff: k starts koff elements into its buffer (1:
 * the element-by-element path for both). */
static void test_rope_qk(int B, int T, int H, int KV, int hd, hpt_dtype dt, int koff)
{
    char name[220];
    int bf = dt == HPT_DTYPE_BF16;
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd;
    for (int inverse = 0; inverse <= 1; inverse++) {
        float *q = hrand(nq, 1.0), *k = hrand(nk, 1.0), *qr = hdup(q, nq), *kr = hdup(k, nk);
        cpu->rope(qr, HPT_DTYPE_F32, B, T, H, hd, 10000.0f, inverse);
        cpu->rope(kr, HPT_DTYPE_F32, B, T, KV, hd, 10000.0f, inverse);
        void *pq, *pk, *pq2, *pk2;
        void *bq = dput_at(q, nq, 0, bf, &pq), *bk = dput_at(k, nk, koff, bf, &pk);
        void *bq2 = dput_at(q, nq, 0, bf, &pq2), *bk2 = dput_at(k, nk, 0, bf, &pk2);
        gpu->rope_qk(pq, pk, dt, B, T, H, KV, hd, 10000.0f, inverse);
        gpu->rope(pq2, dt, B, T, H, hd, 10000.0f, inverse);
        gpu->rope(pk2, dt, B, T, KV, hd, 10000.0f, inverse);
        float *gq = dget(pq, nq, bf), *gk = dget(pk, nk, bf), *gq2 = dget(pq2, nq, bf);
        float *gk2 = dget(pk2, nk, bf);
        char tag[140];
        snprintf(tag, sizeof tag, "%s%s B=%d T=%d H=%d KV=%d hd=%d%s", inverse ? " (inverse)" : "",
                 bf ? " bf16" : "", B, T, H, KV, hd, koff ? " (k unaligned)" : "");
        snprintf(name, sizeof name, "rope_qk%s: q (vs cpu rope)", tag);
        cmp_tol(name, gq, qr, nq, bf ? TOL_BF16 : TOL);
        snprintf(name, sizeof name, "rope_qk%s: k (vs cpu rope)", tag);
        cmp_tol(name, gk, kr, nk, bf ? TOL_BF16 : TOL);
        snprintf(name, sizeof name, "rope_qk%s: q = cuda rope's", tag);
        cmp_bits(name, gq, gq2, nq);
        snprintf(name, sizeof name, "rope_qk%s: k = cuda rope's", tag);
        cmp_bits(name, gk, gk2, nk);
        gpu->free(bq), gpu->free(bk), gpu->free(bq2), gpu->free(bk2);
        free(q), free(k), free(qr), free(kr), free(gq), free(gk), free(gq2), free(gk2);
    }
}

/* SwiGLU forward and backward in the current precision (bf16 mode: gate,
 * up, out bf16): n elements with 16-byte accesses (n % 8 left over: the
 * scalar tail) and, one element into every buffer, element by element;
 * both against the CPU (fp32 inputs; TOL, or TOL_BF16) and against each
 * other bit for bit; outputs poisoned with NaN. */
static void test_swiglu_vec(size_t n)
{
    char name[220];
    int bf = hpt_backend_act_dtype(gpu) == HPT_DTYPE_BF16;
    float *gate = hrand(n, 4.0), *up = hrand(n, 1.0), *dout = hrand(n, 1.0);
    float *out = xmalloc(FB(n)), *dg = xmalloc(FB(n)), *du = xmalloc(FB(n));
    cpu->swiglu_forward(out, gate, up, n);
    cpu->swiglu_backward(dg, du, dout, gate, up, n);
    float *got[2][3];
    for (int off = 0; off <= 1; off++) {
        void *pg, *pu, *po, *pd, *pdg, *pdu, *b[6];
        b[0] = dput_at(gate, n, off, bf, &pg), b[1] = dput_at(up, n, off, bf, &pu);
        b[2] = dput_at(NULL, n, off, bf, &po), b[3] = dput_at(dout, n, off, 0, &pd);
        b[4] = dput_at(NULL, n, off, 0, &pdg), b[5] = dput_at(NULL, n, off, 0, &pdu);
        gpu->swiglu_forward(po, pg, pu, n);
        gpu->swiglu_backward(pdg, pdu, pd, pg, pu, n);
        got[off][0] = dget(po, n, bf), got[off][1] = dget(pdg, n, 0), got[off][2] = dget(pdu, n, 0);
        for (int i = 0; i < 6; i++)
            gpu->free(b[i]);
    }
    const char *what[3] = {"swiglu_forward out", "swiglu_backward dgate", "swiglu_backward dup"};
    const float *ref[3] = {out, dg, du};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s%s n=%zu (16-byte accesses, tail of %zu; vs cpu)", what[i],
                 bf ? " bf16" : "", n, n % 8);
        cmp_tol(name, got[0][i], ref[i], n, bf ? TOL_BF16 : TOL);
        snprintf(name, sizeof name, "%s%s n=%zu unaligned (element by element; vs cpu)", what[i],
                 bf ? " bf16" : "", n);
        cmp_tol(name, got[1][i], ref[i], n, bf ? TOL_BF16 : TOL);
        snprintf(name, sizeof name, "%s%s n=%zu: 16-byte path = element-by-element path",
                 what[i], bf ? " bf16" : "", n);
        cmp_bits(name, got[0][i], got[1][i], n);
        free(got[0][i]), free(got[1][i]);
    }
    free(gate), free(up), free(dout), free(out), free(dg), free(du);
}

static void test_fused(void)
{
    test_add_rmsnorm(33, 96, 0, 0);
    test_add_rmsnorm(7, 1003, 0, 0); /* C not a multiple of 8 (nor 4) */
    test_add_rmsnorm(5, 36, 0, 1);   /* a multiple of 4, not of 8; out aliases x */
    test_add_rmsnorm(9, 2048, 1, 0); /* unaligned, against the aligned unfused ops */
    test_rope_qk(2, 37, 4, 2, 64, HPT_DTYPE_F32, 0);
    test_rope_qk(1, 19, 8, 1, 128, HPT_DTYPE_F32, 1);
    test_rope_qk(1, 13, 3, 3, 40, HPT_DTYPE_F32, 0); /* hd/2 = 20: element by element */
    test_rope_qk(2, 37, 4, 2, 64, HPT_DTYPE_BF16, 0);
    test_rope_qk(1, 19, 2, 1, 128, HPT_DTYPE_BF16, 1);
    test_swiglu_vec(301);
    test_swiglu_vec(4096);
    hpt_status st = hpt_backend_set_precision(gpu, HPT_PRECISION_BF16);
    result("set_precision bf16 accepted (fused)", st == HPT_OK, "(%g)", 0.0);
    test_add_rmsnorm(33, 96, 0, 0);
    test_add_rmsnorm(7, 1003, 0, 1);
    test_add_rmsnorm(9, 264, 1, 0);
    test_swiglu_vec(301);
    hpt_backend_set_precision(gpu, HPT_PRECISION_FP32);
}

/* ======================================================================
 * No host synchronisation inside a step (issue 28): the host_syncs
 * counters of lib/backend_cuda.cu
 * ====================================================================== */

/* The difference b - a of two counter readings, as "d2h h2d sync alloc". */
static hpt_host_syncs syncs_diff(hpt_host_syncs a, hpt_host_syncs b)
{
    hpt_host_syncs d = {b.d2h - a.d2h, b.h2d - a.h2d, b.sync - a.sync, b.alloc - a.alloc};
    return d;
}

static void syncs_check(const char *what, hpt_host_syncs got, hpt_host_syncs want)
{
    char name[260];
    snprintf(name, sizeof name, "host syncs of %s: d2h %llu h2d %llu sync %llu alloc %llu "
             "(at most %llu %llu %llu %llu)", what, (unsigned long long)got.d2h,
             (unsigned long long)got.h2d, (unsigned long long)got.sync,
             (unsigned long long)got.alloc, (unsigned long long)want.d2h,
             (unsigned long long)want.h2d, (unsigned long long)want.sync,
             (unsigned long long)want.alloc);
    result(name, got.d2h <= want.d2h && got.h2d <= want.h2d && got.sync <= want.sync &&
           got.alloc <= want.alloc, "(%g)", 0.0);
}

/* Two training steps of a tiny bf16 model (GQA, untied head): per step
 * the forward with the fused cross-entropy and the backward read back the
 * loss only (one device-to-host copy) and upload the tokens and targets
 * (two host-to-device copies from pageable memory, which CUDA orders
 * after the stream's work); the gradient norm reads back one sum (one
 * sumsq_list round trip per 64 tensors: one here); zero_grad and AdamW
 * none; no explicit synchronisation (run without HPT_CUDA_SYNC=1, which
 * synchronises after every launch and fails this test) and no device
 * allocation or free anywhere in the step. First: the counters count (a
 * download adds one d2h, an upload one h2d). */
static void test_host_syncs(void)
{
    if (!gpu->host_syncs) {
        printf("FAIL host_syncs: the cuda backend has no host_syncs slot\n");
        n_fail++;
        return;
    }
    hpt_host_syncs a, b;
    float one = 1.0f, *d = dput(&one, sizeof one);
    gpu->host_syncs(&a);
    gpu->download(&one, d, sizeof one);
    gpu->upload(d, &one, sizeof one);
    gpu->host_syncs(&b);
    syncs_check("one download and one upload (the counters count)", syncs_diff(a, b),
                (hpt_host_syncs){1, 1, 0, 0});
    result("host_syncs: the download and the upload were counted", b.d2h - a.d2h == 1 &&
           b.h2d - a.h2d == 1, "(%g)", 0.0);
    gpu->free(d);
    enum { B = 2, T = 12, N = B * T };
    hpt_status st = hpt_backend_set_precision(gpu, HPT_PRECISION_BF16);
    hpt_config cfg = {.hidden_size = 64, .intermediate_size = 96, .num_hidden_layers = 2,
                      .num_attention_heads = 4, .num_key_value_heads = 2, .vocab_size = 67,
                      .max_position_embeddings = 16, .rms_norm_eps = 1e-5f,
                      .rope_theta = 10000.0f, .tie_word_embeddings = 0};
    hpt_model_opts mo = {0};
    hpt_model mg;
    if (st || hpt_model_init_opts(&mg, &cfg, gpu, &mo, B, T, 7)) {
        printf("FAIL host_syncs: model init: %s\n", hpt_error_msg());
        n_fail++;
        hpt_backend_set_precision(gpu, HPT_PRECISION_FP32);
        return;
    }
    size_t np = mg.nparams;
    float *d_st = (float *)gpu->alloc(FB(2 * np));
    int32_t in[N], tg[N];
    for (int n = 0; n < N; n++)
        in[n] = (n * 5) % cfg.vocab_size, tg[n] = (in[n] + 1) % cfg.vocab_size;
    for (int step = 1; step <= 2; step++) {
        hpt_host_syncs s0, s1, s2, s3;
        gpu->host_syncs(&s0);
        hpt_model_zero_grad(&mg);
        double loss = hpt_model_forward(&mg, in, tg, 1.0f / N, 1);
        hpt_model_backward(&mg);
        gpu->host_syncs(&s1);
        double ss = hpt_model_grad_sumsq(&mg, mg.grads, 0, np);
        gpu->host_syncs(&s2);
        gpu->adamw(mg.params, mg.grads, d_st, d_st + np, np, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f,
                   step);
        gpu->host_syncs(&s3);
        char what[160];
        snprintf(what, sizeof what, "step %d's zero_grad, forward and backward (loss %.4f)", step,
                 loss / N);
        syncs_check(what, syncs_diff(s0, s1), (hpt_host_syncs){1, 2, 0, 0});
        snprintf(what, sizeof what, "step %d's gradient norm (sum of squares %.3g)", step, ss);
        syncs_check(what, syncs_diff(s1, s2), (hpt_host_syncs){1, 0, 0, 0});
        snprintf(what, sizeof what, "step %d's AdamW", step);
        syncs_check(what, syncs_diff(s2, s3), (hpt_host_syncs){0, 0, 0, 0});
    }
    gpu->free(d_st);
    hpt_model_free(&mg);
    hpt_backend_set_precision(gpu, HPT_PRECISION_FP32);
}

/* ======================================================================
 * lib/backend_cuda.cu: virtual memory (group vmm): ZeRO-3's parameter
 * block (alloc_virtual, commit, decommit, committed)
 * ====================================================================== */

/* Bytes backing alloc_virtual's allocations now (the committed slot). */
static size_t vmm_now(void)
{
    hpt_commit_stats c;
    gpu->committed(&c, 0);
    return c.now;
}

/* 1 when reading the host address p in a child process dies of SIGSEGV,
 * 0 when it reads, -1 when it cannot tell (no fork). Device memory is host
 * memory only on the CPU emulation (tests/gpu/cuda-emu), where an
 * unmapped granule is PROT_NONE. */
static int read_faults(const void *p)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL); /* not the MPI library's handler: die quietly */
        volatile float x = *(const volatile float *)p;
        (void)x;
        _exit(0);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV ? 1 : WIFEXITED(st) ? 0 : -1;
}

/* 1 when bytes [a, b) of device memory at d equal those of the host x. */
static int vmm_same(const float *d, const float *x, size_t a, size_t b)
{
    float *h = xmalloc(b - a);
    gpu->download(h, (const char *)d + a, b - a);
    int same = !memcmp(h, (const char *)x + a, b - a);
    free(h);
    return same;
}

/* In bf16 mode, a product whose weight lies in a virtual block with other
 * parts unmapped equals the same product with the weight in a plain
 * allocation, bit for bit, before and after the weight is rewritten: the
 * working copy converts the weight's own range at each use (a conversion
 * of the whole block would read unmapped granules). */
static void vmm_bf16_weight(float *w_virt, size_t w_off, const float *x_all)
{
    int N = 5, Ic = 24, O = 16;
    if (hpt_backend_set_precision(gpu, HPT_PRECISION_BF16)) {
        result("vmm: bf16 accepted", 0, "(%g)", 0.0);
        return;
    }
    float *in = hrand((size_t)N * Ic, 1.0), *w2 = hrand((size_t)O * Ic, 0.5);
    float *w_plain = dput((const char *)x_all + w_off, FB(O * Ic));
    float *w = (float *)((char *)w_virt + w_off);
    void *din = dput_bf16(in, (size_t)N * Ic);
    for (int round = 0; round < 2; round++) {
        void *o1 = dnan_bf16((size_t)N * O), *o2 = dnan_bf16((size_t)N * O);
        gpu->matmul_forward(o1, HPT_DTYPE_BF16, din, w, N, Ic, O);
        gpu->matmul_forward(o2, HPT_DTYPE_BF16, din, w_plain, N, Ic, O);
        float *g1 = dtake_bf16(o1, (size_t)N * O), *g2 = dtake_bf16(o2, (size_t)N * O);
        result(round ? "vmm: bf16 product, weight in the block rewritten, equals a plain one's"
                     : "vmm: bf16 product with its weight in a partly unmapped block equals a "
                       "plain allocation's",
               !memcmp(g1, g2, FB(N * O)), "(%g)", 0.0);
        free(g1), free(g2);
        gpu->upload(w, w2, FB(O * Ic)); /* the communication backend's writes look alike */
        gpu->upload(w_plain, w2, FB(O * Ic));
    }
    gpu->free(din);
    gpu->free(w_plain);
    free(in), free(w2);
    hpt_backend_set_precision(gpu, HPT_PRECISION_FP32);
}

/* A unit's parts outside the own shard (byte ranges of the block at pb)
 * committed (before its gather) or decommitted (dropped), as
 * lib/train_zero3.c does; 1 when every commit succeeded. */
static int vmm_unit(char *pb, size_t part[2][2], int commit)
{
    int ok = 1;
    for (int k = 0; k < 2; k++) {
        if (part[k][0] >= part[k][1])
            continue;
        if (commit)
            ok &= gpu->commit(pb + part[k][0], part[k][1] - part[k][0]) == HPT_OK;
        else
            gpu->decommit(pb + part[k][0], part[k][1] - part[k][0]);
    }
    return ok;
}

/* Device memory running out (the emulation's HPT_CUDA_EMU_VMM_LIMIT: no
 * GPU fails on demand): a commit that runs out at its second granule
 * fails naming it and gives back the granule it had mapped, and commits
 * again once there is room; an alloc_virtual that runs out midway
 * returns NULL and leaves nothing mapped. Block p holds the own shard's 3
 * granules only; range [r0, r1) of it spans 3 unmapped granules. */
static void vmm_out_of_memory(char *pb, const size_t r[2], const float *x, size_t base_now,
                              size_t G)
{
    char lim[64];
    size_t before = vmm_now();
    snprintf(lim, sizeof lim, "%zu", before + G);
    setenv("HPT_CUDA_EMU_VMM_LIMIT", lim, 1);
    if (!getenv("HPT_CUDA_EMU_VMM_LIMIT"))
        return;
    hpt_status st = gpu->commit(pb + r[0], r[1] - r[0]);
    int gone = vmm_now() == before;
    int emulated = st != HPT_OK; /* a GPU has the room: nothing to see there */
    if (emulated)
        result("vmm: a commit out of device memory fails, naming it, and unmaps what it mapped",
               strstr(hpt_error_msg(), "out of device memory") && gone, "%g granules",
               (double)(vmm_now() - base_now) / G);
    void *q = NULL;
    if (emulated) {
        q = gpu->alloc_virtual(5 * G);
        result("vmm: alloc_virtual out of device memory midway returns NULL, nothing mapped",
               !q && strstr(hpt_error_msg(), "out of device memory") && vmm_now() == before,
               "%g granules", (double)(vmm_now() - base_now) / G);
    }
    unsetenv("HPT_CUDA_EMU_VMM_LIMIT");
    if (q)
        gpu->free(q);
    if (st != HPT_OK)
        st = gpu->commit(pb + r[0], r[1] - r[0]);
    size_t mapped = vmm_now() - before;
    gpu->upload(pb + r[0], (const char *)x + r[0], r[1] - r[0]);
    int same = vmm_same((const float *)pb, x, r[0], r[1]);
    gpu->decommit(pb + r[0], r[1] - r[0]);
    if (emulated)
        result("vmm: with room again the same commit maps its 3 granules and holds data",
               st == HPT_OK && mapped == 3 * G && same && vmm_now() == before, "%g granules",
               (double)mapped / G);
}

/* ZeRO-3's use of the slots on a block of 11 granules: an own shard
 * [4.5, 6.5) granules, units [0, 2.3), [2.3, 4.2), [4.2, 7), [7, end) (in
 * granules; each unit's part outside the own shard committed and
 * decommitted as lib/train_zero3.c does). Checks: the mapped bytes go down
 * after drops and up after gathers by whole granules, the own shard's data
 * survive, a granule two units share stays until both are dropped, an
 * unmapped granule faults (emulation), bf16 working copies of weights in
 * the block, running out of device memory in a commit and in alloc_virtual
 * (emulation: vmm_out_of_memory), and the fallback (HPT_CUDA_VMM=0: held
 * whole). */
static void test_vmm(void)
{
    if (!gpu->alloc_virtual || !gpu->commit || !gpu->decommit || !gpu->committed) {
        result("vmm: the cuda backend has alloc_virtual, commit, decommit, committed", 0, "(%g)",
               0.0);
        return;
    }
    size_t base_now = vmm_now();
    float *probe = gpu->alloc_virtual(4);
    hpt_commit_stats c;
    gpu->committed(&c, 0);
    size_t G = c.granule;
    gpu->free(probe);
    result("vmm: a granule of whole pages", G >= 4096 && G % 4096 == 0, "%g bytes", (double)G);
    if (!G)
        return;
    size_t bytes = 10 * G + 148, n = bytes / sizeof(float);
    float *x = hrand(n, 1.0), *y = hrand(n, 1.0);
    float *p = gpu->alloc_virtual(bytes);
    char *pb = (char *)p;
    result("vmm: alloc_virtual backs every granule", p && vmm_now() - base_now == 11 * G,
           "%g granules", (double)(vmm_now() - base_now) / G);
    if (!p)
        return;
    gpu->upload(p, x, bytes);
    /* byte ranges, as floats' bytes */
    size_t own[2] = {9 * G / 2, 13 * G / 2};
    size_t unit[4][2] = {{0, 23 * G / 10 / 4 * 4}, {23 * G / 10 / 4 * 4, 42 * G / 10 / 4 * 4},
                         {42 * G / 10 / 4 * 4, 7 * G}, {7 * G, bytes}};
    /* as zero3_init: the own shard for good, then every unit's foreign parts */
    int ok = gpu->commit(pb + own[0], own[1] - own[0]) == HPT_OK;
    size_t part[4][2][2];
    for (int u = 0; u < 4; u++) {
        size_t lo = unit[u][0], hi = unit[u][1];
        part[u][0][0] = lo, part[u][0][1] = hi < own[0] ? hi : own[0];
        part[u][1][0] = lo > own[1] ? lo : own[1], part[u][1][1] = hi;
        ok &= vmm_unit(pb, part[u], 1);
    }
    result("vmm: commits of mapped ranges map nothing more", ok && vmm_now() - base_now == 11 * G,
           "%g granules", (double)(vmm_now() - base_now) / G);
    for (int u = 0; u < 4; u++)
        vmm_unit(pb, part[u], 0);
    gpu->committed(&c, 1); /* the peak restarts here (the trainer's first step) */
    result("vmm: every unit dropped: the own shard's 3 granules stay",
           vmm_now() - base_now == 3 * G, "%g granules", (double)(vmm_now() - base_now) / G);
    result("vmm: the own shard's data survive the drops", vmm_same(p, x, own[0], own[1]), "(%g)",
           0.0);
    int f = read_faults(pb + G / 2);
    if (f >= 0 && read_faults(pb + own[0]) == 0) /* host-visible: the emulation */
        result("vmm: reading a dropped granule faults (emulation)", f == 1, "(%g)", 0.0);
    result("vmm: is_device on an unmapped granule", gpu->is_device(pb + G / 2) == 1, "(%g)", 0.0);
    vmm_bf16_weight(p, own[0], x);
    gpu->upload(pb + own[0], (const char *)x + own[0], own[1] - own[0]); /* (rewritten there) */
    ok = 1;
    ok &= vmm_unit(pb, part[1], 1); /* [2.3, 4.2): granules 2, 3 (4 is the own shard's) */
    result("vmm: gathering unit 1 maps granules 2 and 3", ok && vmm_now() - base_now == 5 * G,
           "%g granules", (double)(vmm_now() - base_now) / G);
    gpu->upload(pb + unit[1][0], (const char *)y + unit[1][0], unit[1][1] - unit[1][0]);
    ok &= vmm_unit(pb, part[0], 1); /* [0, 2.3): granules 0, 1 (2 is unit 1's too) */
    gpu->upload(p, y, unit[0][1]);
    result("vmm: gathering unit 0 maps granules 0 and 1 (2 shared)",
           ok && vmm_now() - base_now == 7 * G, "%g granules", (double)(vmm_now() - base_now) / G);
    vmm_unit(pb, part[1], 0);
    result("vmm: unit 1 dropped: granule 3 goes, granule 2 (unit 0's too) stays",
           vmm_now() - base_now == 6 * G && vmm_same(p, y, 0, unit[0][1]), "%g granules",
           (double)(vmm_now() - base_now) / G);
    vmm_unit(pb, part[0], 0);
    gpu->committed(&c, 0);
    result("vmm: unit 0 dropped: back to the own shard; peak 7 granules",
           vmm_now() - base_now == 3 * G && c.peak - base_now == 7 * G, "peak %g granules",
           (double)(c.peak - base_now) / G);
    ok &= vmm_unit(pb, part[2], 1) & vmm_unit(pb, part[3], 1);
    gpu->upload(pb + own[1], (const char *)y + own[1], bytes - own[1]);
    result("vmm: units 2 and 3 gathered: granules 4-10; the own shard intact",
           ok && vmm_now() - base_now == 7 * G && vmm_same(p, x, own[0], own[1]) &&
               vmm_same(p, y, own[1], bytes),
           "%g granules", (double)(vmm_now() - base_now) / G);
    vmm_unit(pb, part[2], 0);
    vmm_unit(pb, part[3], 0);
    result("vmm: units 2 and 3 dropped", vmm_now() - base_now == 3 * G, "%g granules",
           (double)(vmm_now() - base_now) / G);
    vmm_out_of_memory(pb, part[0][0], x, base_now, G);
    gpu->free(p);
    result("vmm: free unmaps the rest", vmm_now() == base_now, "%g bytes",
           (double)(vmm_now() - base_now));
    /* the fallback: held whole, commit and decommit do nothing */
    setenv("HPT_CUDA_VMM", "0", 1);
    p = gpu->alloc_virtual(bytes);
    unsetenv("HPT_CUDA_VMM");
    gpu->committed(&c, 0);
    result("vmm: HPT_CUDA_VMM=0: held whole (granule 0, every byte counted)",
           p && c.granule == 0 && c.now - base_now == bytes, "%g bytes", (double)(c.now - base_now));
    if (p) {
        gpu->upload(p, x, bytes);
        ok = gpu->commit(p, G) == HPT_OK;
        gpu->decommit(p, bytes);
        result("vmm: fallback: decommit keeps the data", ok && vmm_same(p, x, 0, bytes) &&
               vmm_now() - base_now == bytes, "(%g)", 0.0);
        gpu->free(p);
    }
    result("vmm: fallback freed", vmm_now() == base_now, "%g bytes",
           (double)(vmm_now() - base_now));
    free(x), free(y);
}

/* ----------------------------------------------------------------- main */

/* No group arguments: every group; else only the named ones. */
static int want(int argc, char **argv, const char *group)
{
    if (argc < 2)
        return 1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], group))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (hpt_backend_get("cpu", &cpu)) {
        fprintf(stderr, "test_backend_cuda: %s\n", hpt_error_msg());
        MPI_Finalize();
        return 1;
    }
    if (hpt_backend_get("cuda", &gpu)) {
        int skip = strstr(hpt_error_msg(), "no CUDA device visible") != NULL;
        if (skip)
            printf("no CUDA device visible: %s\n", hpt_error_msg());
        else
            fprintf(stderr, "test_backend_cuda: %s\n", hpt_error_msg());
        MPI_Finalize();
        return skip ? 77 : 1;
    }
    if (want(argc, argv, "reserve"))
        test_reserve(); /* first: before any other test grows a scratch */
    if (want(argc, argv, "memory"))
        test_memory();
    if (want(argc, argv, "matmul"))
        test_matmul();
    if (want(argc, argv, "embedding")) {
        test_embedding(37, 48, 50, 10, 20);
        test_embedding(64, 130, 1001, 0, 1001);
        /* 600 positions (3 tiles of the chain kernel) over 30 tokens: chains of
         * ~20 positions, a shard [5, 25) of them; C over two column blocks */
        test_embedding(600, 300, 30, 5, 20);
        /* 4500 positions: the backward's 4096 blocks stride over them */
        test_embedding(4500, 8, 40, 3, 30);
    }
    if (want(argc, argv, "rmsnorm")) {
        test_rmsnorm(33, 96);
        test_rmsnorm(5, 1000);
        test_rmsnorm(700, 40); /* 6 row slices of the dw reduction */
        test_rmsnorm(7, 1003); /* C not a multiple of 8: element by element */
    }
    if (want(argc, argv, "rope")) {
        test_rope(2, 37, 3, 64);
        test_rope(1, 19, 2, 128);
        test_rope(1, 7, 2, 40); /* hd/2 = 20: not whole 8-pair chunks */
    }
    if (want(argc, argv, "attention")) {
        /* T = 37, 50, 19, 70: not multiples of the 16-row or 32-key tiles */
        test_attention(2, 37, 4, 4, 64);  /* GQA ratio 1 */
        test_attention(1, 50, 4, 2, 128); /* ratio 2     */
        test_attention(2, 19, 8, 1, 64);  /* ratio 8     */
        test_attention(1, 70, 16, 2, 128); /* ratio 8    */
        test_attention(1, 33, 2, 1, 80);  /* head_dim not a multiple of 32 */
        test_attention(1, 1, 2, 2, 64);   /* one token   */
        /* tf32 mode: attention through cuBLAS (fp32 operands, tf32 products) */
        hpt_status st = hpt_backend_set_precision(gpu, HPT_PRECISION_TF32);
        result("set_precision tf32 accepted (attention)", st == HPT_OK, "(%g)", 0.0);
        test_attention_blas(0, 2, 37, 4, 2, 64, 0);  /* one chunk */
        test_attention_blas(0, 1, 40, 8, 1, 128, 7); /* GQA 8, ragged chunks */
        test_attention_blas(0, 2, 21, 3, 3, 64, 5);  /* MHA */
        hpt_backend_set_precision(gpu, HPT_PRECISION_FP32);
        test_attention_cached(5, 13, 4, 2, 64);
        test_attention_cached(37, 0, 8, 1, 128);
        test_attention_cached(1, 40, 4, 4, 128);
    }
    if (want(argc, argv, "ring")) {
        /* T = 2 CP x 5 and x 9: chunks not multiples of the 32-key tile */
        test_ring(2, 20, 2, 0, 4, 2, 64);
        test_ring(1, 20, 2, 1, 4, 4, 64);   /* MHA */
        test_ring(1, 54, 3, 2, 8, 2, 128);  /* GQA 4, CP 3, the last rank */
        test_ring(2, 36, 3, 1, 2, 1, 80);   /* head_dim not a multiple of 32 */
        /* bf16 activations (--precision bf16 --cp N) */
        test_ring_bf16(2, 20, 2, 0, 4, 2, 64);
        test_ring_bf16(1, 54, 3, 2, 8, 2, 128); /* GQA 4, CP 3, the last rank */
        test_ring_bf16(2, 36, 3, 1, 2, 1, 80);  /* head_dim not a multiple of 32 */
    }
    if (want(argc, argv, "elementwise")) {
        test_elementwise(100003);
        test_sumsq_list();
    }
    if (want(argc, argv, "crossentropy")) {
        test_crossentropy(13, 1001); /* V not a multiple of 8 */
        test_crossentropy(3, 50257);
        test_vocab_parallel(13, 201, 67, 67, 1.0f / 13);  /* middle rank, all valid */
        test_vocab_parallel(13, 201, 68, 136, 1.0f / 13); /* last rank: 3 padding columns */
        test_vocab_parallel(13, 201, 68, 136, 0.0f);      /* evaluation: logits untouched */
    }
    if (want(argc, argv, "adamw"))
        test_adamw(10007);
    if (want(argc, argv, "bf16"))
        test_bf16();
    if (want(argc, argv, "mma")) {
        /* the tensor-core attention kernels (bf16 mode's default; its own
         * group, for compute-sanitizer's racecheck): T not a multiple of
         * the 64-row tiles, GQA 1/4/8, every head dim they take (128:
         * 32-row backward tiles) */
        hpt_status st = hpt_backend_set_precision(gpu, HPT_PRECISION_BF16);
        result("set_precision bf16 accepted (mma)", st == HPT_OK, "(%g)", 0.0);
        test_attention_mma(2, 37, 4, 4, 64);  /* MHA, one tile           */
        test_attention_mma(1, 130, 8, 2, 64); /* GQA 4, three tiles       */
        test_attention_mma(1, 70, 8, 1, 128); /* GQA 8, hd 128            */
        test_attention_mma(1, 21, 2, 1, 16);  /* hd 16                    */
        test_attention_mma(1, 66, 2, 2, 32);  /* hd 32, a 2-row last tile */
        test_attention_mma(1, 5, 3, 1, 96);   /* hd 96, T < 16            */
        test_attention_mma(1, 150, 3, 1, 96); /* hd 96, two full tiles     */
        test_attention_mma(1, 140, 2, 1, 128); /* hd 128, 4 + 1 backward tiles of 32 */
        /* the dK/dV kernel's split of a GQA group (hpt_cuda_mma_kv_split): the GQA
         * cases above have few blocks, so one query head per block; the
         * presets' case, the whole group in one block (a target of 1
         * block), and a group of 8 in 2 parts of 4 heads (a target of 4
         * blocks: 2 tiles x 2) */
        setenv("HPT_CUDA_MMA_BLOCKS", "1", 1);
        test_attention_mma(1, 130, 8, 2, 64); /* whole groups of 4 */
        test_attention_mma(1, 70, 8, 1, 128); /* a whole group of 8, hd 128 */
        unsetenv("HPT_CUDA_MMA_BLOCKS");
        test_attention_mma_split(1, 70, 8, 1, 64);
        test_attention_env();
        hpt_backend_set_precision(gpu, HPT_PRECISION_FP32);
    }
    if (want(argc, argv, "fused"))
        test_fused();
    if (want(argc, argv, "sync"))
        test_host_syncs();
    if (want(argc, argv, "vmm"))
        test_vmm();
    printf("# %d ok, %d failed (NMSE tolerance %.0e fp32, %.0e tf32, %.0e bf16, %.0e bf16 on "
           "rounded operands, %.0e bf16 storage vs rounded cpu)\n", n_ok, n_fail, TOL, TOL_TF32,
           TOL_BF16, TOL_BF16_EXACT, TOL_BF16_STORE);
    MPI_Finalize();
    return n_fail ? 1 : 0;
}
