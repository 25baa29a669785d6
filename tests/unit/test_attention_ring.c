/* test_attention_ring — the ring attention's block ops (backend.h:
 * attention_block_forward/backward, attention_rowdot; lib/attention_cpu.c)
 * against the CPU backend's whole-sequence attention, the ring simulated in one process: a
 * sequence of T tokens is split into 2*CP zigzag chunks (CP rank i holds
 * chunks i and 2*CP-1-i; when 2*CP does not divide T the chunks differ by
 * one token, and some are empty for T < 2*CP: the op takes any offsets),
 * and the ring is simulated by looping over the steps and ranks in ring
 * order: at step s rank r attends the keys of owner (r - s) mod CP, merging
 * block results by the online softmax; backward passes each owner's dK/dV
 * accumulator from rank to rank as the ring does. T = 1, 2, 7, 64, 65,
 * 1000, 2049; CP 2 and 3; GQA groups 1 and 4; forward (out, lse) and
 * backward (dq, dk, dv) within 1e-5 of the reference, relative to the
 * reference's largest magnitude. Where 2*CP divides T the trainer's own
 * step functions (lib/attention_ring.h) run too; and the order in which
 * the ring posts its transfers (post_order, through a recording
 * communication table on one MPI process). Exit status 1 on any
 * failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_ring.h"
#include "backend.h"
#include "comm.h"
#include "../helpers/expect.h"

#define TOL 1e-5

static float *rnd(size_t n, unsigned *seed)
{
    float *x = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        x[i] = ((float)((*seed >> 8) & 0xFFFF) / 65536.0f - 0.5f) * 2.0f;
    }
    return x;
}

static float *zeros(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

typedef struct {
    int B, T, H, KV, hd, cp;
    int c0[2 * 16 + 1];  /* chunk c: global rows [c0[c], c0[c+1])        */
} geom;

/* Length of chunk c, and rank i's local length and chunk order. */
static int clen(const geom *g, int c) { return g->c0[c + 1] - g->c0[c]; }
static int chunk_of(const geom *g, int i, int j) { return j == 0 ? i : 2 * g->cp - 1 - i; }
static int local_len(const geom *g, int i) { return clen(g, i) + clen(g, 2 * g->cp - 1 - i); }

/* Global row of local row t of rank i. */
static int global_row(const geom *g, int i, int t)
{
    int a = clen(g, i);
    return t < a ? g->c0[i] + t : g->c0[2 * g->cp - 1 - i] + (t - a);
}

/* Gather rank i's rows of x (B,T,w) into (B,Tl,w), or scatter back. */
static void move_rows(const geom *g, int i, float *loc, float *glob, int w, int to_local)
{
    int Tl = local_len(g, i);
    for (int b = 0; b < g->B; b++)
        for (int t = 0; t < Tl; t++) {
            float *l = loc + ((size_t)b * Tl + t) * w;
            float *x = glob + ((size_t)b * g->T + global_row(g, i, t)) * w;
            memcpy(to_local ? l : x, to_local ? x : l, sizeof(float) * w);
        }
}

/* lse (B,H,Tl) of rank i back into (B,H,T). */
static void lse_rows(const geom *g, int i, const float *loc, float *glob)
{
    int Tl = local_len(g, i);
    for (int bh = 0; bh < g->B * g->H; bh++)
        for (int t = 0; t < Tl; t++)
            glob[(size_t)bh * g->T + global_row(g, i, t)] = loc[(size_t)bh * Tl + t];
}

static hpt_attn_block block_of(const geom *g, int r, int o, int qc, int kc)
{
    int cq = chunk_of(g, r, qc), ck = chunk_of(g, o, kc);
    hpt_attn_block b = {local_len(g, r), local_len(g, o), qc ? clen(g, r) : 0, clen(g, cq),
                        kc ? clen(g, o) : 0, clen(g, ck), g->c0[cq], g->c0[ck]};
    return b;
}

static int skip(const hpt_attn_block *b)
{
    return b->nq == 0 || b->nk == 0 || b->k_pos0 > b->q_pos0 + b->nq - 1;
}

/* Max |a - b| over n, relative to max(|ref|, 1e-30). */
/* Worst row of 16 values (a head's vector; lse: 16 rows of it): max over
 * rows of |a - ref| / max(|ref| over the row, 1e-3 x |ref| over all), so
 * a wrong row of small values shows too. */
static double rel_err(const float *a, const float *ref, size_t n)
{
    double all = 1e-30, worst = 0;
    for (size_t i = 0; i < n; i++)
        all = fabs(ref[i]) > all ? fabs(ref[i]) : all;
    for (size_t r = 0; r < n; r += 16) {
        double d = 0, m = 1e-3 * all;
        for (size_t i = r; i < n && i < r + 16; i++) {
            double e = fabs((double)a[i] - ref[i]);
            d = e > d || isnan(e) ? e : d;
            m = fabs(ref[i]) > m ? fabs(ref[i]) : m;
        }
        worst = d / m > worst || isnan(d) ? d / m : worst;
    }
    return worst;
}

typedef struct {
    float *q, *k, *v, *dout;                 /* global inputs            */
    float *out, *lse, *dq, *dk, *dv;         /* reference                 */
} refs;

/* Simulated ring (forward, backward) over the ranks; results scattered
 * into (B,T,..) and compared with the reference. use_steps: the trainer's
 * step functions (equal chunks only). */
static void ring(const hpt_backend *be, const geom *g, const refs *R, int use_steps,
                 const char *what)
{
    int cp = g->cp, B = g->B, T = g->T, H = g->H, KV = g->KV, hd = g->hd;
    size_t wq = (size_t)H * hd, wk = (size_t)KV * hd;
    float *q[16], *k[16], *v[16], *out[16], *lse[16], *dout[16], *dq[16], *D[16];
    float *acc[16], *part[16];
    int Tmax = 0;
    for (int i = 0; i < cp; i++)
        Tmax = local_len(g, i) > Tmax ? local_len(g, i) : Tmax;
    for (int i = 0; i < cp; i++) {
        size_t Tl = (size_t)local_len(g, i);
        q[i] = zeros(B * Tl * wq), k[i] = zeros(B * Tl * wk), v[i] = zeros(B * Tl * wk);
        dout[i] = zeros(B * Tl * wq), out[i] = zeros(B * Tl * wq), dq[i] = zeros(B * Tl * wq);
        lse[i] = zeros((size_t)B * H * Tl), D[i] = zeros((size_t)B * H * Tl);
        acc[i] = zeros(2 * B * Tl * wk), part[i] = zeros(2 * (size_t)B * Tmax * wk);
        move_rows(g, i, q[i], R->q, (int)wq, 1);
        move_rows(g, i, k[i], R->k, (int)wk, 1);
        move_rows(g, i, v[i], R->v, (int)wk, 1);
        move_rows(g, i, dout[i], R->dout, (int)wq, 1);
    }
    int started[16][2] = {{0}};
    for (int s = 0; s < cp; s++)
        for (int r = 0; r < cp; r++) {
            int o = ((r - s) % cp + cp) % cp;
            if (use_steps) {
                hpt_ring_step_forward(be, out[r], lse[r], q[r], k[o], v[o], B, T, cp, r, o, H, KV,
                                      hd, started[r]);
                continue;
            }
            for (int qc = 0; qc < 2; qc++)
                for (int kc = 0; kc < 2; kc++) {
                    hpt_attn_block b = block_of(g, r, o, qc, kc);
                    if (skip(&b))
                        continue;
                    be->attention_block_forward(out[r], lse[r], q[r], k[o], v[o], &b, B, H, KV, hd,
                                                started[r][qc]);
                    started[r][qc] = 1;
                }
        }
    size_t nq = (size_t)B * T * wq, nk = (size_t)B * T * wk;
    float *gout = zeros(nq), *glse = zeros((size_t)B * H * T), *gdq = zeros(nq);
    float *gdk = zeros(nk), *gdv = zeros(nk);
    for (int i = 0; i < cp; i++) {
        move_rows(g, i, out[i], gout, (int)wq, 0);
        lse_rows(g, i, lse[i], glse);
        be->attention_rowdot(D[i], dout[i], out[i], B, local_len(g, i), H, hd);
    }
    for (int s = 0; s < cp; s++)
        for (int r = 0; r < cp; r++) {
            int o = ((r - s) % cp + cp) % cp;
            size_t n = (size_t)B * local_len(g, o) * wk;
            memset(part[r], 0, sizeof(float) * 2 * n);
            if (use_steps)
                hpt_ring_step_backward(be, dq[r], part[r], part[r] + n, D[r], dout[r], lse[r],
                                       q[r], k[o], v[o], B, T, cp, r, o, H, KV, hd);
            else
                for (int qc = 0; qc < 2; qc++)
                    for (int kc = 0; kc < 2; kc++) {
                        hpt_attn_block b = block_of(g, r, o, qc, kc);
                        if (!skip(&b))
                            be->attention_block_backward(dq[r], part[r], part[r] + n, D[r],
                                                         dout[r], lse[r], q[r], k[o], v[o], &b, B,
                                                         H, KV, hd);
                    }
            if (s == 0) /* owner o's accumulator, as it travels the ring */
                memcpy(acc[o], part[r], sizeof(float) * 2 * n);
            else
                be->add(acc[o], acc[o], part[r], 2 * n);
        }
    for (int i = 0; i < cp; i++) {
        size_t n = (size_t)B * local_len(g, i) * wk;
        move_rows(g, i, dq[i], gdq, (int)wq, 0);
        move_rows(g, i, acc[i], gdk, (int)wk, 0);
        move_rows(g, i, acc[i] + n, gdv, (int)wk, 0);
    }
    double e[5] = {rel_err(gout, R->out, nq), rel_err(glse, R->lse, (size_t)B * H * T),
                   rel_err(gdq, R->dq, nq), rel_err(gdk, R->dk, nk), rel_err(gdv, R->dv, nk)};
    const char *names[5] = {"out", "lse", "dq", "dk", "dv"};
    for (int j = 0; j < 5; j++)
        EXPECT(e[j] <= TOL, "%s T %d CP %d H %d KV %d: %s rel err %.3g > %g", what, T, cp, H, KV,
               names[j], e[j], TOL);
    printf("ok %s T %d CP %d GQA %d: out %.1e lse %.1e dq %.1e dk %.1e dv %.1e\n", what, T, cp,
           H / KV, e[0], e[1], e[2], e[3], e[4]);
    for (int i = 0; i < cp; i++) {
        free(q[i]), free(k[i]), free(v[i]), free(dout[i]), free(out[i]), free(dq[i]);
        free(lse[i]), free(D[i]), free(acc[i]), free(part[i]);
    }
    free(gout), free(glse), free(gdq), free(gdk), free(gdv);
}

/* The order in which the ring posts its transfers (lib/attention_ring.c),
 * recorded by a communication table that moves nothing: 'R' or 'S' and
 * the tag's offset from the K tag (0 K, 1 V, 2 dK, 3 dV), 'W' a wait.
 * Over NCCL a send and a receive are kernels on two side streams; where
 * those share a hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1) a second
 * receive waiting in stream order for the first blocks the queue, so
 * every batch must post the first tensor's receive and send before the
 * second tensor's (else each rank's first send never launches: a
 * deadlock on a GPU that no CPU run shows). */
static char posted[512];
static size_t nposted;

static void rec(char what, int tag)
{
    if (nposted + 3 < sizeof posted) {
        posted[nposted++] = what;
        if (what != 'W')
            posted[nposted++] = (char)('0' + tag - 31001);
        posted[nposted] = 0;
    }
}

static void fake_isend(hpt_comm *c, hpt_group g, const float *buf, size_t n, int peer, int tag,
                       hpt_comm_req *r)
{
    (void)c, (void)g, (void)buf, (void)n, (void)peer;
    memset(r, 0, sizeof *r);
    rec('S', tag);
}

static void fake_irecv(hpt_comm *c, hpt_group g, float *buf, size_t n, int peer, int tag,
                       hpt_comm_req *r)
{
    (void)c, (void)g, (void)buf, (void)n, (void)peer;
    memset(r, 0, sizeof *r);
    rec('R', tag);
}

static void fake_wait(hpt_comm *c, hpt_comm_req *r)
{
    (void)c, (void)r;
    if (nposted && posted[nposted - 1] != 'W')
        rec('W', 0);
}

static void post_order(const hpt_backend *be)
{
    hpt_comm_backend fake;
    memset(&fake, 0, sizeof fake);
    fake.name = "order";
    fake.isend_f32 = fake_isend;
    fake.irecv_f32 = fake_irecv;
    fake.wait = fake_wait;
    hpt_comm c;
    memset(&c, 0, sizeof c);
    c.be = &fake;
    c.cp = 2;
    c.cp_rank = 0;
    int B = 1, T = 8, H = 2, KV = 1, hd = 4, Tl = T / 2;
    hpt_ring *r = NULL;
    if (hpt_ring_init(&r, be, &c, B, T, KV, hd) != HPT_OK) {
        EXPECT(0, "post order: hpt_ring_init");
        return;
    }
    size_t nq = (size_t)B * Tl * H * hd, nk = (size_t)B * Tl * KV * hd;
    float *q = zeros(nq), *k = zeros(nk), *v = zeros(nk), *out = zeros(nq), *dout = zeros(nq);
    float *lse = zeros((size_t)B * H * Tl), *D = zeros((size_t)B * H * Tl), *dq = zeros(nq);
    float *dk = zeros(nk), *dv = zeros(nk);
    hpt_ring_forward(r, out, lse, q, k, v, H);
    EXPECT(!strcmp(posted, "R0S0R1S1W"),
           "ring forward posts K's receive and send before V's (got %s)", posted);
    nposted = 0, posted[0] = 0;
    hpt_ring_backward(r, dq, dk, dv, D, dout, out, lse, q, k, v, H);
    EXPECT(!strcmp(posted, "R0S0R1S1S2R2S3R3WS2R2S3R3W"),
           "ring backward posts each tensor's send and receive before the next's (got %s)",
           posted);
    hpt_ring_free(r);
    free(q), free(k), free(v), free(out), free(dout), free(lse), free(D), free(dq), free(dk),
        free(dv);
}

static void one(const hpt_backend *be, int T, int cp, int H, int KV)
{
    geom g = {T >= 1000 ? 1 : 2, T, H, KV, 16, cp, {0}};
    for (int c = 0; c <= 2 * cp; c++) /* as even as possible: the first T % 2cp get one more */
        g.c0[c] = c * (T / (2 * cp)) + (c < T % (2 * cp) ? c : T % (2 * cp));
    unsigned seed = (unsigned)(T * 131 + cp * 7 + KV);
    size_t nq = (size_t)g.B * T * H * g.hd, nk = (size_t)g.B * T * KV * g.hd;
    refs R = {rnd(nq, &seed), rnd(nk, &seed), rnd(nk, &seed), rnd(nq, &seed),
              zeros(nq), zeros((size_t)g.B * H * T), zeros(nq), zeros(nk), zeros(nk)};
    float *scratch = zeros(be->attention_scratch_floats(g.B, T, H));
    be->attention_forward(R.out, R.lse, R.q, R.k, R.v, g.B, T, H, KV, g.hd);
    be->attention_backward(R.dq, R.dk, R.dv, scratch, R.dout, R.out, R.lse, R.q, R.k, R.v, g.B,
                           T, H, KV, g.hd);
    ring(be, &g, &R, 0, "blocks");
    if (T % (2 * cp) == 0)
        ring(be, &g, &R, 1, "ring steps");
    free(R.q), free(R.k), free(R.v), free(R.dout), free(R.out), free(R.lse);
    free(R.dq), free(R.dk), free(R.dv), free(scratch);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv); /* the ring's waits read MPI_Wtime (post_order) */
    const hpt_backend *be;
    if (hpt_backend_get("cpu", &be) != HPT_OK) {
        fprintf(stderr, "no cpu backend: %s\n", hpt_error_msg());
        MPI_Finalize();
        return 1;
    }
    static const int Ts[] = {1, 2, 7, 64, 65, 72, 1000, 2049, 1200};
    for (size_t i = 0; i < sizeof Ts / sizeof *Ts; i++)
        for (int cp = 2; cp <= 3; cp++)
            for (int kv = 4; kv >= 1; kv /= 4)
                one(be, Ts[i], cp, 4, kv);
    post_order(be);
    /* the split's bookkeeping: positions and the in-place take */
    int32_t x[2 * 12], want[2 * 6];
    for (int i = 0; i < 24; i++)
        x[i] = i;
    for (int b = 0, j = 0; b < 2; b++) /* CP 2, rank 1, T 12: chunks 1 and 2 of 3 tokens */
        for (int t = 0; t < 6; t++)
            want[j++] = b * 12 + hpt_cp_pos(t, 12, 2, 1);
    hpt_cp_take(x, 2, 12, 2, 1);
    EXPECT(!memcmp(x, want, sizeof want) && want[0] == 3 && want[3] == 6,
           "hpt_cp_take: rank 1 of CP 2 keeps chunks 1 and 2");
    EXPECT_ERR(hpt_cp_check(12, 4), HPT_ERR_USAGE, "multiple of 8 (the nearest: 8 or 16)");
    EXPECT_ERR(hpt_cp_check(3, 2), HPT_ERR_USAGE, "too short for --cp 2");
    EXPECT(hpt_cp_check(16, 4) == HPT_OK, "T 16 splits over CP 4");
    printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
    MPI_Finalize();
    return failures ? 1 : 0;
}
