/* test_nccl_plan.c — hpt_nccl_plan_make / hpt_nccl_size1_env
 * (lib/comm_nccl_plan.c): which NCCL communicators hpt_comm_nccl_on makes,
 * on hand-made group tables (no MPI calls): groups of one get none unless
 * HPT_NCCL_SIZE1=1, the ZeRO shard group shares the data-parallel one when
 * the sizes agree, a rank outside a group gets none, the pipeline pairs of
 * first, middle and last stages, the size-1 mode's self send/recv, the
 * context-parallel ring's edge communicators (CP 2, 3, 4: two per rank,
 * sender rank 0 and receiver rank 1 inside each, distinct at CP 2). */
#include <stdlib.h>

#include "comm.h"
#include "../helpers/expect.h"

/* A rank of a TP x PP x DP grid at pipeline stage pp_rank; `member` 0
 * marks the embedding group as one this rank is not in. */
static void grid(hpt_comm *c, int tp, int pp, int dp, int dps, int pp_rank)
{
    memset(c, 0, sizeof *c);
    c->tp = tp, c->pp = pp, c->dp = dp, c->pp_rank = pp_rank;
    c->world_size = tp * pp * dp;
    int size[HPT_GROUP_COUNT] = {[HPT_GROUP_WORLD] = tp * pp * dp, [HPT_GROUP_TP] = tp,
                                 [HPT_GROUP_DP] = dp, [HPT_GROUP_PP] = pp,
                                 [HPT_GROUP_MP] = tp * pp, [HPT_GROUP_EMBED] = pp > 1 ? 2 : 1,
                                 [HPT_GROUP_DPS] = dps, [HPT_GROUP_DPR] = dp / dps,
                                 [HPT_GROUP_CP] = 1};
    for (int g = 0; g < HPT_GROUP_COUNT; g++) {
        c->comms[g] = MPI_COMM_SELF; /* any communicator: only != MPI_COMM_NULL is read */
        c->group_size[g] = size[g];
    }
    if (pp > 2 && pp_rank > 0 && pp_rank + 1 < pp)
        c->comms[HPT_GROUP_EMBED] = MPI_COMM_NULL; /* a middle stage */
}

int main(void)
{
    hpt_comm c;
    hpt_nccl_plan p;
    char d[512];
    /* one GPU: nothing without the mode, everything with it */
    grid(&c, 1, 1, 1, 1, 0);
    hpt_nccl_plan_make(&c, 0, &p);
    int any = p.pairs || p.loopback;
    for (int g = 0; g < HPT_GROUP_COUNT; g++)
        any |= p.group[g] != HPT_NCCL_NONE;
    EXPECT(!any, "world 1 without the mode: no communicator");
    hpt_nccl_plan_make(&c, 1, &p);
    for (int g = 0; g < HPT_GROUP_COUNT; g++)
        EXPECT(strcmp(hpt_nccl_group_name((hpt_group)g), "?"), "group %d has no name", g);
    for (int g = 0; g < HPT_GROUP_COUNT; g++)
        EXPECT(p.group[g] == (g == HPT_GROUP_DPS ? HPT_NCCL_SHARES_DP : HPT_NCCL_OWN),
               "size-1 mode: group %s gets %d", hpt_nccl_group_name((hpt_group)g), p.group[g]);
    EXPECT(p.loopback && p.pairs == 0, "size-1 mode: loopback %d pairs %d", p.loopback, p.pairs);
    hpt_nccl_plan_describe(&p, &c, d, sizeof d);
    EXPECT(strstr(d, "world (1), tensor-parallel (1)") && strstr(d, "shard (1) = data-parallel's") &&
               strstr(d, "0 pipeline pair communicators; a send/recv"), "describe: %s", d);
    /* TP 2 x DP 4 with HSDP shards of 2: TP, DP, MP, shard own; PP, replica (2) too */
    grid(&c, 2, 1, 4, 2, 0);
    hpt_nccl_plan_make(&c, 0, &p);
    EXPECT(p.group[HPT_GROUP_TP] == HPT_NCCL_OWN && p.group[HPT_GROUP_PP] == HPT_NCCL_NONE &&
               p.group[HPT_GROUP_DPS] == HPT_NCCL_OWN && p.group[HPT_GROUP_DPR] == HPT_NCCL_OWN &&
               p.group[HPT_GROUP_EMBED] == HPT_NCCL_NONE && !p.loopback,
           "TP 2 x DP 4, shards of 2: tp %d pp %d dps %d dpr %d embed %d", p.group[HPT_GROUP_TP],
           p.group[HPT_GROUP_PP], p.group[HPT_GROUP_DPS], p.group[HPT_GROUP_DPR],
           p.group[HPT_GROUP_EMBED]);
    /* PP 4: first and last stages join one boundary, middle ones two;
     * a middle stage is in no embedding group */
    int want[4] = {2, 4, 4, 2};
    for (int s = 0; s < 4; s++) {
        grid(&c, 1, 4, 1, 1, s);
        hpt_nccl_plan_make(&c, 0, &p);
        EXPECT(p.pairs == want[s], "PP 4 stage %d: %d pair communicators, want %d", s, p.pairs,
               want[s]);
        EXPECT(p.group[HPT_GROUP_EMBED] == (s == 0 || s == 3 ? HPT_NCCL_OWN : HPT_NCCL_NONE),
               "PP 4 stage %d: embedding group %d", s, p.group[HPT_GROUP_EMBED]);
        hpt_nccl_plan_make(&c, 1, &p);
        EXPECT(p.group[HPT_GROUP_EMBED] == (s == 0 || s == 3 ? HPT_NCCL_OWN : HPT_NCCL_NONE),
               "PP 4 stage %d, size-1 mode: not a member, no communicator", s);
    }
    /* CP ring edges: none at CP 1; two per rank otherwise */
    grid(&c, 1, 1, 1, 1, 0);
    hpt_nccl_plan_make(&c, 1, &p);
    EXPECT(p.cp_edges == 0, "CP 1, size-1 mode: %d ring edges, want 0", p.cp_edges);
    c.cp = 2, c.group_size[HPT_GROUP_CP] = 2;
    hpt_nccl_plan_make(&c, 0, &p);
    hpt_nccl_plan_describe(&p, &c, d, sizeof d);
    EXPECT(p.cp_edges == 2 && p.group[HPT_GROUP_CP] == HPT_NCCL_OWN &&
               strstr(d, "context-parallel (2)") &&
               strstr(d, "; 2 context-parallel ring edge communicators"),
           "CP 2: %d edges, cp group %d; describe: %s", p.cp_edges, p.group[HPT_GROUP_CP], d);
    for (int cp = 1; cp <= 4; cp++)
        for (int r = 0; r < cp; r++) {
            int out = -2, in = -2, other = 0;
            for (int e = 0; e < cp; e++) {
                int k = hpt_nccl_cp_edge_rank(cp, r, e);
                if (e == r)
                    out = k;
                else if (e == (r + cp - 1) % cp)
                    in = k;
                else
                    other |= k != -1;
            }
            if (cp == 1) {
                EXPECT(out == -1, "CP 1: no edge (%d)", out);
                continue;
            }
            /* the out-edge: sender (0); the in-edge: receiver (1); at CP 2
             * the in-edge is the other edge of the same two ranks */
            EXPECT(out == 0 && in == 1 && !other, "CP %d rank %d: out-edge rank %d, in-edge "
                   "rank %d, member of another edge %d", cp, r, out, in, other);
        }
    EXPECT(hpt_nccl_cp_edge_rank(2, 0, 2) == -1 && hpt_nccl_cp_edge_rank(3, 3, 0) == -1,
           "out-of-range edge or rank: not a member");
    /* the environment */
    int on = -1;
    unsetenv("HPT_NCCL_SIZE1");
    EXPECT(!hpt_nccl_size1_env(&on) && on == 0, "unset: off (%d)", on);
    setenv("HPT_NCCL_SIZE1", "1", 1);
    EXPECT(!hpt_nccl_size1_env(&on) && on == 1, "1: on (%d)", on);
    setenv("HPT_NCCL_SIZE1", "0", 1);
    EXPECT(!hpt_nccl_size1_env(&on) && on == 0, "0: off (%d)", on);
    setenv("HPT_NCCL_SIZE1", "yes", 1);
    EXPECT_ERR(hpt_nccl_size1_env(&on), HPT_ERR_USAGE, "HPT_NCCL_SIZE1='yes': expected 0 or 1");
    printf("%s: %d failures\n", failures ? "FAIL" : "ok", failures);
    return failures != 0;
}
