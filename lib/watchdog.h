/* watchdog.h — the hang watchdog: one thread per rank that never calls MPI
 * on the training communicators. It reads the rank's flight recorder
 * (lib/flight.h); when the training thread has waited in one communication
 * call, or made no progress inside a step, for longer than the timeout, or
 * has been inside a checkpoint save (hpt_flight_save_begin) for longer
 * than the timeout while the next world rank's heartbeat is older than the
 * stale limit (6 x heartbeat period + 10 s: that rank froze; a slow disk
 * leaves every heartbeat fresh), it
 * dumps the recorder to RUN_DIR/hang/rank-NNNNN.json, reads the other
 * ranks' heartbeat files (RUN_DIR/hang/hb-NNNNN.json, which every watchdog
 * rewrites when its rank's state changes) to name the rank(s) the job waits
 * for, prints one line (the first rank to create RUN_DIR/hang/summary.txt;
 * every rank that cannot create it for another reason, with a warning
 * naming the file and the cause, as for a dump it cannot write; a deleted
 * RUN_DIR/hang is re-created), and ends the whole job with
 * MPI_Abort(MPI_COMM_WORLD, HPT_EXIT_HANG).
 * Design and choices: docs/ARCHITECTURE.md, "Hang watchdog".
 */
#ifndef HPT_WATCHDOG_H
#define HPT_WATCHDOG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "comm.h"
#include "error.h"

#define HPT_EXIT_HANG 6        /* exit status of a job ended by the watchdog   */
#define HPT_HANG_FLOOR_S 300.0 /* automatic timeout: max(floor, 10 x median step) */

typedef struct hpt_watchdog hpt_watchdog;

/* Rank 0, before the run: when RUN_DIR/hang holds a previous hang's
 * summary.txt, copy its first line into prev (n bytes; "" otherwise) and
 * rename the directory to RUN_DIR/hang.N (first free N >= 1); then create
 * RUN_DIR/hang and check that a file can be created in it. Errors:
 * HPT_ERR_IO naming RUN_DIR/hang and the cause. */
hpt_status hpt_watchdog_prepare(const char *run_dir, char *prev, size_t n);

/* Rank 0, after a run that did not hang: remove RUN_DIR/hang if it is empty
 * (prepare made it to check it is writable; a hang's files stay). Every
 * rank's hpt_watchdog_stop also tries, after removing its heartbeat, so
 * the last rank out removes it. */
void hpt_watchdog_tidy(const char *run_dir);

/* Start the watchdog of this rank on c's flight recorder. timeout: > 0
 * seconds; < 0 automatic (max(300 s, 10 x running median step time)); 0
 * off. run_dir: heartbeats and dumps go to RUN_DIR/hang (prepared by rank
 * 0); NULL: no files, a hang is still detected and ends the job, but the
 * laggards cannot be named. *w is NULL when off (timeout 0 or no flight
 * recorder). Errors: HPT_ERR_INTERNAL (no memory, no thread). */
hpt_status hpt_watchdog_start(hpt_watchdog **w, const hpt_comm *c, const char *run_dir,
                              double timeout);

/* Call fn(ctx) from the watchdog thread after the dumps and before
 * MPI_Abort, e.g. to abort a device communicator whose stuck operation
 * would otherwise keep the process alive (NCCL's ncclCommAbort). fn must
 * be safe to call from another thread. NULL w is accepted. */
void hpt_watchdog_on_abort(hpt_watchdog *w, void (*fn)(void *ctx), void *ctx);

/* Training thread, after every step: its wall seconds feed the running
 * median of the automatic timeout. NULL is accepted. */
void hpt_watchdog_step(hpt_watchdog *w, double seconds);

/* Stop and join the thread, remove this rank's heartbeat and then
 * RUN_DIR/hang if that left it empty, free *w. NULL is accepted. */
void hpt_watchdog_stop(hpt_watchdog *w);

/* One rank's heartbeat as the laggard analysis reads it. */
typedef struct {
    int ok;                 /* the file was read                          */
    char host[256], node[256];
    double time;            /* when written (Unix s)                      */
    double idle, waited;    /* seconds, as of `time`                      */
    int64_t step;
    int in_save;            /* 1: inside a checkpoint save                 */
    int blocked;            /* 1: in a communication call: group, op, seq, peer */
    int group, op, peer;    /* peer: world rank (point-to-point) or -1   */
    int64_t seq;
    int64_t posted[HPT_FLIGHT_GROUPS]; /* per group: last seq posted       */
    int64_t completed[HPT_FLIGHT_GROUPS]; /* per group: ops completed       */
    int color[HPT_FLIGHT_GROUPS];      /* per group: instance (-1 none)     */
} hpt_hang_hb;

/* The laggard analysis over n ranks' heartbeats (hb[n], caller-owned;
 * now: Unix s). */
typedef struct {
    int n;
    hpt_hang_hb *hb;
    double now;
    int tp, pp, dp;  /* the rank grid (lib/comm.h), to place a rank without
                      * a heartbeat in its group instances; 0: unknown
                      * (then it is placed in the world group only)       */
    double current;  /* s: a heartbeat younger than this is current even where
                      * another's contradicts it (a live rank rewrites its
                      * heartbeat within a period and a poll of a change);
                      * 0: 5 s                                             */
    int me;          /* set by hpt_hang_analyse: the analysing rank        */
    int *suspect;    /* out, per rank: 1 = suspect                        */
    char **why;      /* out, per suspect: one phrase                       */
    int nsuspects;
    int deadlock;    /* the chain only met blocked ranks (a cycle)         */
    int ambiguous;   /* no rank is known to be behind: the suspects are the
                      * candidates, no node should be excluded (also set
                      * with deadlock)                                    */
} hpt_hang_analysis;

/* Follow the wait chain from rank `me`. A rank blocked in a collective
 * (group g, sequence s) waits for the members of its group instance (same
 * colour; from the grid for a rank without a heartbeat) that have not
 * reached it: no heartbeat, or posted < s. When every member posted s, it
 * waits for those that have not completed s and are elsewhere (not
 * blocked in g seq s: a nonblocking collective progresses only while
 * every member is inside MPI). Blocked in point-to-point: for its peer.
 * A rank inside a checkpoint save, not in a recorded call (HDF5's own
 * MPI-IO collectives), waits for every rank whose heartbeat is older than
 * `stale` (none: END_UNSURE, ambiguous). Ends of the chain — not blocked, no heartbeat, heartbeat older than
 * `stale` s, or another rank's than `me` older than a->current s and
 * contradicted by a member's (it completed more collectives of a shared
 * group than that rank had posted) — are the suspects. When no end is found that way — every
 * member reached waits in the same collective ("stuck in the network", or
 * a member frozen inside it: the heartbeats cannot tell), or a cycle of
 * blocked ranks — the ranks blocked there are the suspects with
 * a->ambiguous set (a->deadlock too for a cycle): candidates, not
 * culprits. Allocates a->suspect and a->why. */
void hpt_hang_analyse(hpt_hang_analysis *a, int me, double stale);
/* Free a->suspect, a->why and a->hb. */
void hpt_hang_analysis_free(hpt_hang_analysis *a);

/* `hpt-metrics hang DIR`: read the summary and the dumps in DIR (a run
 * directory: DIR/hang, else the newest DIR/hang.N; or a hang directory)
 * and print which rank stopped where, the group and its members, the
 * suspects and each rank's last completed operations. Errors: HPT_ERR_IO
 * when DIR holds no dump, HPT_ERR_DATA for a dump that does not parse. */
hpt_status hpt_hang_report(const char *dir, FILE *out);

#endif
