/* train_dp_buckets.h — the data-parallel gradient buckets
 * (lib/train_dp_buckets.c), started by the model's grad_ready hook during
 * backward (lib/train_pipeline.c), waited for before the gradient norm:
 * all-reduces without ZeRO (the last micro-batch's backward, the
 * gradients accumulated in place), reduce-scatters into this rank's shard
 * with ZeRO-2 and 3 (Rajbhandari et al. 2020, "ZeRO", section 5.1,
 * P_os+g) during every micro-batch's backward, so that gradients
 * accumulate in the shard, never in the whole block (M micro-batches cost
 * M reduce-scatters a step). ZeRO-1 uses none (it reduce-scatters the
 * whole block in train.c after backward). */
#ifndef HPT_TRAIN_DP_BUCKETS_H
#define HPT_TRAIN_DP_BUCKETS_H

#include <stddef.h>

#include "train_state.h"

/* The model's grad_ready callback (ctx: the run_state): gradient elements
 * [offset, offset + count) of r->model.grads are final on this replica;
 * add their sum of squares to r->local_sumsq (with metrics: the replica's
 * own gradient, before the sum) and start their in-place sum all-reduce
 * over HPT_GROUP_DP into r->buckets[r->nbuckets++] (at most MAX_BUCKETS
 * per step: fatal beyond). Call r->nbuckets = 0 before the step. */
void dp_bucket_allreduce(void *ctx, size_t offset, size_t count);

/* The grad_ready callback for ZeRO-2 (ctx: the run_state): like
 * dp_bucket_allreduce, but the range is reduce-scattered over
 * HPT_GROUP_DP (the comm table's ireduce_scatter_sum_f32): DP rank i
 * receives the sum of the part inside its shard (r->shard_counts; none
 * when the range misses it) at its place in r->grad_shard. A range holding
 * a gradient that is summed over another group after backward (norm
 * weights under sequence parallelism, the tied embedding's two stages) is
 * only recorded, for dp_buckets_deferred. With r->grads_release (host
 * memory) at most two buckets stay in flight (the oldest is waited for
 * here), and every bucket, once waited for, returns its gradient range to
 * zero, its whole pages given back to the OS (MADV_DONTNEED): they are the
 * next micro-batch's or step's zeroed gradients (r->grads_zero).
 * Gradient accumulation (r->acc_count > 1; r->acc_micro the micro-batch
 * whose backward runs): each bucket's own part is received in r->rs_tmp
 * and copied (micro-batch 0) or added (the others) into r->grad_shard
 * when waited for — the sum over micro-batches of the sums over DP, so
 * within rounding of, not bitwise, the sum over DP of the accumulated
 * gradients of ZeRO 0/1; on device memory the range is then cleared. The
 * ranges summed over another group are left to accumulate in place and
 * recorded at the last micro-batch only. At most r->bucket_cap buckets
 * per micro-batch (fatal beyond). Needs dp_buckets_zero2_init. */
void dp_bucket_reduce_scatter(void *ctx, size_t offset, size_t count);

/* ZeRO-2, after that other sum: reduce-scatter the recorded ranges and
 * wait for them. Collective over DP (every replica records the same). */
void dp_buckets_deferred(run_state *r);

/* ZeRO-2/3: allocate r->bucket_counts, r->deferred, r->bucket_range and
 * r->bucket_own for the stage's layers + 2 buckets (needs r->model,
 * r->comm and r->shard_counts), and with micro_batches > 1 (the step's
 * gradient accumulation) the receive buffer r->rs_tmp (one shard); on
 * host memory turn r->grads_release on and give the (zeroed) gradient
 * block's pages back at once. Errors: HPT_ERR_INTERNAL when out of
 * memory. Freed by the run's cleanup. */
hpt_status dp_buckets_zero2_init(run_state *r, int micro_batches);

/* Wait for every bucket started this step (in start order): the
 * gradients are then summed over DP (ZeRO-2: into the shard, except the
 * deferred ranges). */
void dp_buckets_wait(run_state *r);

/* Add the bucket sums of squares that bucket_sumsq left on the device
 * (sumsq_list_async) to r->local_sumsq, bucket by bucket in start order;
 * one download. dp_buckets_wait calls it first. */
void dp_buckets_sumsq_read(run_state *r);

/* ZeRO-2/3 with gradient accumulation, after a micro-batch's backward
 * that is not the step's last: wait for its buckets (their parts summed
 * into the shard, their ranges zero again) and start the next micro-batch
 * at bucket 0. */
void dp_buckets_micro_end(run_state *r);

#endif
