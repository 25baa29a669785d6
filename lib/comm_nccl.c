/* comm_nccl.c — the NCCL communication backend (built when configure finds
 * NCCL with CUDA; see comm.h, hpt_comm_nccl_on).
 *
 * Design (docs/ARCHITECTURE.md, "NCCL backend"):
 *  - One NCCL communicator per group of size > 1 (TP, DP, PP, MP, embedding
 *    pair, world), created collectively from an ncclUniqueId that the
 *    group's rank 0 broadcasts over the matching MPI communicator. MPI stays
 *    for bootstrap, status agreement, metrics and the checkpoint's HDF5.
 *  - Pipeline point-to-point: four two-rank communicators per stage
 *    boundary direction — send-to-next, receive-from-previous,
 *    send-to-previous, receive-from-next — so each NCCL communicator is
 *    used in one direction, in one order, from one stream. Sends run on a
 *    non-blocking side stream ordered after the compute stream by an event;
 *    receives run on the compute stream (the activation is needed next).
 *    This avoids the classic NCCL p2p deadlock of two ranks that both
 *    enqueue a send before their receive on the same stream/communicator.
 *  - Context parallelism's ring (lib/attention_ring.c: CP rank r sends
 *    K/V blocks and dK/dV accumulators to r+1 and receives from r-1, two
 *    transfers at once per direction, each an isend/irecv then a wait):
 *    one two-rank communicator per ring edge (e -> e+1 mod CP; sender rank
 *    0 inside it, lib/comm_nccl_plan.c hpt_nccl_cp_edge_rank), so a rank
 *    sends only on its out-edge and receives only on its in-edge (at CP 2
 *    the two edges join the same ranks as distinct communicators). Sends
 *    run on one side stream, receives on another, each ordered after the
 *    compute stream by an event (the receive overwrites a buffer an earlier
 *    step read; the send reads what the compute stream wrote); the wait
 *    makes the compute stream wait for the transfer's done event. NCCL
 *    matches a communicator's sends and receives in order, which the ring
 *    keeps (K, V, dK, dV on both sides), so tags are not needed. The ring
 *    posts each tensor's receive and send before the next tensor's: with
 *    the two side streams on one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS
 *    =1) a second receive queued behind the first would hold back every
 *    rank's first send (a deadlock). Compiled here; never run on a GPU by
 *    its author.
 *  - Blocking collectives (tensor-parallel all-reduces, ZeRO-1's
 *    reduce-scatter and all-gather, broadcasts) run on the compute stream
 *    (the CUDA backend's stream 0, the legacy default stream), so they are
 *    ordered with the kernels that produce and consume their buffers
 *    without host synchronisation.
 *  - Overlap: the data-parallel bucket all-reduces (iallreduce, started by
 *    the model's grad_ready callback as soon as backward has enqueued a
 *    bucket's last gradient kernel; lib/train_dp_buckets.c
 *    dp_bucket_allreduce) run on their own non-blocking stream: an event
 *    recorded on the compute stream at the start marks the bucket's gradients ready, the comm stream waits
 *    for it (cudaStreamWaitEvent) and runs ncclAllReduce while backward
 *    kernels of earlier layers keep the compute stream busy. `wait` makes
 *    the compute stream (not the host) wait for that bucket's done event:
 *    the optimizer kernels see reduced gradients, nothing else waits.
 *    Never run on a GPU by this branch's author: see docs/SLURM.md.
 *  - Host buffers (the f64 reductions of losses and norms, host blocks of
 *    the exporter) go through the MPI backend: NCCL reads device memory
 *    only. Counted seconds are the host time to enqueue (the device time is
 *    asynchronous; use Nsight Systems for it).
 *  - Every NCCL and CUDA result is checked; a failure names the call,
 *    file:line and NCCL's/CUDA's message and aborts the job (HPT_FATAL ->
 *    MPI_Abort). hpt_comm_nccl_abort() (for the hang watchdog) aborts every
 *    communicator so a stuck kernel returns.
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "gpu_slots.h"

#define NCCL_OK(call)                                                                              \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess)                                                                     \
            hpt_fatal(__FILE__, __LINE__, HPT_ERR_INTERNAL, "%s: NCCL error %d: %s", #call,       \
                      (int)r_, ncclGetErrorString(r_));                                            \
    } while (0)

#define CUDA_OK(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            hpt_fatal(__FILE__, __LINE__, HPT_ERR_INTERNAL, "%s: CUDA error %d: %s", #call,       \
                      (int)e_, cudaGetErrorString(e_));                                            \
    } while (0)

/* The two-rank communicators: pipeline neighbours (four), then the CP
 * ring's out-edge (this rank sends) and in-edge (it receives). */
enum { P2P_SEND_NEXT, P2P_RECV_PREV, P2P_SEND_PREV, P2P_RECV_NEXT, P2P_CP_OUT, P2P_CP_IN,
       P2P_COUNT };

typedef struct {
    ncclComm_t group[HPT_GROUP_COUNT]; /* NULL: group of one rank, or not a member */
    ncclComm_t p2p[P2P_COUNT];         /* two-rank pipeline and CP ring communicators */
    cudaStream_t compute;              /* the compute backend's stream (0)         */
    cudaStream_t send;                 /* non-blocking side stream for sends       */
    cudaStream_t dp;                   /* non-blocking stream of the DP buckets    */
    cudaStream_t cp_send, cp_recv;     /* non-blocking streams of the CP ring      */
} nccl_state;

static nccl_state *st(hpt_comm *c) { return (nccl_state *)c->nccl; }

static int on_device(const void *p)
{
    struct cudaPointerAttributes a;
    if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "invalid value" of a host pointer */
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static void count(hpt_comm *c, hpt_group g, size_t bytes, double t0)
{
    c->counters[hpt_group_counted(g)].calls++;
    c->counters[hpt_group_counted(g)].bytes += (int64_t)bytes;
    c->counters[hpt_group_counted(g)].seconds += MPI_Wtime() - t0;
}

static void allreduce(hpt_comm *c, hpt_group g, void *buf, size_t n, ncclDataType_t t,
                      size_t esize, ncclRedOp_t op)
{
    double t0 = MPI_Wtime();
    if (st(c)->group[g])
        NCCL_OK(ncclAllReduce(buf, buf, n, t, op, st(c)->group[g], st(c)->compute));
    count(c, g, n * esize, t0);
}

static void nc_allreduce_sum_f32(hpt_comm *c, hpt_group g, float *buf, size_t n)
{
    if (!on_device(buf))
        hpt_comm_mpi.allreduce_sum_f32(c, g, buf, n);
    else
        allreduce(c, g, buf, n, ncclFloat32, sizeof(float), ncclSum);
}

static void nc_allreduce_max_f32(hpt_comm *c, hpt_group g, float *buf, size_t n)
{
    if (!on_device(buf))
        hpt_comm_mpi.allreduce_max_f32(c, g, buf, n);
    else
        allreduce(c, g, buf, n, ncclFloat32, sizeof(float), ncclMax);
}

static void nc_allreduce_sum_f64(hpt_comm *c, hpt_group g, double *buf, size_t n)
{
    if (!on_device(buf))
        hpt_comm_mpi.allreduce_sum_f64(c, g, buf, n);
    else
        allreduce(c, g, buf, n, ncclFloat64, sizeof(double), ncclSum);
}

static void nc_allreduce_max_f64(hpt_comm *c, hpt_group g, double *buf, size_t n)
{
    if (!on_device(buf))
        hpt_comm_mpi.allreduce_max_f64(c, g, buf, n);
    else
        allreduce(c, g, buf, n, ncclFloat64, sizeof(double), ncclMax);
}

/* Enqueue `work` on stream `side` after everything enqueued so far on the
 * compute stream; `done` becomes an event recorded on `side` after the
 * work, which nc_wait makes the compute stream (not the host) wait for. */
#define ON_SIDE_STREAM(s, side, done, work)                                                         \
    do {                                                                                           \
        cudaEvent_t ready_;                                                                        \
        CUDA_OK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));                       \
        CUDA_OK(cudaEventCreateWithFlags(&(done), cudaEventDisableTiming));                       \
        CUDA_OK(cudaEventRecord(ready_, (s)->compute));                                            \
        CUDA_OK(cudaStreamWaitEvent((side), ready_, 0));                                           \
        work;                                                                                      \
        CUDA_OK(cudaEventRecord((done), (side)));                                                  \
        CUDA_OK(cudaEventDestroy(ready_)); /* released once recorded work completes */            \
    } while (0)

/* A bucket of the data-parallel gradient reduction: its gradients are
 * ready once the compute stream reaches this point (the event), the
 * all-reduce runs on the DP stream beside the rest of backward, and
 * nc_wait orders the compute stream after it. Other groups (none call
 * this today) go the same way on the same stream. */
static void nc_iallreduce_sum_f32(hpt_comm *c, hpt_group g, float *buf, size_t n,
                                  hpt_comm_req *r)
{
    r->stage_host = r->stage_dev = NULL; /* other fields belong to the recorder (lib/comm.c) */
    r->stage_bytes = 0;
    r->group = g;
    r->kind1 = 0; /* the device path counts its kind at the start (host time) */
    r->t_start = MPI_Wtime();
    if (!on_device(buf)) {
        hpt_comm_mpi.iallreduce_sum_f32(c, g, buf, n, r);
        r->stage_bytes = 1; /* marks an MPI request */
        return;
    }
    nccl_state *s = st(c);
    double t0 = MPI_Wtime();
    if (s->group[g]) {
        cudaEvent_t done;
        ncclComm_t nc = s->group[g];
        ON_SIDE_STREAM(s, s->dp, done,
                       NCCL_OK(ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, nc, s->dp)));
        r->stage_host = (void *)done;
    }
    count(c, g, n * sizeof(float), t0);
}

static void nc_wait(hpt_comm *c, hpt_comm_req *r)
{
    if (r->stage_bytes == 1) { /* an MPI request (host buffer) */
        hpt_comm_mpi.wait(c, r);
    } else if (r->stage_host) { /* a send or a bucket: order the compute stream after it */
        cudaEvent_t ev = (cudaEvent_t)r->stage_host;
        CUDA_OK(cudaStreamWaitEvent(st(c)->compute, ev, 0));
        CUDA_OK(cudaEventDestroy(ev));
    }
    r->stage_host = NULL;
    r->stage_bytes = 0;
}

static void nc_allgather_f32(hpt_comm *c, hpt_group g, const float *send, float *recv, size_t n)
{
    if (!on_device(send) || !on_device(recv)) {
        hpt_comm_mpi.allgather_f32(c, g, send, recv, n);
        return;
    }
    double t0 = MPI_Wtime();
    if (st(c)->group[g])
        NCCL_OK(ncclAllGather(send, recv, n, ncclFloat32, st(c)->group[g], st(c)->compute));
    else if (send != recv)
        CUDA_OK(cudaMemcpyAsync(recv, send, n * sizeof(float), cudaMemcpyDeviceToDevice,
                                st(c)->compute));
    count(c, g, n * sizeof(float), t0);
    /* host time: the enqueue */
    hpt_comm_count_kind(c->kinds, g, HPT_CK_GATHER, (long long)(n * sizeof(float)),
                        MPI_Wtime() - t0, 0);
}

/* Enqueue on `stream` the in-place all-gather of group g's blocks of buf
 * (counts[i] floats each, back to back): ncclAllGather when the blocks
 * are equal, else (NCCL has no all-gather-v) one broadcast per block in
 * one NCCL group call (NCCL fuses them); nothing in a group of one. */
static void ag_enqueue(hpt_comm *c, hpt_group g, float *buf, const int *counts,
                       cudaStream_t stream)
{
    ncclComm_t nc = st(c)->group[g];
    if (!nc)
        return;
    int size = c->group_size[g], me = c->group_rank[g], equal = 1;
    size_t off = 0, mine = 0;
    for (int i = 0; i < size; i++) {
        if (i == me)
            mine = off;
        off += (size_t)counts[i];
        equal &= counts[i] == counts[0];
    }
    if (equal) {
        NCCL_OK(ncclAllGather(buf + mine, buf, (size_t)counts[0], ncclFloat32, nc, stream));
        return;
    }
    off = 0;
    NCCL_OK(ncclGroupStart());
    for (int i = 0; i < size; i++) {
        NCCL_OK(ncclBroadcast(buf + off, buf + off, (size_t)counts[i], ncclFloat32, i, nc,
                              stream));
        off += (size_t)counts[i];
    }
    NCCL_OK(ncclGroupEnd());
}

static void nc_allgather_inplace_f32(hpt_comm *c, hpt_group g, float *buf, const int *counts)
{
    if (!on_device(buf)) {
        hpt_comm_mpi.allgather_inplace_f32(c, g, buf, counts);
        return;
    }
    double t0 = MPI_Wtime();
    ag_enqueue(c, g, buf, counts, st(c)->compute);
    count(c, g, (size_t)counts[c->group_rank[g]] * sizeof(float), t0);
    /* host time: the enqueue */
    hpt_comm_count_kind(c->kinds, g, HPT_CK_GATHER,
                        (long long)((size_t)counts[c->group_rank[g]] * sizeof(float)),
                        MPI_Wtime() - t0, 0);
}

/* A ZeRO-3 parameter gather: like nc_iallreduce_sum_f32 (the DP stream,
 * ordered after the compute stream by an event, waited for by the compute
 * stream in nc_wait), gathered like nc_allgather_inplace_f32. */
static void nc_iallgather_inplace_f32(hpt_comm *c, hpt_group g, float *buf, const int *counts,
                                      const int *displs, hpt_comm_req *r)
{
    r->stage_host = r->stage_dev = NULL;
    r->stage_bytes = 0;
    r->group = g;
    r->kind1 = 0; /* the device path counts its kind at the start (host time) */
    r->t_start = MPI_Wtime();
    if (!on_device(buf)) {
        hpt_comm_mpi.iallgather_inplace_f32(c, g, buf, counts, displs, r);
        r->stage_bytes = 1; /* marks an MPI request */
        return;
    }
    nccl_state *s = st(c);
    double t0 = MPI_Wtime();
    cudaEvent_t done;
    ON_SIDE_STREAM(s, s->dp, done, ag_enqueue(c, g, buf, counts, s->dp));
    r->stage_host = (void *)done;
    count(c, g, (size_t)counts[c->group_rank[g]] * sizeof(float), t0);
    /* host time: the enqueue */
    hpt_comm_count_kind(c->kinds, g, HPT_CK_GATHER,
                        (long long)((size_t)counts[c->group_rank[g]] * sizeof(float)),
                        MPI_Wtime() - t0, 0);
}

/* Equal blocks: ncclReduceScatter; uneven: one reduce per block to its
 * owner, in one NCCL group call. */
/* Enqueue on `stream` the sum over group g of send (the group's counts,
 * concatenated) with this rank's block into recv: ncclReduceScatter when
 * the blocks are equal, one grouped ncclReduce per block when not (uneven
 * shards), a device copy of the own block in a group of one. Returns the
 * elements reduced (the sum of counts). */
static size_t rs_enqueue(hpt_comm *c, hpt_group g, const float *send, float *recv,
                         const int *counts, cudaStream_t stream)
{
    int size = c->group_size[g], equal = 1;
    size_t total = 0, mine = 0;
    for (int i = 0; i < size; i++) {
        if (i == c->group_rank[g])
            mine = total;
        total += (size_t)counts[i];
        equal &= counts[i] == counts[0];
    }
    ncclComm_t nc = st(c)->group[g];
    if (!nc) {
        if (send + mine != recv)
            CUDA_OK(cudaMemcpyAsync(recv, send + mine, (size_t)counts[0] * sizeof(float),
                                    cudaMemcpyDeviceToDevice, stream));
    } else if (equal) {
        NCCL_OK(ncclReduceScatter(send, recv, (size_t)counts[0], ncclFloat32, ncclSum, nc,
                                  stream));
    } else {
        size_t off = 0;
        NCCL_OK(ncclGroupStart());
        for (int i = 0; i < size; i++) {
            NCCL_OK(ncclReduce(send + off, recv, (size_t)counts[i], ncclFloat32, ncclSum, i, nc,
                               stream));
            off += (size_t)counts[i];
        }
        NCCL_OK(ncclGroupEnd());
    }
    return total;
}

static void nc_reduce_scatter_sum_f32(hpt_comm *c, hpt_group g, const float *send, float *recv,
                                      const int *counts)
{
    if (!on_device(send) || !on_device(recv)) {
        hpt_comm_mpi.reduce_scatter_sum_f32(c, g, send, recv, counts);
        return;
    }
    double t0 = MPI_Wtime();
    size_t total = rs_enqueue(c, g, send, recv, counts, st(c)->compute);
    count(c, g, total * sizeof(float), t0);
    /* host time: the enqueue */
    hpt_comm_count_kind(c->kinds, g, HPT_CK_RS, (long long)(total * sizeof(float)),
                        MPI_Wtime() - t0, 0);
}

/* A ZeRO-2 gradient bucket: like nc_iallreduce_sum_f32 (the DP stream,
 * ordered after the compute stream by an event, waited for by the compute
 * stream in nc_wait), reduce-scattered like nc_reduce_scatter_sum_f32. */
static void nc_ireduce_scatter_sum_f32(hpt_comm *c, hpt_group g, const float *send, float *recv,
                                       const int *counts, hpt_comm_req *r)
{
    r->stage_host = r->stage_dev = NULL;
    r->stage_bytes = 0;
    r->group = g;
    r->kind1 = 0; /* the device path counts its kind at the start (host time) */
    r->t_start = MPI_Wtime();
    if (!on_device(send) || !on_device(recv)) {
        hpt_comm_mpi.ireduce_scatter_sum_f32(c, g, send, recv, counts, r);
        r->stage_bytes = 1; /* marks an MPI request */
        return;
    }
    nccl_state *s = st(c);
    double t0 = MPI_Wtime();
    size_t total = 0;
    cudaEvent_t done;
    ON_SIDE_STREAM(s, s->dp, done, total = rs_enqueue(c, g, send, recv, counts, s->dp));
    r->stage_host = (void *)done;
    count(c, g, total * sizeof(float), t0);
    /* host time: the enqueue */
    hpt_comm_count_kind(c->kinds, g, HPT_CK_RS, (long long)(total * sizeof(float)),
                        MPI_Wtime() - t0, 0);
}

/* The two-rank communicator that carries this send/receive, with the
 * peer's rank inside it in *peer_rank. Point-to-point traffic exists
 * between neighbouring pipeline stages (the lower stage is rank 0 of a
 * pair) and around the context-parallel ring (to r+1 on the out-edge,
 * from r-1 on the in-edge; the sender is rank 0 of an edge); anything
 * else is fatal. */
static ncclComm_t p2p_comm(hpt_comm *c, hpt_group g, int peer, int sending, int *peer_rank)
{
    int me = c->group_rank[g], n = c->group_size[g];
    if (g == HPT_GROUP_CP && n > 1 && peer == (sending ? (me + 1) % n : (me + n - 1) % n)) {
        *peer_rank = sending ? 1 : 0;
        return st(c)->p2p[sending ? P2P_CP_OUT : P2P_CP_IN];
    }
    if (g != HPT_GROUP_PP || (peer != me + 1 && peer != me - 1))
        HPT_FATAL("NCCL backend: point-to-point only between neighbouring pipeline stages or "
                  "to the next / from the previous context-parallel rank (group %s, rank %d, "
                  "peer %d, %s)", hpt_nccl_group_name(g), me, peer,
                  sending ? "send" : "receive");
    int k = peer == me + 1 ? (sending ? P2P_SEND_NEXT : P2P_RECV_NEXT)
                           : (sending ? P2P_SEND_PREV : P2P_RECV_PREV);
    *peer_rank = peer > me ? 1 : 0;
    return st(c)->p2p[k];
}

static void nc_isend_f32(hpt_comm *c, hpt_group g, const float *buf, size_t n, int peer, int tag,
                         hpt_comm_req *r)
{
    (void)tag; /* each communicator carries one direction in order: no tags needed */
    r->stage_host = r->stage_dev = NULL;
    r->stage_bytes = 0;
    r->group = g;
    r->kind1 = 0; /* the device path counts its kind at the start (host time) */
    r->t_start = MPI_Wtime();
    if (!on_device(buf)) {
        hpt_comm_mpi.isend_f32(c, g, buf, n, peer, tag, r);
        r->stage_bytes = 1;
        return;
    }
    nccl_state *s = st(c);
    cudaEvent_t done;
    int pr;
    ncclComm_t pc = p2p_comm(c, g, peer, 1, &pr);
    cudaStream_t side = g == HPT_GROUP_CP ? s->cp_send : s->send;
    double t0 = MPI_Wtime();
    ON_SIDE_STREAM(s, side, done, NCCL_OK(ncclSend(buf, n, ncclFloat32, pr, pc, side)));
    r->stage_host = (void *)done;
    c->counters[hpt_group_counted(g)].calls++;
    c->counters[hpt_group_counted(g)].bytes += (int64_t)(n * sizeof(float));
    if (g == HPT_GROUP_CP) /* host time: the enqueue (as irecv counts it) */
        c->counters[g].seconds += MPI_Wtime() - t0;
}

static void nc_recv_f32(hpt_comm *c, hpt_group g, float *buf, size_t n, int peer, int tag)
{
    if (!on_device(buf)) {
        hpt_comm_mpi.recv_f32(c, g, buf, n, peer, tag);
        return;
    }
    double t0 = MPI_Wtime();
    int pr;
    ncclComm_t pc = p2p_comm(c, g, peer, 0, &pr);
    NCCL_OK(ncclRecv(buf, n, ncclFloat32, pr, pc, st(c)->compute));
    c->counters[hpt_group_counted(g)].calls++;
    c->counters[hpt_group_counted(g)].seconds += MPI_Wtime() - t0;
}

/* Host buffers through MPI (waited by nc_wait's MPI path). Device
 * buffers (the CP ring's blocks only: anything else is fatal): ncclRecv
 * on the in-edge communicator on the CP receive stream, ordered after the
 * compute stream (the buffer may still be read by an earlier step's
 * kernels) by an event; nc_wait makes the compute stream wait for its
 * done event. Counted as recv_f32: one call, no bytes, the host time of
 * the enqueue. */
static void nc_irecv_f32(hpt_comm *c, hpt_group g, float *buf, size_t n, int peer, int tag,
                         hpt_comm_req *r)
{
    r->stage_host = r->stage_dev = NULL;
    r->stage_bytes = 0;
    r->group = g;
    r->kind1 = 0;
    r->t_start = MPI_Wtime();
    if (!on_device(buf)) {
        hpt_comm_mpi.irecv_f32(c, g, buf, n, peer, tag, r);
        r->stage_bytes = 1; /* marks an MPI request */
        return;
    }
    if (g != HPT_GROUP_CP) /* the pipeline receives block, on the compute stream */
        HPT_FATAL("NCCL backend: nonblocking receive into device memory only on the "
                  "context-parallel ring (group %s, peer %d)", hpt_nccl_group_name(g), peer);
    nccl_state *s = st(c);
    double t0 = MPI_Wtime();
    int pr;
    ncclComm_t pc = p2p_comm(c, g, peer, 0, &pr);
    cudaEvent_t done;
    ON_SIDE_STREAM(s, s->cp_recv, done,
                   NCCL_OK(ncclRecv(buf, n, ncclFloat32, pr, pc, s->cp_recv)));
    r->stage_host = (void *)done;
    c->counters[hpt_group_counted(g)].calls++;
    c->counters[hpt_group_counted(g)].seconds += MPI_Wtime() - t0;
}

static void nc_broadcast(hpt_comm *c, hpt_group g, void *buf, size_t bytes, int root)
{
    if (!on_device(buf)) {
        hpt_comm_mpi.broadcast(c, g, buf, bytes, root);
        return;
    }
    double t0 = MPI_Wtime();
    if (st(c)->group[g])
        NCCL_OK(ncclBroadcast(buf, buf, bytes, ncclInt8, root, st(c)->group[g], st(c)->compute));
    count(c, g, bytes, t0);
}

static const hpt_comm_backend nccl_backend = {
    .name = "nccl",
    .allreduce_sum_f32 = nc_allreduce_sum_f32,
    .allreduce_max_f32 = nc_allreduce_max_f32,
    .allreduce_sum_f64 = nc_allreduce_sum_f64,
    .allreduce_max_f64 = nc_allreduce_max_f64,
    .iallreduce_sum_f32 = nc_iallreduce_sum_f32,
    .wait = nc_wait,
    .allgather_f32 = nc_allgather_f32,
    .allgather_inplace_f32 = nc_allgather_inplace_f32,
    .iallgather_inplace_f32 = nc_iallgather_inplace_f32,
    .reduce_scatter_sum_f32 = nc_reduce_scatter_sum_f32,
    .ireduce_scatter_sum_f32 = nc_ireduce_scatter_sum_f32,
    .isend_f32 = nc_isend_f32,
    .recv_f32 = nc_recv_f32,
    .irecv_f32 = nc_irecv_f32,
    .broadcast = nc_broadcast,
};

static const char *host_name(void)
{
    static char host[64];
    if (!host[0] && gethostname(host, sizeof host - 1))
        snprintf(host, sizeof host, "unknown-host");
    return host;
}

/* A communicator over `mpi` (this rank's rank in it: its MPI rank), from a
 * unique id made by its rank 0. Collective over mpi. Errors name this
 * rank's world rank and host. */
static hpt_status init_over(MPI_Comm mpi, ncclComm_t *out, const char *what, int world_rank)
{
    int rank, size;
    MPI_Comm_rank(mpi, &rank);
    MPI_Comm_size(mpi, &size);
    ncclUniqueId id;
    ncclResult_t r = ncclSuccess;
    if (rank == 0)
        r = ncclGetUniqueId(&id);
    int bad = r != ncclSuccess, anybad;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, mpi);
    if (anybad)
        return hpt_error_set(HPT_ERR_IO, "--comm nccl: rank %d on %s: ncclGetUniqueId for the %s "
                             "group failed: %s", world_rank, host_name(), what,
                             ncclGetErrorString(r));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, mpi);
    r = ncclCommInitRank(out, size, id, rank);
    if (r != ncclSuccess) {
        *out = NULL;
        return hpt_error_set(HPT_ERR_IO, "--comm nccl: rank %d on %s: ncclCommInitRank for the %s "
                             "group (%d ranks) failed: %s%s", world_rank, host_name(), what, size,
                             ncclGetErrorString(r),
                             r == ncclInvalidUsage ? " (two ranks on one GPU? NCCL needs a distinct "
                                                     "GPU per rank)" : "");
    }
    return HPT_OK;
}


/* This rank's (host, GPU): the current device's PCI bus id. */
static void my_slot(hpt_gpu_slot *me)
{
    int dev = -1;
    memset(me, 0, sizeof *me);
    snprintf(me->host, sizeof me->host, "%s", host_name());
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetPCIBusId(me->gpu, (int)sizeof me->gpu - 1, dev) != cudaSuccess) {
        cudaGetLastError();
        me->gpu[0] = 0; /* no device: the CUDA backend reports that itself */
    }
}

int hpt_comm_nccl_gpus_shared(hpt_comm *c, char *why, size_t cap)
{
    int n = c->world_size, shared = -1;
    hpt_gpu_slot me, *all = malloc((size_t)n * sizeof *all);
    int *first = malloc((size_t)n * sizeof *first), ok = all && first, allok;
    my_slot(&me);
    MPI_Allreduce(&ok, &allok, 1, MPI_INT, MPI_MIN, c->comms[HPT_GROUP_WORLD]);
    if (allok) {
        MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE,
                      c->comms[HPT_GROUP_WORLD]);
        shared = hpt_gpu_shared(all, n, first);
    }
    if (shared > 0)
        hpt_gpu_shared_describe(all, n, first, 4, why, cap);
    else if (cap)
        snprintf(why, cap, "%s", shared < 0 ? "out of memory gathering every rank's GPU" : "");
    free(all);
    free(first);
    return shared;
}

/* The size-1 mode's point-to-point check on one GPU: 1024 floats sent by
 * this rank to itself over the world communicator (one NCCL group call),
 * on the side stream ordered after the compute stream by an event, as
 * nc_isend_f32 does, the compute stream then waiting for its done event;
 * the received values must equal the sent ones. */
static hpt_status loopback_check(nccl_state *s)
{
    enum { LN = 1024 };
    float host[LN], back[LN], *a = NULL, *b = NULL;
    for (int i = 0; i < LN; i++)
        host[i] = (float)i * 0.5f - 7.0f;
    ncclComm_t w = s->group[HPT_GROUP_WORLD];
    int me = 0;
    hpt_status err = HPT_OK;
    if (cudaMalloc((void **)&a, sizeof host) != cudaSuccess ||
        cudaMalloc((void **)&b, sizeof host) != cudaSuccess) {
        err = hpt_error_set(HPT_ERR_IO, "HPT_NCCL_SIZE1: cudaMalloc of the send/recv check: %s",
                            cudaGetErrorString(cudaGetLastError()));
        goto out;
    }
    CUDA_OK(cudaMemcpy(a, host, sizeof host, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(b, 0, sizeof host));
    NCCL_OK(ncclCommUserRank(w, &me));
    cudaEvent_t done;
    ON_SIDE_STREAM(s, s->send, done, {
        NCCL_OK(ncclGroupStart());
        NCCL_OK(ncclSend(a, LN, ncclFloat32, me, w, s->send));
        NCCL_OK(ncclRecv(b, LN, ncclFloat32, me, w, s->send));
        NCCL_OK(ncclGroupEnd());
    });
    CUDA_OK(cudaStreamWaitEvent(s->compute, done, 0));
    CUDA_OK(cudaEventDestroy(done));
    CUDA_OK(cudaMemcpy(back, b, sizeof back, cudaMemcpyDeviceToHost)); /* on the compute stream */
    if (memcmp(back, host, sizeof host))
        err = hpt_error_set(HPT_ERR_IO, "HPT_NCCL_SIZE1: a send/recv of %d floats to itself "
                            "on the side stream returned other values (first: %g, want %g)",
                            LN, (double)back[0], (double)host[0]);
out:
    cudaFree(a);
    cudaFree(b);
    return err;
}

/* The CP ring's edge communicators (plan->cp_edges: 0 or 2 on every rank
 * alike): for each edge e = 0 .. CP-1 in order, the pair (CP rank e, CP
 * rank e+1 mod CP) of every CP group is split from the CP communicator
 * keyed by its rank inside the edge (hpt_nccl_cp_edge_rank: the sender 0),
 * and agreed over the world after each edge, as the pipeline pairs are. */
static hpt_status cp_edges_init(hpt_comm *c, nccl_state *s, const hpt_nccl_plan *plan)
{
    hpt_status err = HPT_OK;
    for (int e = 0; plan->cp_edges && e < c->cp && !err; e++) {
        int k = hpt_nccl_cp_edge_rank(c->cp, c->group_rank[HPT_GROUP_CP], e);
        MPI_Comm pair;
        MPI_Comm_split(c->comms[HPT_GROUP_CP], k >= 0 ? 0 : MPI_UNDEFINED, k, &pair);
        hpt_status e_ = HPT_OK;
        if (pair != MPI_COMM_NULL) {
            e_ = init_over(pair, &s->p2p[k == 0 ? P2P_CP_OUT : P2P_CP_IN],
                           k == 0 ? "context-parallel ring (out-edge)"
                                  : "context-parallel ring (in-edge)", c->world_rank);
            MPI_Comm_free(&pair);
        }
        err = hpt_comm_agree(c->comms[HPT_GROUP_WORLD], e_); /* every rank, every edge */
    }
    return err;
}

hpt_status hpt_comm_nccl_on(hpt_comm *c)
{
    /* NCCL refuses two ranks on one GPU deep inside ncclCommInitRank
     * (ncclInvalidUsage, "Duplicate GPU detected"): check every rank's
     * (host, PCI bus id) first and name the ranks (the same answer on
     * every rank: the pairs are all-gathered). */
    char why[800];
    int shared = hpt_comm_nccl_gpus_shared(c, why, sizeof why);
    if (shared > 0)
        return hpt_error_set(HPT_ERR_USAGE, "--comm nccl: NCCL needs a distinct GPU per rank, but "
                             "%s (use --comm mpi, which stages through host memory and lets ranks "
                             "share a GPU, or start one rank per GPU)", why);
    if (shared < 0)
        return hpt_error_set(HPT_ERR_IO, "--comm nccl: %s", why);
    nccl_state *s = calloc(1, sizeof *s);
    if (!s)
        return hpt_error_set(HPT_ERR_IO, "--comm nccl: out of memory");
    hpt_status err = HPT_OK;
    s->compute = 0; /* the CUDA backend's stream: the legacy default stream */
    if (cudaStreamCreateWithFlags(&s->send, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s->dp, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s->cp_send, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s->cp_recv, cudaStreamNonBlocking) != cudaSuccess)
        err = hpt_error_set(HPT_ERR_IO, "--comm nccl: rank %d on %s: cudaStreamCreateWithFlags: %s",
                            c->world_rank, host_name(), cudaGetErrorString(cudaGetLastError()));
    err = hpt_comm_agree(c->comms[HPT_GROUP_WORLD], err);
    /* Every rank walks the groups in the same order; a group of one rank
     * needs no communicator (its collectives are copies or nothing) unless
     * HPT_NCCL_SIZE1=1 asks for one (lib/comm_nccl_plan.c). After each
     * group every rank agrees on the results, so a rank whose
     * ncclCommInitRank failed does not leave the others waiting for it in
     * the next group's set-up, and the message names the lowest failing
     * rank and its host. */
    int size1 = 0;
    if (!err)
        err = hpt_comm_agree(c->comms[HPT_GROUP_WORLD], hpt_nccl_size1_env(&size1));
    hpt_nccl_plan plan;
    hpt_nccl_plan_make(c, size1, &plan);
    for (int g = 0; g < HPT_GROUP_COUNT && !err; g++) {
        hpt_status e = HPT_OK;
        if (plan.group[g] == HPT_NCCL_OWN)
            e = init_over(c->comms[g], &s->group[g], hpt_nccl_group_name((hpt_group)g),
                          c->world_rank);
        err = hpt_comm_agree(c->comms[HPT_GROUP_WORLD], e);
    }
    if (!err && plan.group[HPT_GROUP_DPS] == HPT_NCCL_SHARES_DP)
        s->group[HPT_GROUP_DPS] = s->group[HPT_GROUP_DP];
    /* Pipeline neighbours: for each boundary b (stages b, b+1) in order, a
     * forward pair (b sends, b+1 receives) then a backward pair. */
    for (int b = 0; b + 1 < c->pp && !err; b++) {
        int lower = c->pp_rank == b, upper = c->pp_rank == b + 1;
        MPI_Comm pair;
        MPI_Comm_split(c->comms[HPT_GROUP_PP], (lower || upper) ? 0 : MPI_UNDEFINED, c->pp_rank,
                       &pair);
        hpt_status e = HPT_OK;
        if (pair != MPI_COMM_NULL) {
            e = init_over(pair, &s->p2p[lower ? P2P_SEND_NEXT : P2P_RECV_PREV],
                          "pipeline (forward)", c->world_rank);
            if (!e)
                e = init_over(pair, &s->p2p[lower ? P2P_RECV_NEXT : P2P_SEND_PREV],
                              "pipeline (backward)", c->world_rank);
            MPI_Comm_free(&pair);
        }
        err = hpt_comm_agree(c->comms[HPT_GROUP_WORLD], e); /* every rank, every boundary */
    }
    if (!err)
        err = cp_edges_init(c, s, &plan);
    c->nccl = s;
    if (!err && plan.loopback)
        err = hpt_comm_agree(c->comms[HPT_GROUP_WORLD], loopback_check(s));
    if (err) {
        hpt_comm_nccl_off(c);
        return err;
    }
    c->be = &nccl_backend;
    hpt_comm_trace_init(c, NULL); /* the flight recorder back in front (lib/comm.c) */
    return HPT_OK;
}

void hpt_comm_nccl_abort(hpt_comm *c)
{
    nccl_state *s = c ? st(c) : NULL;
    if (!s)
        return;
    for (int g = 0; g < HPT_GROUP_COUNT; g++)
        if (s->group[g] && !(g == HPT_GROUP_DPS && s->group[g] == s->group[HPT_GROUP_DP]))
            ncclCommAbort(s->group[g]);
    for (int k = 0; k < P2P_COUNT; k++)
        if (s->p2p[k])
            ncclCommAbort(s->p2p[k]);
    memset(s->group, 0, sizeof s->group);
    memset(s->p2p, 0, sizeof s->p2p);
}

void hpt_comm_nccl_off(hpt_comm *c)
{
    nccl_state *s = c ? st(c) : NULL;
    if (!s)
        return;
    for (int g = 0; g < HPT_GROUP_COUNT; g++)
        if (s->group[g] && !(g == HPT_GROUP_DPS && s->group[g] == s->group[HPT_GROUP_DP]))
            ncclCommDestroy(s->group[g]); /* the DP communicator once */
    for (int k = 0; k < P2P_COUNT; k++)
        if (s->p2p[k])
            ncclCommDestroy(s->p2p[k]);
    if (s->send)
        cudaStreamDestroy(s->send);
    if (s->dp)
        cudaStreamDestroy(s->dp);
    if (s->cp_send)
        cudaStreamDestroy(s->cp_send);
    if (s->cp_recv)
        cudaStreamDestroy(s->cp_recv);
    free(s);
    c->nccl = NULL;
    c->be = &hpt_comm_mpi;
    hpt_comm_trace_init(c, NULL);
}
