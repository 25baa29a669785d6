/* event_window.c — the job log's rate limit for repeated anomaly lines
 * (event_window.h). */
#include "event_window.h"

#include <stdlib.h>
#include <string.h>

void hpt_event_windows_init(hpt_event_windows *w, int window)
{
    memset(w, 0, sizeof *w);
    w->window = window > 0 ? window : 0;
}

void hpt_event_windows_free(hpt_event_windows *w)
{
    free(w->keys);
    hpt_event_windows_init(w, w->window);
}

/* The key of (kind, rank), created with `step` as its opening when absent
 * (*created = 1); NULL when the table cannot grow. */
static hpt_event_window_key *find(hpt_event_windows *w, const char *kind, int rank,
                                  int64_t step, int *created)
{
    *created = 0;
    for (int i = 0; i < w->n; i++)
        if (w->keys[i].rank == rank && !strcmp(w->keys[i].kind, kind))
            return &w->keys[i];
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 8;
        hpt_event_window_key *p = realloc(w->keys, sizeof *p * (size_t)cap);
        if (!p)
            return NULL;
        w->keys = p;
        w->cap = cap;
    }
    hpt_event_window_key *k = &w->keys[w->n++];
    memset(k, 0, sizeof *k);
    snprintf(k->kind, sizeof k->kind, "%s", kind);
    k->rank = rank;
    k->opened = step;
    *created = 1;
    return k;
}

/* The window's summary line, and its count started anew. */
static void summarize(hpt_event_window_key *k, FILE *log)
{
    if (k->more == 0)
        return;
    if (log) {
        char who[32] = "", steps[64];
        if (k->rank >= 0)
            snprintf(who, sizeof who, " (rank %d)", k->rank);
        if (k->first == k->last)
            snprintf(steps, sizeof steps, "step %lld", (long long)k->first);
        else
            snprintf(steps, sizeof steps, "steps %lld-%lld", (long long)k->first,
                     (long long)k->last);
        fprintf(log, "hpt-train: anomaly: %s%s x%ld more, %s\n", k->kind, who, k->more, steps);
        fflush(log);
    }
    k->more = 0;
}

/* 1 when `step` lies within the window opened at k->opened. */
static int within(const hpt_event_windows *w, const hpt_event_window_key *k, int64_t step)
{
    return step < k->opened || step - k->opened < w->window;
}

int hpt_event_windows_admit(hpt_event_windows *w, FILE *log, int64_t step, const char *kind,
                            int rank)
{
    if (w->window == 0)
        return 1;
    int created;
    hpt_event_window_key *k = find(w, kind, rank, step, &created);
    if (!k || created)
        return 1;
    if (within(w, k, step)) {
        if (k->more++ == 0)
            k->first = step;
        k->last = step;
        return 0;
    }
    summarize(k, log);
    k->opened = step;
    return 1;
}

void hpt_event_windows_close(hpt_event_windows *w, FILE *log, int64_t through)
{
    for (int i = 0; i < w->n; i++) {
        hpt_event_window_key *k = &w->keys[i];
        if (k->more > 0 && through >= k->opened && through - k->opened >= w->window - 1)
            summarize(k, log);
    }
}
