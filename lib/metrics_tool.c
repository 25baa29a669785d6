/* metrics_tool.c — the work of `hpt-metrics` (metrics_tool.h): summary,
 * CSV export, report, goodput and close of an hpt metrics file through the
 * reader API io/metrics_read.h, io/metrics_h5.h (close), lib/live.h
 * (report) and lib/goodput.h. */
#include "metrics_tool.h"

#include <errno.h>
#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "durable.h"
#include "goodput.h"
#include "hpt_config.h"
#include "live.h"
#include "metrics_h5.h"
#include "metrics_read.h"

#define NSLOW 3 /* slowest ranks listed */

/* ------------------------------------------------------------- summary */

/* "%.6g", or "nan" for a non-finite value (as the Python summary). */
static const char *g6(double v, char buf[32])
{
    if (isfinite(v))
        snprintf(buf, 32, "%.6g", v);
    else
        snprintf(buf, 32, "nan");
    return buf;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void print_segments(FILE *out, const hpt_mread_seg *sg, size_t nseg)
{
    fprintf(out, "segments: %zu\n", nseg);
    for (size_t i = 0; i < nseg; i++) {
        const hpt_mread_seg *s = &sg[i];
        char res[48];
        if (s->resumed_from < 0)
            snprintf(res, sizeof res, "fresh start");
        else
            snprintf(res, sizeof res, "resumed from step %lld", (long long)s->resumed_from);
        /* CP is not a /segments field: world = TP x CP x PP x DP */
        long tpd = (long)s->tp * s->pp * s->dp;
        char cp[24] = "";
        if (tpd > 0 && s->world > tpd && s->world % tpd == 0)
            snprintf(cp, sizeof cp, "CP %ld x ", s->world / tpd);
        fprintf(out,
                "  segment %d: first row %lld, %s, world %d (TP %d x %sPP %d x DP %d%s%s%s), "
                "micro-batch %d x grad-accum %d x seq %d, host %s, job %s\n",
                s->segment, (long long)s->first_row, res, s->world, s->tp, cp, s->pp, s->dp,
                s->zero1 == 3 ? ", ZeRO-3" : s->zero1 == 2 ? ", ZeRO-2" : s->zero1 ? ", ZeRO-1" : "",
                s->sequence_parallel ? ", sequence parallel" : "",
                s->recompute == 2 ? ", selective recomputation"
                : s->recompute == 1 ? ", full recomputation" : "",
                s->micro_batch, s->grad_accum, s->seq_len,
                s->host[0] ? s->host : "-", s->slurm_job_id[0] ? s->slurm_job_id : "-");
    }
}

/* "NAME: final X (step S), best Y (step T)" over the finite v[i], leaving
 * out skipped steps when `skipped` is given. */
static void print_loss(FILE *out, const char *name, const double *v, const double *step,
                       const double *skipped, size_t n)
{
    long fin = -1, best = -1;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i]) || (skipped && skipped[i] != 0))
            continue;
        fin = (long)i;
        if (best < 0 || v[i] < v[best])
            best = (long)i;
    }
    char a[32], b[32];
    if (fin < 0)
        fprintf(out, "%s: none\n", name);
    else
        fprintf(out, "%s: final %s (step %.0f), best %s (step %.0f)\n", name, g6(v[fin], a),
                step[fin], g6(v[best], b), step[best]);
}

/* Mean of the finite v[i] of steps not skipped. */
static double mean_ok(const double *v, const double *skipped, size_t n)
{
    double s = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (skipped[i] == 0 && isfinite(v[i])) {
            s += v[i];
            k++;
        }
    return k ? s / (double)k : NAN;
}

static double median_of(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n == 0 ? NAN : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The NSLOW ranks of largest mean busy time (rows where a rank was absent
 * are NaN and left out), slowest first, ties to the lower rank, each with
 * the median of the other ranks' means (the trainer's slow_rank test). */
static void print_slowest(FILE *out, const double *busy, size_t n, size_t W)
{
    double *mean = malloc(sizeof *mean * (W ? W : 1)), *others = malloc(sizeof *others * (W ? W : 1));
    int *order = malloc(sizeof *order * (W ? W : 1));
    size_t k = 0;
    if (!mean || !others || !order)
        goto out;
    for (size_t w = 0; w < W; w++) {
        double s = 0;
        size_t c = 0;
        for (size_t i = 0; i < n; i++)
            if (isfinite(busy[i * W + w])) {
                s += busy[i * W + w];
                c++;
            }
        mean[w] = c ? s / (double)c : NAN;
        if (c)
            order[k++] = (int)w;
    }
    fprintf(out, "slowest ranks (mean busy s/step, against the median of the other ranks):\n");
    for (size_t i = 0; i < k && i < NSLOW; i++) {
        size_t best = i; /* selection sort of the first NSLOW */
        for (size_t j = i + 1; j < k; j++)
            if (mean[order[j]] > mean[order[best]] ||
                (mean[order[j]] == mean[order[best]] && order[j] < order[best]))
                best = j;
        int tmp = order[i];
        order[i] = order[best];
        order[best] = tmp;
        size_t no = 0;
        for (size_t j = 0; j < k; j++)
            if (order[j] != order[i])
                others[no++] = mean[order[j]];
        double r = mean[order[i]], med = median_of(others, no);
        char a[32], b[32];
        if (no == 0) /* one rank: nothing to compare with */
            fprintf(out, "  rank %d: %s (the only rank)\n", order[i], g6(r, a));
        else
            fprintf(out, "  rank %d: %s (%.2fx, others %s)\n", order[i], g6(r, a),
                    med > 0 ? r / med : NAN, g6(med, b));
    }
out:
    free(mean);
    free(others);
    free(order);
}

/* "pipeline bubble: ..." (the last segment with PP > 1): per kept step
 * of that segment (step > its first_step) the most idle rank's
 * /ranks/pipeline_bubble over the step time, the median over the steps
 * that have it, beside the schedule's theory as
 * the segment records it (/segments bubble_theory: (p - 1)/(m + p - 1) for
 * 1F1B and GPipe, Narayanan et al. 2021 section 2.2; interleaved's
 * (p - 1)/(V m + p - 1); ZB-H1's, Qi et al. 2024), or (p - 1)/(m + p - 1)
 * in a file older than it. Nothing
 * without PP or in a file older than the column. */
static hpt_status print_bubble(FILE *out, const hpt_mread *m, const hpt_mread_seg *sg,
                               size_t nseg)
{
    if (nseg == 0 || sg[nseg - 1].pp < 2 || !hpt_mread_has_ranks_col(m, "pipeline_bubble"))
        return HPT_OK;
    double *pb = NULL, *st = NULL, *step = NULL, *ratio = malloc(sizeof(double) * (m->n ? m->n : 1));
    hpt_status st_ = ratio ? hpt_mread_ranks_col(m, "pipeline_bubble", 0, &pb)
                           : hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    if (!st_)
        st_ = hpt_mread_steps_col(m, "step_time", 0, &st);
    if (!st_)
        st_ = hpt_mread_steps_col(m, "step", 0, &step);
    size_t k = 0;
    for (size_t i = 0; !st_ && i < m->n; i++) {
        if (step[i] <= (double)sg[nseg - 1].first_step)
            continue; /* an earlier segment's step: another layout or schedule */
        double worst = -1;
        for (size_t w = 0; w < m->nranks; w++)
            if (isfinite(pb[i * m->nranks + w]) && pb[i * m->nranks + w] > worst)
                worst = pb[i * m->nranks + w];
        if (worst >= 0 && st[i] > 0)
            ratio[k++] = worst / st[i];
    }
    const hpt_mread_seg *g = &sg[nseg - 1];
    int p = g->pp, M = g->grad_accum, known = isfinite(g->bubble_theory);
    char a[32], b[32], v[16];
    snprintf(v, sizeof v, "%d", g->pp_virtual);
    /* the schedule's own formula where the segment records it */
    const char *form = !known || g->pp_schedule <= 1 ? "(p-1)/(m+p-1)"
                       : g->pp_schedule == 2 ? "interleaved V = "
                                             : "ZB-H1, (p-1)z/(m+(p-1)z) (z = (F+B-W)/(F+B+W) from FLOPs)";
    if (!st_ && k)
        fprintf(out, "pipeline bubble: %s of the step (the most idle stage's, median of %zu steps); "
                "theory %s%s%s = %s (PP %d, %d micro-batches)\n", g6(median_of(ratio, k), a), k,
                form, known && g->pp_schedule == 2 ? v : "",
                known && g->pp_schedule == 2 ? ", (p-1)/(V m+p-1)" : "",
                g6(known ? g->bubble_theory : (double)(p - 1) / (M + p - 1), b), p, M);
    free(pb);
    free(st);
    free(step);
    free(ratio);
    return st_;
}

/* "context-parallel ring: ..." (issue 31): over the kept steps where a
 * rank sent ring bytes (/ranks/bytes_cp > 0), the medians of the busiest
 * rank's seconds in the ring's calls (comm_cp), of the most bytes a rank
 * sent, and of the ranks' mean hidden share (cp_ring_hidden: "nan" on
 * NCCL or in a file older than the column). Nothing without CP or in a
 * file older than the ring's columns. */
static hpt_status print_ring(FILE *out, const hpt_mread *m)
{
    if (!hpt_mread_has_ranks_col(m, "bytes_cp") || !hpt_mread_has_ranks_col(m, "comm_cp"))
        return HPT_OK;
    int has_h = hpt_mread_has_ranks_col(m, "cp_ring_hidden");
    size_t n = m->n ? m->n : 1, W = m->nranks;
    double *by = NULL, *cs = NULL, *hd = NULL, *med = malloc(sizeof(double) * 3 * n);
    hpt_status st = med ? hpt_mread_ranks_col(m, "bytes_cp", 0, &by)
                        : hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    if (!st)
        st = hpt_mread_ranks_col(m, "comm_cp", 0, &cs);
    if (!st && has_h)
        st = hpt_mread_ranks_col(m, "cp_ring_hidden", 0, &hd);
    size_t k = 0, kh = 0;
    for (size_t i = 0; !st && i < m->n; i++) {
        double b = 0, s = 0, h = 0;
        size_t nh = 0;
        for (size_t w = 0; w < W; w++) {
            double bw = by[i * W + w], sw = cs[i * W + w], hw = hd ? hd[i * W + w] : NAN;
            b = isfinite(bw) && bw > b ? bw : b;
            s = isfinite(sw) && sw > s ? sw : s;
            if (isfinite(hw) && isfinite(bw) && bw > 0)
                h += hw, nh++;
        }
        if (b <= 0)
            continue;
        med[k] = s, med[n + k] = b, k++;
        if (nh)
            med[2 * n + kh++] = h / (double)nh;
    }
    char a[32], b[32], c[32];
    if (!st && k) {
        double s = median_of(med, k), mb = median_of(med + n, k) / 1e6;
        fprintf(out, "context-parallel ring: %s s/step in its calls (the busiest rank's, median of "
                "%zu steps), %s MB/step sent per rank, hidden %s of its transfers' time in flight\n",
                g6(s, a), k, g6(mb, b), g6(kh ? median_of(med + 2 * n, kh) : NAN, c));
    }
    free(by);
    free(cs);
    free(hd);
    free(med);
    return st;
}

hpt_status hpt_metrics_tool_summary(const char *path, FILE *out)
{
    hpt_mread m;
    hpt_mread_seg *sg = NULL;
    hpt_mread_event *ev = NULL;
    size_t nseg = 0, nev = 0;
    double *col[6] = {0}, *busy = NULL;
    static const char *const names[6] = {"step", "skipped", "loss", "val_loss", "tokens_per_s",
                                         "mfu"};
    double *tok = NULL;
    hpt_status st = hpt_mread_open(&m, path);
    if (!st)
        st = hpt_mread_segments(&m, &sg, &nseg);
    if (!st)
        st = hpt_mread_events(&m, &ev, &nev);
    for (int c = 0; !st && c < 6; c++)
        st = hpt_mread_steps_col(&m, names[c], 0, &col[c]);
    if (!st)
        st = hpt_mread_steps_col(&m, "tokens", 0, &tok);
    if (!st)
        st = hpt_mread_ranks_col(&m, "busy", 0, &busy);
    if (st)
        goto out;
    const double *step = col[0], *skipped = col[1];
    size_t n = m.n, nskip = 0;
    double tokens = 0;
    for (size_t i = 0; i < n; i++) {
        nskip += skipped[i] != 0;
        tokens += isfinite(tok[i]) ? tok[i] : 0;
    }
    char a[32];
    fprintf(out, "file: %s\n", path);
    fprintf(out, "format: hpt-metrics %d (hpt %s)\n", m.format_version,
            m.hpt_version ? m.hpt_version : "None");
    print_segments(out, sg, nseg);
    if (n)
        fprintf(out, "steps: %zu (%.0f-%.0f), %zu rows, %zu repeated rows, %zu skipped\n", n,
                step[0], step[n - 1], m.rows, m.rows - n, nskip);
    else
        fprintf(out, "steps: 0\n");
    fprintf(out, "tokens: %.0f\n", tokens);
    print_loss(out, "train loss", col[2], step, skipped, n);
    print_loss(out, "val loss", col[3], step, NULL, n);
    fprintf(out, "mean tokens/s: %s\n", g6(mean_ok(col[4], skipped, n), a));
    fprintf(out, "mean MFU (%%): %s\n", g6(100 * mean_ok(col[5], skipped, n), a));
    print_slowest(out, busy, n, m.nranks);
    if ((st = print_bubble(out, &m, sg, nseg)) || (st = print_ring(out, &m)))
        goto out;
    fprintf(out, "events: %zu\n", nev);
    for (size_t i = 0; i < nev; i++)
        fprintf(out, "  step %lld rank %d %s: %s\n", (long long)ev[i].step, ev[i].rank,
                ev[i].kind, ev[i].message);
    hpt_goodput g;
    if (!(st = hpt_goodput_read(&m, &g)))
        hpt_goodput_print_line(&g, out);
out:
    for (int c = 0; c < 6; c++)
        free(col[c]);
    free(tok);
    free(busy);
    free(sg);
    free(ev);
    hpt_mread_close(&m);
    return st;
}

/* ----------------------------------------------------------------- csv */

static void put_num(FILE *f, double v)
{
    if (isnan(v))
        fputs("nan", f);
    else if (isinf(v))
        fputs(v > 0 ? "inf" : "-inf", f);
    else
        fprintf(f, "%.17g", v);
}

static hpt_status csv_steps(const hpt_mread *m, FILE *f)
{
    double *col[HPT_SC_COUNT] = {0};
    hpt_status st = HPT_OK;
    for (int c = 0; !st && c < HPT_SC_COUNT; c++)
        st = hpt_mread_steps_col(m, hpt_metrics_step_cols[c].name, 0, &col[c]);
    if (!st) {
        for (int c = 0; c < HPT_SC_COUNT; c++)
            fprintf(f, "%s%s", c ? "," : "", hpt_metrics_step_cols[c].name);
        fputc('\n', f);
        for (size_t i = 0; i < m->n; i++) {
            for (int c = 0; c < HPT_SC_COUNT; c++) {
                if (c)
                    fputc(',', f);
                if (c < HPT_SC_NINT)
                    fprintf(f, "%lld", (long long)col[c][i]);
                else
                    put_num(f, col[c][i]);
            }
            fputc('\n', f);
        }
    }
    for (int c = 0; c < HPT_SC_COUNT; c++)
        free(col[c]);
    return st;
}

static hpt_status csv_ranks(const hpt_mread *m, const char *col, FILE *f)
{
    if (!hpt_mread_has_ranks_col(m, col)) {
        char names[1024];
        hpt_mread_ranks_col_names(m, names, sizeof names);
        return hpt_error_set(HPT_ERR_USAGE, "--ranks %s: %s has no per-rank column '%s' (known: "
                             "%s)", col, m->path, col, names);
    }
    double *v = NULL, *step = NULL;
    hpt_status st = hpt_mread_ranks_col(m, col, 0, &v);
    if (!st)
        st = hpt_mread_steps_col(m, "step", 0, &step);
    if (!st) {
        fputs("step", f);
        for (size_t w = 0; w < m->nranks; w++)
            fprintf(f, ",rank_%zu", w);
        fputc('\n', f);
        for (size_t i = 0; i < m->n; i++) {
            fprintf(f, "%.0f", step[i]);
            for (size_t w = 0; w < m->nranks; w++) {
                fputc(',', f);
                put_num(f, v[i * m->nranks + w]);
            }
            fputc('\n', f);
        }
    }
    free(v);
    free(step);
    return st;
}

/* Does `path`, or a symbolic link on the way from it, name something
 * under /dev or /proc (/dev/stdout -> /proc/self/fd/1 -> the shell's
 * redirect file)? Such a name stands for an open file of this process:
 * replacing the file behind it would not reach the descriptor. */
static int via_dev_or_proc(const char *path)
{
    char cur[PATH_MAX], next[PATH_MAX];
    snprintf(cur, sizeof cur, "%s", path);
    for (int hop = 0; hop < 40; hop++) {
        if (!strncmp(cur, "/dev/", 5) || !strncmp(cur, "/proc/", 6))
            return 1;
        ssize_t n = readlink(cur, next, sizeof next - 1);
        if (n < 0)
            return 0; /* not a link (or gone): the chain ends here */
        next[n] = 0;
        if (next[0] == '/') {
            snprintf(cur, sizeof cur, "%s", next);
        } else { /* relative to the link's directory */
            char *slash = strrchr(cur, '/');
            char dir[PATH_MAX];
            snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - cur + 1) : 0, cur);
            if (snprintf(cur, sizeof cur, "%s%s", dir, next) >= (int)sizeof cur)
                return 0;
        }
    }
    return 0;
}

/* Is `path` (stat as `sb`, symbolic links followed) one of the n input
 * files? Returns its index, or -1. Same file: same st_dev and st_ino. */
static int input_index(const struct stat *sb, const char *const *inputs, int n)
{
    struct stat si;
    for (int i = 0; i < n; i++)
        if (stat(inputs[i], &si) == 0 && si.st_dev == sb->st_dev && si.st_ino == sb->st_ino)
            return i;
    return -1;
}

/* Refuse -o OUT when OUT is one of the n input metrics files: the same
 * path, another path to it, or a symbolic link to it (followed). When OUT
 * does not exist yet, the realpath of its directory plus its name is
 * compared with each input's realpath. Errors: HPT_ERR_USAGE naming OUT
 * and the input. */
static hpt_status out_not_input(const char *outpath, const char *const *inputs, int n)
{
    struct stat so;
    int hit = -1;
    if (stat(outpath, &so) == 0) {
        hit = input_index(&so, inputs, n);
    } else {
        const char *slash = strrchr(outpath, '/');
        char dir[PATH_MAX], want[2 * PATH_MAX + 2];
        if (!slash)
            snprintf(dir, sizeof dir, ".");
        else if (slash == outpath)
            snprintf(dir, sizeof dir, "/");
        else
            snprintf(dir, sizeof dir, "%.*s", (int)(slash - outpath), outpath);
        char *rd = realpath(dir, NULL);
        if (rd) {
            snprintf(want, sizeof want, "%s/%s", strcmp(rd, "/") ? rd : "",
                     slash ? slash + 1 : outpath);
            for (int i = 0; hit < 0 && i < n; i++) {
                char *ri = realpath(inputs[i], NULL);
                if (ri && !strcmp(ri, want))
                    hit = i;
                free(ri);
            }
            free(rd);
        }
    }
    if (hit >= 0)
        return hpt_error_set(HPT_ERR_USAGE, "-o %s: is the input metrics file %s (it would be "
                             "overwritten)", outpath, inputs[hit]);
    return HPT_OK;
}

/* Where -o writes. "-" is standard output (`out`, written directly). A
 * regular file (or a new name) is written as TARGET.tmp
 * and renamed over TARGET, so a failed export leaves no partial file; a
 * symbolic link to a regular file is followed (the link stays, its target
 * is replaced). Anything else that exists — a character device such as
 * /dev/null, a FIFO, a socket, a link to one, or a name under /dev or
 * /proc such as /dev/stdout even when it leads to a regular file — is
 * written directly: renaming over it would replace the device with a
 * regular file, or miss the open descriptor. OUT (or TARGET.tmp) that is
 * one of the n `inputs` is refused before anything is opened for writing
 * (HPT_ERR_USAGE, see out_not_input). target gets the path renamed to
 * (empty: direct), tmp the temporary name; *f is `out` for "-" (the caller
 * does not close it). Errors: HPT_ERR_IO naming -o OUT. */
static hpt_status csv_open_out(const char *outpath, const char *const *inputs, int n,
                               FILE *out, char *target, char *tmp, size_t len, FILE **f)
{
    struct stat sb;
    target[0] = tmp[0] = 0;
    if (!strcmp(outpath, "-")) {
        *f = out;
        return HPT_OK;
    }
    hpt_status st = out_not_input(outpath, inputs, n);
    if (st)
        return st;
    if (stat(outpath, &sb) == 0 && S_ISDIR(sb.st_mode))
        return hpt_error_set(HPT_ERR_IO, "-o %s: is a directory", outpath);
    if (stat(outpath, &sb) == 0 && (!S_ISREG(sb.st_mode) || via_dev_or_proc(outpath))) {
        if (!(*f = fopen(outpath, "w")))
            return hpt_error_set(HPT_ERR_IO, "-o %s: cannot write: %s", outpath,
                                 strerror(errno));
        return HPT_OK;
    }
    char *real = stat(outpath, &sb) == 0 ? realpath(outpath, NULL) : NULL;
    int k = snprintf(target, len, "%s", real ? real : outpath);
    free(real);
    if (k < 0 || (size_t)k + 5 > len)
        return hpt_error_set(HPT_ERR_IO, "-o %s: path too long", outpath);
    snprintf(tmp, len, "%s.tmp", target);
    int hit = stat(tmp, &sb) == 0 ? input_index(&sb, inputs, n) : -1;
    if (hit >= 0)
        return hpt_error_set(HPT_ERR_USAGE, "-o %s: its temporary file %s is the input metrics "
                             "file %s (it would be overwritten)", outpath, tmp, inputs[hit]);
    if (!(*f = fopen(tmp, "w")))
        return hpt_error_set(HPT_ERR_IO, "-o %s: cannot write %s: %s", outpath, tmp,
                             strerror(errno));
    return HPT_OK;
}

/* csv: to standard output, or to -o OUT (see csv_open_out). */
hpt_status hpt_metrics_tool_csv(const char *path, const char *ranks, const char *outpath,
                               FILE *out)
{
    hpt_mread m;
    hpt_status st = hpt_mread_open(&m, path);
    char target[PATH_MAX + 8] = "", tmp[PATH_MAX + 8] = "";
    FILE *f = out;
    if (!st && outpath)
        st = csv_open_out(outpath, &path, 1, out, target, tmp, sizeof tmp, &f);
    if (!st)
        st = ranks ? csv_ranks(&m, ranks, f) : csv_steps(&m, f);
    if (f && f != out) {
        if (fclose(f) != 0 && !st)
            st = hpt_error_set(HPT_ERR_IO, "-o %s: write failed: %s", outpath, strerror(errno));
        if (!st && tmp[0])
            st = hpt_file_commit(tmp, target); /* fsync, rename, fsync of the directory */
        if (st && tmp[0])
            unlink(tmp);
    }
    hpt_mread_close(&m);
    return st;
}

/* -------------------------------------------------------------- report */

#define REPORT_POINTS 20000 /* steps per run before the report downsamples */

/* The page asset `name`: the first of the ndirs directories that has it,
 * into buf. */
static hpt_status find_asset(const char *const *dirs, int ndirs, int install, const char *name,
                             char *buf, size_t len)
{
    for (int i = 0; i < ndirs; i++) {
        if (!dirs[i] || !dirs[i][0])
            continue;
        snprintf(buf, len, "%s/%s", dirs[i], name);
        if (access(buf, R_OK) == 0)
            return HPT_OK;
    }
    return hpt_error_set(HPT_ERR_IO, "report: page asset %s not found in $HPT_LIVE_ASSETS or %s "
                         "(install hpt, or for echarts.min.js run `npm ci` in the source tree "
                         "and rebuild)", name, install < ndirs ? dirs[install] : "");
}

/* report: the runs' history JSON and the page assets inlined into one
 * HTML file, written as OUT.tmp and renamed (see csv_open_out). */
hpt_status hpt_metrics_tool_report(const char *const *files, int n, int points,
                                   const char *const *dirs, int ndirs, int install,
                                   const char *outpath, FILE *out)
{
    static const char *const names[3] = {"style.css", "echarts.min.js", "app.js"};
    char target[PATH_MAX + 8] = "", tmp[PATH_MAX + 8] = "", paths[3][PATH_MAX + 32];
    const char *assets[3] = {paths[0], paths[1], paths[2]};
    FILE *f = NULL;
    hpt_status st = HPT_OK;
    for (int a = 0; !st && a < 3; a++)
        st = find_asset(dirs, ndirs, install, names[a], paths[a], sizeof paths[a]);
    for (int i = 0; !st && i < n; i++) { /* every file readable before OUT is touched */
        hpt_mread m;
        st = hpt_mread_open(&m, files[i]);
        hpt_mread_close(&m);
    }
    if (!st)
        st = csv_open_out(outpath, files, n, out, target, tmp, sizeof tmp, &f);
    if (!st)
        st = hpt_live_report_write(files, n, (size_t)(points > 0 ? points : REPORT_POINTS), assets, f);
    if (f == out) {
        if (fflush(f) != 0 && !st)
            st = hpt_error_set(HPT_ERR_IO, "-o -: write to standard output failed: %s",
                               strerror(errno));
    } else if (f) {
        if (fflush(f) != 0 && !st)
            st = hpt_error_set(HPT_ERR_IO, "-o %s: write failed: %s", outpath, strerror(errno));
        if (fclose(f) != 0 && !st)
            st = hpt_error_set(HPT_ERR_IO, "-o %s: write failed: %s", outpath, strerror(errno));
        if (!st && tmp[0])
            st = hpt_file_commit(tmp, target); /* fsync, rename, fsync of the directory */
        if (st && tmp[0])
            unlink(tmp);
    }
    return st;
}

/* ------------------------------------------------------------- goodput */

hpt_status hpt_metrics_tool_goodput(const char *path, FILE *out)
{
    hpt_goodput g;
    hpt_status st = hpt_goodput_of_file(path, &g);
    if (!st) {
        fprintf(out, "file: %s\n", path);
        hpt_goodput_print(&g, out);
    }
    return st;
}

/* --------------------------------------------------------------- close */

hpt_status hpt_metrics_tool_close(const char *path, FILE *out, FILE *err)
{
    int cleared = 0;
    hpt_status st = hpt_metrics_h5_clear(path, err, &cleared);
    if (!st)
        fprintf(out, "%s: %s\n", path, cleared ? "cleared HDF5's open-for-write flag; plain "
                "readers (h5py.File(FILE, \"r\"), h5dump) open it now"
                : "not flagged open for write: nothing to clear");
    return st;
}

/* The metrics file the argument `arg` names: arg itself, or DIR/metrics.h5
 * when arg is a (run) directory that has one (as hpt-live). buf gets the
 * path (len bytes). A path that does not exist is passed on (the reader
 * says "no such file"). Errors (HPT_ERR_DATA): a directory without
 * metrics.h5; something that is not a regular file (a FIFO or a device:
 * HDF5 would block on it or read forever). */
hpt_status hpt_metrics_tool_resolve(const char *arg, char *buf, size_t len)
{
    struct stat sb;
    snprintf(buf, len, "%s", arg);
    if (stat(arg, &sb) != 0)
        return HPT_OK;
    if (S_ISDIR(sb.st_mode)) {
        size_t k = strlen(arg);
        while (k > 1 && arg[k - 1] == '/') /* "run/" -> "run/metrics.h5" */
            k--;
        if (snprintf(buf, len, "%.*s%smetrics.h5", (int)k, arg, arg[k - 1] == '/' ? "" : "/")
            >= (int)len)
            return hpt_error_set(HPT_ERR_DATA, "%s: path too long", arg);
        if (stat(buf, &sb) != 0)
            return hpt_error_set(HPT_ERR_DATA, "%s: is a directory with no metrics.h5", arg);
    }
    if (!S_ISREG(sb.st_mode))
        return hpt_error_set(HPT_ERR_DATA, "%s: not a regular file (a metrics file or a run "
                             "directory is needed)", buf);
    return HPT_OK;
}

/* --------------------------------------------------------------- trace */

/* Thread ids of the Trace Event Format, one per stream: the step, the
 * compute stream, then the communication groups in lib/flight.c's order. */
static const char *const trace_streams[] = {"step", "compute", "world", "tp", "dp", "pp", "mp",
                                            "embed", "dp-shard", "dp-replica", "cp"};
#define TRACE_NSTREAMS ((int)(sizeof trace_streams / sizeof *trace_streams))

#define TRACE_LANES 16 /* threads per stream for spans that overlap */

/* The stream's first thread id (a multiple of TRACE_LANES). */
static int trace_tid(const char *stream)
{
    for (int i = 0; i < TRACE_NSTREAMS; i++)
        if (!strcmp(stream, trace_streams[i]))
            return i * TRACE_LANES;
    return TRACE_NSTREAMS * TRACE_LANES; /* a group this reader does not know */
}

typedef struct {
    const hpt_metrics_trace_row *r;
    int64_t pid;
    int tid, lane;
} trace_ev;

static int cmp_trace_ev(const void *a, const void *b)
{
    const trace_ev *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->r->t_start != y->r->t_start)
        return x->r->t_start < y->r->t_start ? -1 : 1;
    return x->r->t_end < y->r->t_end ? -1 : x->r->t_end > y->r->t_end;
}

/* A name of the trace (fixed-size, NUL-terminated in the file) as a JSON
 * string body: only [A-Za-z0-9_-] kept, so nothing needs escaping. */
static const char *trace_name(const char *s, char buf[HPT_METRICS_TRACE_NAME_LEN])
{
    int k = 0;
    for (int i = 0; i < HPT_METRICS_TRACE_NAME_LEN - 1 && s[i]; i++)
        if ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
            (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-')
            buf[k++] = s[i];
    buf[k] = 0;
    return k ? buf : "?";
}

/* The Trace Event Format document (JSON object form) of events ev[0..n),
 * sorted; t0: the time origin (Unix seconds). */
static void trace_write(FILE *f, const trace_ev *ev, size_t n, double t0, int multi)
{
    char a[HPT_METRICS_TRACE_NAME_LEN], b[HPT_METRICS_TRACE_NAME_LEN];
    fprintf(f, "{\"displayTimeUnit\": \"ms\",\n \"otherData\": {\"producer\": \"hpt-metrics "
            "trace (hpt %s)\", \"time_origin_unix_s\": %.6f},\n \"traceEvents\": [\n",
            PACKAGE_VERSION, t0);
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        const hpt_metrics_trace_row *r = ev[i].r;
        if (i == 0 || ev[i].pid != ev[i - 1].pid) { /* the rank's process */
            fprintf(f, "%s  {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %lld, \"tid\": 0, "
                    "\"args\": {\"name\": \"", first ? "" : ",\n", (long long)ev[i].pid);
            if (multi)
                fprintf(f, "segment %d, ", r->segment);
            fprintf(f, "rank %d (stage %d)\"}},\n  {\"name\": \"process_sort_index\", \"ph\": "
                    "\"M\", \"pid\": %lld, \"tid\": 0, \"args\": {\"sort_index\": %lld}}",
                    r->rank, r->stage, (long long)ev[i].pid, (long long)ev[i].pid);
            first = 0;
        }
        if (i == 0 || ev[i].pid != ev[i - 1].pid || ev[i].tid != ev[i - 1].tid) {
            fprintf(f, ",\n  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %lld, \"tid\": %d, "
                    "\"args\": {\"name\": \"%s", (long long)ev[i].pid, ev[i].tid,
                    trace_name(r->stream, a));
            if (ev[i].tid % TRACE_LANES)
                fprintf(f, " (overlapping %d)", ev[i].tid % TRACE_LANES + 1);
            fprintf(f, "\"}},\n  {\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": %lld, "
                    "\"tid\": %d, \"args\": {\"sort_index\": %d}}", (long long)ev[i].pid,
                    ev[i].tid, ev[i].tid);
        }
        /* both ends rounded to the printed nanosecond, so a span that ends
         * before the next starts still does when printed */
        double ts = round((r->t_start - t0) * 1e9) / 1e3;
        double dur = round((r->t_end - t0) * 1e9) / 1e3 - ts;
        fprintf(f, ",\n  {\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %lld, "
                "\"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"step\": %d",
                trace_name(r->name, a), ev[i].tid < TRACE_LANES ? "step"
                                        : ev[i].tid < 2 * TRACE_LANES ? "compute" : "comm",
                (long long)ev[i].pid, ev[i].tid, ts, dur > 0 ? dur : 0, r->step);
        if (r->micro >= 0)
            fprintf(f, ", \"micro\": %d", r->micro);
        if (ev[i].tid >= 2 * TRACE_LANES)
            fprintf(f, ", \"group\": \"%s\", \"bytes\": %lld", trace_name(r->stream, b),
                    (long long)r->bytes);
        if (r->peer >= 0)
            fprintf(f, ", \"peer\": %d", r->peer);
        fprintf(f, "}}");
    }
    fprintf(f, "\n]}\n");
}

hpt_status hpt_metrics_tool_trace(const char *path, int step, const char *outpath, FILE *out)
{
    hpt_mread m;
    hpt_metrics_trace_row *rows = NULL;
    trace_ev *ev = NULL;
    size_t nrows = 0, n = 0;
    char target[PATH_MAX + 8] = "", tmp[PATH_MAX + 8] = "";
    FILE *f = out;
    hpt_status st = hpt_mread_open(&m, path);
    if (!st)
        st = hpt_mread_trace(&m, &rows, &nrows);
    if (!st && !(ev = malloc(sizeof *ev * (nrows ? nrows : 1))))
        st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory (%zu trace rows)", nrows);
    int lo = INT32_MAX, hi = 0, seg0 = -1, multi = 0;
    double t0 = INFINITY;
    for (size_t i = 0; !st && i < nrows; i++) {
        const hpt_metrics_trace_row *r = &rows[i];
        lo = r->step < lo ? r->step : lo;
        hi = r->step > hi ? r->step : hi;
        if (step && r->step != step)
            continue;
        multi |= seg0 >= 0 && r->segment != seg0;
        seg0 = seg0 < 0 ? r->segment : seg0;
        ev[n].r = r;
        ev[n].tid = trace_tid(r->stream);
        ev[n].pid = r->rank;
        t0 = r->t_start < t0 ? r->t_start : t0;
        n++;
    }
    if (!st && nrows == 0)
        st = hpt_error_set(HPT_ERR_DATA, "%s: /trace is empty: the spans are gathered after the "
                           "last traced step (or at a stop inside the range); the run has not "
                           "got there yet, or was killed before", path);
    else if (!st && n == 0)
        st = hpt_error_set(HPT_ERR_USAGE, "--step %d: not traced in %s (traced steps: %d-%d)",
                           step, path, lo, hi);
    for (size_t i = 0; !st && multi && i < n; i++) /* a process per segment and rank */
        ev[i].pid = (int64_t)ev[i].r->segment * 1000000 + ev[i].r->rank;
    if (!st) {
        /* spans of one stream that overlap (nonblocking operations in
         * flight together) go to further threads of the stream, so that
         * within a thread every span ends before the next starts */
        qsort(ev, n, sizeof *ev, cmp_trace_ev);
        double lane_end[TRACE_LANES];
        for (size_t i = 0; i < n; i++) {
            if (i == 0 || ev[i].pid != ev[i - 1].pid || ev[i].tid != ev[i - 1].tid)
                for (int l = 0; l < TRACE_LANES; l++)
                    lane_end[l] = -INFINITY;
            int l = 0;
            while (l < TRACE_LANES - 1 && lane_end[l] > ev[i].r->t_start)
                l++;
            lane_end[l] = ev[i].r->t_end > lane_end[l] ? ev[i].r->t_end : lane_end[l];
            ev[i].lane = l;
        }
        for (size_t i = 0; i < n; i++)
            ev[i].tid += ev[i].lane;
        qsort(ev, n, sizeof *ev, cmp_trace_ev);
        if (outpath)
            st = csv_open_out(outpath, &path, 1, out, target, tmp, sizeof tmp, &f);
    }
    if (!st)
        trace_write(f, ev, n, t0, multi);
    if (f && f != out) {
        if (fclose(f) != 0 && !st)
            st = hpt_error_set(HPT_ERR_IO, "-o %s: write failed: %s", outpath, strerror(errno));
        if (!st && tmp[0])
            st = hpt_file_commit(tmp, target);
        if (st && tmp[0])
            unlink(tmp);
    }
    free(ev);
    free(rows);
    hpt_mread_close(&m);
    return st;
}
