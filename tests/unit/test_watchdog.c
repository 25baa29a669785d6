/* test_watchdog.c — the hang watchdog's laggard analysis
 * (hpt_hang_analyse, lib/watchdog.c) on hand-made heartbeats: a wait chain
 * across a pipeline receive and a TP all-reduce, a deadlock cycle, a
 * missing and a stale heartbeat, a collective everyone posted (ambiguous),
 * group instances kept apart by their colour, and the cases of issue 33:
 * a DP bucket the frozen partner posted before it froze in compute, a rank
 * waiting in the world agreement with the frozen rank's heartbeat missing
 * or saying it is between steps; and the DP bucket pattern of the hang2
 * report (several iallreduces posted by every live replica, the frozen one
 * behind): the frozen rank or an ambiguous result, never a healthy rank;
 * and a rank frozen inside a checkpoint save. */
#include <stdlib.h>
#include <string.h>

#include "../helpers/expect.h"
#include "watchdog.h"

#define NOW 1000000.0

static hpt_hang_hb hb[8];
static int grid[3]; /* tp, pp, dp of the analysis; 0: unknown */

/* Rank r: alive, not blocked, every group instance 0, nothing posted. */
static void reset(int n)
{
    memset(hb, 0, sizeof hb);
    for (int r = 0; r < n; r++) {
        hb[r].ok = 1;
        hb[r].time = NOW - 1;
        hb[r].peer = -1;
        strcpy(hb[r].node, "n");
    }
}

static void blocked(int r, int group, int64_t seq, int peer)
{
    hb[r].blocked = 1;
    hb[r].group = group;
    hb[r].op = peer >= 0 ? HPT_FLIGHT_RECV : HPT_FLIGHT_ALLREDUCE;
    hb[r].seq = seq;
    hb[r].peer = peer;
    hb[r].posted[group] = seq;
    hb[r].completed[group] = seq - 1;
}

/* Rank r posted DP buckets first..last and waits in the first. */
static void buckets(int r, int group, int64_t first, int64_t last)
{
    blocked(r, group, first, -1);
    hb[r].op = HPT_FLIGHT_IALLREDUCE;
    hb[r].posted[group] = last;
}

/* Analyse from `me`; returns the suspects as a bit mask. */
static unsigned analyse(int n, int me, hpt_hang_analysis *a)
{
    memset(a, 0, sizeof *a);
    a->n = n;
    a->now = NOW;
    a->hb = malloc(sizeof hb);
    memcpy(a->hb, hb, sizeof hb);
    a->tp = grid[0], a->pp = grid[1], a->dp = grid[2];
    hpt_hang_analyse(a, me, 20);
    unsigned mask = 0;
    for (int r = 0; r < n; r++)
        if (a->suspect && a->suspect[r])
            mask |= 1u << r;
    return mask;
}

int main(void)
{
    hpt_hang_analysis a;
    unsigned m;
    enum { TP = 1, DP = 2, PP = 3 };

    /* TP2 x PP2, rank 1 stalled: 2 receives from 0, 0 waits in TP seq 5
     * with 1, which posted only 4 */
    reset(4);
    blocked(2, PP, 7, 0);
    blocked(0, TP, 5, -1);
    hb[1].posted[TP] = 4;
    hb[1].idle = 5;
    blocked(3, PP, 7, 1);
    m = analyse(4, 2, &a);
    EXPECT(m == 1u << 1 && !a.deadlock, "chain from 2: suspects %#x, deadlock %d", m, a.deadlock);
    EXPECT(a.why[1] && strstr(a.why[1], "not in a communication call"), "why: %s",
           a.why[1] ? a.why[1] : "(null)");
    hpt_hang_analysis_free(&a);

    /* a cycle: 0 receives from 1, 1 from 0 */
    reset(2);
    blocked(0, PP, 3, 1);
    blocked(1, PP, 3, 0);
    m = analyse(2, 0, &a);
    EXPECT(m == 3 && a.deadlock, "cycle: suspects %#x, deadlock %d", m, a.deadlock);
    hpt_hang_analysis_free(&a);

    /* the peer left no heartbeat; then a stale one */
    reset(2);
    blocked(0, PP, 3, 1);
    hb[1].ok = 0;
    m = analyse(2, 0, &a);
    EXPECT(m == 2 && a.why[1] && strstr(a.why[1], "no heartbeat"), "missing: %#x %s", m,
           a.why[1] ? a.why[1] : "(null)");
    hpt_hang_analysis_free(&a);
    reset(2);
    blocked(0, PP, 3, 1);
    blocked(1, TP, 9, -1);
    hb[1].time = NOW - 100;
    m = analyse(2, 0, &a);
    EXPECT(m == 2 && a.why[1] && strstr(a.why[1], "heartbeat 100 s old"), "stale: %#x %s", m,
           a.why[1] ? a.why[1] : "(null)");
    hpt_hang_analysis_free(&a);

    /* a heartbeat recent enough but overtaken: rank 0 (stopped) last wrote
     * that it waits in TP seq 1960, rank 1 has reached seq 3115 since (it
     * completed 1961..3114 with rank 0): named stale, not "waiting" */
    reset(2);
    blocked(1, TP, 3115, -1);
    blocked(0, TP, 1960, -1);
    hb[0].time = NOW - 10;
    hb[0].step = 164;
    m = analyse(2, 1, &a);
    EXPECT(m == 1 && a.why[0] &&
               strstr(a.why[0], "heartbeat 10 s old and stale: rank 1 has since completed tp seq "
                                "3114, past this rank's last record (waiting in allreduce tp seq "
                                "1960, tp posted 1960, at step 164)"),
           "overtaken: %#x %s", m, a.why[0] ? a.why[0] : "(null)");
    hpt_hang_analysis_free(&a);
    /* one collective apart is not evidence (rank 1 may have left seq 1960 first) */
    reset(2);
    blocked(1, TP, 1961, -1);
    blocked(0, TP, 1960, -1);
    m = analyse(2, 1, &a);
    EXPECT(a.why[0] ? !strstr(a.why[0], "stale") : 1, "one apart: %#x %s", m,
           a.why[0] ? a.why[0] : "(null)");
    hpt_hang_analysis_free(&a);

    /* everyone of the DP group posted seq 4 and waits in it (one of them
     * may be frozen inside it, or the network is stuck: the heartbeats
     * cannot tell): both are candidates, ambiguous, no node to exclude */
    reset(2);
    blocked(0, DP, 4, -1);
    blocked(1, DP, 4, -1);
    m = analyse(2, 0, &a);
    EXPECT(m == 3 && a.ambiguous && !a.deadlock, "all posted: suspects %#x, ambiguous %d", m,
           a.ambiguous);
    EXPECT(a.why[0] && strstr(a.why[0], "waiting") && strstr(a.why[0], "cannot tell"),
           "why: %s", a.why[0] ? a.why[0] : "(null)");
    hpt_hang_analysis_free(&a);
    /* ... and a definite end elsewhere wins over that: not ambiguous */
    reset(2);
    blocked(0, PP, 3, 1);
    m = analyse(2, 0, &a);
    EXPECT(m == 2 && !a.ambiguous, "definite end: suspects %#x, ambiguous %d", m, a.ambiguous);
    hpt_hang_analysis_free(&a);

    /* two TP instances (colours 0 and 1): only rank 1 of instance 0 is
     * behind rank 0; rank 3 (instance 1) is behind too but not waited for */
    reset(4);
    hb[2].color[TP] = hb[3].color[TP] = 1;
    blocked(0, TP, 6, -1);
    hb[1].posted[TP] = 5;
    hb[3].posted[TP] = 2;
    m = analyse(4, 0, &a);
    EXPECT(m == 2, "colours: suspects %#x, want rank 1 only", m);
    hpt_hang_analysis_free(&a);

    /* issue 33, TP2 x DP2 (DP pairs 0-2, 1-3), rank 1 frozen in compute
     * after posting DP bucket seq 7 (posted 7, completed 6): rank 3 waits
     * in that bucket, which rank 1 already posted; rank 1 is the suspect,
     * not rank 3 (the launcher excluded a healthy node) */
    reset(4);
    grid[0] = 2, grid[1] = 1, grid[2] = 2;
    for (int r = 0; r < 4; r++) {
        hb[r].color[TP] = r / 2;
        hb[r].color[DP] = r % 2;
    }
    blocked(3, DP, 7, -1);
    hb[1].posted[DP] = 7;
    hb[1].completed[DP] = 6;
    hb[1].idle = 4;
    blocked(0, TP, 12, -1); /* rank 0 waits for rank 1 in TP seq 12 */
    hb[1].posted[TP] = 11;
    hb[1].completed[TP] = 11;
    blocked(2, DP, 7, -1);
    hb[2].completed[DP] = 6;
    m = analyse(4, 3, &a);
    EXPECT(m == 1u << 1 && !a.ambiguous, "TP2xDP2 bucket posted by the frozen partner: suspects "
           "%#x (want rank 1 only), ambiguous %d", m, a.ambiguous);
    hpt_hang_analysis_free(&a);
    /* the same, rank 1's partner 3 completed its own side already (the
     * reduction finished there): rank 1 alone still has it open */
    hb[3].completed[DP] = 6;
    m = analyse(4, 2, &a);
    EXPECT(m == 1u << 1, "from rank 2: suspects %#x, want rank 1", m);
    hpt_hang_analysis_free(&a);

    /* issue 33, PP2 x DP2: ranks 1-3 wait in the world stop agreement
     * (seq 20), rank 0 is between steps (posted world 19, not blocked):
     * rank 0 is named "not in a communication call", and with its
     * heartbeat missing (frozen before its first write) "no heartbeat" */
    reset(4);
    grid[0] = 1, grid[1] = 2, grid[2] = 2;
    for (int r = 1; r < 4; r++)
        blocked(r, 0, 20, -1);
    hb[0].posted[0] = 19;
    hb[0].completed[0] = 19;
    m = analyse(4, 2, &a);
    EXPECT(m == 1 && a.why[0] && strstr(a.why[0], "not in a communication call"),
           "world agreement, rank 0 between steps: suspects %#x %s", m,
           a.why[0] ? a.why[0] : "(null)");
    hpt_hang_analysis_free(&a);
    hb[0].ok = 0;
    m = analyse(4, 3, &a);
    EXPECT(m == 1 && !a.ambiguous && a.why[0] && strstr(a.why[0], "no heartbeat"),
           "world agreement, rank 0 without a heartbeat: suspects %#x %s", m,
           a.why[0] ? a.why[0] : "(null)");
    hpt_hang_analysis_free(&a);
    /* a DP wait with the partner's heartbeat missing: placed by the grid
     * (PP2 x DP2: rank 1's DP partner is rank 0, rank 2's is rank 3) */
    reset(4);
    for (int r = 0; r < 4; r++)
        hb[r].color[DP] = r / 2;
    blocked(1, DP, 5, -1);
    hb[0].ok = 0;
    hb[2].ok = 0;
    m = analyse(4, 1, &a);
    EXPECT(m == 1, "DP partner without a heartbeat: suspects %#x, want rank 0 only", m);
    hpt_hang_analysis_free(&a);
    grid[0] = grid[1] = grid[2] = 0;

    /* hang2: DP4, rank 2 froze in the backward after posting bucket 56;
     * ranks 0, 1, 3 posted 56..59 and wait in 56. Every analysing rank
     * names rank 2 only (the old rule compared rank 1's posted 59 with the
     * analysing rank's wait in 56 and named the analysing rank itself) */
    for (int me = 0; me < 4; me += me == 1 ? 2 : 1) {
        reset(4);
        for (int r = 0; r < 4; r++)
            if (r != 2)
                buckets(r, DP, 56, 59);
        hb[2].posted[DP] = 56;
        hb[2].completed[DP] = 55;
        hb[2].time = NOW - 6;
        m = analyse(4, me, &a);
        EXPECT(m == 1u << 2 && !a.ambiguous, "DP4 buckets, rank 2 frozen after its first, from "
               "rank %d: suspects %#x (want rank 2 only), ambiguous %d", me, m, a.ambiguous);
        hpt_hang_analysis_free(&a);
    }
    /* the same with rank 2's heartbeat written in the setup (waiting in
     * world seq 6; the others completed world 8 since) and 6 s old:
     * contradicted, so stale: rank 2 (what hang-dp-bucket.sh sees) */
    reset(4);
    for (int r = 0; r < 4; r++) {
        buckets(r, DP, 56, 59);
        hb[r].posted[0] = hb[r].completed[0] = 8;
    }
    blocked(2, 0, 6, -1);
    hb[2].posted[DP] = hb[2].completed[DP] = 0;
    hb[2].time = NOW - 6;
    m = analyse(4, 0, &a);
    EXPECT(m == 1u << 2 && !a.ambiguous && a.why[2] && strstr(a.why[2], "stale"),
           "DP4 buckets, rank 2's heartbeat from the setup: suspects %#x (want rank 2), "
           "ambiguous %d, why %s", m, a.ambiguous, a.why[2] ? a.why[2] : "(null)");
    hpt_hang_analysis_free(&a);
    /* ... and that heartbeat only 1 s old (rank 2 may be alive, about to
     * rewrite it): not proof; rank 2 a candidate at most, no healthy rank */
    hb[2].time = NOW - 1;
    m = analyse(4, 0, &a);
    EXPECT((m & ~(1u << 2)) == 0 && (m == 1u << 2 || a.ambiguous), "DP4 buckets, rank 2's "
           "heartbeat fresh: suspects %#x, ambiguous %d (a healthy rank named)", m, a.ambiguous);
    hpt_hang_analysis_free(&a);
    /* trial f43: rank 2 froze inside the all-reduce dp seq 55 after ranks
     * 1 and 3 had completed it; rank 0 still waits in it (heartbeat 5 s
     * old: unchanged, so not rewritten), 1 and 3 wait in world seq 19,
     * rank 2's heartbeat (7 s old) is from the setup (world seq 6). Rank 0
     * waits legitimately: it must not be named (it was, as "stale",
     * under the rule "a member completed the seq it waits in") */
    reset(4);
    blocked(0, DP, 55, -1);
    hb[0].posted[0] = hb[0].completed[0] = 18;
    hb[0].time = NOW - 5.5;
    for (int r = 1; r < 4; r += 2) {
        blocked(r, 0, 19, -1);
        hb[r].posted[DP] = hb[r].completed[DP] = 55;
    }
    blocked(2, 0, 6, -1);
    hb[2].time = NOW - 7;
    m = analyse(4, 3, &a);
    EXPECT(m == 1u << 2, "trial f43 (rank 0 waits in dp 55 that 1 and 3 completed): suspects "
           "%#x, want rank 2 only", m);
    hpt_hang_analysis_free(&a);
    /* the analysing rank is never stale by another's counts, even with an
     * old own record: rank 1 completed more than rank 0 posted, rank 0 is
     * the analyser: it follows its wait to rank 3, which posted nothing */
    reset(4);
    buckets(0, DP, 3, 3);
    hb[0].time = NOW - 8;
    buckets(1, DP, 5, 6);
    hb[1].completed[DP] = 4;
    buckets(2, DP, 3, 4);
    hb[3].idle = 9;
    m = analyse(4, 0, &a);
    EXPECT(m == 1u << 3, "the analysing rank with an old record: suspects %#x, want rank 3", m);
    hpt_hang_analysis_free(&a);

    /* hang2 item 2: ranks 0 and 1 inside a checkpoint save (HDF5's own
     * collectives, not recorded: not blocked), rank 2 frozen in it, its
     * heartbeat 30 s old (over the stale limit): rank 2 alone, from 0 */
    reset(3);
    for (int r = 0; r < 3; r++)
        hb[r].in_save = 1;
    hb[2].time = NOW - 30;
    m = analyse(3, 0, &a);
    EXPECT(m == 1u << 2 && !a.ambiguous, "in a save, rank 2's heartbeat 30 s old: suspects %#x "
           "(want rank 2), ambiguous %d", m, a.ambiguous);
    hpt_hang_analysis_free(&a);
    /* every heartbeat fresh (a slow disk): no definite suspect */
    hb[2].time = NOW - 1;
    m = analyse(3, 0, &a);
    EXPECT(!m || a.ambiguous, "in a save, all fresh: suspects %#x without ambiguous", m);
    hpt_hang_analysis_free(&a);

    if (failures)
        fprintf(stderr, "test_watchdog: %d failures\n", failures);
    else
        printf("test_watchdog: all passed\n");
    return failures != 0;
}
