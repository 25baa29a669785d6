/* live_server.h — hpt-live's HTTP server (docs/LIVE.md): follows metrics
 * files (lib/live.h) and serves the page, its assets, the JSON API and a
 * Server-Sent Events stream with libmicrohttpd, every request checked
 * against an access token. Built only with libmicrohttpd (HAVE_MICROHTTPD). */
#ifndef HPT_LIVE_SERVER_H
#define HPT_LIVE_SERVER_H

#include <stddef.h>
#include <stdio.h>

#include "alert.h"
#include "error.h"

typedef struct {
    const char *const *paths;  /* metrics files or run directories         */
    int npaths;
    const char *bind;          /* address to listen on ("127.0.0.1")       */
    int port;                  /* 0: a free port                            */
    const char *token_file;    /* first line is the token; NULL: random    */
    const char *assets;        /* directory of index.html, app.js, ...     */
    const char *on_alert;      /* shell command run once per fired alert   */
    hpt_alert_rule rules[HPT_ALERT_MAX];
    int nrules;
    double poll_s;             /* seconds between polls (0.5)               */
    size_t points;             /* default history points (2000)             */
    int prom_top_k;            /* GET /metrics: slowest ranks shown (8)     */
} hpt_live_opts;

/* Fill *o with the defaults (bind 127.0.0.1, port 0, poll 0.5 s, 2000
 * points, 8 slowest ranks in /metrics; paths, assets and the rest unset). */
void hpt_live_opts_default(hpt_live_opts *o);

/* Serve until SIGINT or SIGTERM (then HPT_OK). Prints the URL with the
 * token and the ssh tunnel command to `out`, state changes and warnings to
 * `err` (once per change). Errors before serving: HPT_ERR_DATA a path is
 * an existing file that is not an hpt metrics file; HPT_ERR_USAGE a bad
 * --bind address or token; HPT_ERR_IO the port is in use or cannot be
 * bound, the token file cannot be read, no randomness. */
hpt_status hpt_live_serve(const hpt_live_opts *o, FILE *out, FILE *err);

#endif
