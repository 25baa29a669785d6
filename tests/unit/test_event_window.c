/* test_event_window.c — the job log's rate limit of anomaly lines
 * (lib/event_window.h) on hand-made sequences, the printed text compared
 * line for line:
 * - window 10, an anomaly at every step 5..30, closed at the flushes of
 *   steps 10, 20, 30 and at the end: printed 5, 15, 25 and "x9 more, steps
 *   6-14", "x9 more, steps 16-24", "x5 more, steps 26-30";
 * - a window that ends at a flush before the next occurrence: its summary
 *   then, and the next occurrence prints again; one counted occurrence is
 *   "x1 more, step N";
 * - kinds, and the ranks of one kind, have windows of their own;
 * - window 0: every occurrence prints, no summary line.
 * Exit status 0 when every check passes. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event_window.h"
#include "../helpers/expect.h"

/* What was printed to the memory stream, as one string (reset after). */
typedef struct {
    char *buf;
    size_t len;
    FILE *f;
} capture;

static void cap_open(capture *c)
{
    c->buf = NULL;
    c->len = 0;
    c->f = open_memstream(&c->buf, &c->len);
}

static const char *cap_text(capture *c)
{
    fflush(c->f);
    return c->buf ? c->buf : "";
}

static void cap_close(capture *c)
{
    fclose(c->f);
    free(c->buf);
}

/* Every step of a..b an occurrence of `kind` (key rank -1); the steps the
 * caller was told to print, as "5 15 25 " into printed. Windows closed at
 * every multiple of `flush`. */
static void run(hpt_event_windows *w, FILE *log, const char *kind, int a, int b, int flush,
                char *printed, size_t len)
{
    printed[0] = 0;
    for (int s = a; s <= b; s++) {
        if (hpt_event_windows_admit(w, log, s, kind, -1)) {
            fprintf(log, "print %d\n", s);
            snprintf(printed + strlen(printed), len - strlen(printed), "%d ", s);
        }
        if (flush && s % flush == 0)
            hpt_event_windows_close(w, log, s);
    }
}

static void flood(void)
{
    hpt_event_windows w;
    capture c;
    char printed[256];
    cap_open(&c);
    hpt_event_windows_init(&w, 10);
    run(&w, c.f, "throughput_drop", 5, 30, 10, printed, sizeof printed);
    hpt_event_windows_close(&w, c.f, INT64_MAX);
    EXPECT(!strcmp(printed, "5 15 25 "), "printed steps '%s'", printed);
    const char *want = "print 5\n"
                       "hpt-train: anomaly: throughput_drop x9 more, steps 6-14\n"
                       "print 15\n"
                       "hpt-train: anomaly: throughput_drop x9 more, steps 16-24\n"
                       "print 25\n"
                       "hpt-train: anomaly: throughput_drop x5 more, steps 26-30\n";
    EXPECT(!strcmp(cap_text(&c), want), "printed:\n%s\nwant:\n%s", cap_text(&c), want);
    hpt_event_windows_free(&w);
    cap_close(&c);
}

static void closed_by_flush(void)
{
    hpt_event_windows w;
    capture c;
    cap_open(&c);
    hpt_event_windows_init(&w, 10);
    int p5 = hpt_event_windows_admit(&w, c.f, 5, "grad_norm_spike", -1);
    int p6 = hpt_event_windows_admit(&w, c.f, 6, "grad_norm_spike", -1);
    hpt_event_windows_close(&w, c.f, 13); /* the window 5-14 has not ended */
    EXPECT(!strcmp(cap_text(&c), ""), "printed before the window ended: '%s'", cap_text(&c));
    hpt_event_windows_close(&w, c.f, 14);
    const char *want = "hpt-train: anomaly: grad_norm_spike x1 more, step 6\n";
    EXPECT(!strcmp(cap_text(&c), want), "printed '%s', want '%s'", cap_text(&c), want);
    int p20 = hpt_event_windows_admit(&w, c.f, 20, "grad_norm_spike", -1);
    int p21 = hpt_event_windows_admit(&w, c.f, 21, "grad_norm_spike", -1);
    EXPECT(p5 && !p6 && p20 && !p21, "print 5 %d, 6 %d, 20 %d, 21 %d", p5, p6, p20, p21);
    hpt_event_windows_close(&w, c.f, 25); /* 20-29 still open */
    EXPECT(!strcmp(cap_text(&c), want), "a summary too early: '%s'", cap_text(&c));
    hpt_event_windows_close(&w, NULL, INT64_MAX); /* dropped silently */
    hpt_event_windows_close(&w, c.f, INT64_MAX);
    EXPECT(!strcmp(cap_text(&c), want), "a dropped count printed later: '%s'", cap_text(&c));
    hpt_event_windows_free(&w);
    cap_close(&c);
}

static void keys(void)
{
    hpt_event_windows w;
    capture c;
    cap_open(&c);
    hpt_event_windows_init(&w, 50);
    int got = 0;
    for (int s = 10; s <= 30; s += 10) { /* slow_rank of ranks 1 and 2, a spike: own windows */
        got = got * 10 + hpt_event_windows_admit(&w, c.f, s, "slow_rank", 1);
        got = got * 10 + hpt_event_windows_admit(&w, c.f, s, "slow_rank", 2);
        got = got * 10 + hpt_event_windows_admit(&w, c.f, s, "grad_norm_spike", -1);
    }
    EXPECT(got == 111000000, "printed pattern %d, want 111000000", got);
    hpt_event_windows_close(&w, c.f, INT64_MAX);
    const char *want = "hpt-train: anomaly: slow_rank (rank 1) x2 more, steps 20-30\n"
                       "hpt-train: anomaly: slow_rank (rank 2) x2 more, steps 20-30\n"
                       "hpt-train: anomaly: grad_norm_spike x2 more, steps 20-30\n";
    EXPECT(!strcmp(cap_text(&c), want), "printed:\n%s\nwant:\n%s", cap_text(&c), want);
    hpt_event_windows_free(&w);
    cap_close(&c);
}

static void no_window(void)
{
    hpt_event_windows w;
    capture c;
    char printed[256];
    cap_open(&c);
    hpt_event_windows_init(&w, 0);
    run(&w, c.f, "throughput_drop", 1, 12, 5, printed, sizeof printed);
    hpt_event_windows_close(&w, c.f, INT64_MAX);
    EXPECT(!strcmp(printed, "1 2 3 4 5 6 7 8 9 10 11 12 "), "printed steps '%s'", printed);
    EXPECT(!strstr(cap_text(&c), "more"), "a summary with window 0: '%s'", cap_text(&c));
    hpt_event_windows_free(&w);
    cap_close(&c);
}

int main(void)
{
    flood();
    closed_by_flush();
    keys();
    no_window();
    printf(failures ? "FAIL: %d checks\n" : "PASS: event windows\n", failures);
    return failures ? 1 : 0;
}
