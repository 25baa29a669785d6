/* train_zero3.h — ZeRO-3 (Rajbhandari et al. 2020, "ZeRO", section 5.1,
 * P_os+g+p; FSDP's full sharding): the parameters sharded over the DP
 * ranks as the AdamW state and the reduced gradients are (r->shard_counts,
 * contiguous blocks of the parameter block in DP rank order). Each rank
 * keeps its own block; a "unit" of the parameter block — the embedding
 * (first stage), each layer, the final norm with the head (last stage) —
 * is all-gathered over HPT_GROUP_DP when the model needs it (the model's
 * param_need hook, before the unit's forward and again before its
 * backward) and dropped after use (param_done): its memory outside the
 * own block goes back through the backend's decommit (backend.h) — on
 * host memory the whole pages (MADV_DONTNEED), on a CUDA device the
 * granules (2 MiB) no other unit in use and not the own block hold
 * (unmapped: CUDA virtual memory management, the block allocated with
 * alloc_virtual) — and comes back through commit before the unit's next
 * gather, so a rank holds its shard plus the units in use or prefetched
 * (on a device rounded out to whole granules). The next units in the
 * pass's order are gathered while the current one computes (prefetch depth
 * --zero3-prefetch, default 1; nonblocking all-gathers, in the same order
 * on every DP rank). Gradients go as ZeRO-2's (lib/train_dp_buckets.h).
 *
 * The gathered values are copies of the owners' blocks, so a ZeRO-3 step
 * computes bitwise what a ZeRO-2 step computes. On a device without
 * virtual memory management (or HPT_CUDA_VMM=0) the block stays allocated
 * whole, said once on stderr: ZeRO-3 then changes the communication there,
 * not the memory. The CUDA path is tested on the CPU emulation of CUDA
 * (tests/gpu/cuda-emu, group vmm) and by tests/gpu/gpu-zero3-memory.sh,
 * which needs a GPU. Not installed. */
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

/* The device memory backing the parameter block (the backend's committed
 * slot: bytes now, and the peak since the first zero3_drop_all — the
 * steps, with the whole-block gathers of checkpoint saves and exports, in
 * whole granules; granule 0: the block is held whole). Returns 0 (out
 * untouched) without ZeRO-3 or on a backend that does not count it (the
 * CPU), else 1. Local. */
int zero3_device_stats(const run_state *r, hpt_commit_stats *out);

#endif
