/* comm_stage.c — host staging of device buffers for a communication backend
 * that only reads host memory (MPI without CUDA awareness); see comm.h,
 * hpt_comm_stage_on.
 *
 * Every operation of the table is wrapped: each buffer argument that the
 * compute backend reports as device memory is downloaded into host memory
 * before the inner operation and (when the operation writes it) uploaded
 * afterwards; host buffers (the f64 reductions of losses and norms, the
 * exporter's host blocks) pass straight through. Blocking operations share
 * one host buffer that grows to the largest request and is kept for the
 * run (one allocation per lifetime class); a nonblocking operation (the
 * data-parallel bucket all-reduce, pipeline sends) owns a host buffer from
 * its start until its wait, because several are in flight at once.
 *
 * The NCCL backend reads device memory itself and is never wrapped: the
 * staging lives here, in the communication path, and nowhere in model code.
 */
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "hpt_config.h"

static void *grow(hpt_comm_stage *s, size_t bytes)
{
    if (bytes > s->cap) {
        free(s->host);
        s->host = malloc(bytes);
        if (!s->host)
            HPT_FATAL("host staging of device buffers: cannot allocate %zu bytes", bytes);
        s->cap = bytes;
    }
    return s->host;
}

static int dev(const hpt_comm *c, const void *p) { return p && c->stage->is_device(p); }

/* In-place operations on one buffer of n elements of `esize` bytes. */
#define STAGE_INPLACE(call_inner, buf, bytes)                                                      \
    do {                                                                                           \
        hpt_comm_stage *s = c->stage;                                                              \
        if (!dev(c, buf)) {                                                                        \
            void *h_ = (void *)(buf);                                                              \
            call_inner;                                                                            \
        } else {                                                                                   \
            void *h_ = grow(s, bytes);                                                             \
            s->download(h_, buf, bytes);                                                           \
            call_inner;                                                                            \
            s->upload(buf, h_, bytes);                                                             \
        }                                                                                          \
    } while (0)

static void st_allreduce_sum_f32(hpt_comm *c, hpt_group g, float *buf, size_t n)
{
    STAGE_INPLACE(c->stage->inner->allreduce_sum_f32(c, g, h_, n), buf, n * sizeof(float));
}

static void st_allreduce_max_f32(hpt_comm *c, hpt_group g, float *buf, size_t n)
{
    STAGE_INPLACE(c->stage->inner->allreduce_max_f32(c, g, h_, n), buf, n * sizeof(float));
}

static void st_allreduce_sum_f64(hpt_comm *c, hpt_group g, double *buf, size_t n)
{
    STAGE_INPLACE(c->stage->inner->allreduce_sum_f64(c, g, h_, n), buf, n * sizeof(double));
}

static void st_allreduce_max_f64(hpt_comm *c, hpt_group g, double *buf, size_t n)
{
    STAGE_INPLACE(c->stage->inner->allreduce_max_f64(c, g, h_, n), buf, n * sizeof(double));
}

static void st_broadcast(hpt_comm *c, hpt_group g, void *buf, size_t bytes, int root)
{
    hpt_comm_stage *s = c->stage;
    if (!dev(c, buf)) {
        s->inner->broadcast(c, g, buf, bytes, root);
        return;
    }
    void *h = grow(s, bytes);
    int me = c->group_rank[g] == root;
    if (me)
        s->download(h, buf, bytes);
    s->inner->broadcast(c, g, h, bytes, root);
    if (!me)
        s->upload(buf, h, bytes);
}

/* A nonblocking operation's own host copy of `bytes` at dev. */
static void *own(hpt_comm_req *r, void *devp, size_t bytes, int upload_at_wait)
{
    r->stage_host = malloc(bytes ? bytes : 1);
    if (!r->stage_host)
        HPT_FATAL("host staging of device buffers: cannot allocate %zu bytes", bytes);
    r->stage_dev = upload_at_wait ? devp : NULL;
    r->stage_bytes = bytes;
    return r->stage_host;
}

static void st_iallreduce_sum_f32(hpt_comm *c, hpt_group g, float *buf, size_t n, hpt_comm_req *r)
{
    hpt_comm_stage *s = c->stage;
    r->stage_host = r->stage_dev = NULL;
    if (!dev(c, buf)) {
        s->inner->iallreduce_sum_f32(c, g, buf, n, r);
        return;
    }
    float *h = own(r, buf, n * sizeof(float), 1);
    s->download(h, buf, n * sizeof(float));
    s->inner->iallreduce_sum_f32(c, g, h, n, r);
}

static void st_isend_f32(hpt_comm *c, hpt_group g, const float *buf, size_t n, int peer, int tag,
                         hpt_comm_req *r)
{
    hpt_comm_stage *s = c->stage;
    r->stage_host = r->stage_dev = NULL;
    if (!dev(c, buf)) {
        s->inner->isend_f32(c, g, buf, n, peer, tag, r);
        return;
    }
    float *h = own(r, NULL, n * sizeof(float), 0);
    s->download(h, buf, n * sizeof(float));
    s->inner->isend_f32(c, g, h, n, peer, tag, r);
}

static void st_wait(hpt_comm *c, hpt_comm_req *r)
{
    hpt_comm_stage *s = c->stage;
    s->inner->wait(c, r);
    if (r->stage_dev)
        s->upload(r->stage_dev, r->stage_host, r->stage_bytes);
    free(r->stage_host);
    r->stage_host = r->stage_dev = NULL;
}

static void st_recv_f32(hpt_comm *c, hpt_group g, float *buf, size_t n, int peer, int tag)
{
    hpt_comm_stage *s = c->stage;
    if (!dev(c, buf)) {
        s->inner->recv_f32(c, g, buf, n, peer, tag);
        return;
    }
    float *h = grow(s, n * sizeof(float));
    s->inner->recv_f32(c, g, h, n, peer, tag);
    s->upload(buf, h, n * sizeof(float));
}

static void st_irecv_f32(hpt_comm *c, hpt_group g, float *buf, size_t n, int peer, int tag,
                         hpt_comm_req *r)
{
    hpt_comm_stage *s = c->stage;
    r->stage_host = r->stage_dev = NULL;
    if (!dev(c, buf)) {
        s->inner->irecv_f32(c, g, buf, n, peer, tag, r);
        return;
    }
    float *h = own(r, buf, n * sizeof(float), 1); /* uploaded to buf at the wait */
    s->inner->irecv_f32(c, g, h, n, peer, tag, r);
}

static void st_allgather_f32(hpt_comm *c, hpt_group g, const float *send, float *recv, size_t n)
{
    hpt_comm_stage *s = c->stage;
    size_t size = (size_t)c->group_size[g];
    int ds = dev(c, send), dr = dev(c, recv);
    float *h = (ds || dr) ? grow(s, (n * (ds ? 1 : 0) + n * size * (dr ? 1 : 0)) * sizeof(float))
                          : NULL;
    const float *hs = send;
    float *hr = recv;
    if (ds) {
        s->download(h, send, n * sizeof(float));
        hs = h;
    }
    if (dr)
        hr = h + (ds ? n : 0);
    s->inner->allgather_f32(c, g, hs, hr, n);
    if (dr)
        s->upload(recv, hr, n * size * sizeof(float));
}

static void st_allgather_inplace_f32(hpt_comm *c, hpt_group g, float *buf, const int *counts)
{
    hpt_comm_stage *s = c->stage;
    if (!dev(c, buf)) {
        s->inner->allgather_inplace_f32(c, g, buf, counts);
        return;
    }
    size_t total = 0, mine = 0;
    for (int i = 0; i < c->group_size[g]; i++) {
        if (i == c->group_rank[g])
            mine = total;
        total += (size_t)counts[i];
    }
    float *h = grow(s, total * sizeof(float));
    s->download(h + mine, buf + mine, (size_t)counts[c->group_rank[g]] * sizeof(float));
    s->inner->allgather_inplace_f32(c, g, h, counts);
    s->upload(buf, h, total * sizeof(float));
}

/* One host copy of the whole range per operation: this rank's block is
 * downloaded into it, every block comes back into it, and the range goes
 * up to buf at wait. */
static void st_iallgather_inplace_f32(hpt_comm *c, hpt_group g, float *buf, const int *counts,
                                      const int *displs, hpt_comm_req *r)
{
    hpt_comm_stage *s = c->stage;
    r->stage_host = r->stage_dev = NULL;
    if (!dev(c, buf)) {
        s->inner->iallgather_inplace_f32(c, g, buf, counts, displs, r);
        return;
    }
    int me = c->group_rank[g], last = c->group_size[g] - 1;
    size_t total = (size_t)displs[last] + (size_t)counts[last];
    float *h = own(r, buf, total * sizeof(float), 1);
    s->download(h + displs[me], buf + displs[me], (size_t)counts[me] * sizeof(float));
    s->inner->iallgather_inplace_f32(c, g, h, counts, displs, r);
}

static void st_reduce_scatter_sum_f32(hpt_comm *c, hpt_group g, const float *send, float *recv,
                                      const int *counts)
{
    hpt_comm_stage *s = c->stage;
    size_t total = 0, own_n = (size_t)counts[c->group_rank[g]];
    for (int i = 0; i < c->group_size[g]; i++)
        total += (size_t)counts[i];
    int ds = dev(c, send), dr = dev(c, recv);
    float *h = (ds || dr) ? grow(s, ((ds ? total : 0) + (dr ? own_n : 0)) * sizeof(float)) : NULL;
    const float *hs = send;
    float *hr = recv;
    if (ds) {
        s->download(h, send, total * sizeof(float));
        hs = h;
    }
    if (dr)
        hr = h + (ds ? total : 0);
    s->inner->reduce_scatter_sum_f32(c, g, hs, hr, counts);
    if (dr)
        s->upload(recv, hr, own_n * sizeof(float));
}

/* One host copy per operation: [own block | one float | the whole send
 * range] (the gap keeps the two apart when the own block is empty: MPI
 * refuses aliased buffers); the own block goes up to recv at wait
 * (stage_bytes: its size). */
static void st_ireduce_scatter_sum_f32(hpt_comm *c, hpt_group g, const float *send, float *recv,
                                       const int *counts, hpt_comm_req *r)
{
    hpt_comm_stage *s = c->stage;
    size_t total = 0, own_n = (size_t)counts[c->group_rank[g]];
    for (int i = 0; i < c->group_size[g]; i++)
        total += (size_t)counts[i];
    int ds = dev(c, send), dr = dev(c, recv);
    r->stage_host = r->stage_dev = NULL;
    if (!ds && !dr) {
        s->inner->ireduce_scatter_sum_f32(c, g, send, recv, counts, r);
        return;
    }
    float *h = own(r, dr ? recv : NULL, (own_n + 1 + total) * sizeof(float), dr);
    r->stage_bytes = dr ? own_n * sizeof(float) : 0;
    const float *hs = send;
    if (ds) {
        s->download(h + own_n + 1, send, total * sizeof(float));
        hs = h + own_n + 1;
    }
    s->inner->ireduce_scatter_sum_f32(c, g, hs, dr ? h : recv, counts, r);
}

static const hpt_comm_backend staged = {
    .name = "mpi+host-staging",
    .allreduce_sum_f32 = st_allreduce_sum_f32,
    .allreduce_max_f32 = st_allreduce_max_f32,
    .allreduce_sum_f64 = st_allreduce_sum_f64,
    .allreduce_max_f64 = st_allreduce_max_f64,
    .iallreduce_sum_f32 = st_iallreduce_sum_f32,
    .wait = st_wait,
    .allgather_f32 = st_allgather_f32,
    .allgather_inplace_f32 = st_allgather_inplace_f32,
    .iallgather_inplace_f32 = st_iallgather_inplace_f32,
    .reduce_scatter_sum_f32 = st_reduce_scatter_sum_f32,
    .ireduce_scatter_sum_f32 = st_ireduce_scatter_sum_f32,
    .isend_f32 = st_isend_f32,
    .recv_f32 = st_recv_f32,
    .irecv_f32 = st_irecv_f32,
    .broadcast = st_broadcast,
};

void hpt_comm_stage_on(hpt_comm *c, hpt_comm_stage *s, int (*is_device)(const void *p),
                       void (*download)(void *host, const void *dev, size_t bytes),
                       void (*upload)(void *dev, const void *host, size_t bytes))
{
    memset(s, 0, sizeof *s);
    s->inner = c->be;
    s->is_device = is_device;
    s->download = download;
    s->upload = upload;
    c->stage = s;
    c->be = &staged;
}

void hpt_comm_stage_off(hpt_comm *c)
{
    if (!c || !c->stage)
        return;
    c->be = c->stage->inner;
    free(c->stage->host);
    c->stage->host = NULL;
    c->stage->cap = 0;
    c->stage = NULL;
}

#ifndef HAVE_NCCL
/* Built without NCCL: the NCCL entry points say so (comm_nccl.c otherwise). */
hpt_status hpt_comm_nccl_on(hpt_comm *c)
{
    (void)c;
    return hpt_error_set(HPT_ERR_USAGE, "--comm nccl: this build has no NCCL (configure found "
                                        "none; see ./configure --with-nccl)");
}

void hpt_comm_nccl_off(hpt_comm *c) { (void)c; }

void hpt_comm_nccl_abort(hpt_comm *c) { (void)c; }

int hpt_comm_nccl_gpus_shared(hpt_comm *c, char *why, size_t cap)
{
    (void)c;
    if (cap)
        why[0] = 0;
    return 0;
}
#endif
