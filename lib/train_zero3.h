/* train_zero3.h — ZeRO-3 (Rajbhandari et al. 2020, "ZeRO", section 5.1,
 * P_os+g+p; FSDP's full sharding): the parameters sharded over the DP
 * ranks as the AdamW state and the reduced gradients are (r->shard_counts,
 * contiguous blocks of the parameter block in DP rank order). Each rank
 * keeps its own block; a "unit" of the parameter block — the embedding
 * (first stage), each layer, the final norm with the head (last stage) —
 * is all-gathered over HPT_GROUP_DP when the model needs it (the model's
 * param_need hook, before the unit's forward and again before its
 * backward) and dropped after use (param_done): on host memory its pages
 * outside the own block go back to the OS (MADV_DONTNEED), so a rank holds
 * its shard plus the units in use or prefetched. The next units in the
 * pass's order are gathered while the current one computes (prefetch depth
 * --zero3-prefetch, default 1; nonblocking all-gathers, in the same order
 * on every DP rank). Gradients go as ZeRO-2's (lib/train_dp_buckets.h).
 *
 * The gathered values are copies of the owners' blocks, so a ZeRO-3 step
 * computes bitwise what a ZeRO-2 step computes. On a device backend the
 * block stays allocated (no page release: that needs CUDA virtual memory
 * management), so ZeRO-3 changes the communication there, not the memory.
 * Not installed. */
#ifndef HPT_TRAIN_ZERO3_H
#define HPT_TRAIN_ZERO3_H

#include "train_state.h"

/* Set up ZeRO-3 for r's model (after setup_zero: needs r->shard_counts,
 * r->model, r->comm; [lo, hi) this rank's block, setup_zero's): the units,
 * their per-rank counts and displacements, the model's
 * param_need/param_done hooks (ctx r), prefetch depth `prefetch` (>= 0).
 * The parameter block stays whole until zero3_drop_all. Errors:
 * HPT_ERR_INTERNAL when out of memory. Freed by zero3_free. */
hpt_status zero3_init(run_state *r, int prefetch, size_t lo, size_t hi);

/* Free the ZeRO-3 state (waits for gathers in flight); accepts NULL. */
void zero3_free(run_state *r);

/* Every unit dropped: gathers in flight waited for, the pages outside the
 * own block given back (host memory). After the optimizer step (the other
 * ranks' blocks are stale), and once before the first step (after a
 * checkpoint or --init-from filled the whole block). Local. No-op without
 * ZeRO-3. */
void zero3_drop_all(run_state *r);

/* The whole parameter block gathered (one blocking all-gather over DP),
 * for the readers of the whole block: checkpoint saves, --export, the
 * replica checks. Collective over DP; no-op without ZeRO-3. Follow with
 * zero3_drop_all once done. */
void zero3_gather_all(run_state *r);

/* The unit holding element x of the parameter block gathered (blocking,
 * no prefetch; it stays until zero3_drop_all): readers of single tensors
 * outside forward and backward, such as the replica checks. Collective
 * over DP (every DP rank holds the same units in the same order); no-op
 * without ZeRO-3. */
void zero3_hold(run_state *r, size_t x);

/* Bytes of parameters this rank holds at most in the step just taken
 * (own block + units resident at once, counted in whole units), and the
 * gathers' count and seconds waited since the start (zero: no ZeRO-3). */
void zero3_stats(const run_state *r, size_t *peak_bytes, int64_t *gathers, double *wait_s);

#endif
