/* train_dp_buckets.h — the data-parallel gradient buckets
 * (lib/train_dp_buckets.c), started by the model's grad_ready hook during
 * the last micro-batch's backward (lib/train_pipeline.c), waited for
 * before the gradient norm. Without ZeRO-1 only (ZeRO-1 reduce-scatters
 * the whole block in train.c). */
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

/* Wait for every bucket started this step (in start order): the
 * gradients are then summed over DP. */
void dp_buckets_wait(run_state *r);

#endif
