/* metrics_json.h — a metrics file as the JSON the live page reads
 * (share/live/app.js; the HTTP contract in docs/LIVE.md): the history of
 * one run (/api/history), its entry in the run list (/api/runs), and the
 * self-contained report page of `hpt-metrics report`.
 *
 * Read through io/metrics_read.h: each step once, the last row of a step
 * winning. Non-finite values are written as null. Numbers are printed with
 * 17 significant digits, so a value read back equals the float64 in the
 * file bit for bit. */
#ifndef HPT_METRICS_JSON_H
#define HPT_METRICS_JSON_H

#include <stdio.h>

#include "error.h"

/* Write the history object of the metrics file `path` to `out`:
 *   {"run":0,"state":S,"columns":{"step","loss","lr","grad_norm","clip",
 *    "tokens_per_s","mfu","skipped","time","step_time","flops","segment",
 *    "tokens","val_step","val_loss"},
 *    "ranks":{"step","busy_s","step_s","flops"},"comm":{"groups","seconds"},
 *    "events":[...],"segments":[...],"alerts":[]}
 * columns: one value per kept step, /steps units (clip = clip_coef,
 * time = wall_time); val_step/val_loss: the steps with a finite
 * validation loss, downsampled on their own the same way. When the file
 * holds more than `points` steps (points > 0) the rows are downsampled:
 * the first and last step, the steps of events and, per bucket of about
 * n/(points/2) steps, the rows of the smallest and the largest value of
 * each plotted column (extremes are never lost).
 * ranks: rank x step matrices [step][rank] of busy time (s), step time (s)
 * and achieved FLOP/s (the step's model FLOPs shared equally by the row's
 * ranks / the rank's step time), per bucket of at most 200 steps the mean
 * of the finite values (one bucket per step for shorter runs).
 * comm.seconds[g][r]: mean seconds per step of rank r in the
 * communication calls of group g (tp, pp, dp, mp, embed) over all steps.
 * events: the /events rows {step,time,kind,file_kind,rank,detail}:
 * file_kind as in the file, kind the page's name (skipped_step ->
 * nonfinite, grad_norm_spike -> spike, checkpoint_save -> checkpoint,
 * run_start -> segment, others unchanged).
 * segments: {step,time,resumed_from,world,tp,pp,dp,host,slurm_job_id} per
 * /segments row, step = the segment's first step (first_step + 1), time
 * the wall time of its run_start event (null if none).
 * state: "finished" when the last segment logged run_end "done", else
 * "stopped". alerts: [] (a report evaluates no rules).
 * "run" is 0: a caller listing several runs sets its own ids.
 * Errors: those of hpt_mread_open / the column readers (HPT_ERR_DATA naming
 * the file), HPT_ERR_IO when writing to `out` fails, HPT_ERR_INTERNAL when
 * out of memory. */
hpt_status hpt_metrics_history_json(const char *path, int points, FILE *out);

/* Write the /api/runs entry of the metrics file `path` as run `id`:
 * {"id","name","path","layout":{"tp","pp","dp","world"} (of the last
 * segment),"attrs":{"hpt_version","format_version","peak_flops_per_rank",
 * "segments","steps"},"state","error":null}. `name` is the name of the
 * file's directory (the run directory), or the file name when it has none.
 * Errors as hpt_metrics_history_json. */
hpt_status hpt_metrics_run_json(const char *path, int id, FILE *out);

/* Write the self-contained report page for the `n` metrics files `paths`
 * to `out`: share/live/index.html's head, style.css, window.HPT_DATA =
 * {"runs":[...],"history":[...]} (history with at most `points` steps per
 * run), echarts.min.js and app.js, all inlined (no request is made when
 * it is opened). `assets[0..2]` are the paths of style.css,
 * echarts.min.js and app.js. Errors: HPT_ERR_IO naming an asset that
 * cannot be read, the data errors of the files, HPT_ERR_IO when writing
 * fails. */
hpt_status hpt_metrics_report_write(const char *const *paths, int n, int points,
                                    const char *const assets[3], FILE *out);

#endif
