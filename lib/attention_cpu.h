/* attention_cpu.h — the CPU backend's causal grouped-query attention
 * (lib/attention_cpu.c), exported for the backend table in
 * lib/backend_cpu.c and for bench/attention_bench.c. Shapes and the
 * contract of every function: the attention slots of backend.h. */
#ifndef HPT_ATTENTION_CPU_H
#define HPT_ATTENTION_CPU_H

#include <stddef.h>

#include "backend.h"

/* Query rows and key columns per tile. */
#ifndef HPT_ATTN_CPU_TILE
#define HPT_ATTN_CPU_TILE 64
#endif

/* Forward (FlashAttention, Dao et al. 2022, algorithm 1, causal): out
 * (B,T,H,hd) overwritten; lse (B,H,T) = the per-row log-sum-exp of the
 * scaled scores, the only saved state. */
void hpt_attn_cpu_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                          int B, int T, int H, int KV, int hd);

/* Backward (Dao et al. 2022, algorithm 2): each tile's probabilities are
 * recomputed from lse; scratch (B,H,T) receives D = rowsum(dout * out).
 * dq (B,T,H,hd), dk/dv (B,T,KV,hd) overwritten. */
void hpt_attn_cpu_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                           const float *out, const float *lse, const float *q, const float *k,
                           const float *v, int B, int T, int H, int KV, int hd);

/* hpt_attn_block: lib/backend.h. */

/* Forward of one block (algorithm 1 of FlashAttention with the causal rule
 * on global positions): for the block's query rows, out (B,Tq,H,hd) and
 * lse (B,H,Tq) receive the block's normalised output and row log-sum-exp
 * (merge = 0: overwritten; a row that sees no key of the block gets out
 * 0 and lse -inf), or (merge = 1) the online-softmax merge of it into
 * what they hold: L = logaddexp(lse, lse_b), out = e^(lse - L) out +
 * e^(lse_b - L) out_b (a row with lse -inf takes the block's result; a
 * row seeing no key keeps its own). Other rows untouched. Whole-sequence
 * forward == one block with merge 0 and Tq = Tk = nq = nk = T, offsets
 * and positions 0 (bitwise). */
void hpt_attn_cpu_block_forward(float *out, float *lse, const float *q, const float *k,
                                const float *v, const hpt_attn_block *blk, int B, int H, int KV,
                                int hd, int merge);

/* Backward of one block (FlashAttention-2, Dao 2023, algorithm 2) with the
 * FINAL lse of the query rows (after every block's merge) and D =
 * rowsum(dout * out) of the final out (hpt_attn_cpu_rowdot): dq
 * (B,Tq,H,hd) += the block's contribution for the query rows; dk, dv
 * (B,Tk,KV,hd) += its contribution for the key rows (accumulated, never
 * zeroed). Fixed order: key tiles, query heads of the group, query tiles. */
void hpt_attn_cpu_block_backward(float *dq, float *dk, float *dv, const float *D,
                                 const float *dout, const float *lse, const float *q,
                                 const float *k, const float *v, const hpt_attn_block *blk, int B,
                                 int H, int KV, int hd);

/* D (B,H,T) = rowsum over hd of dout * out, both (B,T,H,hd). */
void hpt_attn_cpu_rowdot(float *D, const float *dout, const float *out, int B, int T, int H,
                         int hd);

/* Floats of the saved state and of the backward's scratch: B*H*T each. */
size_t hpt_attn_cpu_floats(int B, int T, int H);

#endif
