/* attention_ring.h — context parallelism (issue 31): the zigzag split of a
 * sequence over the CP ranks and ring attention over them.
 *
 * Split (Brandon et al. 2023, "Striped Attention" / the zigzag of
 * Megatron-LM's context parallelism): a sequence of T tokens is cut into
 * 2*CP chunks of Tc = T/(2*CP); CP rank i holds chunks i and 2*CP-1-i,
 * stored as Tl = T/CP local rows (chunk i, then chunk 2*CP-1-i), so every
 * rank has the same causal work. Everything per token (embedding, norms,
 * MLP, head, loss) runs on the local rows; only attention needs the other
 * ranks' keys and values.
 *
 * Ring attention (Liu et al. 2023, "Ring Attention with Blockwise
 * Transformers"): the K/V blocks (un-expanded GQA heads, (B,Tl,KV,hd)
 * each) travel around the CP ring, rank r sending to r+1 and receiving from
 * r-1 with nonblocking send/receive (comm table: isend_f32/irecv_f32 on
 * HPT_GROUP_CP; the NCCL table: one two-rank communicator per ring edge),
 * in flight while the current block computes. K/V travel in the
 * activation dtype (fp32, or bf16 with --precision bf16 on the CUDA
 * backend: half the bytes), as opaque 4-byte words through the f32 slots
 * (Tl = 2 Tc is even, so a bf16 block is whole words); nothing is
 * converted. The dK/dV accumulators stay fp32 in every precision (they
 * are sums over the CP ranks' queries, added in ring order). At step s
 * rank r holds the keys of owner (r - s) mod CP; each (query chunk, key
 * chunk) pair is one be->attention_block_forward call, merged into the
 * output by the online softmax in a fixed order (step, query chunk, key
 * chunk); pairs entirely above the causal diagonal are skipped. Backward
 * (FlashAttention-2's algorithm 2 per block, with the final lse and D =
 * rowsum(dout * out)): dq accumulates locally; the block's dK/dV
 * contributions are added to an accumulator that travels around the ring
 * with the keys and reaches the owner after CP transfers. Every sum has a
 * fixed order, so CP runs are bitwise reproducible; they equal one rank to
 * rounding (the merges add in another order), about 1e-6 relative.
 */
#ifndef HPT_ATTENTION_RING_H
#define HPT_ATTENTION_RING_H

#include <stdint.h>

#include "backend.h"
#include "error.h"

struct hpt_comm;

/* T splits into 2*cp zigzag chunks: T a multiple of 2*cp (then T >= 2*cp).
 * Errors: HPT_ERR_USAGE naming --seq-len, --cp and the nearest valid
 * lengths. cp = 1: always HPT_OK. */
hpt_status hpt_cp_check(int T, int cp);

/* Global position (0 .. T-1) of local row t (0 .. T/cp - 1) of CP rank
 * `rank` under the zigzag split. */
int hpt_cp_pos(int t, int T, int cp, int rank);

/* Keep CP rank `rank`'s rows of B sequences of T tokens, in place: x (B,T)
 * becomes (B,T/cp) (chunk rank, then chunk 2*cp-1-rank of each
 * sequence). cp = 1: nothing. */
void hpt_cp_take(int32_t *x, int B, int T, int cp, int rank);

/* The ring's computation of one step, without communication (the unit
 * test drives it with all ranks' data in ring order). Local queries q
 * (B,Tl,H,hd) of CP rank `rank` against the keys k, v (B,Tl,KV,hd) of CP
 * rank `owner`. Forward: every visible (query chunk, key chunk) pair is
 * merged into out (B,Tl,H,hd) and lse (B,H,Tl); *started (2 flags, one per
 * query chunk, 0 before the first step) says whether out holds a result
 * yet (the first pair overwrites). Backward: dq += and dk, dv += (the
 * owner's rows) with the final lse and D (B,H,Tl). T: the global length. */
void hpt_ring_step_forward(const hpt_backend *be, void *out, float *lse, const void *q,
                           const void *k, const void *v, int B, int T, int cp, int rank,
                           int owner, int H, int KV, int hd, int *started);
void hpt_ring_step_backward(const hpt_backend *be, float *dq, float *dk, float *dv,
                            const float *D, const float *dout, const float *lse, const void *q,
                            const void *k, const void *v, int B, int T, int cp, int rank,
                            int owner, int H, int KV, int hd);

typedef struct hpt_ring hpt_ring;

/* The ring of this rank for micro-batches of B sequences of T tokens
 * (global) with KV local kv heads of hd: its transfer buffers (backend
 * memory, hpt_ring_bytes: 2 K/V blocks in flight in the activation dtype,
 * 2 dK/dV accumulators and the block's contribution in fp32) and the local
 * rows' positions. c: the grid (HPT_GROUP_CP). Errors: HPT_ERR_USAGE from
 * hpt_cp_check, or when the backend has no ring ops (naming it);
 * HPT_ERR_INTERNAL out of memory (the bytes). *out NULL on error. */
hpt_status hpt_ring_init(hpt_ring **out, const hpt_backend *be, struct hpt_comm *c, int B, int T,
                         int KV, int hd);

/* Bytes of backend memory hpt_ring_init allocates (for hpt-plan and the
 * model's activation figure), n = B*(T/cp)*KV*hd: 4n elements of the
 * activation dtype `act` (two K/V pairs) + 6n floats (dK/dV accumulators
 * twice and the block's part); 0 when cp = 1. */
size_t hpt_ring_bytes(int B, int T, int cp, int KV, int hd, hpt_dtype act);

/* Positions of the local rows (Tl entries, host): for rope_pos. */
const int *hpt_ring_positions(const hpt_ring *r);

/* Attention of the local queries over the whole sequence (collective over
 * HPT_GROUP_CP): out (B,Tl,H,hd) and lse (B,H,Tl) overwritten; q, k, v:
 * the local rows after RoPE at their global positions. */
void hpt_ring_forward(hpt_ring *r, void *out, float *lse, const void *q, const void *k,
                      const void *v, int H);

/* Its backward (collective over HPT_GROUP_CP): dq (B,Tl,H,hd), dk, dv
 * (B,Tl,KV,hd) overwritten with the gradients of the local rows (dk, dv
 * summed over every rank's queries); D: B*H*Tl floats of scratch; out,
 * lse: the forward's. */
void hpt_ring_backward(hpt_ring *r, float *dq, float *dk, float *dv, float *D, const float *dout,
                       const void *out, const float *lse, const void *q, const void *k,
                       const void *v, int H);

/* The ring's transfers since hpt_ring_init, seconds: `waited` blocked in
 * their waits, `inflight` from each batch of sends/receives' start to the
 * end of its waits; 1 - waited/inflight is the share of the transfers'
 * time hidden behind the block compute (on MPI without an asynchronous
 * progress thread a message may only move inside the wait, so an upper
 * bound of the transfer hidden, as metrics' dp_gather_hidden). NaN when r
 * is NULL or the communication backend is not MPI (NCCL's waits are the
 * compute stream's, which host clocks cannot time). */
void hpt_ring_timing(const hpt_ring *r, double *waited, double *inflight);

/* Free; accepts NULL. */
void hpt_ring_free(hpt_ring *r);

#endif
