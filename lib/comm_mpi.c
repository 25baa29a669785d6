/* comm_mpi.c — the MPI communication backend, the rank grid and status
 * agreement; see comm.h. */
#include <stdlib.h>
#include <string.h>

#include "comm.h"

static double wtime(void) { return MPI_Wtime(); }

/* A nonblocking operation of `bytes` started on group g (its wait adds the
 * seconds); the shard and replica groups count as DP (hpt_group_counted). */
static void posted(hpt_comm *c, hpt_group g, size_t bytes)
{
    hpt_comm_counter *k = &c->counters[hpt_group_counted(g)];
    k->calls++;
    k->bytes += (int64_t)bytes;
}

/* A blocking operation of `bytes` on group g that started at t0. */
static void count(hpt_comm *c, hpt_group g, size_t bytes, double t0)
{
    posted(c, g, bytes);
    c->counters[hpt_group_counted(g)].seconds += wtime() - t0;
}

/* MPI counts are int: large buffers go in chunks of at most 2^30 elements. */
#define CHUNK ((size_t)1 << 30)

static void mpi_allreduce_sum_f32(hpt_comm *c, hpt_group g, float *buf, size_t n)
{
    double t0 = wtime();
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t k = n - off < CHUNK ? n - off : CHUNK;
        MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)k, MPI_FLOAT, MPI_SUM, c->comms[g]);
    }
    count(c, g, n * sizeof(float), t0);
}

static void mpi_allreduce_max_f32(hpt_comm *c, hpt_group g, float *buf, size_t n)
{
    double t0 = wtime();
    HPT_CHECK(n < CHUNK);
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_MAX, c->comms[g]);
    count(c, g, n * sizeof(float), t0);
}

static void mpi_allreduce_f64(hpt_comm *c, hpt_group g, double *buf, size_t n, MPI_Op op)
{
    double t0 = wtime();
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, op, c->comms[g]);
    count(c, g, n * sizeof(double), t0);
}

static void mpi_allreduce_sum_f64(hpt_comm *c, hpt_group g, double *buf, size_t n)
{
    mpi_allreduce_f64(c, g, buf, n, MPI_SUM);
}

static void mpi_allreduce_max_f64(hpt_comm *c, hpt_group g, double *buf, size_t n)
{
    mpi_allreduce_f64(c, g, buf, n, MPI_MAX);
}

static void mpi_iallreduce_sum_f32(hpt_comm *c, hpt_group g, float *buf, size_t n,
                                   hpt_comm_req *r)
{
    HPT_CHECK(n < CHUNK);
    r->group = g;
    r->kind1 = 0;
    r->t_start = wtime();
    MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c->comms[g], &r->req);
    posted(c, g, n * sizeof(float));
}

static void mpi_wait(hpt_comm *c, hpt_comm_req *r)
{
    double t0 = wtime();
    MPI_Wait(&r->req, MPI_STATUS_IGNORE);
    double t1 = wtime();
    c->counters[hpt_group_counted(r->group)].seconds += t1 - t0;
    hpt_comm_count_kind(c->kinds, r->group, r->kind1 - 1, -1, t1 - t0, t1 - r->t_start);
    r->kind1 = 0;
}

static void mpi_allgather_f32(hpt_comm *c, hpt_group g, const float *send, float *recv, size_t n)
{
    double t0 = wtime();
    HPT_CHECK(n < CHUNK);
    MPI_Allgather(send, (int)n, MPI_FLOAT, recv, (int)n, MPI_FLOAT, c->comms[g]);
    count(c, g, n * sizeof(float), t0);
    hpt_comm_count_kind(c->kinds, g, HPT_CK_GATHER, (long long)(n * sizeof(float)), wtime() - t0,
                        wtime() - t0);
}

static void mpi_reduce_scatter_sum_f32(hpt_comm *c, hpt_group g, const float *send, float *recv,
                                       const int *counts)
{
    double t0 = wtime();
    int n = 0;
    for (int i = 0; i < c->group_size[g]; i++)
        n += counts[i];
    MPI_Reduce_scatter(send, recv, counts, MPI_FLOAT, MPI_SUM, c->comms[g]);
    count(c, g, (size_t)n * sizeof(float), t0);
    double dt = wtime() - t0;
    hpt_comm_count_kind(c->kinds, g, HPT_CK_RS, (long long)n * (long long)sizeof(float), dt, dt);
}

static void mpi_ireduce_scatter_sum_f32(hpt_comm *c, hpt_group g, const float *send, float *recv,
                                        const int *counts, hpt_comm_req *r)
{
    size_t n = 0;
    for (int i = 0; i < c->group_size[g]; i++)
        n += (size_t)counts[i];
    HPT_CHECK(n < CHUNK);
    r->group = g;
    r->kind1 = HPT_CK_RS + 1;
    r->t_start = wtime();
    MPI_Ireduce_scatter(send, recv, counts, MPI_FLOAT, MPI_SUM, c->comms[g], &r->req);
    posted(c, g, n * sizeof(float));
    hpt_comm_count_kind(c->kinds, g, HPT_CK_RS, (long long)n * (long long)sizeof(float), 0, 0);
}

static void mpi_allgather_inplace_f32(hpt_comm *c, hpt_group g, float *buf, const int *counts)
{
    double t0 = wtime();
    int size = c->group_size[g], displ[size], n = 0;
    for (int i = 0; i < size; i++) {
        displ[i] = n;
        n += counts[i];
    }
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displ, MPI_FLOAT, c->comms[g]);
    count(c, g, (size_t)counts[c->group_rank[g]] * sizeof(float), t0);
    double dt = wtime() - t0;
    hpt_comm_count_kind(c->kinds, g, HPT_CK_GATHER,
                        (long long)counts[c->group_rank[g]] * (long long)sizeof(float), dt, dt);
}

static void mpi_iallgather_inplace_f32(hpt_comm *c, hpt_group g, float *buf, const int *counts,
                                       const int *displs, hpt_comm_req *r)
{
    r->group = g;
    r->kind1 = HPT_CK_GATHER + 1;
    r->t_start = wtime();
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT,
                    c->comms[g], &r->req);
    posted(c, g, (size_t)counts[c->group_rank[g]] * sizeof(float));
    hpt_comm_count_kind(c->kinds, g, HPT_CK_GATHER,
                        (long long)counts[c->group_rank[g]] * (long long)sizeof(float), 0, 0);
}

static void mpi_isend_f32(hpt_comm *c, hpt_group g, const float *buf, size_t n, int peer, int tag,
                          hpt_comm_req *r)
{
    HPT_CHECK(n < CHUNK);
    r->group = g;
    r->kind1 = 0;
    r->t_start = wtime();
    MPI_Isend(buf, (int)n, MPI_FLOAT, peer, tag, c->comms[g], &r->req);
    posted(c, g, n * sizeof(float));
}

static void mpi_recv_f32(hpt_comm *c, hpt_group g, float *buf, size_t n, int peer, int tag)
{
    double t0 = wtime();
    HPT_CHECK(n < CHUNK);
    MPI_Recv(buf, (int)n, MPI_FLOAT, peer, tag, c->comms[g], MPI_STATUS_IGNORE);
    c->counters[hpt_group_counted(g)].calls++;
    c->counters[hpt_group_counted(g)].seconds += wtime() - t0;
}

static void mpi_irecv_f32(hpt_comm *c, hpt_group g, float *buf, size_t n, int peer, int tag,
                          hpt_comm_req *r)
{
    HPT_CHECK(n < CHUNK);
    r->group = g;
    r->kind1 = 0;
    r->t_start = wtime();
    MPI_Irecv(buf, (int)n, MPI_FLOAT, peer, tag, c->comms[g], &r->req);
    c->counters[hpt_group_counted(g)].calls++;
}

static void mpi_broadcast(hpt_comm *c, hpt_group g, void *buf, size_t bytes, int root)
{
    double t0 = wtime();
    HPT_CHECK(bytes < CHUNK);
    MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, c->comms[g]);
    count(c, g, bytes, t0);
}

const hpt_comm_backend hpt_comm_mpi = {
    .name = "mpi",
    .allreduce_sum_f32 = mpi_allreduce_sum_f32,
    .allreduce_max_f32 = mpi_allreduce_max_f32,
    .allreduce_sum_f64 = mpi_allreduce_sum_f64,
    .allreduce_max_f64 = mpi_allreduce_max_f64,
    .iallreduce_sum_f32 = mpi_iallreduce_sum_f32,
    .wait = mpi_wait,
    .allgather_f32 = mpi_allgather_f32,
    .allgather_inplace_f32 = mpi_allgather_inplace_f32,
    .iallgather_inplace_f32 = mpi_iallgather_inplace_f32,
    .reduce_scatter_sum_f32 = mpi_reduce_scatter_sum_f32,
    .ireduce_scatter_sum_f32 = mpi_ireduce_scatter_sum_f32,
    .isend_f32 = mpi_isend_f32,
    .recv_f32 = mpi_recv_f32,
    .irecv_f32 = mpi_irecv_f32,
    .broadcast = mpi_broadcast,
};

/* ------------------------------------------------------------ the grid */

hpt_status hpt_grid_check(int world, int tp, int pp, int dp, int *dp_out)
{
    return hpt_grid_check_cp(world, tp, 1, pp, dp, dp_out);
}

hpt_status hpt_grid_check_cp(int world, int tp, int cp, int pp, int dp, int *dp_out)
{
    if (tp <= 0 || pp <= 0 || cp <= 0)
        return cp == 1 ? hpt_error_set(HPT_ERR_USAGE, "--tp %d --pp %d: sizes must be > 0", tp, pp)
                       : hpt_error_set(HPT_ERR_USAGE, "--tp %d --cp %d --pp %d: sizes must be > 0",
                                       tp, cp, pp);
    long tcp = (long)tp * cp * pp;
    if (dp <= 0) {
        if (world % tcp)
            return cp == 1
                       ? hpt_error_set(HPT_ERR_USAGE,
                                       "%d rank%s cannot be split into --tp %d x --pp %d x DP: "
                                       "the world size must be a multiple of tp*pp = %d",
                                       world, world == 1 ? "" : "s", tp, pp, tp * pp)
                       : hpt_error_set(HPT_ERR_USAGE,
                                       "%d rank%s cannot be split into --tp %d x --cp %d x --pp "
                                       "%d x DP: the world size must be a multiple of tp*cp*pp = "
                                       "%ld", world, world == 1 ? "" : "s", tp, cp, pp, tcp);
        dp = (int)(world / tcp);
    }
    if (tcp * dp != world)
        return cp == 1 ? hpt_error_set(HPT_ERR_USAGE,
                                       "--tp %d x --pp %d x --dp %d = %ld rank%s, but the job has "
                                       "%d rank%s (omit --dp to infer it)", tp, pp, dp, tcp * dp,
                                       tcp * dp == 1 ? "" : "s", world, world == 1 ? "" : "s")
                       : hpt_error_set(HPT_ERR_USAGE,
                                       "--tp %d x --cp %d x --pp %d x --dp %d = %ld rank%s, but "
                                       "the job has %d rank%s (omit --dp to infer it)", tp, cp, pp,
                                       dp, tcp * dp, tcp * dp == 1 ? "" : "s", world,
                                       world == 1 ? "" : "s");
    *dp_out = dp;
    return HPT_OK;
}

static void split(hpt_comm *c, MPI_Comm world, hpt_group g, int color, int key)
{
    MPI_Comm_split(world, color, key, &c->comms[g]);
    MPI_Comm_rank(c->comms[g], &c->group_rank[g]);
    MPI_Comm_size(c->comms[g], &c->group_size[g]);
    c->group_color[g] = color;
}

/* c->group_world[g]: the world rank of every rank of group g (for the
 * flight recorder's peers and dumps). */
static void group_members_of(hpt_comm *c, int g)
{
    free(c->group_world[g]);
    c->group_world[g] = NULL;
    if (c->comms[g] == MPI_COMM_NULL || c->comms[g] == 0 || c->group_size[g] <= 0)
        return;
    c->group_world[g] = malloc(sizeof(int) * (size_t)c->group_size[g]);
    if (c->group_world[g])
        MPI_Allgather(&c->world_rank, 1, MPI_INT, c->group_world[g], 1, MPI_INT, c->comms[g]);
}

static void group_members(hpt_comm *c)
{
    for (int g = 0; g < HPT_GROUP_COUNT; g++)
        group_members_of(c, g);
}

/* DPS and DPR for shard groups of n replicas (see hpt_comm_shard_group):
 * replica index cp + dp*CP, CP*DP replicas. */
static void split_shards(hpt_comm *c, MPI_Comm world, int n)
{
    int R = c->cp * c->dp, rep = c->cp_rank + c->dp_rank * c->cp;
    int inst = c->tp_rank + c->pp_rank * c->tp, q = rep / n, s = rep % n;
    split(c, world, HPT_GROUP_DPS, inst * (R / n) + q, s);
    split(c, world, HPT_GROUP_DPR, inst * n + s, q);
}

hpt_status hpt_comm_shard_group(hpt_comm *c, int n)
{
    if (n <= 0 || (c->cp * c->dp) % n)
        return hpt_error_set(HPT_ERR_USAGE, "shard group of %d ranks does not divide CP x DP %d",
                             n, c->cp * c->dp);
    for (int g = HPT_GROUP_DPS; g <= HPT_GROUP_DPR; g++)
        if (c->comms[g] != MPI_COMM_NULL && c->comms[g] != 0)
            MPI_Comm_free(&c->comms[g]);
    split_shards(c, c->comms[HPT_GROUP_WORLD], n);
    group_members_of(c, HPT_GROUP_DPS);
    group_members_of(c, HPT_GROUP_DPR);
    return HPT_OK;
}

hpt_status hpt_comm_init(hpt_comm *c, MPI_Comm world, int tp, int pp, int dp, FILE *warn)
{
    return hpt_comm_init_cp(c, world, tp, 1, pp, dp, warn);
}

hpt_status hpt_comm_init_cp(hpt_comm *c, MPI_Comm world, int tp, int cp, int pp, int dp,
                            FILE *warn)
{
    memset(c, 0, sizeof *c);
    c->be = &hpt_comm_mpi;
    MPI_Comm_rank(world, &c->world_rank);
    MPI_Comm_size(world, &c->world_size);
    c->tp = tp;
    c->cp = cp;
    c->pp = pp;
    c->dp = dp;
    int r = c->world_rank, tc = tp * cp, tcd = tp * cp * dp;
    c->tp_rank = r % tp;
    c->cp_rank = (r / tp) % cp;
    c->dp_rank = (r / tc) % dp;
    c->pp_rank = r / tcd;
    int cd = c->cp_rank + c->dp_rank * cp; /* replica index among the CP x DP */
    MPI_Comm_dup(world, &c->comms[HPT_GROUP_WORLD]);
    for (int g = 0; g < HPT_GROUP_COUNT; g++)
        c->group_color[g] = -1;
    c->group_color[HPT_GROUP_WORLD] = 0;
    c->group_rank[HPT_GROUP_WORLD] = r;
    c->group_size[HPT_GROUP_WORLD] = c->world_size;
    split(c, world, HPT_GROUP_TP, r / tp, c->tp_rank);
    split(c, world, HPT_GROUP_DP, c->tp_rank + c->pp_rank * tp, cd);
    split(c, world, HPT_GROUP_PP, r % tcd, c->pp_rank);
    split(c, world, HPT_GROUP_MP, cd, c->tp_rank + c->pp_rank * tp);
    split(c, world, HPT_GROUP_CP, c->tp_rank + (c->dp_rank + c->pp_rank * dp) * tp, c->cp_rank);
    split_shards(c, world, cp * dp);
    int ends = c->pp_rank == 0 || c->pp_rank == pp - 1;
    MPI_Comm_split(world, ends ? r % tcd : MPI_UNDEFINED, c->pp_rank, &c->comms[HPT_GROUP_EMBED]);
    if (ends) {
        MPI_Comm_rank(c->comms[HPT_GROUP_EMBED], &c->group_rank[HPT_GROUP_EMBED]);
        MPI_Comm_size(c->comms[HPT_GROUP_EMBED], &c->group_size[HPT_GROUP_EMBED]);
        c->group_color[HPT_GROUP_EMBED] = r % tcd;
    }
    group_members(c);

    /* Node-local rank; a TP group whose ranks are on different nodes pays
     * inter-node latency on every layer's all-reduce. */
    MPI_Comm node;
    MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &c->node_rank);
    MPI_Comm_size(node, &c->node_size);
    int node_id, lo, hi;
    MPI_Allreduce(&r, &node_id, 1, MPI_INT, MPI_MIN, node); /* lowest world rank on the node */
    MPI_Allreduce(&node_id, &lo, 1, MPI_INT, MPI_MIN, c->comms[HPT_GROUP_TP]);
    MPI_Allreduce(&node_id, &hi, 1, MPI_INT, MPI_MAX, c->comms[HPT_GROUP_TP]);
    int spans = lo != hi, any = 0;
    MPI_Allreduce(&spans, &any, 1, MPI_INT, MPI_MAX, world);
    if (any && r == 0 && warn)
        fprintf(warn,
                "hpt: warning: a tensor-parallel group (--tp %d) spans nodes (%d ranks per "
                "node); keep TP inside a node\n",
                tp, c->node_size);
    MPI_Comm_free(&node);
    hpt_comm_trace_init(c, r == 0 ? warn : NULL);
    return HPT_OK;
}

void hpt_comm_free(hpt_comm *c)
{
    if (!c)
        return;
    hpt_comm_watch_forget(c);
    for (int g = 0; g < HPT_GROUP_COUNT; g++) {
        if (c->comms[g] != MPI_COMM_NULL && c->comms[g] != 0)
            MPI_Comm_free(&c->comms[g]);
        free(c->group_world[g]);
    }
    hpt_flight_free(c->fr);
    memset(c, 0, sizeof *c);
}

hpt_status hpt_comm_agree(MPI_Comm world, hpt_status st)
{
    int rank, size, failing;
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);
    int mine = st ? rank : size;
    hpt_comm_watch w = hpt_comm_watch_begin(world, HPT_FLIGHT_ALLREDUCE, sizeof mine);
    MPI_Allreduce(&mine, &failing, 1, MPI_INT, MPI_MIN, world);
    hpt_comm_watch_end(w);
    if (failing == size)
        return HPT_OK;
    struct {
        int code;
        char msg[1000];
    } e = {0};
    if (rank == failing) {
        e.code = (int)st;
        snprintf(e.msg, sizeof e.msg, "%s", hpt_error_msg());
    }
    w = hpt_comm_watch_begin(world, HPT_FLIGHT_BROADCAST, sizeof e);
    MPI_Bcast(&e, sizeof e, MPI_BYTE, failing, world);
    hpt_comm_watch_end(w);
    return hpt_error_set((hpt_status)e.code, "%s", e.msg);
}
