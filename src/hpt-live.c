/* hpt-live — a live view of running (or finished) hpt-train jobs in the
 * browser: a thin main over lib/live_server.h (docs/LIVE.md). One process,
 * no MPI: it only reads metrics files as a SWMR reader. */
#include <getopt.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alert.h"
#include "cli.h"
#include "error.h"
#include "hpt_config.h"
#include "live_server.h"

#ifndef HPT_LIVE_ASSETS_DIR
#define HPT_LIVE_ASSETS_DIR "share/live"
#endif
#ifndef HPT_LIVE_BUILD_ASSETS
#define HPT_LIVE_BUILD_ASSETS HPT_LIVE_ASSETS_DIR
#endif
#ifndef HPT_LIVE_SRC_ASSETS
#define HPT_LIVE_SRC_ASSETS HPT_LIVE_ASSETS_DIR
#endif

/* The page's files when neither --assets nor HPT_LIVE_ASSETS says: the
 * installed ones, else (running from the build tree) the build tree's,
 * else the source tree's share/live — the first with an index.html. */
static const char *default_assets(void)
{
    static const char *const dirs[] = {HPT_LIVE_ASSETS_DIR, HPT_LIVE_BUILD_ASSETS,
                                       HPT_LIVE_SRC_ASSETS};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/index.html", dirs[i]);
        if (access(p, R_OK) == 0)
            return dirs[i];
    }
    return HPT_LIVE_ASSETS_DIR;
}

static void usage(FILE *f)
{
    fputs("usage: hpt-live [options] RUN_DIR|METRICS.h5 ...\n"
          "\n"
          "Follow the metrics files of hpt-train runs (RUN_DIR/metrics.h5) while they are\n"
          "written and serve a page with their curves, events, alerts and per-rank heat\n"
          "maps (docs/LIVE.md). A file that does not exist yet is waited for. Every\n"
          "request needs the access token printed with the URL.\n"
          "\n"
          "options:\n"
          "  --bind ADDR         address to listen on [127.0.0.1]; others are reachable\n"
          "                      from the network (a warning is printed)\n"
          "  --port P            TCP port; 0 picks a free one [0]\n"
          "  --token-file FILE   the access token is FILE's first line (16+ characters\n"
          "                      A-Z a-z 0-9 - _ .) instead of a random one\n"
          "  --alert RULE        e.g. 'grad_norm>10', 'loss>8', 'tokens_per_s<500',\n"
          "                      nonfinite; COLUMN OP NUMBER with OP one of < > <= >=;\n"
          "                      repeatable\n"
          "  --on-alert CMD      run CMD (sh -c) once per fired alert, with HPT_ALERT_RULE,\n"
          "                      HPT_ALERT_RUN, HPT_ALERT_STEP, HPT_ALERT_VALUE and\n"
          "                      HPT_ALERT_FILE in its environment\n"
          "  --assets DIR        the page's files [$HPT_LIVE_ASSETS, else the installed\n"
          "                      ones, else those of the build or source tree]\n"
          "  --points N          default points of a history request [2000]\n"
          "  --prometheus-top-k N\n"
          "                      GET /metrics (Prometheus text format; the token also as\n"
          "                      Authorization: Bearer) lists the N slowest ranks [8]\n"
          "  -h, --help          print this help and exit\n"
          "  --version           print the hpt version and exit\n"
          "\n"
          "exit status: 0 stopped by Ctrl-C or SIGTERM, 2 usage error (bad option, alert\n"
          "rule, address or token), 3 a path is not an hpt metrics file, 5 the port is in\n"
          "use or the token file cannot be read.\n",
          f);
}

enum { OPT_BIND = 256, OPT_PORT, OPT_TOKEN_FILE, OPT_ALERT, OPT_ON_ALERT, OPT_ASSETS, OPT_POINTS,
       OPT_PROM_TOP_K, OPT_HELP, OPT_VERSION };

static const struct option long_opts[] = {
    {"bind", 1, 0, OPT_BIND},         {"port", 1, 0, OPT_PORT},
    {"token-file", 1, 0, OPT_TOKEN_FILE}, {"alert", 1, 0, OPT_ALERT},
    {"on-alert", 1, 0, OPT_ON_ALERT}, {"assets", 1, 0, OPT_ASSETS},
    {"points", 1, 0, OPT_POINTS},     {"prometheus-top-k", 1, 0, OPT_PROM_TOP_K},
    {"help", 0, 0, OPT_HELP},
    {"version", 0, 0, OPT_VERSION},   {0, 0, 0, 0}};

static hpt_status apply(hpt_live_opts *o, int opt, const char *arg, int *action)
{
    int v;
    hpt_status st;
    switch (opt) {
    case OPT_BIND: o->bind = arg; return HPT_OK;
    case OPT_PORT:
        st = hpt_cli_parse_int("port", arg, &o->port);
        if (!st && (o->port < 0 || o->port > 65535))
            st = hpt_error_set(HPT_ERR_USAGE, "--port %s: not a TCP port (0 to 65535)", arg);
        return st;
    case OPT_TOKEN_FILE: o->token_file = arg; return HPT_OK;
    case OPT_ALERT:
        if (o->nrules == HPT_ALERT_MAX)
            return hpt_error_set(HPT_ERR_USAGE, "--alert '%s': at most %d rules", arg,
                                 HPT_ALERT_MAX);
        st = hpt_alert_parse(arg, &o->rules[o->nrules]);
        o->nrules += !st;
        return st;
    case OPT_ON_ALERT: o->on_alert = arg; return HPT_OK;
    case OPT_ASSETS: o->assets = arg; return HPT_OK;
    case OPT_POINTS:
        st = hpt_cli_parse_int("points", arg, &v);
        if (!st && v < 2)
            st = hpt_error_set(HPT_ERR_USAGE, "--points %s: must be >= 2", arg);
        o->points = st ? o->points : (size_t)v;
        return st;
    case OPT_PROM_TOP_K:
        st = hpt_cli_parse_int("prometheus-top-k", arg, &v);
        if (!st && v < 1)
            st = hpt_error_set(HPT_ERR_USAGE, "--prometheus-top-k %s: must be >= 1", arg);
        o->prom_top_k = st ? o->prom_top_k : v;
        return st;
    case OPT_HELP: *action = 1; return HPT_OK;
    default: *action = 2; return HPT_OK;
    }
}

static hpt_status parse_args(int argc, char **argv, hpt_live_opts *o, int *action)
{
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
        if (c == '?' || c == ':')
            return hpt_error_set(HPT_ERR_USAGE, "%s: unknown option or missing value (see "
                                 "hpt-live --help)", argv[optind - 1]);
        hpt_status st = apply(o, c == 'h' ? OPT_HELP : c, optarg, action);
        if (st)
            return st;
    }
    o->paths = (const char *const *)argv + optind;
    o->npaths = argc - optind;
    if (!*action && o->npaths == 0)
        return hpt_error_set(HPT_ERR_USAGE, "no run: give RUN_DIR or METRICS.h5 (see hpt-live "
                             "--help)");
    if (!o->assets)
        o->assets = getenv("HPT_LIVE_ASSETS") && *getenv("HPT_LIVE_ASSETS")
                        ? getenv("HPT_LIVE_ASSETS") : default_assets();
    return HPT_OK;
}

int main(int argc, char **argv)
{
    hpt_live_opts o;
    int action = 0;
    hpt_live_opts_default(&o);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* messages name HDF5's cause themselves */
    hpt_status st = parse_args(argc, argv, &o, &action);
    if (!st && action == 1)
        usage(stdout);
    else if (!st && action == 2)
        printf("hpt-live (hpt) %s\n", PACKAGE_VERSION);
    else if (!st)
        st = hpt_live_serve(&o, stdout, stderr);
    if (st)
        fprintf(stderr, "hpt-live: %s\n", hpt_error_msg());
    return hpt_status_exit_code(st);
}
