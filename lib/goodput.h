/* goodput.h — where a training run's wall time went, over all its segments
 * (restarts, requeues), and how often to checkpoint against failures.
 *
 * Accounting (docs/METRICS.md, "Goodput"): from the metrics file's raw
 * rows (every row of every segment, not only the last row of each step),
 * its /segments and /events, the wall time from the first segment's
 * process start to the run's last known time is split into
 *   productive  the step time of the last row of each step,
 *   redone      the step time of every other row: steps whose work a
 *               restart lost and that were run again,
 *   checkpoint  the training stalls of the saves (rank 0's
 *               /ranks/checkpoint, and a save that ended a segment),
 *   startup     each segment's process start to its first step's start
 *               (set-up, data, model, the checkpoint load),
 *   validation  rank 0's /ranks/validation,
 *   between     a segment's last known time to the next one's process
 *               start (the time it ran after its last flushed row, the
 *               job's downtime, the queue),
 *   other       the rest inside segments (metrics, logging, the stop
 *               agreement between steps; after a segment's last save).
 * The parts add up to the wall time by construction; `fraction` =
 * productive / wall is what Llama 3 reports as effective training time
 * (Dubey et al. 2024, "The Llama 3 Herd of Models", §3.3.4).
 *
 * Checkpoint interval (hpt-plan --mtbf-hours): Young 1974 and Daly 2006
 * with Daly's expected wall time, below. Units: seconds. */
#ifndef HPT_GOODPUT_H
#define HPT_GOODPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "metrics_h5.h"
#include "metrics_read.h"

/* What the accounting reads: every raw row of /steps in file order, rank
 * 0's per-rank values, the two tables. Arrays are borrowed. */
typedef struct {
    size_t rows;
    const double *step, *segment, *wall_time, *step_time; /* /steps/NAME [rows] */
    const double *checkpoint; /* /ranks/checkpoint, rank 0 [rows]             */
    const double *validation; /* /ranks/validation, rank 0 [rows]; NULL when
                               * the file predates the column               */
    const hpt_metrics_seg_row *seg; /* [nseg]; process_start/load_seconds NaN
                                     * where the file predates them          */
    size_t nseg;
    const hpt_metrics_event_row *ev; /* [nev], any order                     */
    size_t nev;
} hpt_goodput_in;

/* The split (seconds) and its counts. */
typedef struct {
    double wall, productive, redone, checkpoint, startup, validation, between, other;
    double fraction;        /* productive / wall; NaN when wall <= 0         */
    double load;            /* of startup: checkpoint loads (/segments
                             * load_seconds where recorded)                 */
    double restart_startup; /* of startup: the resumed segments'            */
    int64_t rows, steps;    /* raw rows; distinct steps                      */
    int64_t redone_steps;   /* rows - steps: rows a later row of the same
                             * step superseded                             */
    int segments, resumes;  /* segments; of them resumed from a checkpoint  */
    int saves;              /* checkpoint stalls counted                     */
    int start_known;        /* segments whose process start is recorded (the
                             * others count from their metrics open)       */
    int validation_known;   /* 1: the file has /ranks/validation             */
} hpt_goodput;

/* Split in->rows rows into *g (see above). Segments are in /segments'
 * order; a segment's rows are those from its first_row to the next
 * segment's whose /steps/segment is its index; an event belongs to the
 * segment whose process start is the last before its time. NaN step,
 * checkpoint or validation seconds count as 0. Errors: HPT_ERR_INTERNAL
 * out of memory (g zeroed). */
hpt_status hpt_goodput_compute(const hpt_goodput_in *in, hpt_goodput *g);

/* The goodput of the open metrics file m (io/metrics_read.h). Errors:
 * HPT_ERR_DATA naming the file and dataset, HPT_ERR_INTERNAL. */
hpt_status hpt_goodput_read(const hpt_mread *m, hpt_goodput *g);

/* The goodput of the metrics file `path` (io/metrics_read.h: SWMR read,
 * damaged files refused). Errors: as hpt_mread_open (HPT_ERR_DATA naming
 * the file and dataset), HPT_ERR_INTERNAL out of memory. */
hpt_status hpt_goodput_of_file(const char *path, hpt_goodput *g);

/* `hpt-metrics goodput`: one "NAME: SECONDS s (PERCENT %), detail" line
 * per part, then "goodput: PERCENT %". */
void hpt_goodput_print(const hpt_goodput *g, FILE *out);

/* The one line of `hpt-metrics summary`: "goodput: P % of W s (...)". */
void hpt_goodput_print_line(const hpt_goodput *g, FILE *out);

/* ------------------------------------------------ checkpoint interval */

/* Young 1974 ("A first order approximation to the optimum checkpoint
 * interval", CACM 17(9)): compute time between checkpoints
 * tau = sqrt(2 delta M) for save time delta and mean time between
 * failures M (both > 0). */
double hpt_goodput_young(double delta, double mtbf);

/* Daly 2006 ("A higher order estimate of the optimum checkpoint interval
 * for restart dumps", FGCS 22(3)), his higher-order optimum:
 * tau = sqrt(2 delta M) [1 + (1/3) sqrt(delta/2M) + (1/9)(delta/2M)] - delta
 * for delta < 2M, else tau = M. */
double hpt_goodput_daly(double delta, double mtbf);

/* Expected goodput of checkpointing every tau seconds of compute, Daly
 * 2006's model (failures a Poisson process of mean M, each costing the
 * restart time R and the work since the last checkpoint): the expected
 * wall time of T_s seconds of work is
 * T_w = M e^(R/M) (e^((tau + delta)/M) - 1) T_s / tau,
 * returned as T_s / T_w (tau, delta, M > 0; R >= 0). */
double hpt_goodput_expected(double tau, double delta, double restart, double mtbf);

#endif
