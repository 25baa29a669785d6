/* comm_nccl_plan.c — which NCCL communicators hpt_comm_nccl_on creates for
 * this rank: one per group of two or more ranks (or of one, in the size-1
 * mode), the ZeRO shard group sharing the data-parallel one when they are
 * the same ranks, the pipeline pairs and the context-parallel ring's
 * edges. Pure logic over the MPI groups,
 * compiled with or without NCCL, so the CPU tests check it (--comm mpi
 * standing in) and lib/comm_nccl.c follows it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"

static const char *const plan_names[] = {"world", "tensor-parallel",
    "data-parallel", "pipeline", "model-parallel", "embedding", "data-parallel shard",
    "data-parallel replica", "context-parallel"};
_Static_assert(sizeof plan_names / sizeof plan_names[0] == HPT_GROUP_COUNT,
               "a name for every hpt_group (lib/comm.h)");

const char *hpt_nccl_group_name(hpt_group g)
{
    return g >= 0 && g < HPT_GROUP_COUNT && plan_names[g] ? plan_names[g] : "?";
}

hpt_status hpt_nccl_size1_env(int *on)
{
    const char *e = getenv("HPT_NCCL_SIZE1");
    *on = 0;
    if (!e || !*e || !strcmp(e, "0"))
        return HPT_OK;
    if (!strcmp(e, "1")) {
        *on = 1;
        return HPT_OK;
    }
    return hpt_error_set(HPT_ERR_USAGE, "HPT_NCCL_SIZE1='%s': expected 0 or 1 (1: NCCL "
                         "communicators for groups of one rank too, to exercise NCCL on one GPU)", e);
}

void hpt_nccl_plan_make(const hpt_comm *c, int size1, hpt_nccl_plan *p)
{
    memset(p, 0, sizeof *p);
    p->size1 = size1 != 0;
    for (int g = 0; g < HPT_GROUP_COUNT; g++) {
        int member = c->comms[g] != MPI_COMM_NULL && c->comms[g] != 0;
        int wanted = member && c->group_size[g] >= (p->size1 ? 1 : 2);
        if (wanted && g == HPT_GROUP_DPS && c->group_size[g] == c->group_size[HPT_GROUP_DP])
            p->group[g] = HPT_NCCL_SHARES_DP; /* plain ZeRO: the DP ranks themselves */
        else
            p->group[g] = wanted ? HPT_NCCL_OWN : HPT_NCCL_NONE;
    }
    /* stage b joins boundary b-1's pair and boundary b's: two
     * communicators (forward, backward) each */
    if (c->pp > 1)
        p->pairs = 2 * ((c->pp_rank > 0) + (c->pp_rank + 1 < c->pp));
    /* the CP ring: its out-edge and its in-edge (distinct at CP 2 too) */
    if (c->cp > 1)
        p->cp_edges = 2;
    p->loopback = p->size1 && p->group[HPT_GROUP_WORLD] == HPT_NCCL_OWN;
}

int hpt_nccl_cp_edge_rank(int cp, int cp_rank, int e)
{
    if (cp < 2 || e < 0 || e >= cp || cp_rank < 0 || cp_rank >= cp)
        return -1;
    return cp_rank == e ? 0 : cp_rank == (e + 1) % cp ? 1 : -1;
}

int hpt_nccl_plan_describe(const hpt_nccl_plan *p, const hpt_comm *c, char *buf, size_t cap)
{
    size_t k = 0;
    int n = 0;
#define PUT(...) (k += (size_t)snprintf(buf + (k < cap ? k : cap), k < cap ? cap - k : 0, __VA_ARGS__))
    if (cap)
        buf[0] = 0;
    for (int g = 0; g < HPT_GROUP_COUNT; g++) {
        if (p->group[g] == HPT_NCCL_NONE)
            continue;
        PUT("%s%s (%d)", n++ ? ", " : "", plan_names[g], c->group_size[g]);
        if (p->group[g] == HPT_NCCL_SHARES_DP)
            PUT(" = data-parallel's");
    }
    PUT("%s%d pipeline pair communicator%s", n ? "; " : "", p->pairs, p->pairs == 1 ? "" : "s");
    if (p->cp_edges)
        PUT("; %d context-parallel ring edge communicators", p->cp_edges);
    if (p->loopback)
        PUT("; a send/recv to itself on the side stream, checked");
#undef PUT
    return (int)k;
}
