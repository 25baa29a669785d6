/* metrics.c — the metrics file writer (metrics.h, docs/METRICS.md). */
#include "hpt_config.h"

#include "metrics.h"

#include "comm.h"
#include "event_window.h"
#include "fsutil.h"
#include "metrics_h5.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define HIST 64 /* running-median window of the anomaly detectors */

/* The file's per-rank columns are this module's records, in order. */
_Static_assert(HPT_MR_COUNT == HPT_RC_COUNT, "io/metrics_h5.h: one /ranks column per HPT_MR_*");

typedef hpt_metrics_event_row event_row;

const char *const hpt_fault_anomaly_kinds[3] = {"", "grad_norm_spike", "throughput_drop"};

/* ----------------------------------------------------------- the state */

struct hpt_metrics {
    MPI_Comm comm;
    int rank, world, interval, n;
    hpt_metrics_step *steps; /* [interval]                                  */
    hpt_metrics_rank *recs;  /* [interval]                                  */
    double *all;             /* rank 0: [interval][world][HPT_MR_COUNT]      */
    /* rank 0 only */
    hpt_metrics_h5 h;        /* the file (io/metrics_h5.h)                  */
    int broken;              /* a write failed: warned once, stop writing   */
    hpt_metrics_info info;
    int *dp_rank;
    event_row *ev;
    int nev, cap_ev;
    double norm_hist[HIST], tps_hist[HIST];
    int nnorm, ntps;
    double ema_g2, ema_s, ema_w;
    double seconds;          /* wall time spent in this module               */
    int64_t recorded;        /* records made by this process                 */
    int lock_fd;             /* flock on PATH.lock: one writer per file      */
    double *slow_buf;        /* [HIST][world] busy times awaiting judgement  */
    int nslow;
    int64_t slow_first;      /* first step in slow_buf                        */
    hpt_event_windows log_windows; /* the job log's rate limit of anomaly lines */
    hpt_alert_rule alerts[HPT_ALERT_MAX]; /* --alert rules and their state    */
    int nalerts;
};

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* The path must be a regular file or not exist in a writable directory. */
static hpt_status check_path(hpt_metrics *m)
{
    return hpt_check_output_file("metrics file", m->h.path);
}

/* Bytes free on the file system holding the metrics file. */
static double free_bytes(const hpt_metrics *m)
{
    char dir[4096];
    hpt_path_dir(m->h.path, dir, sizeof dir);
    struct statvfs v;
    if (statvfs(dir, &v) != 0)
        return INFINITY; /* unknown: let the write tell */
    return (double)v.f_bavail * (double)v.f_frsize;
}

/* Bytes an append of n rows may need: new chunks of every column (1024-row
 * chunks of /steps, 64 x 16 chunks of /ranks) plus metadata, doubled, plus
 * 1 MiB for closing the file cleanly. HDF5 must never meet ENOSPC: its
 * failed-flush path cannot be recovered from (the library then crashes
 * when MPI_Finalize closes it), so the writer stops before. */
static double bytes_needed(const hpt_metrics *m, int n)
{
    double cols = (m->world + 15) / 16, rows64 = n / 64 + 1, rows1k = n / 1024 + 1;
    double chunks = HPT_SC_COUNT * rows1k * 8192.0 + HPT_MR_COUNT * cols * rows64 * 8192.0;
    return 2 * (chunks + 65536.0 + (double)m->nev * sizeof(hpt_metrics_event_row)) + 1048576.0;
}

/* One writer per metrics file: an exclusive flock on PATH.lock, held until
 * the file is closed (HDF5's own locking is off, so that SWMR readers
 * holding the file do not stop a run from starting). */
static hpt_status take_lock(hpt_metrics *m)
{
    char lp[4200];
    snprintf(lp, sizeof lp, "%s.lock", m->h.path);
    m->lock_fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (m->lock_fd < 0)
        return hpt_error_set(HPT_ERR_IO, "metrics file %s: cannot create the lock file %s: %s",
                             m->h.path, lp, strerror(errno));
    if (flock(m->lock_fd, LOCK_EX | LOCK_NB) == 0)
        return HPT_OK;
    int err = errno;
    if (err == EWOULDBLOCK)
        return hpt_error_set(HPT_ERR_IO,
                             "metrics file %s is being written by another process (%s is "
                             "locked); one hpt-train per metrics file: pass another --metrics "
                             "path or --run-dir",
                             m->h.path, lp);
    close(m->lock_fd);
    m->lock_fd = -1;
    if (err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL) {
        /* NFS without lockd, Lustre without flock: no lock to take, not a
         * second writer. One warning; the run goes on unlocked. */
        fprintf(stderr, "hpt-train: warning: metrics file %s: its file system does not "
                "support file locks (flock on %s: %s); going on without the lock: make sure "
                "no other hpt-train writes this file\n", m->h.path, lp, strerror(err));
        return HPT_OK;
    }
    return hpt_error_set(HPT_ERR_IO, "metrics file %s: cannot lock %s: %s", m->h.path, lp,
                         strerror(err));
}

/* Move the metrics file aside to PATH.unreadable-TIME (never deleted);
 * the aside name in `aside`. 0 on success. */
static int move_aside(hpt_metrics *m, char *aside, size_t len)
{
    hpt_metrics_h5_close(&m->h);
    snprintf(aside, len, "%s.unreadable-%lld", m->h.path, (long long)time(NULL));
    return rename(m->h.path, aside);
}

/* Stop writing after a failure or before the disk fills: close the file
 * now, while there is room for its last metadata, and warn once. An HDF5
 * failure (`hdf5`: the cause) means a damaged file: it is moved aside. */
static void give_up(hpt_metrics *m, const char *why, const char *hdf5)
{
    char aside[4200] = "";
    if (m->broken)
        return;
    m->broken = 1;
    if (hdf5 && move_aside(m, aside, sizeof aside) == 0) {
        fprintf(stderr, "hpt-train: warning: metrics file %s: %s (HDF5: %s); damaged file moved "
                "to %s; no more metrics rows are written; training goes on\n", m->h.path, why,
                hdf5, aside);
        return;
    }
    fprintf(stderr,
            "hpt-train: warning: metrics file %s: %s%s%s%s; no more metrics rows are written (the "
            "%lld rows already flushed stay readable); training goes on\n",
            m->h.path, why, hdf5 ? " (HDF5: " : "", hdf5 ? hdf5 : "", hdf5 ? ")" : "",
            (long long)m->h.rows);
    hpt_metrics_h5_close(&m->h);
}

/* An existing file: opened for appending, or (damaged) moved aside so
 * that a new one is started. */
static hpt_status open_or_move_aside(hpt_metrics *m, hid_t fapl)
{
    char aside[4200];
    hpt_status st = hpt_metrics_h5_open(&m->h, fapl, m->info.model_config);
    if (!st || !m->h.damaged)
        return st;
    if (move_aside(m, aside, sizeof aside) != 0)
        return st;
    fprintf(stderr, "hpt-train: warning: %s; moved to %s, starting a new file\n",
            hpt_error_msg(), aside);
    return HPT_OK;
}

/* This segment's row of /segments (segment, first_row, last_step_before:
 * io/metrics_h5.c fills them from the file). */
static void fill_segment(const hpt_metrics *m, hpt_metrics_seg_row *s)
{
    memset(s, 0, sizeof *s);
    s->first_step = m->info.first_step;
    s->resumed_from = m->info.resumed_from;
    s->world = m->info.world;
    s->tp = m->info.tp;
    s->pp = m->info.pp;
    s->dp = m->info.dp;
    s->zero1 = m->info.zero1;
    s->sequence_parallel = m->info.sequence_parallel;
    s->recompute = m->info.recompute;
    s->grad_accum = m->info.grad_accum;
    s->micro_batch = m->info.micro_batch;
    s->seq_len = m->info.seq_len;
    s->start_time = wall_now();
    s->process_start = m->info.process_start;
    s->load_seconds = m->info.load_seconds;
    s->pp_schedule = m->info.pp_schedule;
    s->pp_virtual = m->info.pp_virtual;
    s->bubble_theory = m->info.bubble_theory;
    s->flops_per_token = m->info.flops_per_token;
    s->peak_flops_per_rank = m->info.peak_flops_per_rank;
    snprintf(s->hpt_version, HPT_METRICS_STR_LEN, "%s", PACKAGE_VERSION); /* the file's lengths */
    const char *job = getenv("SLURM_JOB_ID");
    snprintf(s->slurm_job_id, HPT_METRICS_STR_LEN, "%s", job ? job : "");
    gethostname(s->host, HPT_METRICS_HOST_LEN - 1);
}

/* Rank 0: lock, open or create the file, start this segment. */
static hpt_status open_root(hpt_metrics *m)
{
    hid_t fapl = hpt_metrics_h5_fapl();
    hpt_status st = check_path(m);
    if (!st)
        st = take_lock(m);
    if (!st && access(m->h.path, F_OK) == 0)
        st = open_or_move_aside(m, fapl);
    if (!st && access(m->h.path, F_OK) != 0) {
        double need = bytes_needed(m, m->interval), have = free_bytes(m);
        if (have < need) { /* not an error: the run goes on without metrics */
            H5Pclose(fapl);
            m->broken = 1;
            fprintf(stderr, "hpt-train: warning: metrics file %s: %.0f KiB free on its file "
                    "system, %.0f KiB needed; training goes on without metrics\n", m->h.path,
                    have / 1024, need / 1024);
            return HPT_OK;
        }
        hpt_metrics_h5_attrs a = {m->info.model_config, m->info.flop_formula,
                                  m->info.flops_per_token, m->info.peak_flops_per_rank};
        st = hpt_metrics_h5_create(&m->h, fapl, &a);
    }
    if (!st && !m->broken) {
        hpt_metrics_seg_row s;
        fill_segment(m, &s);
        m->h.want_trace = m->info.trace;
        if (hpt_metrics_h5_start_segment(&m->h, fapl, &s) < 0) /* damaged: aside, go on */
            give_up(m, "cannot append the segment or reopen the file for SWMR writing",
                    m->h.cause[0] ? m->h.cause : "HDF5 error");
    }
    H5Pclose(fapl);
    return st;
}

static void free_m(hpt_metrics *m)
{
    if (!m)
        return;
    if (m->rank == 0)
        hpt_metrics_h5_free(&m->h);
    free(m->steps);
    free(m->recs);
    free(m->all);
    free(m->dp_rank);
    free(m->ev);
    free(m->slow_buf);
    hpt_event_windows_free(&m->log_windows);
    if (m->lock_fd >= 0)
        close(m->lock_fd); /* releases the flock */
    free(m);
}

hpt_status hpt_metrics_open(hpt_metrics **out, MPI_Comm comm, const char *path, int interval,
                            const hpt_metrics_info *info)
{
    *out = NULL;
    hpt_metrics *m = calloc(1, sizeof *m);
    hpt_status st = HPT_OK;
    if (!m)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory (metrics)");
    m->comm = comm;
    m->lock_fd = -1;
    MPI_Comm_rank(comm, &m->rank);
    MPI_Comm_size(comm, &m->world);
    m->interval = interval < 1 ? 1 : interval;
    m->info = *info;
    hpt_event_windows_init(&m->log_windows, info->event_window);
    m->nalerts = info->nalerts < HPT_ALERT_MAX ? info->nalerts : HPT_ALERT_MAX;
    if (m->nalerts > 0)
        memcpy(m->alerts, info->alerts, sizeof *m->alerts * (size_t)m->nalerts);
    m->steps = calloc((size_t)m->interval, sizeof *m->steps);
    m->recs = calloc((size_t)m->interval, sizeof *m->recs);
    if (!m->steps || !m->recs)
        st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory (metrics)");
    if (!st && m->rank == 0) {
        hpt_metrics_h5_init(&m->h, path);
        m->all = malloc(sizeof(double) * (size_t)m->interval * m->world * HPT_MR_COUNT);
        m->dp_rank = malloc(sizeof(int) * (size_t)m->world);
        if (!m->all || !m->dp_rank)
            st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory (metrics)");
        else {
            memcpy(m->dp_rank, info->dp_rank, sizeof(int) * (size_t)m->world);
            m->info.dp_rank = m->dp_rank;
            st = open_root(m);
        }
    }
    /* one verdict: rank 0's */
    int code = st;
    char msg[1024] = "";
    if (m->rank == 0 && st)
        snprintf(msg, sizeof msg, "%s", hpt_error_msg());
    /* watched collectives (lib/comm.h): every rank waits here for rank 0's
     * open, so the hang watchdog times it */
    hpt_comm_watch w = hpt_comm_watch_begin(comm, HPT_FLIGHT_BROADCAST, sizeof code);
    MPI_Bcast(&code, 1, MPI_INT, 0, comm);
    hpt_comm_watch_end(w);
    if (code) {
        w = hpt_comm_watch_begin(comm, HPT_FLIGHT_BROADCAST, sizeof msg);
        MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, 0, comm);
        hpt_comm_watch_end(w);
        free_m(m);
        return hpt_error_set((hpt_status)code, "%s", msg);
    }
    *out = m;
    return HPT_OK;
}

void hpt_metrics_record(hpt_metrics *m, const hpt_metrics_step *s, const hpt_metrics_rank *r)
{
    if (!m || m->n >= m->interval)
        return;
    double t0 = MPI_Wtime();
    m->steps[m->n] = *s;
    m->recs[m->n] = *r;
    m->n++;
    m->recorded++;
    m->seconds += MPI_Wtime() - t0;
}

int hpt_metrics_due(const hpt_metrics *m)
{
    return m && m->n >= m->interval;
}

static void vevent(hpt_metrics *m, int64_t step, int rank, const char *kind, const char *fmt,
                   va_list ap)
{
    if (m->nev == m->cap_ev) {
        int cap = m->cap_ev ? 2 * m->cap_ev : 16;
        event_row *p = realloc(m->ev, sizeof *p * (size_t)cap);
        if (!p)
            return;
        m->ev = p;
        m->cap_ev = cap;
    }
    event_row *e = &m->ev[m->nev++];
    memset(e, 0, sizeof *e);
    e->step = step;
    e->wall_time = wall_now();
    e->rank = rank;
    snprintf(e->kind, HPT_METRICS_KIND_LEN, "%s", kind); /* the file's lengths */
    vsnprintf(e->message, HPT_METRICS_MSG_LEN, fmt, ap);
}

void hpt_metrics_event(hpt_metrics *m, int64_t step, int rank, const char *kind, const char *fmt,
                       ...)
{
    if (!m || m->rank != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vevent(m, step, rank, kind, fmt, ap);
    va_end(ap);
}

int hpt_metrics_log_anomaly(hpt_metrics *m, FILE *log, int64_t step, int rank, const char *kind)
{
    if (!m || m->rank != 0)
        return 0;
    return hpt_event_windows_admit(&m->log_windows, log, step, kind,
                                   strcmp(kind, "slow_rank") ? -1 : rank);
}

/* Anomaly: record an event and print one line to the job log (the first
 * of its window: hpt_metrics_log_anomaly). */
static void anomaly(hpt_metrics *m, FILE *log, int64_t step, int rank, const char *kind,
                    const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void anomaly(hpt_metrics *m, FILE *log, int64_t step, int rank, const char *kind,
                    const char *fmt, ...)
{
    va_list ap;
    int before = m->nev;
    va_start(ap, fmt);
    vevent(m, step, rank, kind, fmt, ap);
    va_end(ap);
    if (m->nev == before)
        return; /* out of memory: not recorded */
    /* the closing flush judges the last steps after run_end was queued:
     * run_end stays the last event */
    int at = m->nev - 1; /* this event's index */
    if (at >= 1 && !strcmp(m->ev[at - 1].kind, "run_end")) {
        event_row t = m->ev[at - 1];
        m->ev[at - 1] = m->ev[at];
        m->ev[at--] = t;
    }
    if (hpt_metrics_log_anomaly(m, log, step, rank, kind) && log) {
        fprintf(log, "hpt-train: anomaly at step %lld: %s: %s\n", (long long)step, kind,
                m->ev[at].message);
        fflush(log);
    }
}

/* 1 when --fault-anomaly forces anomaly `which` (HPT_FAULT_ANOMALY_*) at
 * `step`. */
static int forced(const hpt_metrics *m, int which, int64_t step)
{
    return m->info.fault_anomaly == which && step >= m->info.fault_from &&
           step <= m->info.fault_to;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n, double *scratch)
{
    memmove(scratch, v, sizeof *v * (size_t)n);
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_double);
    return n % 2 ? scratch[n / 2] : 0.5 * (scratch[n / 2 - 1] + scratch[n / 2]);
}

static void push(double *hist, int *n, double v)
{
    if (*n < HIST)
        hist[(*n)++] = v;
    else {
        memmove(hist, hist + 1, sizeof *hist * (HIST - 1));
        hist[HIST - 1] = v;
    }
}

/* Gathered value c of step record i from world rank w, with n records per
 * rank (MPI_Gather lays them out rank by rank). */
#define AT(m, n, i, w, c) ((m)->all[(((size_t)(w) * (n) + (i)) * HPT_MR_COUNT) + (c)])

/* Gradient noise scale of gathered row i (of n) into cols (rank 0);
 * sums: [dp] scratch. */
static void noise_scale(hpt_metrics *m, int n, int i, double *cols[HPT_SC_COUNT], double *sums)
{
    int W = m->world, D = m->info.dp;
    const hpt_metrics_step *s = &m->steps[i];
    cols[HPT_SC_G2][i] = cols[HPT_SC_S][i] = cols[HPT_SC_NOISE][i] = NAN;
    if (D > 1 && m->info.cp <= 1 && !s->skipped) {
        /* McCandlish et al. 2018, appendix A.1: |G_small|^2 from the K
         * small batches' gradients — each DP replica's (K = D), or each
         * micro-batch's of each replica (K = D x grad-accum, sumsq_micro)
         * — which the ranks hold scaled by 1/global tokens, so a small
         * batch's mean gradient is K times it: |G_small|^2 = (1/K) sum_k
         * |K g_k|^2 = K sum_k |g_k|^2; |G_big|^2 from the global norm. */
        memset(sums, 0, sizeof *sums * (size_t)D);
        for (int w = 0; w < W; w++)
            sums[m->dp_rank[w]] += AT(m, n, i, w, HPT_MR_GRAD_SUMSQ);
        double K = (double)D * (m->info.sumsq_micro ? m->info.grad_accum : 1), gs2 = 0;
        for (int d = 0; d < D; d++)
            gs2 += sums[d] * K;
        double gb2 = s->grad_norm * s->grad_norm, bb = s->tokens, bs = s->tokens / K;
        double g2 = (bb * gb2 - bs * gs2) / (bb - bs);
        double S = (gs2 - gb2) / (1.0 / bs - 1.0 / bb);
        cols[HPT_SC_G2][i] = g2;
        cols[HPT_SC_S][i] = S;
        if (isfinite(g2) && isfinite(S)) {
            m->ema_g2 = 0.9 * m->ema_g2 + 0.1 * g2;
            m->ema_s = 0.9 * m->ema_s + 0.1 * S;
            m->ema_w = 0.9 * m->ema_w + 0.1;
        }
        if (m->ema_w > 0 && m->ema_g2 > 0)
            cols[HPT_SC_NOISE][i] = m->ema_s / m->ema_g2;
    }
}

/* Gradient-norm spike of step s against the running median (rank 0). */
static void spike(hpt_metrics *m, FILE *log, const hpt_metrics_step *s)
{
    double scratch[HIST];
    int ok = !s->skipped && isfinite(s->grad_norm);
    if (forced(m, HPT_FAULT_ANOMALY_SPIKE, s->step))
        anomaly(m, log, s->step, 0, "grad_norm_spike",
                "forced by --fault-anomaly (testing): gradient norm %.4g", s->grad_norm);
    else if (ok && m->nnorm >= 10) {
        double med = median(m->norm_hist, m->nnorm, scratch);
        if (s->grad_norm > m->info.spike_factor * med)
            anomaly(m, log, s->step, 0, "grad_norm_spike",
                    "gradient norm %.4g is %.1fx the running median %.4g", s->grad_norm,
                    s->grad_norm / med, med);
    }
    if (ok)
        push(m->norm_hist, &m->nnorm, s->grad_norm);
}

/* Throughput drop of `step` (tps tokens/s) against the running median
 * (rank 0). */
static void drop(hpt_metrics *m, FILE *log, int64_t step, double tps)
{
    double scratch[HIST];
    int ok = isfinite(tps) && tps > 0;
    if (forced(m, HPT_FAULT_ANOMALY_DROP, step))
        anomaly(m, log, step, 0, "throughput_drop",
                "forced by --fault-anomaly (testing): %.0f tokens/s", tps);
    else if (ok && m->ntps >= 10) {
        double med = median(m->tps_hist, m->ntps, scratch);
        if (tps < 0.5 * med)
            anomaly(m, log, step, 0, "throughput_drop",
                    "%.0f tokens/s is %.0f%% of the running median %.0f", tps, 100 * tps / med,
                    med);
    }
    if (ok)
        push(m->tps_hist, &m->ntps, tps);
}

/* The --alert rules on row i (rank 0): a rule that fires (lib/alert.h:
 * once per firing edge) records an `alert` event and prints one line. */
static void alerts(hpt_metrics *m, FILE *log, int i, double *cols[HPT_SC_COUNT])
{
    double v[HPT_SC_COUNT], value;
    const hpt_metrics_step *s = &m->steps[i];
    for (int c = HPT_SC_NINT; c < HPT_SC_COUNT; c++)
        v[c] = cols[c][i];
    v[HPT_SC_STEP] = (double)s->step;
    v[HPT_SC_SKIPPED] = s->skipped;
    v[HPT_SC_SEGMENT] = m->h.segment;
    v[HPT_SC_REPEATED] = 0;
    for (int k = 0; k < m->nalerts; k++) {
        if (!hpt_alert_eval(&m->alerts[k], v, &value))
            continue;
        hpt_metrics_event(m, s->step, -1, "alert", "%s fired: %g", m->alerts[k].text, value);
        if (log) {
            fprintf(log, "hpt-train: alert at step %lld: %s (value %g)\n", (long long)s->step,
                    m->alerts[k].text, value);
            fflush(log);
        }
    }
}

/* Slow ranks over windows of >= 3 steps of the gathered rows (kept across
 * flushes when the interval is shorter): each rank's median busy time
 * against the median of the other ranks' of its pipeline stage (robust to
 * one noisy step; stages differ by design — the last holds the LM head —, so
 * a rank alone in its stage, TP = DP = 1, is not judged). World rank w is in
 * stage w / (TP DP) (rank = tp + dp TP + pp TP DP, lib/comm.h).
 * busy: [world] scratch (rank 0). */
static void slow_ranks(hpt_metrics *m, FILE *log, int n, double *busy)
{
    int W = m->world;
    if (!m->slow_buf)
        m->slow_buf = malloc(sizeof(double) * HIST * (size_t)W);
    double *col = malloc(sizeof *col * (size_t)(HIST > W ? HIST : W));
    for (int i = 0; W > 1 && m->slow_buf && col && i < n; i++) {
        if (m->nslow == 0)
            m->slow_first = m->steps[i].step;
        for (int w = 0; w < W; w++)
            m->slow_buf[(size_t)m->nslow * W + w] = AT(m, n, i, w, HPT_MR_BUSY);
        m->nslow++;
        int end = i == n - 1;
        if (m->nslow < HIST && !(end && m->nslow >= 3))
            continue;
        int k = m->nslow;
        for (int w = 0; w < W; w++) {
            for (int j = 0; j < k; j++)
                col[j] = m->slow_buf[(size_t)j * W + w];
            busy[w] = median(col, k, col);
        }
        int per_stage = m->info.tp * m->info.dp > 0 ? m->info.tp * m->info.dp : W;
        for (int w = 0; w < W; w++) {
            int q = 0;
            for (int x = 0; x < W; x++)
                if (x != w && x / per_stage == w / per_stage)
                    col[q++] = busy[x];
            if (!q)
                continue;
            double med = median(col, q, col);
            if (busy[w] > m->info.slow_factor * med && busy[w] - med > 0.02)
                anomaly(m, log, m->steps[i].step, w, "slow_rank",
                        "rank %d computes %.3f s/step, %.1fx the median %.3f s of the other "
                        "ranks of its pipeline stage (steps %lld-%lld)",
                        w, busy[w], med > 0 ? busy[w] / med : INFINITY, med,
                        (long long)m->slow_first, (long long)m->steps[i].step);
        }
        m->nslow = 0;
    }
    free(col);
}

/* Derived values and anomaly detection over the gathered rows (rank 0).
 * cols[c][i] are the /steps columns of row i. */
static void derive(hpt_metrics *m, FILE *log, int n, double *cols[HPT_SC_COUNT])
{
    double *sums = calloc((size_t)m->info.dp, sizeof *sums);
    double *busy = malloc(sizeof *busy * (size_t)m->world);
    for (int i = 0; sums && busy && i < n; i++) {
        noise_scale(m, n, i, cols, sums);
        spike(m, log, &m->steps[i]);
        drop(m, log, m->steps[i].step, cols[HPT_SC_TOK_S][i]);
        alerts(m, log, i, cols);
    }
    if (busy)
        slow_ranks(m, log, n, busy);
    free(sums);
    free(busy);
}

/* The /steps columns of the n buffered records (rank 0): ints[c] for the
 * integer columns, cols[c] for the others, from buf ([HPT_SC_COUNT][n]). */
static void step_columns(hpt_metrics *m, int n, double *buf, int64_t *ibuf,
                         int64_t *ints[HPT_SC_NINT], double *cols[HPT_SC_COUNT])
{
    for (int c = 0; c < HPT_SC_COUNT; c++)
        cols[c] = buf + (size_t)c * n;
    for (int c = 0; c < HPT_SC_NINT; c++)
        ints[c] = ibuf + (size_t)c * n;
    double peak = m->info.peak_flops_per_rank * m->world;
    for (int i = 0; i < n; i++) {
        const hpt_metrics_step *s = &m->steps[i];
        ints[HPT_SC_STEP][i] = s->step;
        ints[HPT_SC_SEGMENT][i] = m->h.segment;
        ints[HPT_SC_REPEATED][i] = s->step <= m->h.prev_max_step;
        ints[HPT_SC_SKIPPED][i] = s->skipped;
        cols[HPT_SC_WALL][i] = s->wall_time;
        cols[HPT_SC_LOSS][i] = s->loss;
        cols[HPT_SC_VAL][i] = s->val_loss;
        cols[HPT_SC_LR][i] = s->lr;
        cols[HPT_SC_NORM][i] = s->grad_norm;
        cols[HPT_SC_CLIP][i] = s->clip_coef;
        cols[HPT_SC_TOKENS][i] = s->tokens;
        cols[HPT_SC_STEP_TIME][i] = s->step_time;
        cols[HPT_SC_TOK_S][i] = s->step_time > 0 ? s->tokens / s->step_time : NAN;
        cols[HPT_SC_FLOPS][i] = s->tokens * m->info.flops_per_token;
        cols[HPT_SC_MFU][i] = s->step_time > 0 && peak > 0
                                  ? cols[HPT_SC_FLOPS][i] / s->step_time / peak : NAN;
    }
}

/* Append the n buffered records (n may be 0: events only) and the
 * pending events to the file (rank 0). 0, or -1 with m->h.cause. */
static int write_rows(hpt_metrics *m, FILE *log)
{
    int n = m->n, e = -1;
    size_t rows = (size_t)(n > 0 ? n : 1);
    double *buf = malloc(sizeof *buf * rows * HPT_SC_COUNT), *cols[HPT_SC_COUNT];
    int64_t *ibuf = malloc(sizeof *ibuf * rows * HPT_SC_NINT), *ints[HPT_SC_NINT];
    if (buf && ibuf) {
        step_columns(m, n, buf, ibuf, ints, cols);
        if (n > 0)
            derive(m, log, n, cols);
        e = hpt_metrics_h5_append(&m->h, n, ints, cols, m->all, m->world, m->ev, m->nev);
        if (!e)
            m->nev = 0;
    } else
        snprintf(m->h.cause, sizeof m->h.cause, "out of memory");
    free(buf);
    free(ibuf);
    return e;
}

hpt_status hpt_metrics_flush(hpt_metrics *m, FILE *log)
{
    if (!m)
        return HPT_OK;
    int n = m->n;
    double t0 = MPI_Wtime();
    /* n is the same on every rank: records are made once per step */
    hpt_comm_watch w = hpt_comm_watch_begin(m->comm, HPT_FLIGHT_GATHER,
                                            sizeof(double) * (size_t)(n * HPT_MR_COUNT));
    MPI_Gather(m->recs, n * HPT_MR_COUNT, MPI_DOUBLE, m->all, n * HPT_MR_COUNT, MPI_DOUBLE, 0,
               m->comm);
    hpt_comm_watch_end(w);
    if (m->rank == 0 && !m->broken && (n > 0 || m->nev > 0)) {
        double need = bytes_needed(m, n), have = free_bytes(m);
        char why[256];
        if (have < need) {
            snprintf(why, sizeof why, "%.0f KiB free on its file system, %.0f KiB needed",
                     have / 1024, need / 1024);
            give_up(m, why, NULL);
        } else if (write_rows(m, log) < 0)
            give_up(m, "an HDF5 write or flush failed", m->h.cause[0] ? m->h.cause
                                                                      : "HDF5 error");
    }
    if (m->rank == 0 && n > 0) /* the job log's windows that ended by now */
        hpt_event_windows_close(&m->log_windows, log, m->steps[n - 1].step);
    m->n = 0;
    m->seconds += MPI_Wtime() - t0;
    return HPT_OK;
}

void hpt_metrics_write_events(hpt_metrics *m)
{
    if (!m || m->rank != 0 || m->broken || m->nev == 0)
        return;
    double t0 = MPI_Wtime();
    int n = m->n;
    m->n = 0; /* events only: the buffered records wait for their flush */
    if (free_bytes(m) < bytes_needed(m, 0))
        give_up(m, "the disk is nearly full", NULL);
    else if (write_rows(m, NULL) < 0)
        give_up(m, "an HDF5 write or flush failed", m->h.cause[0] ? m->h.cause : "HDF5 error");
    m->n = n;
    m->seconds += MPI_Wtime() - t0;
}

void hpt_metrics_trace(hpt_metrics *m, hpt_metrics_trace_row *rows, size_t n)
{
    if (!m || m->rank != 0 || m->broken || !m->info.trace || n == 0)
        return;
    double t0 = MPI_Wtime();
    for (size_t i = 0; i < n; i++)
        rows[i].segment = m->h.segment;
    if (free_bytes(m) < bytes_needed(m, 0) + (double)n * sizeof *rows)
        give_up(m, "the disk is nearly full", NULL);
    else if (hpt_metrics_h5_append_trace(&m->h, rows, n) < 0)
        give_up(m, "an HDF5 write or flush failed", m->h.cause[0] ? m->h.cause : "HDF5 error");
    m->seconds += MPI_Wtime() - t0;
}

void hpt_metrics_close(hpt_metrics *m, int collective, FILE *log)
{
    if (!m)
        return;
    if (collective)
        hpt_metrics_flush(m, log);
    if (m->rank == 0)
        hpt_event_windows_close(&m->log_windows, log, INT64_MAX);
    if (m->rank == 0 && log && m->recorded > 0)
        fprintf(log, "metrics: %lld rows in %s; %.1f ms in the metrics code on rank 0 (%.3f ms "
                "per step)%s\n", (long long)m->h.rows, m->h.path, 1e3 * m->seconds,
                1e3 * m->seconds / (double)m->recorded, m->broken ? "; stopped writing early (see the warning above)" : "");
    free_m(m);
}
