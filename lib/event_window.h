/* event_window.h — the job log's rate limit for repeated anomaly lines
 * (hpt-train --event-window N, docs/METRICS.md): per key — an anomaly kind,
 * or a kind and a rank — the first occurrence is printed as it comes and
 * opens a window of N steps; further occurrences within the window are only
 * counted, and once the window has passed one line sums them up:
 *
 *     hpt-train: anomaly: throughput_drop x9 more, steps 6-14
 *
 * The next occurrence after the window prints again and opens the next
 * window. Only the job log is limited: the caller still records every
 * occurrence (lib/metrics.c: the metrics file's /events). Used on world
 * rank 0 only; no communication, no allocation beyond the table of keys. */
#ifndef HPT_EVENT_WINDOW_H
#define HPT_EVENT_WINDOW_H

#include <stdint.h>
#include <stdio.h>

#define HPT_EVENT_WINDOW_KIND_LEN 32

/* One key's window. */
typedef struct {
    char kind[HPT_EVENT_WINDOW_KIND_LEN];
    int rank;              /* the rank the key names; -1: the kind alone   */
    int64_t opened;        /* step of the printed occurrence that opened it */
    int64_t first, last;   /* steps of the first and last counted one      */
    long more;             /* occurrences counted, not printed, so far      */
} hpt_event_window_key;

typedef struct {
    int window;            /* steps per window; 0: every occurrence printed */
    int n, cap;
    hpt_event_window_key *keys;
} hpt_event_windows;

/* An empty table with windows of `window` steps (0: no limit; < 0 taken as
 * 0). Nothing to free until the first hpt_event_windows_admit. */
void hpt_event_windows_init(hpt_event_windows *w, int window);

/* One occurrence of `kind` (for `rank`, or -1 when the kind alone is the
 * key) at `step`. Returns 1 when the caller is to print its line (the
 * first of a window, or every one with window 0, or when the table cannot
 * grow: out of memory never hides a line), 0 when it was only counted.
 * Before returning 1 for a key whose previous window has passed, that
 * window's "xN more" line is printed to `log` (NULL: nothing printed, the
 * counting is the same). Steps of one key are expected in order; an
 * earlier step than the window's opening counts within it. */
int hpt_event_windows_admit(hpt_event_windows *w, FILE *log, int64_t step, const char *kind,
                            int rank);

/* Print the "xN more" line of every window that counted occurrences and
 * whose last step is <= `through` (INT64_MAX: every window, at the end of
 * the run), and start their counts anew. log NULL: the counts are dropped
 * silently. */
void hpt_event_windows_close(hpt_event_windows *w, FILE *log, int64_t through);

/* Free the table (w itself is the caller's); w is empty afterwards. */
void hpt_event_windows_free(hpt_event_windows *w);

#endif
