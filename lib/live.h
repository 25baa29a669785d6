/* live.h — following metrics files for the live view (docs/LIVE.md): the
 * state of one followed run, its incremental reader, and the JSON of the
 * HTTP API (history with downsampling, stream messages). The HTTP server
 * is lib/live_server.c (hpt_live_serve); the alert rules lib/alert.h.
 *
 * Reading: a run opens its metrics file as a SWMR reader (io/metrics_h5.h's
 * fapl: bounded metadata retries) and keeps it open; each poll refreshes
 * the datasets and reads only the rows, events and segments appended since
 * the last poll (hyperslabs from the last row read), never the whole file.
 * The global columns of every kept step stay in memory (about 100 bytes a
 * step); per-rank values are read from the file when a request needs them.
 * Each step is kept once, the last row of a step winning (the dedup rule
 * of io/metrics_read.h). HDF5 is not thread-safe here: callers serialise
 * every call on one run (lib/live_server.c holds one lock). */
#ifndef HPT_LIVE_H
#define HPT_LIVE_H

#include <hdf5.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "alert.h"
#include "error.h"
#include "goodput.h"
#include "metrics_h5.h"

/* ------------------------------------------------------------ buffers */

/* A growable string (JSON output). Zero-initialise; free with free(b->p). */
typedef struct {
    char *p;
    size_t n, cap;
    int oom; /* an allocation failed: the content is incomplete */
} hpt_sbuf;

void hpt_sbuf_printf(hpt_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hpt_sbuf_put(hpt_sbuf *b, const char *s, size_t n);
/* A JSON string literal of s (quotes, escapes; bytes >= 0x80 as is). */
void hpt_sbuf_json_str(hpt_sbuf *b, const char *s);
/* A JSON number: shortest "%.17g" round trip; NaN and +-inf as null. */
void hpt_sbuf_json_num(hpt_sbuf *b, double v);

/* ---------------------------------------------------------------- runs */

typedef enum {
    HPT_LIVE_WAITING, HPT_LIVE_LIVE, HPT_LIVE_STOPPED, HPT_LIVE_FINISHED, HPT_LIVE_ERROR
} hpt_live_state;

/* "waiting", "live", "stopped", "finished", "error". */
const char *hpt_live_state_name(hpt_live_state s);

/* Global values kept per step, in this order (names of the JSON keys in
 * hpt_live_col_json, /steps columns in hpt_live_col_src). */
enum {
    HPT_LC_STEP, HPT_LC_WALL, HPT_LC_LOSS, HPT_LC_VAL, HPT_LC_LR, HPT_LC_NORM, HPT_LC_CLIP,
    HPT_LC_TOK_S, HPT_LC_MFU, HPT_LC_STEP_TIME, HPT_LC_FLOPS, HPT_LC_SKIPPED, HPT_LC_SEGMENT,
    HPT_LC_TOKENS, HPT_LC_COUNT
};
extern const char *const hpt_live_col_json[HPT_LC_COUNT];
extern const int hpt_live_col_src[HPT_LC_COUNT];

/* The rows of /events and /segments as io/metrics_h5.h defines them
 * (kind: the file's kind, skipped_step, ...); in a hpt_live_seg,
 * sequence_parallel and recompute are -1 where the file's /segments
 * predates them. */
typedef hpt_metrics_event_row hpt_live_event;
typedef hpt_metrics_seg_row hpt_live_seg;

typedef struct {
    char rule[HPT_ALERT_TEXT];
    int64_t step;
    double value, time;
} hpt_live_alert;

/* What a poll found new, for the stream (indices into the run's arrays). */
typedef struct {
    size_t rows_from, rows_to;     /* raw rows read in this poll            */
    int64_t *steps;                /* [rows_to - rows_from]: step of each new row (malloc'd) */
    size_t events_from, segs_from, alerts_from;
    int state_changed;
    int replaced;                  /* the path now names another file (moved
                                    * aside, replaced), or it changed in place
                                    * or was cut: everything was dropped and
                                    * read afresh */
    int opened;                    /* the file was opened afresh this poll  */
} hpt_live_news;

/* One followed metrics file. Fields read-only outside lib/live*.c. */
typedef struct {
    int id;
    char path[4096], name[256];
    hpt_live_state state;
    char error[600];          /* why state is error (or waiting), "" if none */
    char damage[600];         /* a read outside the poll failed (hpt_live_run_set_damage):
                               * state error until the file changes      */
    int said;                 /* the current error/waiting was printed     */
    hid_t file;               /* open SWMR reader, or <= 0                 */
    hid_t sd[HPT_SC_COUNT], rd[HPT_RC_COUNT], seg_ds, ev_ds, seg_t, ev_t;
    size_t rows;              /* raw rows read                             */
    size_t nranks;            /* extent of the rank axis                   */
    /* kept steps, sorted by step: n of cap */
    size_t n, cap;
    double *col[HPT_LC_COUNT];/* [cap] each                                */
    size_t *row;              /* [cap]: the raw row kept for each step      */
    hpt_live_event *ev;       /* [nev]                                      */
    size_t nev;
    hpt_live_seg *seg;        /* [nseg]                                     */
    size_t nseg;
    hpt_live_alert *alert;    /* [nalert]                                   */
    size_t nalert;
    hpt_alert_rule rules[HPT_ALERT_MAX];
    int nrules;
    size_t alerts_seen;       /* alerts handed to --on-alert so far         */
    /* keys (hpt_live_alert_key) of the alerts --on-alert already ran for;
     * kept when the file is replaced (a copy read again fires nothing) */
    uint64_t *fired;
    size_t nfired, capfired;
    char *model_config, *hpt_version, *flop_formula; /* root attributes    */
    double flops_per_token, peak_flops;
    /* writer liveness */
    int lock_seen;            /* the writer's lock was seen held on this host */
    double last_growth;       /* time (Unix s) the file last grew           */
    double usual;             /* usual seconds between growths              */
    unsigned long long dev, ino; /* the open file's identity                 */
    long long size;              /* its size at the last poll (bytes; -1 none) */
    long long mtime_ns, ctime_ns; /* its mtime and ctime then (ns)          */
    int settling;             /* it changed in place at the last poll, nothing new */
    long long probed[3];      /* size, mtime, ctime (ns) of the last probe  */
    char probe_error[600];    /* its finding (hpt_metrics_h5_probe), "" if sound */
    size_t reread_alerts;     /* alerts reported before a re-read (not new again) */
} hpt_live_run;

/* Set up run `id` for `path` (a metrics file, or a run directory: its
 * metrics.h5; a path that does not exist yet is a file if it ends in .h5,
 * else a run directory), state waiting, nothing opened. `rules`: nrules
 * alert rules copied into the run. */
void hpt_live_run_init(hpt_live_run *r, int id, const char *path, const hpt_alert_rule *rules,
                       int nrules);

/* A key naming alert `a` (FNV-1a of its rule, step and value bits): equal
 * for the same alert read again from a copy of the file. */
uint64_t hpt_live_alert_key(const hpt_live_alert *a);

/* 1 if --on-alert already ran for alert `a` of run r, else record it and
 * return 0 (-1 out of memory: treated as not seen). */
int hpt_live_alert_fired(hpt_live_run *r, const hpt_live_alert *a);

/* Close the file and free what the run holds. */
void hpt_live_run_free(hpt_live_run *r);

/* One poll at Unix time `now`: open the file if needed, read what was
 * appended, evaluate the alert rules on the new rows, update the state.
 * *news (may be NULL) says what is new; its steps array is the caller's
 * to free. A path that now names another file, or none (the writer moved
 * a damaged file aside and started a new one, a run directory moved away),
 * drops everything read and starts again (news->replaced); so does a file
 * that got shorter, and one that changed in place with nothing new to read
 * for two polls (overwritten bytes: reading it afresh finds the damage;
 * hpt_live_run_set_damage's mark is cleared then). Never fails: a failure becomes state error (or waiting) with the
 * message in r->error; the file is re-opened at the next poll. Returns 1
 * when the state changed or its message changed (print it once). */
int hpt_live_run_poll(hpt_live_run *r, double now, hpt_live_news *news);

/* Record that a read of run r's file outside the poll (its history's
 * per-rank values) failed with `msg`: the state becomes error with that
 * reason, and stays so until the file changes (it is then read afresh);
 * meanwhile the history leaves out the per-rank values. Returns 1 when the
 * state or its message changed. */
int hpt_live_run_set_damage(hpt_live_run *r, const char *msg);

/* 1 when `path` exists but is not an hpt metrics file at all (not HDF5,
 * or HDF5 without format="hpt-metrics", or another format_version, or not
 * a regular file at all, e.g. /dev/null): a
 * usage mistake hpt-live refuses at start. The message is in hpt_error_msg
 * (HPT_ERR_DATA, naming the file). */
int hpt_live_not_metrics(const char *path);

/* The goodput of run r over the raw rows read so far (lib/goodput.h):
 * the rows' /steps columns and rank 0's /ranks columns read again from
 * the open file, the segments and events as held. Errors: HPT_ERR_DATA
 * (the file is not open, or a read failed: the message names the file and
 * the dataset), HPT_ERR_INTERNAL out of memory. */
hpt_status hpt_live_goodput(const hpt_live_run *r, hpt_goodput *g);

/* ---------------------------------------------------------------- JSON */

/* The runs list of GET /api/runs: {"runs":[...]} (docs/LIVE.md). */
void hpt_live_runs_json(hpt_live_run *const *runs, int nruns, hpt_sbuf *out);

/* The history of GET /api/history for an open run (docs/LIVE.md): every
 * kept step when there are at most `points`, else about `points` rows
 * chosen by min/max per bucket of loss, grad_norm, tokens_per_s and mfu,
 * always with the first and last step and every event step; per-rank
 * values (busy, step time, FLOP/s; 6 significant digits) for at most
 * min(points, 512, max(16, 2^17 / ranks)) steps (the slowest step of each
 * bucket) read from the file (left out, empty, while the file is closed
 * or r->damage is set). `seq`: the stream
 * sequence number to resume the stream from (GET /api/stream?from=SEQ),
 * -1 to leave it out. "trace": the step timeline of --trace-steps (the
 * /trace table: spans per traced step, ms from the step's first span;
 * docs/LIVE.md), null without one or while the file is closed or damaged.
 * Returns HPT_OK or HPT_ERR_DATA (a read failed; the
 * message names the file and dataset) with *out incomplete. */
hpt_status hpt_live_run_history_json(hpt_live_run *r, size_t points, long long seq, hpt_sbuf *out);

/* /ranks/NAME (a per-rank column, io/metrics_h5.h) of raw row `row` of
 * run r into out[r->nranks]. The file must be open (r->file > 0).
 * Returns HPT_OK, or HPT_ERR_DATA (not open, or damaged: the message
 * names the file, the column and HDF5's cause). */
hpt_status hpt_live_rank_values(const hpt_live_run *r, const char *name, size_t row,
                                double *out);

/* GET /metrics: every run of runs[0..nruns) in the Prometheus text
 * exposition format 0.0.4 (lib/live_prom.c; names, labels and units in
 * docs/LIVE.md), appended to *out. `now`: Unix time (s) for the
 * seconds-since gauges; `topk` (>= 1): series of the slowest ranks. A run
 * whose per-rank step times cannot be read is marked damaged
 * (hpt_live_run_set_damage: its state is error, as the page shows it)
 * and changed[i] (may be NULL) set to 1 when its state changed. Output
 * is complete unless out->oom. */
void hpt_live_prom_write(hpt_live_run *const *runs, int nruns, double now, int topk,
                         int *changed, hpt_sbuf *out);

/* `hpt-metrics report`: write to `out` the self-contained report page of
 * the `n` metrics files `paths` (files or run directories): the head of
 * share/live/index.html, style.css, window.HPT_DATA = {"runs":[...],
 * "history":[...]} where runs is the list GET /api/runs gives and
 * history[i] what GET /api/history?run=i&points=POINTS gives for file i
 * (hpt_live_runs_json, hpt_live_run_history_json: the live page and the
 * report are one producer), echarts.min.js and app.js, all inlined (no
 * request is made when it is opened). `assets[0..2]`: the paths of
 * style.css, echarts.min.js and app.js. Each file is read once, with no
 * alert rules. Errors: HPT_ERR_IO naming an asset that cannot be read or
 * when writing fails; HPT_ERR_DATA naming a file that is missing, not an
 * hpt metrics file, or damaged; HPT_ERR_INTERNAL out of memory. */
hpt_status hpt_live_report_write(const char *const *paths, int n, size_t points,
                                 const char *const assets[3], FILE *out);

/* Stream messages (Server-Sent Events, without the framing) for what a
 * poll found: appends to *out complete SSE records ("event: rows\ndata:
 * {...}\n\n", state, event, alert). `max_rows`: above it, one "history"
 * record (re-read the history) replaces the rows. Per-rank values of the
 * new rows are read from the file (ranks key). */
void hpt_live_news_sse(hpt_live_run *r, const hpt_live_news *news, size_t max_rows,
                       hpt_sbuf *out);

/* GET /api/goodput?run=ID: {"run":ID,"goodput":{...}} — the history's
 * goodput object alone (docs/LIVE.md), null while the file is not open or
 * marked damaged. Errors: as hpt_live_goodput (*out incomplete). */
hpt_status hpt_live_goodput_json(hpt_live_run *r, hpt_sbuf *out);

/* The JSON of event e of run r as in the history ("step", "time", "kind"
 * mapped to the live kinds, "file_kind", "rank", "detail"). */
void hpt_live_event_json(const hpt_live_event *e, hpt_sbuf *out);

#endif
