/* comm.c — the recording layer in front of every communication backend:
 * each call of the table is recorded in the rank's flight recorder
 * (lib/flight.h) before it is handed to the backend (c->inner) and marked
 * completed after; see comm.h. A blocking call is "posted" and "blocked"
 * at once; a nonblocking one is posted by its start and blocked/completed
 * by its wait. Backend-independent: MPI today, NCCL next. */
#include "comm.h"

_Static_assert(HPT_GROUP_COUNT == HPT_FLIGHT_GROUPS, "flight.h: HPT_FLIGHT_GROUPS");

/* World rank of group rank `peer` of group g; -1 when unknown. */
static int world_of(const hpt_comm *c, hpt_group g, int peer)
{
    return c->group_world[g] && peer >= 0 && peer < c->group_size[g] ? c->group_world[g][peer]
                                                                       : -1;
}

/* Record a blocking call: posted and waited on. */
static int64_t begin(hpt_comm *c, hpt_group g, int op, size_t bytes, int peer)
{
    return hpt_flight_post_blocking(c->fr, g, op, (int64_t)bytes, peer);
}

static int sum_counts(const hpt_comm *c, hpt_group g, const int *counts)
{
    int n = 0;
    for (int i = 0; i < c->group_size[g]; i++)
        n += counts[i];
    return n;
}

static void t_allreduce_sum_f32(hpt_comm *c, hpt_group g, float *buf, size_t n)
{
    int64_t id = begin(c, g, HPT_FLIGHT_ALLREDUCE, n * sizeof(float), -1);
    c->inner->allreduce_sum_f32(c, g, buf, n);
    hpt_flight_done(c->fr, id, g);
}

static void t_allreduce_max_f32(hpt_comm *c, hpt_group g, float *buf, size_t n)
{
    int64_t id = begin(c, g, HPT_FLIGHT_ALLREDUCE, n * sizeof(float), -1);
    c->inner->allreduce_max_f32(c, g, buf, n);
    hpt_flight_done(c->fr, id, g);
}

static void t_allreduce_sum_f64(hpt_comm *c, hpt_group g, double *buf, size_t n)
{
    int64_t id = begin(c, g, HPT_FLIGHT_ALLREDUCE, n * sizeof(double), -1);
    c->inner->allreduce_sum_f64(c, g, buf, n);
    hpt_flight_done(c->fr, id, g);
}

static void t_allreduce_max_f64(hpt_comm *c, hpt_group g, double *buf, size_t n)
{
    int64_t id = begin(c, g, HPT_FLIGHT_ALLREDUCE, n * sizeof(double), -1);
    c->inner->allreduce_max_f64(c, g, buf, n);
    hpt_flight_done(c->fr, id, g);
}

static void t_iallreduce_sum_f32(hpt_comm *c, hpt_group g, float *buf, size_t n, hpt_comm_req *r)
{
    int64_t id = hpt_flight_post(c->fr, g, HPT_FLIGHT_IALLREDUCE, (int64_t)(n * sizeof(float)), -1);
    c->inner->iallreduce_sum_f32(c, g, buf, n, r);
    r->fr_id = id;
}

static void t_wait(hpt_comm *c, hpt_comm_req *r)
{
    int64_t id = r->fr_id;
    hpt_flight_block(c->fr, id);
    c->inner->wait(c, r);
    hpt_flight_done(c->fr, id, r->group);
}

static void t_allgather_f32(hpt_comm *c, hpt_group g, const float *send, float *recv, size_t n)
{
    int64_t id = begin(c, g, HPT_FLIGHT_ALLGATHER, n * sizeof(float), -1);
    c->inner->allgather_f32(c, g, send, recv, n);
    hpt_flight_done(c->fr, id, g);
}

static void t_allgather_inplace_f32(hpt_comm *c, hpt_group g, float *buf, const int *counts)
{
    int64_t id = begin(c, g, HPT_FLIGHT_ALLGATHERV,
                       (size_t)counts[c->group_rank[g]] * sizeof(float), -1);
    c->inner->allgather_inplace_f32(c, g, buf, counts);
    hpt_flight_done(c->fr, id, g);
}

static void t_iallgather_inplace_f32(hpt_comm *c, hpt_group g, float *buf, const int *counts,
                                     const int *displs, hpt_comm_req *r)
{
    int64_t id = hpt_flight_post(c->fr, g, HPT_FLIGHT_ALLGATHERV,
                                 (int64_t)counts[c->group_rank[g]] * (int64_t)sizeof(float), -1);
    c->inner->iallgather_inplace_f32(c, g, buf, counts, displs, r);
    r->fr_id = id;
}

static void t_reduce_scatter_sum_f32(hpt_comm *c, hpt_group g, const float *send, float *recv,
                                     const int *counts)
{
    int64_t id = begin(c, g, HPT_FLIGHT_REDUCE_SCATTER,
                       (size_t)sum_counts(c, g, counts) * sizeof(float), -1);
    c->inner->reduce_scatter_sum_f32(c, g, send, recv, counts);
    hpt_flight_done(c->fr, id, g);
}

static void t_ireduce_scatter_sum_f32(hpt_comm *c, hpt_group g, const float *send, float *recv,
                                      const int *counts, hpt_comm_req *r)
{
    int64_t id = hpt_flight_post(c->fr, g, HPT_FLIGHT_REDUCE_SCATTER,
                                 (int64_t)sum_counts(c, g, counts) * (int64_t)sizeof(float), -1);
    c->inner->ireduce_scatter_sum_f32(c, g, send, recv, counts, r);
    r->fr_id = id;
}

static void t_isend_f32(hpt_comm *c, hpt_group g, const float *buf, size_t n, int peer, int tag,
                        hpt_comm_req *r)
{
    int64_t id = hpt_flight_post(c->fr, g, HPT_FLIGHT_ISEND, (int64_t)(n * sizeof(float)),
                                 world_of(c, g, peer));
    c->inner->isend_f32(c, g, buf, n, peer, tag, r);
    r->fr_id = id;
}

static void t_recv_f32(hpt_comm *c, hpt_group g, float *buf, size_t n, int peer, int tag)
{
    int64_t id = begin(c, g, HPT_FLIGHT_RECV, n * sizeof(float), world_of(c, g, peer));
    c->inner->recv_f32(c, g, buf, n, peer, tag);
    hpt_flight_done(c->fr, id, g);
}

static void t_irecv_f32(hpt_comm *c, hpt_group g, float *buf, size_t n, int peer, int tag,
                        hpt_comm_req *r)
{
    int64_t id = hpt_flight_post(c->fr, g, HPT_FLIGHT_RECV, (int64_t)(n * sizeof(float)),
                                 world_of(c, g, peer));
    c->inner->irecv_f32(c, g, buf, n, peer, tag, r);
    r->fr_id = id;
}

static void t_broadcast(hpt_comm *c, hpt_group g, void *buf, size_t bytes, int root)
{
    int64_t id = begin(c, g, HPT_FLIGHT_BROADCAST, bytes, -1);
    c->inner->broadcast(c, g, buf, bytes, root);
    hpt_flight_done(c->fr, id, g);
}

const hpt_comm_backend hpt_comm_traced = {
    .name = "traced",
    .allreduce_sum_f32 = t_allreduce_sum_f32,
    .allreduce_max_f32 = t_allreduce_max_f32,
    .allreduce_sum_f64 = t_allreduce_sum_f64,
    .allreduce_max_f64 = t_allreduce_max_f64,
    .iallreduce_sum_f32 = t_iallreduce_sum_f32,
    .wait = t_wait,
    .allgather_f32 = t_allgather_f32,
    .allgather_inplace_f32 = t_allgather_inplace_f32,
    .iallgather_inplace_f32 = t_iallgather_inplace_f32,
    .reduce_scatter_sum_f32 = t_reduce_scatter_sum_f32,
    .ireduce_scatter_sum_f32 = t_ireduce_scatter_sum_f32,
    .isend_f32 = t_isend_f32,
    .recv_f32 = t_recv_f32,
    .irecv_f32 = t_irecv_f32,
    .broadcast = t_broadcast,
};

/* The communicator whose recorder also takes the watched collectives. */
static hpt_comm *watched;

/* The group of comm (see comm.h), or -1: not one of the watched one's. */
static int watch_group(MPI_Comm comm)
{
    hpt_comm *c = watched;
    int size, cmp;
    if (!c || !c->fr || comm == MPI_COMM_NULL || MPI_Comm_size(comm, &size) != MPI_SUCCESS)
        return -1;
    if (size == c->world_size)
        return HPT_GROUP_WORLD;
    for (int g = 1; g < HPT_GROUP_COUNT; g++)
        if (c->comms[g] != MPI_COMM_NULL && c->comms[g] != 0 &&
            MPI_Comm_compare(comm, c->comms[g], &cmp) == MPI_SUCCESS && cmp != MPI_UNEQUAL)
            return g;
    return -1;
}

hpt_comm_watch hpt_comm_watch_begin(MPI_Comm comm, int op, size_t bytes)
{
    hpt_comm_watch w = {-1, watch_group(comm)};
    if (w.group >= 0)
        w.id = hpt_flight_post_blocking(watched->fr, w.group, op, (int64_t)bytes, -1);
    return w;
}

hpt_comm_watch hpt_comm_watch_post(MPI_Comm comm, int op, size_t bytes)
{
    hpt_comm_watch w = {-1, watch_group(comm)};
    if (w.group >= 0)
        w.id = hpt_flight_post(watched->fr, w.group, op, (int64_t)bytes, -1);
    return w;
}

void hpt_comm_watch_block(hpt_comm_watch w)
{
    if (w.id >= 0 && watched && watched->fr)
        hpt_flight_block(watched->fr, w.id);
}

void hpt_comm_watch_end(hpt_comm_watch w)
{
    if (w.id >= 0 && watched && watched->fr)
        hpt_flight_done(watched->fr, w.id, w.group);
}

void hpt_comm_watch_forget(hpt_comm *c)
{
    if (watched == c)
        watched = NULL;
}

void hpt_comm_trace_init(hpt_comm *c, FILE *warn)
{
    if (c->be == &hpt_comm_traced) /* already in front */
        return;
    c->inner = c->be;
    if (c->fr) { /* the backend was switched: record in front of the new one */
        c->be = &hpt_comm_traced;
        watched = c;
        return;
    }
    size_t n = hpt_flight_size_from_env();
    if (!n)
        return;
    if (!(c->fr = hpt_flight_new(n))) {
        if (warn)
            fprintf(warn, "hpt: warning: no memory for a flight recorder of %zu operations: "
                          "recording off\n", n);
        return;
    }
    c->be = &hpt_comm_traced;
    watched = c;
}
