/* attention_cpu.c — causal grouped-query attention on the CPU without the
 * (B,H,T,T) matrix: FlashAttention (Dao et al. 2022, "FlashAttention: Fast
 * and Memory-Efficient Exact Attention with IO-Awareness"), algorithm 1
 * (forward, online softmax over key tiles, saves only the per-row
 * log-sum-exp) and algorithm 2 (backward, recomputes each tile's
 * probabilities from it, with D = rowsum(dout * out) precomputed as in
 * FlashAttention-2, Dao 2023, algorithm 2). Tiles wholly above the causal
 * diagonal are skipped, so QK^T and PV cost about half of the full square.
 *
 * Tile products go through cblas_sgemm (OpenBLAS, single-threaded inside
 * the OpenMP region: see cpu_init in backend_cpu.c); the element-wise
 * softmax parts are plain loops.
 *
 * Determinism: every work item owns the rows it writes and runs its tiles
 * in a fixed order, so results do not depend on the thread count or the
 * schedule. Forward items are (b, h, query tile); backward items are
 * (b, kv head): the item owns dk/dv of its kv head and dq of the query
 * heads of its group (Ainslie et al. 2023: query head h reads kv head
 * h/(H/KV)), so no accumulation is shared between threads (the only
 * reduction clauses are `omp simd` ones inside a row, within one thread). */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention_cpu.h"
#include "error.h"

#define TILE HPT_ATTN_CPU_TILE

size_t hpt_attn_cpu_floats(int B, int T, int H) { return (size_t)B * H * T; }

static float *tile_alloc(size_t floats)
{
    float *p = malloc(sizeof(float) * (floats ? floats : 1));
    if (!p)
        HPT_FATAL("attention (cpu): out of memory for a %zu-float tile buffer", floats);
    return p;
}

static int min_int(int a, int b) { return a < b ? a : b; }

/* Geometry of one call: row strides, and the block of rows it works on.
 * Queries are rows [q_off, q_off + nq) of each sequence of Tq rows
 * (q, out: (B,Tq,H,hd); lse, D: (B,H,Tq)), keys rows [k_off, k_off + nk)
 * of sequences of Tk rows (k, v, dk, dv: (B,Tk,KV,hd)). Query row r (of
 * the block) may attend key row s iff s <= r + dpos, dpos = (global
 * position of query row 0) - (that of key row 0): the causal rule on
 * global positions. The whole-sequence attention is Tq = Tk = nq = nk =
 * T, offsets 0, dpos 0. */
typedef struct {
    int T, H, KV, hd, ldq, ldk;
    float scale;
    int Tq, Tk, q_off, k_off, nq, nk;
    long dpos;
} attn_geom;

static attn_geom geom_of(int T, int H, int KV, int hd)
{
    attn_geom g = {T, H, KV, hd, H * hd, KV * hd, 1.0f / sqrtf((float)hd), T, T, 0, 0, T, T, 0};
    return g;
}

static attn_geom geom_block(const hpt_attn_block *blk, int H, int KV, int hd)
{
    attn_geom g = geom_of(blk->nq, H, KV, hd);
    g.Tq = blk->Tq, g.Tk = blk->Tk, g.q_off = blk->q_off, g.k_off = blk->k_off;
    g.nq = blk->nq, g.nk = blk->nk, g.dpos = (long)blk->q_pos0 - blk->k_pos0;
    return g;
}

/* Valid key columns of query row r (block row) in the key tile starting
 * at block key row s0 of nc columns: min(nc, r + dpos - s0 + 1), at least 0. */
static int causal_lim(const attn_geom *g, int r, int s0, int nc)
{
    long lim = (long)r + g->dpos - s0 + 1;
    return lim <= 0 ? 0 : lim >= nc ? nc : (int)lim;
}

/* exp(x) for x <= 0 (a score minus its row's max or log-sum-exp; rounding
 * may make it slightly positive) in a form the compiler vectorises, where
 * libm's expf is a call per element: x = n ln2 + r with |r| <= ln2/2
 * (Cody-Waite, two-part ln2), e^r by the polynomial of Cephes' expf
 * (Moshier 1989; about 1 ulp on this range), 2^n put into the exponent
 * bits. x below -87.3 (e^x under FLT_MIN; -inf included) gives 0; a NaN
 * of either sign gives NaN (a NaN weight must show in the loss, not be
 * dropped as a zero probability). The range test works on the bits (for
 * x <= 0 a larger magnitude is a larger unsigned pattern): a float compare
 * would keep GCC from vectorising (it may trap). 2^n is taken from the
 * bits of the rounding sum, not by a float-to-int cast, which is undefined
 * for NaN (and for the out-of-range n a NaN or +inf argument would give).
 * Measured: bench/attention.sh. */
static inline float exp_nonpos(float x)
{
    const uint32_t lo = 0xC2AE999Au; /* -87.3f */
    union { float f; uint32_t u; } in = {.f = x}, res, t;
    uint32_t nan = (in.u & 0x7FFFFFFFu) > 0x7F800000u;
    uint32_t keep = -(uint32_t)((in.u <= lo) | nan); /* all ones: inside the range or NaN */
    in.u = (in.u & keep) | (lo & ~keep);
    float xc = in.f;
    t.f = xc * 1.44269504088896341f + 12582912.0f; /* nearest integer in the low bits: 1.5*2^23 */
    float n = t.f - 12582912.0f;
    float r = xc - n * 0.693359375f - n * -2.12194440e-4f;
    float y = 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * r * r + r + 1.0f;
    /* t's bits are 0x4B400000 + n; shifted by 23 the 0x4B400000 leaves
     * (unsigned, so NaN's garbage only wraps): the bits of 2^n */
    union { uint32_t u; float f; } two_n = {.u = (t.u + 127u) << 23};
    res.f = y * two_n.f;
    res.u &= keep;
    return res.f;
}

/* ------------------------------------------------------------ forward */

/* Online softmax of one row of scores s (nc columns, the first `lim`
 * valid) into running max *m and sum *l; s becomes exp(s - new max) with
 * zeros past lim. Returns the factor exp(old max - new max) by which the
 * row's output accumulator must be rescaled. */
static float online_softmax_row(float *s, int lim, int nc, float *m, float *l)
{
    if (lim <= 0) { /* no valid key in this tile (a block's masked row) */
        memset(s, 0, sizeof(float) * (size_t)nc);
        return 1.0f;
    }
    float mx = *m, sum = 0.0f;
#pragma omp simd reduction(max : mx)
    for (int c = 0; c < lim; c++)
        mx = s[c] > mx ? s[c] : mx;
    /* simd reductions run inside one thread: the max is exact in any
     * order, the sum's order is fixed by the compiled vector width */
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < lim; c++) {
        s[c] = exp_nonpos(s[c] - mx);
        sum += s[c];
    }
    for (int c = lim; c < nc; c++)
        s[c] = 0.0f;
    float alpha = expf(*m - mx); /* 0 on the first tile (*m = -inf) */
    *l = *l * alpha + sum;
    *m = mx;
    return alpha;
}

/* Query tile i of head h, batch b: out rows t0 .. t0+nr-1 (of the
 * block) and their lse. S (TILE,TILE), O (TILE,hd), m, l (TILE) are the
 * thread's buffers. merge = 0: out and lse are overwritten; a row that
 * sees no key gets out 0, lse -inf. merge = 1: this block's normalised
 * result (O/l, lse_b = m + log l) is merged into out, lse by the online
 * softmax (Milakov & Gimelshein 2018; Liu et al. 2023, Ring Attention):
 * L = logaddexp(lse, lse_b), out = e^(lse - L) out + e^(lse_b - L) O/l;
 * rows without a key here are left as they are. */
static void forward_tile(float *out, float *lse, const float *q, const float *k, const float *v,
                         const attn_geom *g, int b, int h, int i, float *S, float *O, float *m,
                         float *l, int merge)
{
    int hd = g->hd, kvh = h / (g->H / g->KV), t0 = i * TILE, nr = min_int(TILE, g->nq - t0);
    const float *qi = q + ((size_t)b * g->Tq + g->q_off + t0) * g->ldq + (size_t)h * hd;
    const float *kb = k + ((size_t)b * g->Tk + g->k_off) * g->ldk + (size_t)kvh * hd;
    const float *vb = v + ((size_t)b * g->Tk + g->k_off) * g->ldk + (size_t)kvh * hd;
    memset(O, 0, sizeof(float) * (size_t)nr * hd);
    for (int r = 0; r < nr; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    /* key tiles with a key visible to the tile's last row: at or left of
     * the diagonal */
    for (int j = 0, s0 = 0; s0 < g->nk && s0 <= t0 + nr - 1 + g->dpos; j++, s0 += TILE) {
        int nc = min_int(TILE, g->nk - s0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hd, g->scale, qi, g->ldq,
                    kb + (size_t)s0 * g->ldk, g->ldk, 0.0f, S, TILE);
        for (int r = 0; r < nr; r++) {
            float alpha = online_softmax_row(S + (size_t)r * TILE, causal_lim(g, t0 + r, s0, nc),
                                             nc, &m[r], &l[r]);
            float *o = O + (size_t)r * hd;
            for (int e = 0; e < hd; e++)
                o[e] *= alpha;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hd, nc, 1.0f, S, TILE,
                    vb + (size_t)s0 * g->ldk, g->ldk, 1.0f, O, hd);
    }
    float *lrow = lse + ((size_t)b * g->H + h) * g->Tq + g->q_off + t0;
    for (int r = 0; r < nr; r++) {
        float *o = out + ((size_t)b * g->Tq + g->q_off + t0 + r) * g->ldq + (size_t)h * hd;
        /* l = 0 only for a row without a key (else l >= 1); a NaN stays */
        float lb = l[r] != 0.0f ? m[r] + logf(l[r]) : -INFINITY, inv = 1.0f / l[r];
        if (!merge || lrow[r] == -INFINITY) {
            for (int e = 0; e < hd; e++)
                o[e] = l[r] != 0.0f ? O[(size_t)r * hd + e] * inv : 0.0f;
            lrow[r] = lb;
        } else if (lb != -INFINITY) {
            float L0 = lrow[r], mx = L0 > lb ? L0 : lb;
            float L = mx + log1pf(expf((L0 > lb ? lb : L0) - mx));
            float a = expf(L0 - L), c = expf(lb - L) * inv;
            for (int e = 0; e < hd; e++)
                o[e] = a * o[e] + c * O[(size_t)r * hd + e];
            lrow[r] = L;
        }
    }
}

/* Every (b, h, query tile) item of g, longest first. */
static void forward_all(float *out, float *lse, const float *q, const float *k, const float *v,
                        const attn_geom *g, int B, int merge)
{
    int nt = (g->nq + TILE - 1) / TILE, bh = B * g->H, H = g->H;
#pragma omp parallel
    {
        float *S = tile_alloc((size_t)TILE * TILE), *O = tile_alloc((size_t)TILE * g->hd);
        float *m = tile_alloc(TILE), *l = tile_alloc(TILE);
        /* longest items (last query tiles) first; each item is independent */
#pragma omp for schedule(dynamic, 1)
        for (long it = 0; it < (long)nt * bh; it++) {
            int i = nt - 1 - (int)(it / bh), b = (int)(it % bh) / H, h = (int)(it % bh) % H;
            forward_tile(out, lse, q, k, v, g, b, h, i, S, O, m, l, merge);
        }
        free(S), free(O), free(m), free(l);
    }
}

void hpt_attn_cpu_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                          int B, int T, int H, int KV, int hd)
{
    attn_geom g = geom_of(T, H, KV, hd);
    forward_all(out, lse, q, k, v, &g, B, 0);
}

void hpt_attn_cpu_block_forward(float *out, float *lse, const float *q, const float *k,
                                const float *v, const hpt_attn_block *blk, int B, int H, int KV,
                                int hd, int merge)
{
    attn_geom g = geom_block(blk, H, KV, hd);
    if (blk->nq > 0 && blk->nk > 0)
        forward_all(out, lse, q, k, v, &g, B, merge);
}

/* ------------------------------------------------------------ backward */

/* D (T) = rowsum(dout * out) for head h of batch b. */
static void rowdot(float *D, const float *dout, const float *out, const attn_geom *g, int b, int h)
{
    for (int t = 0; t < g->T; t++) {
        size_t o = ((size_t)b * g->T + t) * g->ldq + (size_t)h * g->hd;
        float s = 0.0f;
        for (int e = 0; e < g->hd; e++)
            s += dout[o + e] * out[o + e];
        D[t] = s;
    }
}

/* Pointers of one (batch, query head, kv head) for the backward. */
typedef struct {
    const float *q, *k, *v, *dout, *lse, *D;
    float *dq, *dk, *dv;
} attn_head;

/* p[c] = exp(p[c] - L) (p holds a row of scaled scores), d[c] = p[c] *
 * (d[c] - Di) (d holds dP), for c < lim. */
static void probs_dscores_row(float *restrict p, float *restrict d, int lim, float L, float Di)
{
#pragma omp simd
    for (int c = 0; c < lim; c++) {
        float e = exp_nonpos(p[c] - L);
        p[c] = e;
        d[c] = e * (d[c] - Di);
    }
}

/* One tile pair (query tile i, key tile j) of algorithm 2, both tiles of
 * the block (query rows t0.., key rows s0.. counted from q_off, k_off):
 * P = exp(scale q k^T - lse) (causal mask on global positions),
 * dV_j += P^T dO_i, dP = dO_i V_j^T, dS = P * (dP - D_i),
 * dK_j += scale dS^T Q_i, dQ_i += scale dS K_j. P, dP: (TILE,TILE).
 * a's pointers are at row 0 of the sequence (b) and the head. */
static void backward_pair(const attn_head *a, const attn_geom *g, int i, int j, float *P,
                          float *dP)
{
    int hd = g->hd, t0 = i * TILE, s0 = j * TILE;
    int nr = min_int(TILE, g->nq - t0), nc = min_int(TILE, g->nk - s0);
    size_t qo = (size_t)(g->q_off + t0) * g->ldq, ko = (size_t)(g->k_off + s0) * g->ldk;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hd, g->scale, a->q + qo, g->ldq,
                a->k + ko, g->ldk, 0.0f, P, TILE);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hd, 1.0f, a->dout + qo, g->ldq,
                a->v + ko, g->ldk, 0.0f, dP, TILE);
    for (int r = 0; r < nr; r++) {
        float *p = P + (size_t)r * TILE, *d = dP + (size_t)r * TILE;
        float L = a->lse[g->q_off + t0 + r], Di = a->D[g->q_off + t0 + r];
        int lim = causal_lim(g, t0 + r, s0, nc);
        probs_dscores_row(p, d, lim, L, Di);
        for (int c = lim; c < nc; c++)
            p[c] = d[c] = 0.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hd, nr, 1.0f, P, TILE, a->dout + qo,
                g->ldq, 1.0f, a->dv + ko, g->ldk);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hd, nr, g->scale, dP, TILE, a->q + qo,
                g->ldq, 1.0f, a->dk + ko, g->ldk);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hd, nc, g->scale, dP, TILE,
                a->k + ko, g->ldk, 1.0f, a->dq + qo, g->ldq);
}

/* Zero `rows` rows of `n` floats at stride ld. */
static void zero_rows(float *x, int rows, int n, int ld)
{
    for (int r = 0; r < rows; r++)
        memset(x + (size_t)r * ld, 0, sizeof(float) * n);
}

/* The tile pairs of item (b, kvh) in a fixed order: key tiles outer (so
 * dK_j/dV_j stay in cache), the group's query heads, then the query tiles
 * that see key tile j (at or below the diagonal). D: (B,H,Tq). */
static void backward_pairs(float *dq, float *dk, float *dv, const float *D, const float *dout,
                           const float *lse, const float *q, const float *k, const float *v,
                           const attn_geom *g, int b, int kvh, float *P, float *dP)
{
    int hd = g->hd, group = g->H / g->KV;
    int nqt = (g->nq + TILE - 1) / TILE, nkt = (g->nk + TILE - 1) / TILE;
    size_t kb = (size_t)b * g->Tk * g->ldk + (size_t)kvh * hd;
    for (int j = 0; j < nkt; j++)
        for (int h = kvh * group; h < (kvh + 1) * group; h++) {
            size_t qb = (size_t)b * g->Tq * g->ldq + (size_t)h * hd;
            size_t rb = ((size_t)b * g->H + h) * g->Tq;
            attn_head a = {q + qb, k + kb, v + kb, dout + qb, lse + rb, D + rb,
                           dq + qb, dk + kb, dv + kb};
            for (int i = 0; i < nqt; i++) {
                int t0 = i * TILE, nr = min_int(TILE, g->nq - t0);
                if ((long)t0 + nr - 1 + g->dpos >= (long)j * TILE) /* some key visible */
                    backward_pair(&a, g, i, j, P, dP);
            }
        }
}

/* Work item (b, kvh) of the whole-sequence backward: dk/dv of the kv
 * head, dq of its query heads (zeroed first), D of those heads. */
static void backward_item(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                          const float *out, const float *lse, const float *q, const float *k,
                          const float *v, const attn_geom *g, int b, int kvh, float *P, float *dP)
{
    int T = g->T, hd = g->hd, group = g->H / g->KV;
    size_t kb = (size_t)b * T * g->ldk + (size_t)kvh * hd;
    zero_rows(dk + kb, T, hd, g->ldk);
    zero_rows(dv + kb, T, hd, g->ldk);
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
        size_t qb = (size_t)b * T * g->ldq + (size_t)h * hd;
        zero_rows(dq + qb, T, hd, g->ldq);
        rowdot(scratch + ((size_t)b * g->H + h) * T, dout, out, g, b, h);
    }
    backward_pairs(dq, dk, dv, scratch, dout, lse, q, k, v, g, b, kvh, P, dP);
}

void hpt_attn_cpu_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                           const float *out, const float *lse, const float *q, const float *k,
                           const float *v, int B, int T, int H, int KV, int hd)
{
    attn_geom g = geom_of(T, H, KV, hd);
#pragma omp parallel
    {
        float *P = tile_alloc((size_t)TILE * TILE), *dP = tile_alloc((size_t)TILE * TILE);
#pragma omp for schedule(dynamic, 1)
        for (int bk = 0; bk < B * KV; bk++)
            backward_item(dq, dk, dv, scratch, dout, out, lse, q, k, v, &g, bk / KV, bk % KV, P,
                          dP);
        free(P), free(dP);
    }
}

void hpt_attn_cpu_block_backward(float *dq, float *dk, float *dv, const float *D,
                                 const float *dout, const float *lse, const float *q,
                                 const float *k, const float *v, const hpt_attn_block *blk, int B,
                                 int H, int KV, int hd)
{
    attn_geom g = geom_block(blk, H, KV, hd);
    if (blk->nq <= 0 || blk->nk <= 0)
        return;
#pragma omp parallel
    {
        float *P = tile_alloc((size_t)TILE * TILE), *dP = tile_alloc((size_t)TILE * TILE);
#pragma omp for schedule(dynamic, 1)
        for (int bk = 0; bk < B * KV; bk++)
            backward_pairs(dq, dk, dv, D, dout, lse, q, k, v, &g, bk / KV, bk % KV, P, dP);
        free(P), free(dP);
    }
}

void hpt_attn_cpu_rowdot(float *D, const float *dout, const float *out, int B, int T, int H,
                         int hd)
{
    attn_geom g = geom_of(T, H, H, hd);
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H; bh++)
        rowdot(D + (size_t)bh * T, dout, out, &g, bh / H, bh % H);
}
