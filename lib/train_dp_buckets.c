/* train_dp_buckets.c — the data-parallel gradient buckets: the DP sum
 * all-reduce of each gradient range started (nonblocking) as soon as the
 * last micro-batch's backward has finished it, overlapping the rest of the
 * backward, and the wait for all of them before the optimizer step; see
 * train_dp_buckets.h. */
#include "train_dp_buckets.h"

#include <signal.h>

void dp_bucket_allreduce(void *ctx, size_t offset, size_t count)
{
    run_state *r = ctx;
    HPT_CHECK(r->nbuckets < MAX_BUCKETS);
    if (r->metrics) /* this replica's own gradient, before the sum over DP */
        r->local_sumsq += hpt_model_grad_sumsq(&r->model, r->model.grads + offset, offset,
                                               offset + count);
    r->comm.be->iallreduce_sum_f32(&r->comm, HPT_GROUP_DP, r->model.grads + offset, count,
                                   &r->buckets[r->nbuckets++]);
    if (r->fault_stop_bucket) { /* test: frozen with a bucket in flight (--fault-stall-at bucket) */
        r->fault_stop_bucket = 0;
        raise(SIGSTOP);
    }
}

void dp_buckets_wait(run_state *r)
{
    for (int i = 0; i < r->nbuckets; i++)
        r->comm.be->wait(&r->comm, &r->buckets[i]);
}
