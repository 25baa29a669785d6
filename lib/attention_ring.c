/* attention_ring.c — context parallelism: the zigzag split and ring
 * attention over the CP ranks; see attention_ring.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_ring.h"
#include "comm.h"

enum { TAG_K = 31001, TAG_V, TAG_DK, TAG_DV };

hpt_status hpt_cp_check(int T, int cp)
{
    if (cp <= 1)
        return HPT_OK;
    int m = 2 * cp;
    if (T % m == 0 && T >= m)
        return HPT_OK;
    int lo = T / m * m, hi = lo + m;
    if (lo <= 0)
        return hpt_error_set(HPT_ERR_USAGE, "--seq-len %d is too short for --cp %d: the zigzag "
                             "split needs 2 x CP = %d chunks of at least one token (the "
                             "nearest valid length: %d)", T, cp, m, hi);
    return hpt_error_set(HPT_ERR_USAGE, "--seq-len %d does not split into the 2 x --cp %d = %d "
                         "equal zigzag chunks of context parallelism: choose a multiple of %d "
                         "(the nearest: %d or %d)", T, cp, m, m, lo, hi);
}

int hpt_cp_pos(int t, int T, int cp, int rank)
{
    int Tc = T / (2 * cp);
    return t < Tc ? rank * Tc + t : (2 * cp - 1 - rank) * Tc + (t - Tc);
}

void hpt_cp_take(int32_t *x, int B, int T, int cp, int rank)
{
    if (cp <= 1)
        return;
    int Tc = T / (2 * cp), Tl = 2 * Tc;
    for (int b = 0; b < B; b++) { /* destinations never pass unread sources */
        memmove(x + (size_t)b * Tl, x + (size_t)b * T + (size_t)rank * Tc, sizeof *x * Tc);
        memmove(x + (size_t)b * Tl + Tc, x + (size_t)b * T + (size_t)(2 * cp - 1 - rank) * Tc,
                sizeof *x * Tc);
    }
}

/* The block of query chunk qc of `rank` against key chunk kc of `owner`. */
static hpt_attn_block pair_block(int T, int cp, int rank, int owner, int qc, int kc)
{
    int Tc = T / (2 * cp), Tl = 2 * Tc;
    hpt_attn_block b = {Tl, Tl, qc * Tc, Tc, kc * Tc, Tc,
                        hpt_cp_pos(qc * Tc, T, cp, rank), hpt_cp_pos(kc * Tc, T, cp, owner)};
    return b;
}

/* A pair with no visible key: its first key after its last query. */
static int masked(const hpt_attn_block *b) { return b->k_pos0 > b->q_pos0 + b->nq - 1; }

void hpt_ring_step_forward(const hpt_backend *be, void *out, float *lse, const void *q,
                           const void *k, const void *v, int B, int T, int cp, int rank,
                           int owner, int H, int KV, int hd, int *started)
{
    for (int qc = 0; qc < 2; qc++)
        for (int kc = 0; kc < 2; kc++) {
            hpt_attn_block b = pair_block(T, cp, rank, owner, qc, kc);
            if (masked(&b))
                continue;
            be->attention_block_forward(out, lse, q, k, v, &b, B, H, KV, hd, started[qc]);
            started[qc] = 1;
        }
}

void hpt_ring_step_backward(const hpt_backend *be, float *dq, float *dk, float *dv,
                            const float *D, const float *dout, const float *lse, const void *q,
                            const void *k, const void *v, int B, int T, int cp, int rank,
                            int owner, int H, int KV, int hd)
{
    for (int qc = 0; qc < 2; qc++)
        for (int kc = 0; kc < 2; kc++) {
            hpt_attn_block b = pair_block(T, cp, rank, owner, qc, kc);
            if (!masked(&b))
                be->attention_block_backward(dq, dk, dv, D, dout, lse, q, k, v, &b, B, H, KV, hd);
        }
}

struct hpt_ring {
    const hpt_backend *be;
    hpt_comm *c;
    int B, T, Tl, cp, rank, KV, hd;
    size_t n;       /* elements of one K (or V) block: B*Tl*KV*hd          */
    size_t esz;     /* bytes of one K/V element: the activation dtype's     */
    size_t words;   /* 4-byte words of one K (or V) block: n*esz/4          */
    char *block;    /* backend memory, hpt_ring_bytes: kv[2] (K then V, n
                     * act elements each), then acc[2] (dK then dV, 2n
                     * floats each) and part (dK then dV, 2n floats)       */
    char *kv[2];
    float *acc[2], *part;
    int *pos;       /* host, Tl                                            */
    /* transfer timing (hpt_ring_timing): seconds blocked in the waits, and
     * from each batch's first start to the end of its waits */
    double waited, inflight;
};

size_t hpt_ring_bytes(int B, int T, int cp, int KV, int hd, hpt_dtype act)
{
    if (cp <= 1)
        return 0;
    size_t n = (size_t)B * (size_t)(T / cp) * (size_t)KV * (size_t)hd;
    return 4 * n * hpt_dtype_bytes(act) + 6 * n * sizeof(float);
}

hpt_status hpt_ring_init(hpt_ring **out, const hpt_backend *be, hpt_comm *c, int B, int T,
                         int KV, int hd)
{
    *out = NULL;
    hpt_status st = hpt_cp_check(T, c->cp);
    if (st)
        return st;
    if (!be->attention_block_forward || !be->attention_block_backward || !be->attention_rowdot ||
        !be->rope_pos)
        return hpt_error_set(HPT_ERR_USAGE, "--cp %d: the %s backend has no ring attention",
                             c->cp, be->name);
    hpt_ring *r = calloc(1, sizeof *r);
    if (!r)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory for the CP ring");
    hpt_dtype act = hpt_backend_act_dtype(be);
    r->be = be, r->c = c, r->B = B, r->T = T, r->cp = c->cp, r->rank = c->cp_rank;
    r->Tl = T / c->cp, r->KV = KV, r->hd = hd;
    r->n = (size_t)B * r->Tl * KV * hd;
    r->esz = hpt_dtype_bytes(act);
    r->words = r->n * r->esz / 4; /* Tl = 2 Tc is even: whole words in bf16 too */
    size_t bytes = hpt_ring_bytes(B, T, c->cp, KV, hd, act);
    r->pos = malloc(sizeof(int) * (size_t)r->Tl);
    r->block = be->alloc(bytes);
    if (!r->pos || !r->block) {
        hpt_ring_free(r);
        return hpt_error_set(HPT_ERR_INTERNAL, "--cp %d: out of memory for the ring's %zu bytes "
                             "of K/V transfer buffers", c->cp, bytes);
    }
    size_t kvb = 2 * r->n * r->esz; /* one K/V pair */
    float *f = (float *)(r->block + 2 * kvb);
    for (int i = 0; i < 2; i++) {
        r->kv[i] = r->block + kvb * (size_t)i;
        r->acc[i] = f + 2 * r->n * (size_t)i;
    }
    r->part = f + 4 * r->n;
    for (int t = 0; t < r->Tl; t++)
        r->pos[t] = hpt_cp_pos(t, T, r->cp, r->rank);
    *out = r;
    return HPT_OK;
}

const int *hpt_ring_positions(const hpt_ring *r) { return r->pos; }

void hpt_ring_free(hpt_ring *r)
{
    if (!r)
        return;
    if (r->block)
        r->be->free(r->block);
    free(r->pos);
    free(r);
}

/* Post the sends of (k, v) to the next rank and the receives of the next
 * block from the previous one into dst (K then V): 4 requests. The blocks
 * are activations (fp32 or bf16): they travel as r->words opaque 4-byte
 * words through the f32 slots (a send/receive copies bits, no arithmetic),
 * as sequence parallelism's all-gathers of bf16 activations do.
 * K's receive and send are posted before V's: over NCCL they are kernels
 * on two side streams (lib/comm_nccl.c), and where those streams share a
 * hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1, or two streams hashed to
 * one queue) V's receive, waiting in stream order for K's, blocks the
 * queue: posted before K's send (receives first), it kept every rank's K
 * send from launching, so no K receive could finish: a deadlock. */
static void ring_pass(hpt_ring *r, const void *k, const void *v, char *dst, int tk, int tv,
                      hpt_comm_req *req)
{
    hpt_comm *c = r->c;
    int next = (r->rank + 1) % r->cp, prev = (r->rank + r->cp - 1) % r->cp;
    size_t w = r->words;
    c->be->irecv_f32(c, HPT_GROUP_CP, (float *)dst, w, prev, tk, &req[0]);
    c->be->isend_f32(c, HPT_GROUP_CP, (const float *)k, w, next, tk, &req[2]);
    c->be->irecv_f32(c, HPT_GROUP_CP, (float *)(dst + r->n * r->esz), w, prev, tv, &req[1]);
    c->be->isend_f32(c, HPT_GROUP_CP, (const float *)v, w, next, tv, &req[3]);
}

/* Wait for n requests posted together; the window from the earliest
 * start to the end of the waits is in flight, the time inside the waits
 * waited (hpt_ring_timing). */
static void wait_all(hpt_ring *r, hpt_comm_req *req, int n)
{
    double t0 = MPI_Wtime(), first = t0;
    for (int i = 0; i < n; i++) {
        first = req[i].t_start < first ? req[i].t_start : first;
        r->c->be->wait(r->c, &req[i]);
    }
    double t1 = MPI_Wtime();
    r->waited += t1 - t0;
    r->inflight += t1 - first;
}

void hpt_ring_timing(const hpt_ring *r, double *waited, double *inflight)
{
    int host_timed = r && !r->c->nccl; /* MPI (host staging included) */
    *waited = host_timed ? r->waited : NAN;
    *inflight = host_timed ? r->inflight : NAN;
}

void hpt_ring_forward(hpt_ring *r, void *out, float *lse, const void *q, const void *k,
                      const void *v, int H)
{
    int started[2] = {0, 0};
    const void *ck = k, *cv = v;
    for (int s = 0; s < r->cp; s++) {
        hpt_comm_req req[4];
        char *nxt = r->kv[(s + 1) % 2];
        if (s + 1 < r->cp) /* the next block travels while this one computes */
            ring_pass(r, ck, cv, nxt, TAG_K, TAG_V, req);
        int owner = (r->rank - s + r->cp) % r->cp;
        hpt_ring_step_forward(r->be, out, lse, q, ck, cv, r->B, r->T, r->cp, r->rank, owner, H,
                              r->KV, r->hd, started);
        if (s + 1 < r->cp) {
            wait_all(r, req, 4);
            ck = nxt, cv = nxt + r->n * r->esz;
        }
    }
}

void hpt_ring_backward(hpt_ring *r, float *dq, float *dk, float *dv, float *D, const float *dout,
                       const void *out, const float *lse, const void *q, const void *k,
                       const void *v, int H)
{
    const hpt_backend *be = r->be;
    hpt_comm *c = r->c;
    int next = (r->rank + 1) % r->cp, prev = (r->rank + r->cp - 1) % r->cp;
    size_t n = r->n;
    be->attention_rowdot(D, dout, out, r->B, r->Tl, H, r->hd);
    be->memset0(dq, sizeof(float) * (size_t)r->B * r->Tl * H * r->hd);
    const void *ck = k, *cv = v;
    hpt_comm_req kvq[4], accq[2], inq[2];
    for (int s = 0; s < r->cp; s++) {
        char *nxt = r->kv[(s + 1) % 2];
        if (s + 1 < r->cp)
            ring_pass(r, ck, cv, nxt, TAG_K, TAG_V, kvq);
        int owner = (r->rank - s + r->cp) % r->cp;
        be->memset0(r->part, sizeof(float) * 2 * n);
        hpt_ring_step_backward(be, dq, r->part, r->part + n, D, dout, lse, q, ck, cv, r->B, r->T,
                               r->cp, r->rank, owner, H, r->KV, r->hd);
        /* the owner's accumulator: its sum so far (from the previous rank)
         * plus this rank's part, in ring order */
        float *acc = r->part;
        if (s > 0) {
            wait_all(r, inq, 2);
            acc = r->acc[s % 2];
            be->add(acc, acc, r->part, 2 * n);
        }
        /* the next accumulator (the last one: this rank's own, final);
         * dK's send and receive before dV's, as ring_pass (a deadlock
         * over NCCL otherwise) */
        float *in_k = s + 1 < r->cp ? r->acc[(s + 1) % 2] : dk;
        float *in_v = s + 1 < r->cp ? r->acc[(s + 1) % 2] + n : dv;
        c->be->isend_f32(c, HPT_GROUP_CP, acc, n, next, TAG_DK, &accq[0]);
        c->be->irecv_f32(c, HPT_GROUP_CP, in_k, n, prev, TAG_DK, &inq[0]);
        c->be->isend_f32(c, HPT_GROUP_CP, acc + n, n, next, TAG_DV, &accq[1]);
        c->be->irecv_f32(c, HPT_GROUP_CP, in_v, n, prev, TAG_DV, &inq[1]);
        if (s + 1 < r->cp) {
            wait_all(r, kvq, 4);
            ck = nxt, cv = nxt + n * r->esz;
        }
        wait_all(r, accq, 2);
    }
    wait_all(r, inq, 2);
}
