/* metrics_tool.h — the commands of `hpt-metrics` (docs/ANALYSIS.md) as a
 * library: src/hpt-metrics.c parses options and calls these. Each reads
 * metrics files through io/metrics_read.h (SWMR read, bounded metadata
 * retries, attributes probed in a child; each step once, the last row of a
 * step winning — the rule analysis/hpt_metrics.py applies too) and writes
 * to `out`. Errors: HPT_ERR_DATA naming a file that is missing, not an hpt
 * metrics file or damaged (the dataset, HDF5's cause); HPT_ERR_USAGE (an
 * unknown --ranks column: the message lists the file's); HPT_ERR_IO (an
 * output that cannot be written, or OUT naming an input); HPT_ERR_INTERNAL
 * out of memory. */
#ifndef HPT_METRICS_TOOL_H
#define HPT_METRICS_TOOL_H

#include <stddef.h>
#include <stdio.h>

#include "error.h"

/* `summary FILE`: the run's segments, steps, tokens, losses, throughput,
 * slowest ranks and events, the lines analysis/hpt_metrics.summary_text
 * prints, then the goodput line (hpt_goodput_print_line). */
hpt_status hpt_metrics_tool_summary(const char *path, FILE *out);

/* `csv FILE [--ranks COL] [-o OUT]`: the /steps columns (or /ranks/COL,
 * one column per rank) of the kept steps as CSV, to `out` or to OUT
 * (written as a temporary file and renamed; never one of the inputs). */
hpt_status hpt_metrics_tool_csv(const char *path, const char *ranks_col, const char *outpath,
                                FILE *out);

/* `report FILE... -o OUT`: the n files (each readable first, before OUT
 * is touched) as one self-contained HTML page (hpt_live_report_write);
 * `points` steps per run before it downsamples (0: 20000); the page's
 * assets style.css, echarts.min.js and app.js each from the first of the
 * ndirs directories `dirs` that has it (NULL or empty entries skipped:
 * $HPT_LIVE_ASSETS, the installed, build and source trees' share/live);
 * OUT "-" is `out`. Errors also HPT_ERR_IO naming an asset found nowhere
 * (dirs[install], the installed directory, in the message). */
hpt_status hpt_metrics_tool_report(const char *const *files, int n, int points,
                                   const char *const *dirs, int ndirs, int install,
                                   const char *outpath, FILE *out);

/* `goodput FILE`: where the run's wall time went over all its segments
 * (lib/goodput.h, hpt_goodput_print). */
hpt_status hpt_metrics_tool_goodput(const char *path, FILE *out);

/* `close FILE`: hpt_metrics_h5_clear, one line on `out` saying what was
 * done; a warning (no lock support) on `err`. */
hpt_status hpt_metrics_tool_close(const char *path, FILE *out, FILE *err);

/* `trace FILE [--step N] [-o OUT]`: the step timeline /trace
 * (hpt-train --trace-steps) in the Trace Event Format (JSON object form,
 * as Perfetto and chrome://tracing open it): one process per rank (per
 * segment and rank when several segments traced), one thread per stream
 * ("step", "compute", then each communication group), complete ("X")
 * events with ts/dur in microseconds from the earliest span, args step,
 * micro, group, bytes, peer; sorted so ts never decreases within a
 * thread. step 0: every traced step. To `out`, or OUT as csv -o.
 * Errors: HPT_ERR_DATA no /trace or an empty one; HPT_ERR_USAGE a step
 * not traced (the message gives the traced ones). */
hpt_status hpt_metrics_tool_trace(const char *path, int step, const char *outpath, FILE *out);

/* The metrics file a command-line argument names: arg itself, or
 * DIR/metrics.h5 for a (run) directory that has one, into buf (len
 * bytes); a path that does not exist is passed on (the reader says "no
 * such file"). HPT_ERR_DATA: a directory without metrics.h5, something
 * not a regular file (a FIFO, a device: HDF5 would block on it). */
hpt_status hpt_metrics_tool_resolve(const char *arg, char *buf, size_t len);

#endif
