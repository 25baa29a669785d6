/* train_pipeline.c — the pipeline schedule: per-stage forward and backward of
 * micro-batches with point-to-point activation/gradient transfer, 1F1B and
 * GPipe ordering, the bucketed data-parallel gradient reduction started
 * during the last backward, and validation (forward only). */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan.h"
#include "attention_ring.h"
#include "train_dp_buckets.h"
#include "train_pipeline.h"
#include "train_signals.h"
#include "trace.h"

/* Layers of this pipeline rank. P stages x V model chunks (V = 1 but for
 * the interleaved schedule) make P*V virtual stages; virtual stage
 * v = c*P + s (chunk c of stage s) gets layers v*L/(P*V) .. (v+1)*L/(P*V)
 * (balanced; the interleaved schedule needs P*V to divide L), or the v-th
 * count of --pp-split "a,b,..." (P*V counts summing to L). r->l0/l1 span
 * chunk 0 .. V-1, r->chunk_l0/l1 each chunk, r->layer_stage every layer's
 * stage. Errors: HPT_ERR_USAGE for more virtual stages than layers, a
 * split that does not match, L not divisible by P*V. */
hpt_status stage_layers(run_state *r, const hpt_train_opts *o)
{
    int P = r->comm.pp, L = r->cfg.num_hidden_layers, V = o->pp_schedule == HPT_PLAN_SCHEDULE_INTERLEAVED ? o->pp_virtual : 1;
    int PV = P * V, count = 0, total = 0, *first = calloc((size_t)PV + 1, sizeof(int));
    if (!first)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    hpt_status st = HPT_OK;
    if (V > 64)
        st = hpt_error_set(HPT_ERR_USAGE, "--pp-virtual %d: at most 64 model chunks", V);
    else if (PV > L)
        st = V > 1 ? hpt_error_set(HPT_ERR_USAGE, "--pp %d x --pp-virtual %d = %d virtual stages: "
                                   "more than the model's %d layers", P, V, PV, L)
                   : hpt_error_set(HPT_ERR_USAGE, "--pp %d: more pipeline stages than the model's "
                                   "%d layers", P, L);
    else if (V > 1 && !o->pp_split && L % PV)
        st = hpt_error_set(HPT_ERR_USAGE, "--pp-virtual %d: the model's %d layers do not split "
                           "into --pp %d x %d = %d equal model chunks (choose V with P x V "
                           "dividing %d, or give --pp-split with %d counts)", V, L, P, V, PV, L,
                           PV);
    for (int v = 0; !st && !o->pp_split && v <= PV; v++) /* balanced */
        first[v] = (int)((long)v * L / PV);
    for (const char *p = o->pp_split; !st && p && *p; count++) {
        char *end;
        long n = strtol(p, &end, 10);
        if (end == p || n <= 0 || (*end && *end != ',') || count >= PV || total + n > L) {
            st = hpt_error_set(HPT_ERR_USAGE, "--pp-split '%s': expected %d positive layer "
                               "counts (%s) summing to the model's %d layers", o->pp_split, PV,
                               V > 1 ? "--pp x --pp-virtual" : "--pp", L);
            break;
        }
        first[count] = total;
        total += (int)n;
        p = *end ? end + 1 : end;
    }
    if (!st && o->pp_split && (count != PV || total != L))
        st = hpt_error_set(HPT_ERR_USAGE, "--pp-split '%s': %d counts summing to %d, expected %d "
                           "counts (%s) summing to %d layers", o->pp_split, count, total, PV,
                           V > 1 ? "--pp x --pp-virtual" : "--pp", L);
    if (!st && o->pp_split)
        first[PV] = L;
    if (!st && !(r->layer_stage = calloc((size_t)L, sizeof(int))))
        st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    for (int v = 0; !st && v < PV; v++)
        for (int l = first[v]; l < first[v + 1]; l++)
            r->layer_stage[l] = v % P;
    if (!st) {
        r->nchunks = V;
        for (int c = 0; c < V; c++) {
            r->chunk_l0[c] = first[c * P + r->comm.pp_rank];
            r->chunk_l1[c] = first[c * P + r->comm.pp_rank + 1];
        }
        r->l0 = r->chunk_l0[0];
        r->l1 = r->chunk_l1[V - 1];
    }
    free(first);
    return st;
}

/* Megatron's interleaved 1F1B order (Narayanan et al. 2021, section 2.2;
 * Megatron-LM's forward_backward_pipelining_with_interleaving): task k of
 * the M*V forwards (or backwards) of a step runs micro-batch
 * (k / (P*V))*P + k % P on model chunk (k / P) % V (backwards: the
 * chunks in reverse). Stage s runs (P - s - 1)*2 + (V - 1)*P warm-up
 * forwards (all of them when M == P), then one forward and one
 * backward, then the remaining backwards. */
static int il_micro(int k, int P, int V) { return (k / (P * V)) * P + k % P; }
static int il_chunk(int k, int P, int V, int fwd)
{
    int c = (k / P) % V;
    return fwd ? c : V - 1 - c;
}
static int il_warmup(int P, int V, int s, int M)
{
    int total = M * V, w = M == P ? total : (P - s - 1) * 2 + (V - 1) * P;
    return w < total ? w : total;
}

/* Micro-batches in flight on this stage (activation slots): 1F1B keeps at
 * most PP - stage (Narayanan et al. 2021, section 2.2), GPipe all of them.
 * The interleaved schedule keeps a pool of slots bound to a chunk at each
 * forward and freed after its backward: as many as the most chunk
 * forwards in flight at once in its order (simulated: Megatron's warm-up
 * count + 1, at most M x V), the last stage's last chunk — which carries
 * the head's buffers — in head slots of its own (one: in that order each
 * such forward is followed by its backward), r->head_slots. */
int pipeline_slots(run_state *r, const hpt_train_opts *o)
{
    int M = o->grad_accum;
    if (r->nchunks > 1) {
        int P = r->comm.pp, V = r->nchunks, s = r->comm.pp_rank, total = M * V;
        int warm = il_warmup(P, V, s, M), live = 0, head = 0, most = 1, most_head = 0;
        int f = 0, b = 0;
#define IL_HEAD(c) (s == P - 1 && (c) == V - 1)
#define IL_F()                                                                   \
    do {                                                                         \
        int c_ = il_chunk(f++, P, V, 1);                                         \
        if (IL_HEAD(c_))                                                         \
            most_head = ++head > most_head ? head : most_head;                   \
        else                                                                     \
            most = ++live > most ? live : most;                                  \
    } while (0)
#define IL_B()                                                                   \
    do {                                                                         \
        int c_ = il_chunk(b++, P, V, 0);                                         \
        *(IL_HEAD(c_) ? &head : &live) -= 1;                                     \
    } while (0)
        for (int k = 0; k < warm; k++)
            IL_F();
        for (int k = 0; k < total - warm; k++) {
            IL_F();
            IL_B();
        }
#undef IL_F
#undef IL_B
#undef IL_HEAD
        r->head_slots = most_head;
        r->slots_per_chunk = 0;
        return most + most_head;
    }
    /* ZB-H1 (Qi et al. 2024, section 3.1): a micro-batch's activations
     * stay until its deferred W, which stage s runs s micro-batches after
     * its B: PP in flight on every stage (1F1B's bound, on stage 0), and
     * s + 1 W operand sets (s pending, plus the newest B's before the
     * oldest W runs); stage 0 defers nothing (its B feeds no one) */
    int P = r->comm.pp, s = r->comm.pp_rank;
    int gpipe = o->pp_schedule == HPT_PLAN_SCHEDULE_GPIPE;
    int zb = o->pp_schedule == HPT_PLAN_SCHEDULE_ZBH1;
    int inflight = gpipe ? M : zb ? P : P - s;
    r->slots_per_chunk = inflight < M ? inflight : M;
    r->wstash = zb && s > 0 ? (s + 1 < M ? s + 1 : M) : 0;
    return r->slots_per_chunk;
}

hpt_status setup_pipeline(run_state *r, int nslots, int micro_batches)
{
    if (r->nchunks > 1) { /* the interleaved schedule's slot pool */
        r->slot_of = calloc((size_t)micro_batches * r->nchunks, sizeof(int));
        r->free_slot = calloc((size_t)nslots, sizeof(int));
        r->free_head = calloc((size_t)nslots, sizeof(int));
        if (!r->slot_of || !r->free_slot || !r->free_head)
            return hpt_error_set(HPT_ERR_INTERNAL, "out of memory for the slot pool");
        r->nfree = r->nfree_head = 0; /* queues, oldest first: a slot freed last is */
        r->free_at = r->free_head_at = 0; /* reused last, its sends long done */
        for (int k = 0; k < nslots; k++)
            if (k >= nslots - r->head_slots)
                r->free_head[r->nfree_head++] = k;
            else
                r->free_slot[r->nfree++] = k;
    }
    size_t NC = hpt_model_stage_elems(&r->model); /* the local shard under SP */
    r->fwd_req = calloc((size_t)nslots, sizeof(hpt_comm_req));
    r->bwd_req = calloc((size_t)nslots, sizeof(hpt_comm_req));
    r->fwd_busy = calloc((size_t)nslots, 1);
    r->bwd_busy = calloc((size_t)nslots, 1);
    r->grad_send = r->comm.pp > 1 ? r->model.be->alloc(sizeof(float) * NC * nslots) : NULL;
    if (!r->fwd_req || !r->bwd_req || !r->fwd_busy || !r->bwd_busy ||
        (r->comm.pp > 1 && !r->grad_send))
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory for pipeline buffers");
    return HPT_OK;
}

/* The slot of micro-batch i of chunk `chunk`: one chunk, i mod the slots;
 * interleaved, at its forward (`take`) a free one of the pool (the head's
 * for the last stage's last chunk), bound to the chunk, else the one its
 * forward took. */
static int slot_for(run_state *r, int i, int chunk, int M, int take)
{
    if (r->nchunks == 1)
        return i % r->slots_per_chunk;
    if (!take)
        return r->slot_of[chunk * M + i];
    int head = r->model.last && chunk == r->nchunks - 1, n = r->model.nslots, k;
    HPT_CHECK(head ? r->nfree_head > 0 : r->nfree > 0);
    if (head) {
        k = r->free_head[r->free_head_at];
        r->free_head_at = (r->free_head_at + 1) % n, r->nfree_head--;
    } else {
        k = r->free_slot[r->free_at];
        r->free_at = (r->free_at + 1) % n, r->nfree--;
    }
    r->slot_of[chunk * M + i] = k;
    hpt_model_bind_slot(&r->model, k, chunk);
    return k;
}

/* Interleaved: slot k back to its pool (its pending send is waited for by
 * the next forward or backward that uses it). */
static void slot_free(run_state *r, int k)
{
    if (r->nchunks == 1)
        return;
    int n = r->model.nslots;
    if (k >= n - r->head_slots)
        r->free_head[(r->free_head_at + r->nfree_head++) % n] = k;
    else
        r->free_slot[(r->free_at + r->nfree++) % n] = k;
}

/* What crosses a pipeline boundary per micro-batch: the stage's output
 * (or input gradient), only this rank's sequence shard under sequence
 * parallelism. */
static size_t act_elems(const run_state *r) { return hpt_model_stage_elems(&r->model); }

/* Forward of micro-batch i (global positions from `first`) through this
 * stage: receive the previous stage's output, run, send to the next.
 * Returns the stage's loss sum (non-zero on the last stage only). */
static double pipe_forward(run_state *r, const hpt_train_opts *o, hpt_loader *ld, int64_t first,
                           int i, int chunk, float grad_scale, int train)
{
    hpt_comm *c = &r->comm;
    int P = c->pp, M = o->grad_accum, k = slot_for(r, i, chunk, M, 1);
    int from = !(r->model.first && chunk == 0), to = !(r->model.last && chunk == r->nchunks - 1);
    /* a message is tagged by its receiver's chunk: (that chunk) x M + i;
     * the last stage's chunk c feeds the first stage's chunk c + 1 */
    int tag = chunk * M + i, to_tag = (chunk + (c->pp_rank == P - 1)) * M + i;
    double t0 = now_s();
    hpt_loader_batch(ld, first, o->batch, r->inputs, r->targets);
    hpt_cp_take(r->inputs, o->batch, o->seq_len, c->cp, c->cp_rank); /* CP: this rank's rows */
    hpt_cp_take(r->targets, o->batch, o->seq_len, c->cp, c->cp_rank);
    double t1 = now_s();
    if (r->fwd_busy[k]) { /* the slot's previous output must have left */
        c->be->wait(c, &r->fwd_req[k]);
        r->fwd_busy[k] = 0;
    }
    if (from) /* the previous stage, or (a later chunk) the last one */
        c->be->recv_f32(c, HPT_GROUP_PP, hpt_model_stage_input(&r->model, k), act_elems(r),
                        (c->pp_rank + P - 1) % P, tag);
    double t2 = now_s();
    if (train && i == 0 && o->fault_slow_rank == c->world_rank) /* test: a straggler */
        nanosleep(&(struct timespec){(time_t)(o->fault_slow_ms / 1e3),
                                     (long)(fmod(o->fault_slow_ms, 1e3) * 1e6)}, NULL);
    double c2 = comm_seconds(r);
    double loss = hpt_model_stage_forward(&r->model, k, r->inputs, r->targets, grad_scale, train);
    if (train) { /* compute only: the TP all-reduces inside are communication */
        double t3 = now_s();
        r->t_data += t1 - t0;
        r->t_wait += t2 - t1;
        r->t_fwd += t3 - t2 - (comm_seconds(r) - c2);
        r->t_pipe_busy += (t1 - t0) + (t3 - t2);
        hpt_trace_span(r->trace, "data", "compute", i, t0, t1);
        hpt_trace_span(r->trace, "forward", "compute", i, t2, t3);
    }
    if (to) {
        c->be->isend_f32(c, HPT_GROUP_PP, hpt_model_stage_output(&r->model, k), act_elems(r),
                         (c->pp_rank + 1) % P, to_tag, &r->fwd_req[k]);
        r->fwd_busy[k] = 1;
    }
    if (!train) /* validation: nothing kept for a backward */
        slot_free(r, k);
    return loss;
}

/* Backward of micro-batch i: receive dL/d(output) from the next stage, run,
 * send dL/d(input) to the previous stage. split (zb-h1): the input-gradient
 * pass B only, its weight-gradient pass W left for pipe_weight (the slot
 * stays taken until then). */
static void pipe_backward(run_state *r, int i, int chunk, int M, int split)
{
    hpt_comm *c = &r->comm;
    int P = c->pp, V = r->nchunks, k = slot_for(r, i, chunk, M, 0);
    /* tagged by the receiver's chunk, after the forwards' tags: (V + that
     * chunk) x M + i; the first stage's chunk c feeds the last's c - 1 */
    int tag = (V + chunk) * M + i, to_tag = (V + chunk - (c->pp_rank == 0)) * M + i;
    int from = !(r->model.last && chunk == r->nchunks - 1), to = !(r->model.first && chunk == 0);
    double t0 = now_s();
    if (from)
        c->be->recv_f32(c, HPT_GROUP_PP, r->model.dx, act_elems(r), (c->pp_rank + 1) % P, tag);
    double t1 = now_s(), c1 = comm_seconds(r);
    if (split)
        hpt_model_stage_backward_input(&r->model, k, i % r->wstash);
    else
        hpt_model_stage_backward(&r->model, k);
    double t2 = now_s();
    r->t_wait += t1 - t0;
    r->t_bwd += t2 - t1 - (comm_seconds(r) - c1); /* compute only */
    r->t_pipe_busy += t2 - t1;
    r->t_pipe_end = t2;
    hpt_trace_span(r->trace, "backward", "compute", i, t1, t2);
    if (to) {
        float *buf = r->grad_send + (size_t)k * act_elems(r);
        if (r->bwd_busy[k])
            c->be->wait(c, &r->bwd_req[k]);
        r->model.be->copy(buf, r->model.dx, sizeof(float) * act_elems(r));
        c->be->isend_f32(c, HPT_GROUP_PP, buf, act_elems(r), (c->pp_rank + P - 1) % P, to_tag,
                         &r->bwd_req[k]);
        r->bwd_busy[k] = 1;
    }
    if (!split)
        slot_free(r, k); /* its activations are spent */
}

/* zb-h1: the deferred weight-gradient pass W of micro-batch i (after its
 * B): compute only, traced as "weight". */
static void pipe_weight(run_state *r, int i, int M)
{
    int k = slot_for(r, i, 0, M, 0);
    double t0 = now_s();
    hpt_model_stage_backward_weight(&r->model, k, i % r->wstash);
    double t1 = now_s();
    r->t_bwd += t1 - t0;
    r->t_pipe_busy += t1 - t0;
    r->t_pipe_end = t1;
    hpt_trace_span(r->trace, "weight", "compute", i, t0, t1);
    slot_free(r, k);
}

/* Complete every pending pipeline send. */
static void pipe_drain(run_state *r)
{
    for (int k = 0; k < r->model.nslots; k++) {
        if (r->fwd_busy[k])
            r->comm.be->wait(&r->comm, &r->fwd_req[k]);
        if (r->bwd_busy[k])
            r->comm.be->wait(&r->comm, &r->bwd_req[k]);
        r->fwd_busy[k] = r->bwd_busy[k] = 0;
    }
}

/* Sum a loss over the stages (only the last has it) and the CP x DP
 * replicas (each CP rank has its rows' part). */
static double reduce_loss(run_state *r, double sum)
{
    if (r->comm.pp > 1)
        r->comm.be->allreduce_sum_f64(&r->comm, HPT_GROUP_PP, &sum, 1);
    if (r->comm.group_size[HPT_GROUP_DP] > 1)
        r->comm.be->allreduce_sum_f64(&r->comm, HPT_GROUP_DP, &sum, 1);
    return sum;
}

/* A stop signal during validation, agreed at validation batch boundaries.
 * On several ranks each batch starts a nonblocking all-reduce (max) of the
 * local flag and the next boundary reads it, so no rank waits on it while
 * the batch runs; every rank sees the same answer at the same batch. */
typedef struct {
    MPI_Request req;
    int mine, any;
    hpt_comm_watch w;   /* its flight-recorder record (lib/comm.h) */
} stop_poll;

/* At the start of validation batch i: 1 when a stop signal reached some
 * rank (at batch i - 1 on several ranks, at once on one). Collective
 * (nonblocking) on several ranks: call it at every batch, then
 * stop_poll_end(). */
static int stop_poll_at(run_state *r, stop_poll *p, int i)
{
    if (r->comm.world_size == 1)
        return train_stop_signal != 0;
    if (i > 0) {
        hpt_comm_watch_block(p->w);
        MPI_Wait(&p->req, MPI_STATUS_IGNORE);
        hpt_comm_watch_end(p->w);
        if (p->any)
            return 1;
    }
    p->mine = train_stop_signal != 0;
    p->w = hpt_comm_watch_post(r->comm.comms[HPT_GROUP_WORLD], HPT_FLIGHT_IALLREDUCE, sizeof p->mine);
    MPI_Iallreduce(&p->mine, &p->any, 1, MPI_INT, MPI_MAX, r->comm.comms[HPT_GROUP_WORLD],
                   &p->req);
    return 0;
}

static void stop_poll_end(stop_poll *p)
{
    if (p->req != MPI_REQUEST_NULL) {
        hpt_comm_watch_block(p->w);
        MPI_Wait(&p->req, MPI_STATUS_IGNORE);
        hpt_comm_watch_end(p->w);
    }
}

double pipe_evaluate(run_state *r, const hpt_train_opts *o)
{
    double sum = 0.0;
    int D = r->comm.dp, M = o->grad_accum, done = 0;
    int64_t S = hpt_loader_num_samples(r->val), G = (int64_t)o->batch * M * D;
    int poll = r->ckpt_dir[0] && o->save_signals; /* the stop signals are caught */
    stop_poll p = {.req = MPI_REQUEST_NULL};
    for (; done < o->eval_batches && !(poll && stop_poll_at(r, &p, done)); done++)
        for (int k = 0; k < M; k++) /* each micro-batch through every chunk in turn: the */
            for (int c = 0; c < r->nchunks; c++) { /* sends are received as they go */
                int64_t pos = done * G + ((int64_t)k * D + r->comm.dp_rank) * o->batch;
                sum += pipe_forward(r, o, r->val, pos % S, k, c, 0.0f, 0);
            }
    stop_poll_end(&p);
    pipe_drain(r);
    r->val_stopped = done < o->eval_batches;
    sum = reduce_loss(r, sum);
    return r->val_stopped ? NAN : sum / ((double)o->eval_batches * G * o->seq_len);
}

/* Tied embeddings across stages: the first stage's embedding and the last
 * stage's copy get the sum of both gradients, so they stay identical. */
static void tie_grads(run_state *r)
{
    if (r->comm.pp == 1 || !r->cfg.tie_word_embeddings || !(r->model.first || r->model.last))
        return;
    const hpt_tensor *t = hpt_model_tensor(&r->model, HPT_TENSOR_EMBED, -1);
    r->comm.be->allreduce_sum_f32(&r->comm, HPT_GROUP_EMBED, r->model.grads + t->offset,
                                  (size_t)(t->rows * t->cols));
}

/* Forward+backward over the grad_accum micro-batches of one step on this
 * rank. Micro-batch k of DP rank d holds global positions
 * cursor + (k*DP + d)*B ... + B-1, so the DP ranks together consume the
 * same B*accum*DP samples, in the same global order, as one rank would.
 * Pipeline schedule (Narayanan et al. 2021, "Efficient Large-Scale
 * Language Model Training on GPU Clusters", section 2.2): 1F1B runs
 * PP - stage - 1 warm-up forwards, then alternates one forward and one
 * backward, then drains the backwards; GPipe runs all forwards, then all
 * backwards. Gradients are scaled by 1/(tokens of the global batch) and
 * summed over DP: all-reduced during the last backward, or with ZeRO-2/3
 * reduce-scattered into this rank's shard during each micro-batch's
 * backward (accumulated there); with ZeRO-1 the reduce-scatter is in
 * grad_norm. Returns the mean loss per target token
 * of the global batch. */
double pipe_accumulate(run_state *r, const hpt_train_opts *o)
{
    int D = r->comm.dp, d = r->comm.dp_rank, M = o->grad_accum;
    int P = r->comm.pp, s = r->comm.pp_rank, R = r->comm.group_size[HPT_GROUP_DP]; /* CP x DP */
    double tokens = (double)M * o->batch * o->seq_len * D;
    float scale = (float)(1.0 / tokens);
    int warm = o->pp_schedule == HPT_PLAN_SCHEDULE_GPIPE ? M : (P - s - 1 < M ? P - s - 1 : M);
    double sum = 0.0;
    if (!r->grads_zero) /* ZeRO-2 on host memory: released to zero by the buckets */
        hpt_model_zero_grad(&r->model);
    r->grads_zero = 0;
    if (r->poison) /* test: this rank's own gradients turn non-finite */
        r->model.be->scale(r->model.grads, NAN, r->model.nparams);
    r->nbuckets = r->nwaited = 0;
    r->ndeferred = 0;
    r->local_sumsq = 0;
    r->t_pipe0 = r->t_pipe_end = now_s();
    r->t_pipe_busy = 0;
    int V = r->nchunks; /* micro-batch i of model chunk c */
#define FWD(i, c) sum += pipe_forward(r, o, r->train, r->cursor + ((int64_t)(i) * D + d) * o->batch, \
                                      (i), (c), scale, 1)
    for (int i = 0; r->samples && i < M; i++) /* the samples this replica trains on */
        for (int j = 0; j < o->batch; j++) {
            int64_t pos = r->cursor + ((int64_t)i * D + d) * o->batch + j;
            fprintf(r->samples, "%d\t%lld\t%lld\n", r->step, (long long)pos,
                    (long long)hpt_loader_sample_at(r->train, pos));
        }
    if (r->samples) /* like log.tsv: a killed run keeps every started step's rows */
        fflush(r->samples);
    /* ZeRO-2/3: every micro-batch's gradient reduce-scattered into the
     * shard during its backward; otherwise the last one's all-reduced */
#define BWD(i, c)                                                                       \
    do {                                                                                \
        int shard_ = R > 1 && o->zero >= 2;                                             \
        r->acc_micro = (i);                                                             \
        if (zb) { /* B only: no range is final before its W */                          \
            pipe_backward(r, (i), (c), M, 1);                                           \
            r->wpending++;                                                              \
            break;                                                                      \
        }                                                                               \
        if (shard_ || ((i) + 1 == M && R > 1 && o->zero != 1)) {                        \
            r->model.grad_ready = shard_ ? dp_bucket_reduce_scatter : dp_bucket_allreduce; \
            r->model.grad_ready_ctx = r;                                                \
        }                                                                               \
        pipe_backward(r, (i), (c), M, 0);                                               \
        r->model.grad_ready = NULL;                                                     \
        if (shard_ && (i) + 1 < M)                                                      \
            dp_buckets_micro_end(r);                                                    \
    } while (0)
    /* zb-h1: the oldest pending W; the last micro-batch's starts the DP
     * all-reduce (ZeRO-2/3 are refused with zb-h1) */
#define WGT()                                                                           \
    do {                                                                                \
        int i_ = r->wnext++;                                                            \
        r->wpending--;                                                                  \
        r->acc_micro = i_;                                                              \
        if (i_ + 1 == M && R > 1 && o->zero != 1) {                                     \
            r->model.grad_ready = dp_bucket_allreduce;                                  \
            r->model.grad_ready_ctx = r;                                                \
        }                                                                               \
        pipe_weight(r, i_, M);                                                          \
        r->model.grad_ready = NULL;                                                     \
    } while (0)
    /* one loop for every schedule: task k runs micro-batch il_micro(k) of
     * chunk il_chunk(k) — with one chunk, micro-batch k of chunk 0 — after
     * w warm-up forwards (1F1B and zb-h1: P - s - 1, GPipe: all,
     * interleaved: Megatron's count). zb-h1 (Qi et al. 2024, figure 3;
     * the exact order of their Megatron-DeepSpeed ZeroBubbleH1Pipeline):
     * stage s > 0 runs each backward as B alone and its W later: none in
     * the first s steady iterations, then after every B the oldest
     * pending W, the rest at the end; stage 0 runs whole backwards. */
    int zb = r->wstash > 0;
    int total = M * V, w = V > 1 ? il_warmup(P, V, s, M) : warm;
    r->wnext = r->wpending = 0;
    for (int k = 0; k < w; k++)
        FWD(il_micro(k, P, V), il_chunk(k, P, V, 1));
    for (int k = 0; k < total - w; k++) {
        FWD(il_micro(w + k, P, V), il_chunk(w + k, P, V, 1));
        BWD(il_micro(k, P, V), il_chunk(k, P, V, 0));
        if (zb && k >= s)
            WGT();
    }
    for (int k = total - w; k < total; k++) {
        BWD(il_micro(k, P, V), il_chunk(k, P, V, 0));
        if (zb)
            WGT();
    }
    while (zb && r->wpending)
        WGT();
#undef FWD
#undef BWD
#undef WGT
    pipe_drain(r);
    r->cursor += (int64_t)M * o->batch * D;
    dp_buckets_wait(r);
    hpt_model_sp_sum_grads(&r->model); /* norm weights under sequence parallelism */
    tie_grads(r);
    if (o->zero >= 2) {
        dp_buckets_deferred(r);
        r->grads_zero = r->grads_release; /* every range went through a bucket */
    }
    r->local_loss = sum;
    return reduce_loss(r, sum) / tokens;
}
