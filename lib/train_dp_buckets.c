/* train_dp_buckets.c — the data-parallel gradient buckets: the DP sum of
 * each gradient range started (nonblocking) as soon as the last
 * micro-batch's backward has finished it, overlapping the rest of the
 * backward, and the wait for all of them before the optimizer step: an
 * all-reduce without ZeRO, a reduce-scatter into this rank's shard with
 * ZeRO-2; see train_dp_buckets.h. */
#include "train_dp_buckets.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* Test (--fault-stall-at bucket): frozen with this step's first bucket in
 * flight. */
static void fault_stop(run_state *r)
{
    if (r->fault_stop_bucket) {
        r->fault_stop_bucket = 0;
        raise(SIGSTOP);
    }
}

/* With metrics: this replica's own gradient in [offset, offset + count),
 * before the sum over DP, into r->local_sumsq. On a backend with
 * sumsq_list_async the range sums stay on the device (no host sync inside
 * backward) until dp_buckets_sumsq_read adds them, bucket by bucket in
 * the order hpt_model_grad_sumsq would (the same bits); else now. */
static void bucket_sumsq(run_state *r, size_t offset, size_t count)
{
    enum { RANGES = 256 }; /* a bucket is a layer, the head or the embedding: ~10 tensors */
    const hpt_backend *be = r->model.be;
    const float *x[RANGES];
    size_t n[RANGES];
    int k = -1;
    if (be->sumsq_list_async && !r->sumsq_cap) { /* once: -1 when out of memory */
        r->sumsq_cap = r->model.ntensors + MAX_BUCKETS; /* a tensor split over two buckets */
        r->sumsq_dev = be->alloc(sizeof(double) * (size_t)r->sumsq_cap);
        r->sumsq_per = calloc(MAX_BUCKETS, sizeof(int)); /* both freed by the run's cleanup */
        if (!r->sumsq_dev || !r->sumsq_per)
            r->sumsq_cap = -1;
    }
    if (r->sumsq_cap > 0)
        k = hpt_model_grad_ranges(&r->model, r->model.grads + offset, offset, offset + count, x,
                                  n, RANGES);
    if (k < 0 || r->sumsq_nk + k > r->sumsq_cap || r->sumsq_nb == MAX_BUCKETS) {
        dp_buckets_sumsq_read(r); /* the earlier buckets first: the same order */
        r->local_sumsq += hpt_model_grad_sumsq(&r->model, r->model.grads + offset, offset,
                                               offset + count);
        return;
    }
    if (k)
        be->sumsq_list_async(r->sumsq_dev + r->sumsq_nk, x, n, k);
    r->sumsq_nk += k;
    r->sumsq_per[r->sumsq_nb++] = k;
}

void dp_buckets_sumsq_read(run_state *r)
{
    if (!r->sumsq_nb)
        return;
    double *h = malloc(sizeof(double) * (size_t)(r->sumsq_nk ? r->sumsq_nk : 1));
    HPT_CHECK(h);
    if (r->sumsq_nk)
        r->model.be->download(h, r->sumsq_dev, sizeof(double) * (size_t)r->sumsq_nk);
    for (int b = 0, j = 0; b < r->sumsq_nb; b++) {
        double t = 0.0; /* hpt_model_grad_sumsq's sum, from 0.0 in range order */
        for (int e = j + r->sumsq_per[b]; j < e; j++)
            t += h[j];
        r->local_sumsq += t;
    }
    free(h);
    r->sumsq_nk = r->sumsq_nb = 0;
}

void dp_bucket_allreduce(void *ctx, size_t offset, size_t count)
{
    run_state *r = ctx;
    HPT_CHECK(r->nbuckets < MAX_BUCKETS);
    if (r->metrics) /* this replica's own gradient, before the sum over DP */
        bucket_sumsq(r, offset, count);
    r->comm.be->iallreduce_sum_f32(&r->comm, HPT_GROUP_DP, r->model.grads + offset, count,
                                   &r->buckets[r->nbuckets++]);
    fault_stop(r);
}

/* Does [offset, offset + count) hold a gradient that is summed over
 * another group after backward (norm weights under sequence parallelism,
 * hpt_model_sp_sum_grads; a tied embedding split over the first and last
 * stage, tie_grads)? Its DP reduce-scatter must wait for that sum. */
static int needs_later_sum(const run_state *r, size_t offset, size_t count)
{
    const hpt_model *m = &r->model;
    int tied = r->comm.pp > 1 && r->cfg.tie_word_embeddings && (m->first || m->last);
    for (int i = 0; i < m->ntensors; i++) {
        const hpt_tensor *t = &m->tensors[i];
        size_t a = t->offset, b = a + (size_t)(t->rows * t->cols);
        int later = (m->sp && m->sp_norm_count && t->split == 0) ||
                    (tied && t->kind == HPT_TENSOR_EMBED);
        if (later && a < offset + count && offset < b)
            return 1;
    }
    return 0;
}

/* ZeRO-2 on host memory: gradient range [offset, offset + count), already
 * reduce-scattered, back to zero — the whole pages inside it given back to
 * the OS (MADV_DONTNEED: anonymous private pages then read as zero and take
 * no memory until backward writes them again), the partial pages at its
 * ends (shared with the neighbouring ranges) cleared by memset. */
static void release_range(run_state *r, size_t offset, size_t count)
{
    if (!r->grads_release)
        return;
    char *p = (char *)(r->model.grads + offset), *end = p + count * sizeof(float), *a, *b;
    if (!pages_release(p, end, &a, &b)) {
        memset(p, 0, (size_t)(end - p));
        return;
    }
    memset(p, 0, (size_t)(a - p));
    memset(b, 0, (size_t)(end - b));
}

/* Wait for bucket i and release its gradients; with gradient
 * accumulation its own part, received in rs_tmp, is copied (the first
 * micro-batch) or added (the others) into grad_shard, and on device
 * memory its range is cleared for the next micro-batch's backward. */
static void finish_bucket(run_state *r, int i)
{
    r->comm.be->wait(&r->comm, &r->buckets[i]);
    if (!r->bucket_range)
        return;
    size_t at = r->bucket_own[i][0], n = r->bucket_own[i][1];
    int micro = (int)r->bucket_own[i][2]; /* the bucket's, not the one running now */
    const hpt_backend *be = r->model.be;
    if (n && micro == 0)
        be->copy(r->grad_shard + at, r->rs_tmp + at, sizeof(float) * n);
    else if (n)
        be->add(r->grad_shard + at, r->grad_shard + at, r->rs_tmp + at, n);
    if (r->grads_release)
        release_range(r, r->bucket_range[i][0], r->bucket_range[i][1]);
    else if (micro + 1 < r->acc_count) /* the next backward accumulates from zero */
        be->memset0(r->model.grads + r->bucket_range[i][0], sizeof(float) * r->bucket_range[i][1]);
}

/* Start the reduce-scatter of gradient range [offset, offset + count)
 * over DP: rank i receives the part inside its shard (possibly nothing),
 * this rank's part lands at its place in r->grad_shard — or, with
 * gradient accumulation (rs_tmp) unless `direct`, at that place in rs_tmp,
 * summed into grad_shard by finish_bucket. */
static void start_reduce_scatter(run_state *r, size_t offset, size_t count, int direct)
{
    int D = r->comm.group_size[HPT_GROUP_DPS], me = r->comm.group_rank[HPT_GROUP_DPS];
    HPT_CHECK(r->nbuckets < r->bucket_cap);
    int *counts = r->bucket_counts + (size_t)r->nbuckets * D;
    shard_parts(r, offset, offset + count, counts, NULL);
    size_t at = offset > r->opt.lo ? offset - r->opt.lo : 0; /* own part's place in the shard */
    int tmp = r->rs_tmp && !direct;
    float *recv = (tmp ? r->rs_tmp : r->grad_shard) + (counts[me] ? at : 0);
    r->bucket_range[r->nbuckets][0] = offset;
    r->bucket_range[r->nbuckets][1] = count;
    r->bucket_own[r->nbuckets][0] = at;
    r->bucket_own[r->nbuckets][1] = tmp ? (size_t)counts[me] : 0;
    r->bucket_own[r->nbuckets][2] = (size_t)r->acc_micro;
    r->comm.be->ireduce_scatter_sum_f32(&r->comm, HPT_GROUP_DPS, r->model.grads + offset, recv,
                                        counts, &r->buckets[r->nbuckets++]);
    fault_stop(r);
}

void dp_bucket_reduce_scatter(void *ctx, size_t offset, size_t count)
{
    run_state *r = ctx;
    int later = needs_later_sum(r, offset, count), last = r->acc_micro + 1 == r->acc_count;
    if (later && !last) /* accumulates in place until the last micro-batch */
        return;
    if (r->metrics) /* this replica's own gradient, before the sum over DP */
        bucket_sumsq(r, offset, count);
    if (later) {
        HPT_CHECK(r->ndeferred < r->bucket_cap);
        r->deferred[r->ndeferred][0] = offset;
        r->deferred[r->ndeferred++][1] = count;
        return;
    }
    start_reduce_scatter(r, offset, count, 0);
    /* releasing: at most two buckets in flight, so at most their gradients
     * (and the ones backward is writing) are resident */
    if (r->grads_release && r->nbuckets - r->nwaited > 2)
        finish_bucket(r, r->nwaited++);
}

void dp_buckets_deferred(run_state *r)
{
    int first = r->nbuckets;
    for (int i = 0; i < r->ndeferred; i++) /* only now: straight into the shard */
        start_reduce_scatter(r, r->deferred[i][0], r->deferred[i][1], 1);
    for (int i = first; i < r->nbuckets; i++)
        finish_bucket(r, i);
    r->nwaited = r->nbuckets;
    r->ndeferred = 0;
}

hpt_status dp_buckets_zero2_init(run_state *r, int micro_batches)
{
    size_t S = (size_t)r->shard_counts[0]; /* the largest shard */
    r->acc_count = micro_batches;
    if (micro_batches > 1 && !(r->rs_tmp = r->model.be->alloc(sizeof(float) * (S ? S : 1))))
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory for the ZeRO-2 receive buffer");
    r->bucket_cap = r->model.nl + 2; /* the head, each layer, the embedding */
    r->bucket_counts = calloc((size_t)r->bucket_cap * (size_t)r->comm.group_size[HPT_GROUP_DPS],
                              sizeof(int));
    r->deferred = calloc((size_t)r->bucket_cap, sizeof *r->deferred);
    r->bucket_range = calloc((size_t)r->bucket_cap, sizeof *r->bucket_range);
    r->bucket_own = calloc((size_t)r->bucket_cap, sizeof *r->bucket_own);
    r->grads_release = r->model.be->is_device == NULL; /* host memory: pages can go back */
    if (!r->bucket_counts || !r->deferred || !r->bucket_range || !r->bucket_own)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory for the ZeRO-2 buckets");
    release_range(r, 0, r->model.nparams); /* allocated zeroed: resident until given back */
    r->grads_zero = r->grads_release;
    return HPT_OK;
}

void dp_buckets_wait(run_state *r)
{
    dp_buckets_sumsq_read(r);
    for (int i = r->nwaited; i < r->nbuckets; i++)
        finish_bucket(r, i);
    r->nwaited = r->nbuckets;
}

void dp_buckets_micro_end(run_state *r)
{
    dp_buckets_wait(r);
    r->nbuckets = r->nwaited = 0;
}
