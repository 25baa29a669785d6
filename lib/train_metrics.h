/* train_metrics.h — the training run's metrics file and --comm-stats
 * (lib/train_metrics.c). */
#ifndef HPT_TRAIN_METRICS_H
#define HPT_TRAIN_METRICS_H

#include <stdio.h>

#include "train_state.h"

/* Open the metrics file (--metrics, else RUN_DIR/metrics.h5; "none" or
 * neither: off) and record the run's opening events (run_start, resume,
 * layout change). Collective. Errors: HPT_ERR_USAGE (the path is another
 * output of the run), HPT_ERR_IO. */
hpt_status open_metrics(run_state *r, const hpt_train_opts *o, const hpt_ckpt_meta *meta);
/* This step's global and per-rank record; t0, t_acc, t1 as in the step
 * loop; skip: the step was skipped. */
void record_metrics(run_state *r, const hpt_train_opts *o, int step, double t0, double t_acc,
                    double t1, double loss, double val, float lr, double norm, int skip);
/* A skipped step's event naming the first rank with non-finite values.
 * Collective (one all-reduce); every rank calls it for the same step. */
void skipped_step_event(run_state *r, int step, double loss, double norm, FILE *out);
/* --comm-stats: per-group communication per training step and peak RSS,
 * gathered to rank 0 (printed; RUN_DIR/comm.tsv). Collective. */
void comm_stats(run_state *r, const hpt_train_opts *o, FILE *out);
#endif
