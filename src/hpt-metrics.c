/* hpt-metrics — summary, CSV export, close, HTML report and goodput of an hpt metrics file
 * without Python (the file lib/metrics.c writes; docs/ANALYSIS.md): a thin
 * main, option parsing over lib/metrics_tool.h (the commands' work) and
 * lib/watchdog.h (hang). Under mpiexec rank 0 does the work and every rank
 * exits with its status.
 */
#include <hdf5.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "error.h"
#include "hpt_config.h"
#include "metrics_h5.h"
#include "metrics_tool.h"
#include "watchdog.h"

static void usage(FILE *f)
{
    fputs("usage: hpt-metrics summary FILE\n"
          "       hpt-metrics csv FILE [--ranks COL] [-o OUT]\n"
          "       hpt-metrics close FILE\n"
          "       hpt-metrics report FILE... -o OUT.html\n"
          "       hpt-metrics goodput FILE\n"
          "       hpt-metrics hang RUN_DIR\n"
          "       hpt-metrics trace FILE [--step N] [-o OUT.json]\n"
          "\n"
          "Read the metrics file hpt-train writes (RUN_DIR/metrics.h5; also the file of a\n"
          "live or a killed run; a FILE that is a run directory means its metrics.h5).\n"
          "Each step is reported once: after a resume the last row of a step (the later\n"
          "segment) wins (docs/ANALYSIS.md).\n"
          "\n"
          "commands:\n"
          "  summary FILE    segments and layouts, steps and rows, final/best train and\n"
          "                  validation loss, mean tokens/s and MFU, the slowest ranks\n"
          "                  (mean busy time per step), every event, the goodput\n"
          "  csv FILE        one row per step, the /steps columns (step, segment, ...,\n"
          "                  noise_scale), sorted by step\n"
          "    --ranks COL   instead: steps x ranks of the per-rank column /ranks/COL\n"
          "                  (step_time, busy, forward, comm_dp, bytes_tp, ...): columns\n"
          "                  step, rank_0, rank_1, ...; nan where a rank did not exist\n"
          "    -o OUT        write to OUT instead of standard output: a regular file is\n"
          "                  written as OUT.tmp and renamed to OUT; a device or FIFO\n"
          "                  (e.g. /dev/stdout) is written directly; \"-o -\" is\n"
          "                  standard output; an OUT that is the input FILE is refused\n"
          "  close FILE      clear HDF5's open-for-write flag that a killed hpt-train\n"
          "                  leaves, so that plain readers (h5py.File(FILE, \"r\"),\n"
          "                  h5dump) open the file; refused while a live hpt-train\n"
          "                  writes it (FILE.lock is locked)\n"
          "  report FILE...  one self-contained HTML page (scripts and data inlined, no\n"
          "                  network needed) with the live view's charts of the runs,\n"
          "                  overlaid: loss, learning rate, gradient norm, tokens/s,\n"
          "                  MFU, events, rank x step heat map, communication per rank\n"
          "    -o OUT.html   required; written as OUT.html.tmp and renamed (as csv -o:\n"
          "                  \"-o -\" is standard output; an input FILE is refused)\n"
          "    --points N    steps kept per run before downsampling (first and last\n"
          "                  step, event steps and each bucket's extremes) [20000]\n"
          "  goodput FILE    over all segments (restarts, requeues): the wall time split\n"
          "                  into productive and redone steps, checkpoint stalls, start-up\n"
          "                  and loading, validation, time between segments; the goodput\n"
          "  hang RUN_DIR    after a job ended with exit status 6 (hang watchdog): which\n"
          "                  rank stopped where, the group and its members, the suspects\n"
          "                  and each rank's last completed operations, from the dumps\n"
          "                  in RUN_DIR/hang (else the newest RUN_DIR/hang.N, or RUN_DIR\n"
          "                  itself)\n"
          "  trace FILE      the step timeline (hpt-train --trace-steps) in the Trace\n"
          "                  Event Format for Perfetto or chrome://tracing: a process\n"
          "                  per rank, a thread per stream (step, compute, each group);\n"
          "                  --step N: that step only; -o as csv\n"
          "\n"
          "options:\n"
          "  -h, --help      print this help and exit\n"
          "  --version       print the hpt version and exit\n"
          "\n"
          "exit status: 0 ok, 2 usage error (unknown command, option or column), 3 missing\n"
          "file, not an hpt metrics file or damaged, not a regular file, a directory\n"
          "without metrics.h5 (hang: a dump that does not parse or is damaged), 5 OUT not\n"
          "writable, (close) a live writer holds FILE, (hang) no dumps in RUN_DIR or no\n"
          "RUN_DIR; an OUT that is an input FILE is a usage error (2).\n",
          f);
}

#define REPORT_MAX_FILES 64

/* ----------------------------------------------------------------- CLI */

typedef struct {
    const char *cmd, *file, *ranks, *out;
    int help, version;
    const char *files[REPORT_MAX_FILES]; /* report: every FILE (files[0] == file) */
    int nfiles, points;                  /* report --points (0: not given) */
    int step;                            /* trace --step (0: every traced step) */
} cli;

static hpt_status parse_args(int argc, char **argv, cli *c)
{
    memset(c, 0, sizeof *c);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            c->help = 1;
        else if (!strcmp(a, "--version"))
            c->version = 1;
        else if (!strcmp(a, "--ranks") || !strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (i + 1 >= argc)
                return hpt_error_set(HPT_ERR_USAGE, "%s needs a value (see --help)", a);
            *(!strcmp(a, "--ranks") ? &c->ranks : &c->out) = argv[++i];
        } else if (!strcmp(a, "--points") || !strcmp(a, "--step")) {
            if (i + 1 >= argc)
                return hpt_error_set(HPT_ERR_USAGE, "%s needs a value (see --help)", a);
            int *v = a[2] == 'p' ? &c->points : &c->step;
            hpt_status st = hpt_cli_parse_int(a + 2, argv[++i], v);
            if (st)
                return st;
            if (*v < (a[2] == 'p' ? 2 : 1))
                return hpt_error_set(HPT_ERR_USAGE, "%s %s: must be >= %d", a, argv[i],
                                     a[2] == 'p' ? 2 : 1);
        } else if (!strncmp(a, "--ranks=", 8))
            c->ranks = a + 8;
        else if (a[0] == '-' && a[1])
            return hpt_error_set(HPT_ERR_USAGE, "unknown option '%s' (see --help)", a);
        else if (!c->cmd)
            c->cmd = a;
        else if (!c->file)
            c->file = c->files[c->nfiles++] = a;
        else if (!strcmp(c->cmd, "report") && c->nfiles < REPORT_MAX_FILES)
            c->files[c->nfiles++] = a;
        else
            return hpt_error_set(HPT_ERR_USAGE, "unexpected argument '%s' (see --help)", a);
    }
    if (c->help || c->version)
        return HPT_OK;
    if (!c->cmd)
        return hpt_error_set(HPT_ERR_USAGE, "a command is required: summary, csv, close, report, "
                             "goodput, hang or trace (see --help)");
    if (strcmp(c->cmd, "summary") && strcmp(c->cmd, "csv") && strcmp(c->cmd, "close") &&
        strcmp(c->cmd, "report") && strcmp(c->cmd, "hang") && strcmp(c->cmd, "goodput") &&
        strcmp(c->cmd, "trace"))
        return hpt_error_set(HPT_ERR_USAGE, "unknown command '%s' (summary, csv, close, report, "
                             "goodput, hang, trace; see --help)", c->cmd);
    if (!c->file)
        return hpt_error_set(HPT_ERR_USAGE, "%s needs a %s (see --help)", c->cmd,
                             strcmp(c->cmd, "hang") ? "metrics FILE" : "RUN_DIR");
    if (strcmp(c->cmd, "report") && c->points)
        return hpt_error_set(HPT_ERR_USAGE, "--points: only report takes it");
    if (strcmp(c->cmd, "trace") && c->step)
        return hpt_error_set(HPT_ERR_USAGE, "--step: only trace takes it");
    if (!strcmp(c->cmd, "report") && (c->ranks || !c->out))
        return hpt_error_set(HPT_ERR_USAGE, c->ranks ? "--ranks: report does not take it"
                             : "report needs -o OUT.html (see --help)");
    if (strcmp(c->cmd, "csv") && (c->ranks || (c->out && strcmp(c->cmd, "report") &&
                                                 strcmp(c->cmd, "trace"))))
        return hpt_error_set(HPT_ERR_USAGE, c->ranks ? "--ranks: only csv takes it"
                             : "-o: only csv, report and trace take it");
    return HPT_OK;
}

/* report: the page's assets from $HPT_LIVE_ASSETS, where this build
 * installs them, the build tree's and the source tree's share/live
 * (uninstalled programs find their tree's copy); the work in
 * lib/metrics_tool.c. */
static hpt_status report(const cli *c, FILE *out)
{
    const char *dirs[] = {getenv("HPT_LIVE_ASSETS"), HPT_LIVE_DATADIR, HPT_LIVE_BUILDDIR,
                          HPT_LIVE_SRCDIR};
    return hpt_metrics_tool_report(c->files, c->nfiles, c->points, dirs, 4, 1, c->out, out);
}

static hpt_status run(int argc, char **argv, FILE *out)
{
    static char paths[REPORT_MAX_FILES][PATH_MAX + 16];
    cli c;
    hpt_status st = parse_args(argc, argv, &c);
    if (st)
        return st;
    if (hpt_cli_help_or_version(out, c.help, c.version, usage,
                                "hpt-metrics (hpt) %s; reads metrics format version %d\n",
                                PACKAGE_VERSION, HPT_METRICS_FORMAT_VERSION))
        return HPT_OK;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our messages, not HDF5's error stack */
    if (strcmp(c.cmd, "hang")) /* metrics files: a run directory means its metrics.h5 */
        for (int i = 0; i < c.nfiles; i++) {
            st = hpt_metrics_tool_resolve(c.files[i], paths[i], sizeof paths[i]);
            if (st)
                return st;
            c.files[i] = paths[i];
        }
    c.file = c.files[0];
    if (!strcmp(c.cmd, "summary"))
        return hpt_metrics_tool_summary(c.file, out);
    if (!strcmp(c.cmd, "close"))
        return hpt_metrics_tool_close(c.file, out, stderr);
    if (!strcmp(c.cmd, "report"))
        return report(&c, out);
    if (!strcmp(c.cmd, "trace"))
        return hpt_metrics_tool_trace(c.file, c.step, c.out, out);
    if (!strcmp(c.cmd, "hang"))
        return hpt_hang_report(c.file, out);
    if (!strcmp(c.cmd, "goodput"))
        return hpt_metrics_tool_goodput(c.file, out);
    return hpt_metrics_tool_csv(c.file, c.ranks, c.out, out);
}

int main(int argc, char **argv) { return hpt_cli_main_rank0(argc, argv, "hpt-metrics", run); }
