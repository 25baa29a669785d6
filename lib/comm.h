/* comm.h — the communication-backend seam and the rank grid.
 *
 * Rank grid (Megatron-LM's default order): world = TP x CP x DP x PP and
 *   rank = tp + cp*TP + dp*TP*CP + pp*TP*CP*DP
 * so tensor-parallel ranks are consecutive (same node), then context
 * parallel (the ranks sharing one sequence, issue 31), then data
 * parallel, then pipeline stages. The weights are replicated over CP
 * exactly as over DP: the "DP" groups below (HPT_GROUP_DP and ZeRO's
 * DPS/DPR) hold the CP x DP replicas (c->cp * c->dp ranks), so gradients,
 * losses and ZeRO state reduce over both; c->dp and c->dp_rank stay the
 * data-parallel size and coordinate (which samples a rank reads). Every collective of the trainer goes
 * through one table of function pointers (MPI now, NCCL later) on a named
 * group, and every call is counted per group (calls, payload bytes,
 * seconds) for the metrics. hpt_comm_init installs the recording table
 * (hpt_comm_traced, lib/comm.c) in front of the backend: every call goes
 * through it and lands in the rank's flight recorder (lib/flight.h), which
 * the hang watchdog (lib/watchdog.h) reads.
 */
#ifndef HPT_COMM_H
#define HPT_COMM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "flight.h"

typedef enum {
    HPT_GROUP_WORLD,
    HPT_GROUP_TP,    /* same (dp, pp): tensor-parallel ranks              */
    HPT_GROUP_DP,    /* same (tp, pp): the weight replicas, CP x DP ranks
                      * (group rank cp + dp*CP; DP ranks when CP = 1)     */
    HPT_GROUP_PP,    /* same (tp, dp): the stages of one pipeline         */
    HPT_GROUP_MP,    /* same dp: the model-parallel group (TP x PP)        */
    HPT_GROUP_EMBED, /* first and last stage of one pipeline (same tp, dp):
                      * holds the two copies of a tied embedding; NULL
                      * communicator on the other stages                 */
    HPT_GROUP_DPS,   /* ZeRO's shard group: DP ranks q*N .. q*N + N-1 of
                      * one DP group (N = hpt_comm_shard_group's; all of
                      * DP unless HSDP)                                  */
    HPT_GROUP_DPR,   /* HSDP's replica group: the DP ranks holding the
                      * same shard (DP rank % N equal); one rank unless
                      * HSDP                                             */
    HPT_GROUP_CP,    /* same (tp, dp, pp): the context-parallel ranks that
                      * share one sequence (the ring of ring attention) */
    HPT_GROUP_COUNT
} hpt_group;

/* The group whose counters count g's traffic: the shard and replica
 * groups are parts of the data-parallel group, counted as DP (so
 * --comm-stats, metrics.h5 and hpt-plan see one "dp" figure). */
static inline int hpt_group_counted(int g)
{
    return g == HPT_GROUP_DPS || g == HPT_GROUP_DPR ? HPT_GROUP_DP : g;
}

typedef struct {
    int64_t calls;   /* collective or point-to-point calls                */
    int64_t bytes;   /* payload bytes handed to the call by this rank     */
    double seconds;  /* wall time inside the calls (including waits)      */
} hpt_comm_counter;

/* ZeRO's sharding traffic on the DP groups (DP, its shard and replica
 * groups), by kind: parameter all-gathers and gradient reduce-scatters.
 * A blocking call waits its whole duration; a nonblocking one is in
 * flight from its start to the end of its wait, and only its wait is
 * waited: 1 - seconds/inflight is the share hidden behind other work. */
enum { HPT_CK_GATHER, HPT_CK_RS, HPT_CK_COUNT };
typedef struct {
    int64_t calls, bytes; /* as hpt_comm_counter                          */
    double seconds;       /* waited: inside the blocking call or the wait  */
    double inflight;      /* from the start to the end of the wait          */
} hpt_comm_kind_counter;

typedef struct hpt_comm hpt_comm;

/* A pending nonblocking operation. */
typedef struct {
    MPI_Request req;
    hpt_group group;
    int kind1;       /* HPT_CK_* + 1 for the kind counters; 0 none (set at
                      * every start by the backends)                     */
    double t_start;
    /* host staging (comm_stage.c): the operation's own host copy, and the
     * device buffer it is uploaded to at wait (NULL: nothing to upload). */
    void *stage_host, *stage_dev;
    size_t stage_bytes;
    int64_t fr_id;   /* flight-recorder id of the operation (lib/comm.c) */
} hpt_comm_req;

typedef struct hpt_comm_stage hpt_comm_stage;

/* Count a ZeRO sharding call of `kind` (HPT_CK_*) on group g (nothing
 * when g is not one of the DP groups): `bytes` handed in, `waited` and
 * `inflight` seconds (a blocking call: both its duration; a nonblocking
 * start: 0, 0 with calls counted; its wait: calls 0 via bytes < 0). */
static inline void hpt_comm_count_kind(hpt_comm_kind_counter *k, hpt_group g, int kind,
                                       long long bytes, double waited, double inflight)
{
    if (kind < 0 || kind >= HPT_CK_COUNT || hpt_group_counted(g) != HPT_GROUP_DP)
        return;
    if (bytes >= 0) {
        k[kind].calls++;
        k[kind].bytes += bytes;
    }
    k[kind].seconds += waited;
    k[kind].inflight += inflight;
}

typedef struct {
    const char *name;
    /* buf (n floats) = sum over the group, in place. */
    void (*allreduce_sum_f32)(hpt_comm *c, hpt_group g, float *buf, size_t n);
    /* buf (n floats) = element-wise max over the group, in place. */
    void (*allreduce_max_f32)(hpt_comm *c, hpt_group g, float *buf, size_t n);
    /* buf (n doubles) = sum / max over the group, in place. */
    void (*allreduce_sum_f64)(hpt_comm *c, hpt_group g, double *buf, size_t n);
    void (*allreduce_max_f64)(hpt_comm *c, hpt_group g, double *buf, size_t n);
    /* Start an in-place sum all-reduce of n floats; finish with wait. */
    void (*iallreduce_sum_f32)(hpt_comm *c, hpt_group g, float *buf, size_t n, hpt_comm_req *r);
    void (*wait)(hpt_comm *c, hpt_comm_req *r);
    /* recv (size*n) = concatenation of every rank's send (n), rank order. */
    void (*allgather_f32)(hpt_comm *c, hpt_group g, const float *send, float *recv, size_t n);
    /* Block i of buf (counts[i] floats, blocks back to back in rank order)
     * is rank i's; every rank receives all blocks, in place. */
    void (*allgather_inplace_f32)(hpt_comm *c, hpt_group g, float *buf, const int *counts);
    /* The same, nonblocking (MPI_Iallgatherv in place; NCCL: one
     * broadcast per block in a group call on the DP side stream): start
     * it; finish with wait. displs[i] = counts[0] + ... + counts[i-1];
     * buf, counts and displs must not change until the wait (MPI reads
     * them until then). Counted as allgather_inplace_f32 is: one call,
     * this rank's block's bytes. ZeRO-3's parameter gathers and their
     * prefetch (lib/train_zero3.c). */
    void (*iallgather_inplace_f32)(hpt_comm *c, hpt_group g, float *buf, const int *counts,
                                   const int *displs, hpt_comm_req *r);
    /* recv (counts[rank]) = sum over the group of this rank's block of send
     * (blocks of counts[i] floats back to back in rank order). */
    void (*reduce_scatter_sum_f32)(hpt_comm *c, hpt_group g, const float *send, float *recv,
                                   const int *counts);
    /* The same, nonblocking (MPI_Ireduce_scatter; NCCL: ncclReduceScatter
     * for equal blocks, one ncclReduce per block otherwise): start it;
     * finish with wait. send and recv must not change until then; counts
     * may be zero (a rank owning nothing of this range) and is read only
     * during the call. Counted as reduce_scatter_sum_f32 is: one call,
     * the whole send range's bytes. ZeRO-2's gradient buckets
     * (lib/train_dp_buckets.c). */
    void (*ireduce_scatter_sum_f32)(hpt_comm *c, hpt_group g, const float *send, float *recv,
                                    const int *counts, hpt_comm_req *r);
    /* Point-to-point inside a group (pipeline activations and gradients,
     * the CP ring's blocks): start sending n floats to group rank `peer`;
     * finish with wait. The floats are copied as bits, so callers may move
     * bf16 activations as whole 4-byte words (lib/attention_ring.c). */
    void (*isend_f32)(hpt_comm *c, hpt_group g, const float *buf, size_t n, int peer, int tag,
                      hpt_comm_req *r);
    /* Receive n floats from group rank `peer` (blocking). */
    void (*recv_f32)(hpt_comm *c, hpt_group g, float *buf, size_t n, int peer, int tag);
    /* Start receiving n floats from group rank `peer` into buf; finish
     * with wait (buf must not be read or freed before). Counted as
     * recv_f32: one call, no bytes (the sender counts them). The ring of
     * context parallelism (lib/attention_ring.c): K/V blocks in flight
     * while the current block computes. NCCL: host buffers through MPI;
     * device buffers through the ring's in-edge communicator on a side
     * stream (lib/comm_nccl.c; compiled, not yet run on a GPU). */
    void (*irecv_f32)(hpt_comm *c, hpt_group g, float *buf, size_t n, int peer, int tag,
                      hpt_comm_req *r);
    /* bytes from `root` (group rank) to every rank. */
    void (*broadcast)(hpt_comm *c, hpt_group g, void *buf, size_t bytes, int root);
} hpt_comm_backend;

struct hpt_comm {
    const hpt_comm_backend *be;
    int world_rank, world_size;
    int tp, pp, dp, cp;                 /* grid sizes (dp: data parallel)     */
    int tp_rank, pp_rank, dp_rank, cp_rank; /* this rank's coordinates        */
    int node_rank, node_size;           /* rank and size inside its node      */
    MPI_Comm comms[HPT_GROUP_COUNT];
    int group_rank[HPT_GROUP_COUNT], group_size[HPT_GROUP_COUNT];
    hpt_comm_counter counters[HPT_GROUP_COUNT];
    hpt_comm_kind_counter kinds[HPT_CK_COUNT]; /* the DP gathers, reduce-scatters */
    hpt_comm_stage *stage;              /* host staging; NULL when off        */
    void *nccl;                         /* comm_nccl.c state; NULL when off   */
    /* flight recorder (lib/comm.c): `be` is hpt_comm_traced calling
     * `inner`, or `inner` itself when the recorder is off */
    const hpt_comm_backend *inner;
    hpt_flight *fr;                     /* NULL = off (HPT_FLIGHT_RECORDER=0) */
    int group_color[HPT_GROUP_COUNT];   /* same color = same group instance; -1 none */
    int *group_world[HPT_GROUP_COUNT];  /* world rank of every group rank    */
};

/* Host staging of device buffers (comm_stage.c). */
struct hpt_comm_stage {
    const hpt_comm_backend *inner;      /* the wrapped (host-memory) backend  */
    int (*is_device)(const void *p);    /* compute backend: p is device memory */
    void (*download)(void *host, const void *dev, size_t bytes);
    void (*upload)(void *dev, const void *host, size_t bytes);
    void *host;                         /* blocking operations' buffer, owned  */
    size_t cap;                         /* its size, bytes                    */
};

/* Put host staging between c's backend (MPI: host memory only) and a
 * compute backend whose buffers live in device memory (CUDA): every buffer
 * argument for which is_device() is true is downloaded to host memory
 * before the operation and uploaded after it when the operation writes it;
 * host buffers pass through unchanged. The results equal the unstaged
 * backend's bit for bit. s (caller-owned, lives as long as c) holds the
 * state; c->be becomes the staging table. Allocation failure later is
 * fatal (MPI_Abort via HPT_FATAL, naming the bytes). The NCCL backend
 * reads device memory itself and needs no staging. */
void hpt_comm_stage_on(hpt_comm *c, hpt_comm_stage *s, int (*is_device)(const void *p),
                       void (*download)(void *host, const void *dev, size_t bytes),
                       void (*upload)(void *dev, const void *host, size_t bytes));

/* Switch c to the NCCL backend (collective over c's world; CUDA device
 * already chosen): first hpt_comm_nccl_gpus_shared (ranks sharing a GPU:
 * HPT_ERR_USAGE naming them, before NCCL is touched); then one NCCL
 * communicator per group of more than one rank, agreed over the world
 * after each group (a failure names the lowest failing rank and its host),
 * from an ncclUniqueId broadcast over the group's MPI communicator, and
 * two-rank communicators per pipeline boundary and direction and per
 * context-parallel ring edge (hpt_nccl_cp_edge_rank) for the
 * point-to-point traffic. Device buffers go through NCCL, host buffers
 * through MPI; the data-parallel bucket all-reduces (iallreduce) run on a
 * stream of their own, ordered after the compute stream by an event and
 * waited for by the compute stream only (overlap with backward). Errors
 * (agreed over the world, so every rank returns the same): HPT_ERR_USAGE
 * for shared GPUs or a build without NCCL; HPT_ERR_IO naming the rank, its
 * host, the group and NCCL's message. */
hpt_status hpt_comm_nccl_on(hpt_comm *c);

/* Do ranks share a GPU? Collective over c's world: every rank's (host
 * name, PCI bus id of its current CUDA device) is all-gathered and checked
 * with hpt_gpu_shared (lib/gpu_slots.h). Returns the number of ranks whose
 * GPU a lower rank also uses (the same on every rank; 0: all distinct), and
 * in why (cap bytes, NUL-terminated) the ranks, hosts and GPUs ("rank 1 on
 * n1 shares GPU 0000:3b:00.0 with rank 0; ..."); -1 when out of memory
 * (why says so). hpt_comm_nccl_on calls it before any ncclCommInitRank;
 * --comm auto uses it to fall back to MPI with host staging. Without NCCL
 * in the build: 0, why "". */
int hpt_comm_nccl_gpus_shared(hpt_comm *c, char *why, size_t cap);

/* The NCCL communicators hpt_comm_nccl_on creates for this rank
 * (lib/comm_nccl_plan.c; pure, built with or without NCCL). */
enum { HPT_NCCL_NONE, HPT_NCCL_OWN, HPT_NCCL_SHARES_DP };
typedef struct {
    int group[HPT_GROUP_COUNT]; /* HPT_NCCL_NONE, _OWN, or _SHARES_DP (the shard group) */
    int pairs;                  /* pipeline pair communicators this rank joins: 0, 2, 4 */
    int cp_edges;               /* context-parallel ring edges this rank joins: 0, 2    */
    int size1;                  /* groups of one rank get a communicator too            */
    int loopback;               /* size-1 mode: a checked send/recv to itself            */
} hpt_nccl_plan;

/* HPT_NCCL_SIZE1 into *on: unset, empty or 0 -> 0; 1 -> 1 (the size-1 mode:
 * a communicator for every group this rank is in, groups of one included,
 * so a one-GPU run drives every NCCL collective, the side streams and
 * their events; plus a send/recv to itself). Else HPT_ERR_USAGE. */
hpt_status hpt_nccl_size1_env(int *on);

/* This rank's plan for c's groups: a communicator for each group of at
 * least 2 ranks (1 with size1) that it belongs to; the ZeRO shard group
 * shares the data-parallel one when they have the same size; the pipeline
 * pair communicators (two per neighbouring stage); the CP ring's two edge
 * communicators when c->cp > 1 (hpt_nccl_cp_edge_rank). */
void hpt_nccl_plan_make(const hpt_comm *c, int size1, hpt_nccl_plan *p);

/* The ring of context parallelism (lib/attention_ring.c) over NCCL: one
 * two-rank communicator per ring edge e = 0 .. cp-1, joining CP rank e (the
 * sender, rank 0 inside it) and CP rank (e+1) % cp (the receiver, rank 1),
 * so each edge carries one direction: every CP rank is in two, its out-edge
 * (e = cp_rank) and its in-edge (e = cp_rank - 1 mod cp); at CP 2 they join
 * the same two ranks as two distinct communicators. Returns this rank's
 * rank inside edge e (0 or 1), or -1 when it is not a member (or cp < 2,
 * or e out of range). Pure. */
int hpt_nccl_cp_edge_rank(int cp, int cp_rank, int e);

/* "world (1), tensor-parallel (1), ...; 0 pipeline pair communicators[; 2
 * context-parallel ring edge communicators][; a send/recv ...]" into buf
 * (snprintf rules); returns the length wanted. */
int hpt_nccl_plan_describe(const hpt_nccl_plan *p, const hpt_comm *c, char *buf, size_t cap);

/* A group's name in messages ("data-parallel shard"). */
const char *hpt_nccl_group_name(hpt_group g);

/* Destroy the NCCL communicators and switch back to MPI; accepts c without
 * NCCL. */
void hpt_comm_nccl_off(hpt_comm *c);

/* Abort every NCCL communicator of c (ncclCommAbort) so an operation stuck
 * on the GPU returns; for the hang watchdog before it ends the job. Safe
 * to call from another thread; accepts c without NCCL. */
void hpt_comm_nccl_abort(hpt_comm *c);

/* Undo hpt_comm_stage_on and free its host buffer; no nonblocking
 * operation may be in flight. Accepts c without staging. */
void hpt_comm_stage_off(hpt_comm *c);

/* The MPI backend. */
extern const hpt_comm_backend hpt_comm_mpi;

/* The recording table: every slot records the call in c->fr (posted,
 * blocked, completed; point-to-point peers as world ranks) and calls the
 * same slot of c->inner. */
extern const hpt_comm_backend hpt_comm_traced;

/* Put the recording table in front of c->be (c->inner = the backend),
 * with a ring of hpt_flight_size_from_env() slots; with 0 slots (or out of
 * memory: a warning on `warn`) calls go straight to the backend. Needs
 * c->group_world. Called by hpt_comm_init; call it again after something
 * that replaced c->be without calling the old table (switching to another
 * backend): the same recorder is put back in front (a no-op when it is
 * already there). Not after a wrapper that calls the old c->be as its
 * inner table (it already calls the recorder; wrapping it again would make
 * the recorder call itself). */
void hpt_comm_trace_init(hpt_comm *c, FILE *warn);

/* Watched collectives: a collective that bypasses the table (a direct MPI
 * call: hpt_comm_agree, the step-boundary stop agreement, the metrics
 * gather, a checkpoint's agreements and CRC reduction) is recorded in the
 * flight recorder of the watched communicator — the last one whose
 * recorder hpt_comm_trace_init turned on, until hpt_comm_free — so the
 * hang watchdog times it and the laggard analysis follows it like any
 * other call. Only the recorder: the per-group counters (--comm-stats) do
 * not count it. `comm` names the group: a communicator as large as the
 * world is the world group, a smaller one the group whose communicator it
 * is (MPI_Comm_compare not MPI_UNEQUAL); every member must call the same
 * watched collectives in the same order (collective semantics give that).
 * op: hpt_flight_op; bytes: this rank's payload. Returns a handle for
 * hpt_comm_watch_end; nothing is recorded (handle id -1) without a watched
 * communicator or for a communicator of none of its groups. Training
 * thread only. */
typedef struct {
    int64_t id;  /* flight-recorder id; -1: not recorded */
    int group;
} hpt_comm_watch;
hpt_comm_watch hpt_comm_watch_begin(MPI_Comm comm, int op, size_t bytes);
/* The same for a nonblocking collective: posted now, waited on from
 * hpt_comm_watch_block (just before its MPI_Wait) to hpt_comm_watch_end. */
hpt_comm_watch hpt_comm_watch_post(MPI_Comm comm, int op, size_t bytes);
void hpt_comm_watch_block(hpt_comm_watch w);
/* The watched collective w completed. */
void hpt_comm_watch_end(hpt_comm_watch w);
/* c is no longer the watched communicator (hpt_comm_free calls it). */
void hpt_comm_watch_forget(hpt_comm *c);

/* Check a layout without communicating: world == tp*pp*dp with all > 0
 * (dp <= 0 means "infer dp = world/(tp*pp)"). Every rank computes the same
 * answer, so an error is found before any collective can hang. On success
 * *dp_out is the data-parallel size. Errors: HPT_ERR_USAGE naming the
 * option and listing valid layouts when the product does not match.
 * hpt_grid_check is hpt_grid_check_cp with cp = 1. */
hpt_status hpt_grid_check(int world, int tp, int pp, int dp, int *dp_out);

/* The same with context parallelism: world == tp*cp*pp*dp, all > 0 (dp <=
 * 0: inferred as world/(tp*cp*pp)). Errors as hpt_grid_check, naming --cp
 * too. */
hpt_status hpt_grid_check_cp(int world, int tp, int cp, int pp, int dp, int *dp_out);

/* Build the grid on `world` (collective over it): sub-communicators for
 * every group, node-local rank (MPI_Comm_split_type SHARED). Writes one
 * warning line to `warn` (rank 0) when a TP group spans nodes. The grid
 * must have passed hpt_grid_check. */
hpt_status hpt_comm_init(hpt_comm *c, MPI_Comm world, int tp, int pp, int dp, FILE *warn);

/* The same on the grid TP x CP x DP x PP (hpt_comm_init is cp = 1): adds
 * HPT_GROUP_CP, and the DP groups span the CP x DP replicas (see above).
 * The grid must have passed hpt_grid_check_cp. */
hpt_status hpt_comm_init_cp(hpt_comm *c, MPI_Comm world, int tp, int cp, int pp, int dp,
                            FILE *warn);

/* Shard groups of n consecutive replica (DP group) ranks (HSDP; Zhao et al. 2023,
 * "PyTorch FSDP", section 3.2.2 hybrid sharding): HPT_GROUP_DPS becomes the
 * DP ranks [q*n, q*n + n) holding this rank (q = dp_rank / n), and
 * HPT_GROUP_DPR the DP/n ranks with the same dp_rank % n. hpt_comm_init
 * sets n = DP (DPS is the whole DP group, DPR this rank alone). Collective
 * over the world; call before the NCCL set-up (hpt_comm_nccl_on). Errors:
 * HPT_ERR_USAGE when n does not divide CP x DP (every rank the same). */
hpt_status hpt_comm_shard_group(hpt_comm *c, int n);

/* Free the sub-communicators; accepts a zeroed struct. */
void hpt_comm_free(hpt_comm *c);

/* Agree on a status across `world`: if any rank failed, every rank returns
 * the failure of the lowest failing rank with its message (so rank 0 can
 * print it once). Collective. */
hpt_status hpt_comm_agree(MPI_Comm world, hpt_status st);

#endif
