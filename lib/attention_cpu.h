/* attention_cpu.h — the CPU backend's causal grouped-query attention
 * (lib/attention_cpu.c), exported for the backend table in
 * lib/backend_cpu.c and for bench/attention_bench.c. Shapes and the
 * contract of every function: the attention slots of backend.h. */
#ifndef HPT_ATTENTION_CPU_H
#define HPT_ATTENTION_CPU_H

#include <stddef.h>

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

/* Floats of the saved state and of the backward's scratch: B*H*T each. */
size_t hpt_attn_cpu_floats(int B, int T, int H);

#endif
