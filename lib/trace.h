/* trace.h — the step timeline (hpt-train --trace-steps A-B): on every
 * rank, each forward and backward of every micro-batch, the data loading,
 * the optimizer, validation, checkpoint saves and every communication
 * operation of the flight recorder (group, bytes, peer) of steps A..B,
 * with start and end times, gathered to world rank 0 at the end of step B
 * (or when the run stops inside A..B) into the metrics file's /trace table
 * (io/metrics_h5.h hpt_metrics_trace_row, docs/METRICS.md).
 * `hpt-metrics trace RUN_DIR` turns it into the Trace Event Format
 * (lib/metrics_tool.h).
 *
 * Times: each rank records CLOCK_MONOTONIC (now_s, the flight recorder)
 * and converts to Unix time with one offset measured when the recorder is
 * made, so ranks of one host share a clock; across hosts the spans are as
 * aligned as the hosts' clocks (NTP: typically well under a millisecond).
 *
 * Bounds: at most HPT_TRACE_MAX_SPANS spans per rank over the whole range
 * and HPT_TRACE_MAX_OPS communication operations per rank and step; what
 * does not fit is counted and reported (a `trace` event and one log
 * line), never an error. Recording a span is a store into a preallocated
 * array: no allocation, no lock, no communication. */
#ifndef HPT_TRACE_H
#define HPT_TRACE_H

#include <mpi.h>
#include <stdio.h>

#include "error.h"
#include "flight.h"
#include "metrics.h"

#define HPT_TRACE_MAX_SPANS 32768
#define HPT_TRACE_MAX_OPS 8192

typedef struct hpt_trace hpt_trace;

/* --trace-steps: "A-B" or "A" (= "A-A"), 1 <= A <= B, into *a, *b.
 * Errors: HPT_ERR_USAGE quoting the text: not two positive step numbers
 * ("expected ... e.g. 10-12"), or A > B ("reversed"). */
hpt_status hpt_trace_parse(const char *spec, int *a, int *b);

/* A recorder of steps a..b (1-based, inclusive) on world rank `rank`,
 * pipeline stage `stage`; communication is captured from fr (NULL: no
 * communication spans). NULL when out of memory. Free with
 * hpt_trace_free. */
hpt_trace *hpt_trace_new(int a, int b, int rank, int stage, hpt_flight *fr);
void hpt_trace_free(hpt_trace *t);

/* Step `step` (1-based) begins: communication captured since the last
 * call is attributed to the step then current; capture runs while the
 * step is in a..b. Call at every step's start, before its first
 * operation. */
void hpt_trace_step(hpt_trace *t, int step);

/* 1 while the current step is traced (t may be NULL: 0). */
int hpt_trace_on(const hpt_trace *t);

/* A span of the current step on this rank: name and stream are static
 * strings of at most 15 characters (stream "compute" or "step"), micro
 * the 0-based micro-batch or -1, t0 <= t1 monotonic seconds (now_s).
 * A no-op while not tracing; counted as dropped beyond the bound. */
void hpt_trace_span(hpt_trace *t, const char *name, const char *stream, int micro, double t0,
                    double t1);

/* 1 when the spans must be gathered after step `step`: it is b, or the
 * run stops after it (`stopping`) inside a..b. Same answer on every rank
 * given the same arguments. */
int hpt_trace_due(const hpt_trace *t, int step, int stopping);

/* Gather every rank's spans to rank 0 of `world` (rank by rank: rank 0
 * holds one rank's spans at a time) and append them to the metrics file
 * (hpt_metrics_trace); rank 0 prints one line to `log` (NULL: none) and
 * records a `trace` event. Capture stops. Collective over `world`. */
void hpt_trace_flush(hpt_trace *t, MPI_Comm world, hpt_metrics *m, FILE *log);

#endif
