/* live_server.c — hpt-live's HTTP server (live_server.h, docs/LIVE.md).
 *
 * Threads: the caller's thread polls the runs every poll_s seconds and
 * turns what is new into Server-Sent Events records in a ring; libmicrohttpd
 * runs one thread per connection (a stream blocks in its reader callback
 * until the ring moves or PING_S seconds pass: a ": ping"). One mutex guards
 * the runs (and so every HDF5 call) and the ring.
 * Connections: up to CONN_MAX (bounded by RLIMIT_NOFILE), each dropped after
 * IDLE_S seconds without traffic, so idle sockets (no request, or a finished
 * keep-alive) cannot hold the token holder out for long. libmicrohttpd's
 * timeout counts seconds since the last byte received or sent, so a stream
 * (a ping every PING_S < IDLE_S) is not cut; streams get STREAM_IDLE_S
 * besides, for a loaded machine. A closed stream is noticed at the next
 * ping's send. */
#define _GNU_SOURCE /* close_range (glibc 2.34) */
#include "live_server.h"

#include "live.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RING 1024          /* SSE records kept for slow or late streams  */
#define PING_S 5           /* seconds between keep-alive comments        */
#define IDLE_S 10u         /* a connection without traffic is closed     */
#define STREAM_IDLE_S 60u  /* the same for an event stream (pings: 5 s)  */
#define CONN_MAX 1024u     /* concurrent connections, at most            */
#define MAX_STREAM_ROWS 4096

typedef struct {
    const hpt_live_opts *o;
    hpt_live_run **runs;
    int nruns;
    char token[256];
    pthread_mutex_t lock;
    pthread_cond_t moved;
    char *ring[RING];
    unsigned long long next_seq; /* records 0..next_seq-1 were pushed     */
    volatile sig_atomic_t stop;
} server;

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

void hpt_live_opts_default(hpt_live_opts *o)
{
    memset(o, 0, sizeof *o);
    o->bind = "127.0.0.1";
    o->poll_s = 0.5;
    o->points = 2000;
    o->prom_top_k = 8;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* ------------------------------------------------------------- token */

static int token_char_ok(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           c == '-' || c == '_' || c == '.';
}

static hpt_status read_token(const char *file, char *tok, size_t len)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return hpt_error_set(HPT_ERR_IO, "--token-file %s: cannot read it: %s", file,
                             strerror(errno));
    char line[512];
    int got = fgets(line, sizeof line, f) != NULL, err = ferror(f) ? errno : 0;
    fclose(f);
    if (err)
        return hpt_error_set(HPT_ERR_IO, "--token-file %s: cannot read it: %s", file,
                             strerror(err));
    line[got ? strcspn(line, "\r\n") : 0] = 0;
    size_t n = strlen(line);
    int ok = n >= 16 && n < len;
    for (size_t i = 0; ok && i < n; i++)
        ok = token_char_ok((unsigned char)line[i]);
    if (!ok)
        return hpt_error_set(HPT_ERR_USAGE, "--token-file %s: the first line must be a token of "
                             "16 to %zu characters A-Z a-z 0-9 - _ . (got %zu characters%s)",
                             file, len - 1, n, n >= 16 && n < len ? " with others" : "");
    memcpy(tok, line, n + 1);
    return HPT_OK;
}

static hpt_status random_token(char *tok)
{
    unsigned char b[16];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, b, sizeof b) : -1;
    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)sizeof b)
        return hpt_error_set(HPT_ERR_IO, "cannot read /dev/urandom for the access token: %s",
                             strerror(errno));
    for (int i = 0; i < 16; i++)
        sprintf(tok + 2 * i, "%02x", b[i]);
    return HPT_OK;
}

/* Constant-time comparison (the token must not leak through timing). */
static int token_ok(const server *s, const char *given)
{
    if (!given)
        return 0;
    size_t a = strlen(s->token), b = strlen(given);
    unsigned char d = a != b;
    for (size_t i = 0; i < a; i++)
        d |= (unsigned char)(s->token[i] ^ given[i < b ? i : 0]);
    return d == 0;
}

/* ------------------------------------------------------------ socket */

static int is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

/* The listening socket on bind:port (*port updated when 0). */
static hpt_status listen_on(const char *bind_addr, int *port, int *fd, int *v6, FILE *err)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    socklen_t sl;
    if (inet_pton(AF_INET, bind_addr, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)*port);
        sl = sizeof *a4;
        *v6 = 0;
    } else if (inet_pton(AF_INET6, bind_addr, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)*port);
        sl = sizeof *a6;
        *v6 = 1;
    } else
        return hpt_error_set(HPT_ERR_USAGE, "--bind '%s': not an IPv4 or IPv6 address (e.g. "
                             "127.0.0.1, ::1, 0.0.0.0)", bind_addr);
    if (!is_loopback(&ss))
        fprintf(err, "hpt-live: warning: --bind %s is not a loopback address: anyone who can "
                "reach this host and port and learns the token sees the runs; prefer the "
                "default 127.0.0.1 and an ssh tunnel\n", bind_addr);
    *fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*fd < 0)
        return hpt_error_set(HPT_ERR_IO, "cannot create a socket: %s", strerror(errno));
    int one = 1;
    setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (*v6)
        setsockopt(*fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(*fd, (struct sockaddr *)&ss, sl) < 0 || listen(*fd, 64) < 0) {
        int e = errno;
        close(*fd);
        *fd = -1;
        if (e == EADDRINUSE)
            return hpt_error_set(HPT_ERR_IO, "--port %d: address %s port %d is already in use "
                                 "(another server listens there): pick another --port, or "
                                 "--port 0 for a free one", *port, bind_addr, *port);
        return hpt_error_set(HPT_ERR_IO, "cannot listen on %s port %d: %s", bind_addr, *port,
                             strerror(e));
    }
    sl = sizeof ss;
    getsockname(*fd, (struct sockaddr *)&ss, &sl);
    *port = ntohs(ss.ss_family == AF_INET ? a4->sin_port : a6->sin6_port);
    return HPT_OK;
}

/* ------------------------------------------------------------- ring */

/* Push one SSE text (taken over) and wake the streams (lock held). */
static void push(server *s, char *text)
{
    char **slot = &s->ring[s->next_seq % RING];
    free(*slot);
    *slot = text;
    s->next_seq++;
    pthread_cond_broadcast(&s->moved);
}

/* Push a "state" record of run r (lock held). */
static void push_state(server *s, const hpt_live_run *r)
{
    hpt_sbuf b = {0};
    hpt_sbuf_printf(&b, "event: state\ndata: {\"run\":%d,\"state\":\"%s\",\"error\":", r->id,
                    hpt_live_state_name(r->state));
    if (r->error[0])
        hpt_sbuf_json_str(&b, r->error);
    else
        hpt_sbuf_put(&b, "null", 4);
    hpt_sbuf_printf(&b, "}\n\n");
    if (b.oom)
        free(b.p);
    else
        push(s, b.p);
}

/* ------------------------------------------------------------ stream */

typedef struct {
    server *s;
    unsigned long long seq; /* next record to send                        */
    hpt_sbuf pend;          /* bytes not yet handed to MHD                 */
    size_t off;
} stream;

static void stream_take(stream *c, const char *p, size_t n)
{
    if (c->off == c->pend.n) {
        c->pend.n = c->off = 0;
        if (c->pend.p)
            c->pend.p[0] = 0;
    }
    hpt_sbuf_put(&c->pend, p, n);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream *c = cls;
    server *s = c->s;
    if (c->off == c->pend.n) {
        pthread_mutex_lock(&s->lock);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += PING_S;
        int timed_out = 0;
        while (!s->stop && c->seq == s->next_seq && !timed_out)
            timed_out = pthread_cond_timedwait(&s->moved, &s->lock, &until) == ETIMEDOUT;
        if (s->stop) {
            pthread_mutex_unlock(&s->lock);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (s->next_seq - c->seq > RING) { /* fell behind: re-read the history */
            c->seq = s->next_seq - RING;
            const char *reset = "event: reset\ndata: {}\n\n";
            stream_take(c, reset, strlen(reset));
        }
        for (; c->seq < s->next_seq; c->seq++)
            stream_take(c, s->ring[c->seq % RING], strlen(s->ring[c->seq % RING]));
        pthread_mutex_unlock(&s->lock);
        if (c->off == c->pend.n && timed_out)
            stream_take(c, ": ping\n\n", 8);
        if (c->pend.oom)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = c->pend.n - c->off < max ? c->pend.n - c->off : max;
    memcpy(buf, c->pend.p + c->off, n);
    c->off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    stream *c = cls;
    free(c->pend.p);
    free(c);
}

/* --------------------------------------------------------- responses */

static enum MHD_Result send_buf(struct MHD_Connection *conn, unsigned code, const char *type,
                                const char *body, size_t n)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)body,
                                                             MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    enum MHD_Result ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_text(struct MHD_Connection *conn, unsigned code, const char *msg)
{
    return send_buf(conn, code, "text/plain; charset=utf-8", msg, strlen(msg));
}

static enum MHD_Result send_json_error(struct MHD_Connection *conn, unsigned code,
                                       const char *msg)
{
    hpt_sbuf b = {0};
    hpt_sbuf_printf(&b, "{\"error\":");
    hpt_sbuf_json_str(&b, msg);
    hpt_sbuf_printf(&b, "}");
    enum MHD_Result ret = send_buf(conn, code, "application/json", b.p ? b.p : "{}",
                                   b.p ? b.n : 2);
    free(b.p);
    return ret;
}

/* The fixed list of files served from the assets directory. */
static const char *const assets[][2] = {
    {"index.html", "text/html; charset=utf-8"},
    {"app.js", "text/javascript; charset=utf-8"},
    {"style.css", "text/css; charset=utf-8"},
    {"echarts.min.js", "text/javascript; charset=utf-8"},
};

/* A warning on err for each asset missing from dir: the page is served
 * anyway (the API works), but without its charts or at all. */
static void check_assets(const char *dir, FILE *err)
{
    for (size_t i = 0; i < sizeof assets / sizeof assets[0]; i++) {
        char path[4200];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, assets[i][0]);
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
            continue;
        fprintf(err, "hpt-live: warning: %s is missing: the page will %s (build hpt after "
                "`npm ci` in its source tree, which setup.sh runs; or pass --assets DIR / "
                "HPT_LIVE_ASSETS)\n", path,
                strcmp(assets[i][0], "echarts.min.js") ? "not work" : "draw no charts");
    }
}

static enum MHD_Result send_asset(server *s, struct MHD_Connection *conn, const char *name)
{
    int a = -1;
    for (size_t i = 0; i < sizeof assets / sizeof assets[0]; i++)
        if (!strcmp(name, assets[i][0]))
            a = (int)i;
    if (a < 0)
        return send_text(conn, 404, "404 not found\n");
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", s->o->assets, assets[a][0]);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        if (fd >= 0)
            close(fd);
        char msg[4400];
        snprintf(msg, sizeof msg, "404: %s is missing from the assets directory %s (install "
                 "hpt, or pass --assets DIR / HPT_LIVE_ASSETS)\n", assets[a][0], s->o->assets);
        return send_text(conn, 404, msg);
    }
    struct MHD_Response *r = MHD_create_response_from_fd((uint64_t)sb.st_size, fd);
    if (!r) {
        close(fd);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", assets[a][1]);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    enum MHD_Result ret = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* The value of query argument `name`, its name matched exactly (libmicrohttpd's
 * lookup ignores case: ?TOKEN= or ?Run= are not our arguments); the first
 * one when repeated; NULL when absent. A value that decodes to a NUL byte
 * (?run=0%00) is returned as the literal "%00", which no argument accepts:
 * the C string would otherwise end at the NUL and "0%00" pass as "0". */
struct arg_find {
    const char *name, *value;
};

static enum MHD_Result arg_find_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                                   size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    struct arg_find *a = cls;
    if (key && strlen(key) == key_size && !strcmp(key, a->name)) {
        a->value = !value ? "" : strlen(value) != value_size ? "%00" : value;
        return MHD_NO; /* found: stop */
    }
    return MHD_YES;
}

static const char *arg_str(struct MHD_Connection *conn, const char *name)
{
    struct arg_find a = {name, NULL};
    MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND, arg_find_cb, &a);
    return a.value;
}

/* A strict non-negative integer query argument in [lo, hi] (def if absent):
 * decimal digits only, no sign, no leading zero ("0" itself excepted). */
static int arg_int(struct MHD_Connection *conn, const char *name, long lo, long hi, long def,
                   long *out)
{
    const char *v = arg_str(conn, name);
    if (!v) {
        *out = def;
        return def >= lo;
    }
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi || (*v < '0' || *v > '9') ||
        (v[0] == '0' && v[1]))
        return 0;
    *out = x;
    return 1;
}

/* A run's JSON from fn (history, goodput) under the lock; a read that
 * finds damage marks the run (its state pushed) and fn runs again, now
 * leaving out what the file no longer gives. */
typedef hpt_status (*run_json_fn)(const server *s, hpt_live_run *r, long arg, hpt_sbuf *out);

static enum MHD_Result send_run_json(server *s, struct MHD_Connection *conn, long run,
                                     run_json_fn fn, long arg)
{
    hpt_sbuf b = {0};
    pthread_mutex_lock(&s->lock);
    hpt_live_run *r = s->runs[run];
    hpt_status st = fn(s, r, arg, &b);
    if (st == HPT_ERR_DATA) { /* damaged: the run is in error, its JSON says so */
        if (hpt_live_run_set_damage(r, hpt_error_msg()))
            push_state(s, r);
        free(b.p);
        b = (hpt_sbuf){0};
        st = fn(s, r, arg, &b);
    }
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", st ? hpt_error_msg() : "");
    pthread_mutex_unlock(&s->lock);
    enum MHD_Result ret = st ? send_json_error(conn, 500, msg)
                             : send_buf(conn, 200, "application/json", b.p, b.n);
    free(b.p);
    return ret;
}

/* arg: the points; the stream position is read under the lock, so the
 * history and GET /api/stream?from=SEQ meet exactly */
static hpt_status history_json(const server *s, hpt_live_run *r, long points, hpt_sbuf *out)
{
    return hpt_live_run_history_json(r, (size_t)points, (long long)s->next_seq, out);
}

static hpt_status goodput_json(const server *s, hpt_live_run *r, long arg, hpt_sbuf *out)
{
    (void)s, (void)arg;
    return hpt_live_goodput_json(r, out);
}

static enum MHD_Result send_history(server *s, struct MHD_Connection *conn)
{
    long run, points;
    if (!arg_int(conn, "run", 0, s->nruns - 1, -1, &run))
        return send_json_error(conn, 400, "run=ID: expected the id of a run of /api/runs");
    if (!arg_int(conn, "points", 2, 10000000, (long)s->o->points, &points))
        return send_json_error(conn, 400, "points=N: expected an integer from 2 to 10000000");
    return send_run_json(s, conn, run, history_json, points);
}

static enum MHD_Result send_goodput(server *s, struct MHD_Connection *conn)
{
    long run;
    if (!arg_int(conn, "run", 0, s->nruns - 1, -1, &run))
        return send_json_error(conn, 400, "run=ID: expected the id of a run of /api/runs");
    return send_run_json(s, conn, run, goodput_json, 0);
}

static enum MHD_Result send_runs(server *s, struct MHD_Connection *conn)
{
    hpt_sbuf b = {0};
    pthread_mutex_lock(&s->lock);
    hpt_live_runs_json(s->runs, s->nruns, &b);
    pthread_mutex_unlock(&s->lock);
    enum MHD_Result ret = b.oom ? send_json_error(conn, 500, "out of memory")
                                : send_buf(conn, 200, "application/json", b.p, b.n);
    free(b.p);
    return ret;
}

static enum MHD_Result send_stream(server *s, struct MHD_Connection *conn)
{
    long from;
    if (!arg_int(conn, "from", 0, LONG_MAX, -1, &from) && arg_str(conn, "from"))
        return send_json_error(conn, 400, "from=SEQ: expected the \"seq\" of a history (an "
                               "integer >= 0)");
    stream *c = calloc(1, sizeof *c);
    if (!c)
        return MHD_NO;
    c->s = s;
    pthread_mutex_lock(&s->lock);
    c->seq = s->next_seq;
    /* ?from=SEQ (the "seq" of a history): replay what came after it */
    if (from >= 0 && (unsigned long long)from < s->next_seq &&
        s->next_seq - (unsigned long long)from <= RING)
        c->seq = (unsigned long long)from;
    hpt_sbuf_printf(&c->pend, "retry: 2000\n\n");
    for (int i = 0; i < s->nruns; i++) { /* where every run stands now */
        hpt_live_run *r = s->runs[i];
        hpt_sbuf_printf(&c->pend, "event: state\ndata: {\"run\":%d,\"state\":\"%s\",\"error\":",
                        r->id, hpt_live_state_name(r->state));
        if (r->error[0])
            hpt_sbuf_json_str(&c->pend, r->error);
        else
            hpt_sbuf_printf(&c->pend, "null");
        hpt_sbuf_printf(&c->pend, "}\n\n");
    }
    pthread_mutex_unlock(&s->lock);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024,
                                                               stream_read, c, stream_free);
    if (!r) {
        stream_free(c);
        return MHD_NO;
    }
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, STREAM_IDLE_S);
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    enum MHD_Result ret = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* The token of an "Authorization: Bearer TOKEN" header (RFC 6750; the
 * scheme's case ignored), or NULL. */
static const char *bearer(struct MHD_Connection *conn)
{
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7))
        return NULL;
    h += 7;
    while (*h == ' ')
        h++;
    return h;
}

/* GET /metrics: the Prometheus text exposition (hpt_live_prom_write). */
static enum MHD_Result send_metrics(server *s, struct MHD_Connection *conn)
{
    hpt_sbuf b = {0};
    int *changed = calloc((size_t)s->nruns, sizeof *changed);
    pthread_mutex_lock(&s->lock);
    hpt_live_prom_write(s->runs, s->nruns, now_s(), s->o->prom_top_k, changed, &b);
    for (int i = 0; changed && i < s->nruns; i++)
        if (changed[i])
            push_state(s, s->runs[i]);
    pthread_mutex_unlock(&s->lock);
    free(changed);
    enum MHD_Result ret = b.oom || !changed
                              ? send_text(conn, 500, "500 out of memory\n")
                              : send_buf(conn, 200, "text/plain; version=0.0.4; charset=utf-8",
                                         b.p ? b.p : "", b.n);
    free(b.p);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload_data;
    server *s = cls;
    if (!*con_cls) { /* first call: headers only */
        *con_cls = s;
        return MHD_YES;
    }
    if (*upload_size) { /* no request bodies */
        *upload_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return send_text(conn, 405, "405 method not allowed\n");
    if (!token_ok(s, arg_str(conn, "token")) && !token_ok(s, bearer(conn)))
        return send_text(conn, 403, "403 forbidden: missing or wrong token (use the URL "
                                    "hpt-live printed)\n");
    if (strstr(url, "%00")) /* left encoded by unescape() */
        return send_text(conn, 400, "400 bad request: a NUL byte (%00) in the path\n");
    if (!strcmp(url, "/"))
        return send_asset(s, conn, "index.html");
    if (!strncmp(url, "/assets/", 8))
        return send_asset(s, conn, url + 8);
    if (!strcmp(url, "/api/runs"))
        return send_runs(s, conn);
    if (!strcmp(url, "/api/history"))
        return send_history(s, conn);
    if (!strcmp(url, "/api/goodput"))
        return send_goodput(s, conn);
    if (!strcmp(url, "/api/stream"))
        return send_stream(s, conn);
    if (!strcmp(url, "/metrics"))
        return send_metrics(s, conn);
    return send_text(conn, 404, "404 not found\n");
}

/* libmicrohttpd's unescaper for the path and the query arguments: %HH
 * decoded, except in a string holding %00, which is left as it is. A
 * decoded NUL would end the C string handed to handle(), so that
 * /assets/app.js%00.html was served as app.js; left encoded, it matches
 * no name (the path is refused with a 400, an argument is not valid). */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *s)
{
    (void)cls;
    (void)conn;
    if (strstr(s, "%00"))
        return strlen(s);
    return MHD_http_unescape(s);
}

/* ------------------------------------------------------------ alerts */

extern char **environ;

/* Run --on-alert for alert a of run r (not waited for; reaped later). The
 * environment is built before fork(): between fork and exec only
 * async-signal-safe calls (other threads may hold malloc's lock). */
static void run_on_alert(const char *cmd, const hpt_live_run *r, const hpt_live_alert *a,
                         FILE *err)
{
    char vars[5][4400];
    snprintf(vars[0], sizeof vars[0], "HPT_ALERT_RULE=%s", a->rule);
    snprintf(vars[1], sizeof vars[1], "HPT_ALERT_RUN=%s", r->name);
    snprintf(vars[2], sizeof vars[2], "HPT_ALERT_STEP=%lld", (long long)a->step);
    snprintf(vars[3], sizeof vars[3], "HPT_ALERT_VALUE=%.17g", a->value);
    snprintf(vars[4], sizeof vars[4], "HPT_ALERT_FILE=%s", r->path);
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = malloc(sizeof *env * (n + 6));
    if (!env) {
        fprintf(err, "hpt-live: --on-alert: out of memory\n");
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "HPT_ALERT_", 10))
            env[k++] = environ[i];
    for (int i = 0; i < 5; i++)
        env[k++] = vars[i];
    env[k] = NULL;
    char *argv[] = {"sh", "-c", (char *)cmd, NULL};
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd >= 0) {
            dup2(fd, 0);
            close(fd);
        }
        /* the command gets stdin, stdout, stderr only: not the metrics
         * files HDF5 holds open (no O_CLOEXEC there), nor the sockets */
        if (close_range(3, ~0u, 0) != 0)
            for (int f = 3; f < 65536; f++)
                close(f);
        execve("/bin/sh", argv, env);
        _exit(127);
    }
    if (pid < 0)
        fprintf(err, "hpt-live: --on-alert: cannot start the command: %s\n", strerror(errno));
    free(env);
}

/* -------------------------------------------------------------- loop */

/* After the file was opened afresh: build the history the page will ask
 * for once, so that per-rank values HDF5 cannot read make the run error
 * now (the run list, the terminal), not at the page's first request. */
static void probe_history(server *s, hpt_live_run *r, hpt_live_news *nw)
{
    hpt_sbuf b = {0};
    if (hpt_live_run_history_json(r, s->o->points, -1, &b) == HPT_ERR_DATA &&
        hpt_live_run_set_damage(r, hpt_error_msg()))
        nw->state_changed = 1;
    free(b.p);
}

/* One poll of every run: stream records, messages on err, --on-alert. */
static void poll_all(server *s, FILE *err, int first)
{
    hpt_sbuf b = {0};
    for (int i = 0; i < s->nruns; i++) {
        hpt_live_run *r = s->runs[i];
        hpt_live_news nw;
        pthread_mutex_lock(&s->lock);
        hpt_live_run_poll(r, now_s(), &nw);
        if (nw.opened && r->state != HPT_LIVE_ERROR && r->state != HPT_LIVE_WAITING)
            probe_history(s, r, &nw);
        if (!first)
            hpt_live_news_sse(r, &nw, MAX_STREAM_ROWS, &b);
        if (b.n && !b.oom) {
            push(s, b.p);
            b = (hpt_sbuf){0};
        }
        free(b.p);
        b = (hpt_sbuf){0};
        free(nw.steps);
        if (!r->said) {
            r->said = 1;
            if (r->state == HPT_LIVE_WAITING || r->state == HPT_LIVE_ERROR)
                fprintf(err, "hpt-live: %s: %s\n", r->name, r->error);
            else
                fprintf(err, "hpt-live: %s: %s (%zu steps)\n", r->name,
                        hpt_live_state_name(r->state), r->n);
        }
        for (; r->alerts_seen < r->nalert; r->alerts_seen++) {
            const hpt_live_alert *a = &r->alert[r->alerts_seen];
            if (first) { /* history: shown, no command (nor after a replacement) */
                hpt_live_alert_fired(r, a);
                continue;
            }
            int seen = hpt_live_alert_fired(r, a) == 1;
            fprintf(err, "hpt-live: %s: alert %s at step %lld (value %g)%s\n", r->name, a->rule,
                    (long long)a->step, a->value,
                    seen && s->o->on_alert ? " (read again from a replaced file: --on-alert "
                                             "already ran for it)" : "");
            if (s->o->on_alert && !seen)
                run_on_alert(s->o->on_alert, r, a, err);
        }
        pthread_mutex_unlock(&s->lock);
    }
    fflush(err);
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

static void print_url(const hpt_live_opts *o, int port, const char *token, FILE *out)
{
    char host[256] = "HOST";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = 0;
    int any = !strcmp(o->bind, "0.0.0.0") || !strcmp(o->bind, "::");
    int v6 = strchr(o->bind, ':') != NULL;
    const char *shown = any ? host : o->bind;
    fprintf(out, "hpt-live: serving %d run%s at http://%s%s%s:%d/?token=%s\n", o->npaths,
            o->npaths == 1 ? "" : "s", v6 && !any ? "[" : "", shown, v6 && !any ? "]" : "", port,
            token);
    /* the tunnel's far end: where the server listens, as seen from this host */
    char target[300];
    if (!strcmp(o->bind, "0.0.0.0"))
        snprintf(target, sizeof target, "127.0.0.1");
    else if (!strcmp(o->bind, "::"))
        snprintf(target, sizeof target, "[::1]");
    else
        snprintf(target, sizeof target, "%s%s%s", v6 ? "[" : "", o->bind, v6 ? "]" : "");
    /* the tunnel's near end (the laptop's loopback): IPv6 for an IPv6 bind,
     * so the URL also works when opened on this host */
    const char *near = v6 && !any ? "[::1]" : "127.0.0.1";
    fprintf(out, "hpt-live: from your laptop: ssh -N -L %s%s%d:%s:%d %s\n", v6 && !any ? near : "",
            v6 && !any ? ":" : "", port, target, port, host);
    fprintf(out, "hpt-live: then open http://%s:%d/?token=%s (Ctrl-C stops hpt-live)\n", near,
            port, token);
    fflush(out);
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !g_stop)
        ;
}

static void server_free(server *s)
{
    for (int i = 0; i < s->nruns; i++)
        if (s->runs[i]) {
            hpt_live_run_free(s->runs[i]);
            free(s->runs[i]);
        }
    free(s->runs);
    for (int i = 0; i < RING; i++)
        free(s->ring[i]);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->moved);
}

static hpt_status setup(server *s, const hpt_live_opts *o)
{
    s->runs = calloc((size_t)(o->npaths ? o->npaths : 1), sizeof *s->runs);
    if (!s->runs)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    for (int i = 0; i < o->npaths; i++) {
        s->runs[i] = malloc(sizeof *s->runs[i]);
        if (!s->runs[i])
            return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
        s->nruns = i + 1;
        hpt_live_run_init(s->runs[i], i, o->paths[i], o->rules, o->nrules);
        if (hpt_live_not_metrics(s->runs[i]->path))
            return HPT_ERR_DATA;
    }
    return o->token_file ? read_token(o->token_file, s->token, sizeof s->token)
                         : random_token(s->token);
}

/* The connection limit: CONN_MAX, fewer when the descriptor limit is low
 * (its soft limit is raised toward the hard one first; 64 kept for HDF5
 * files, the listening socket and stdio). */
static unsigned conn_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 64u;
    rlim_t want = (rlim_t)CONN_MAX + 64;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want &&
        (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > rl.rlim_cur)) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
        return CONN_MAX;
    return rl.rlim_cur > 64 + 16 ? (unsigned)(rl.rlim_cur - 64) : 16u;
}

hpt_status hpt_live_serve(const hpt_live_opts *o, FILE *out, FILE *err)
{
    server s;
    memset(&s, 0, sizeof s);
    s.o = o;
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.moved, NULL);
    int fd = -1, port = o->port, v6 = 0;
    hpt_status st = setup(&s, o);
    if (!st)
        st = listen_on(o->bind, &port, &fd, &v6, err);
    if (st) {
        server_free(&s);
        return st;
    }
    check_assets(o->assets, err);
    signal(SIGPIPE, SIG_IGN);
    g_stop = 0;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    poll_all(&s, err, 1);
    /* poll(), not select(): descriptors may pass FD_SETSIZE */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     (MHD_is_feature_supported(MHD_FEATURE_POLL) == MHD_YES ? MHD_USE_POLL : 0) |
                     (v6 ? MHD_USE_IPv6 : 0);
    struct MHD_Daemon *d = MHD_start_daemon(flags, 0, NULL, NULL, handle, &s,
                                            MHD_OPTION_LISTEN_SOCKET, fd,
                                            MHD_OPTION_CONNECTION_LIMIT, conn_limit(),
                                            MHD_OPTION_CONNECTION_TIMEOUT, IDLE_S,
                                            MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
                                            MHD_OPTION_END);
    if (!d) {
        close(fd);
        server_free(&s);
        return hpt_error_set(HPT_ERR_IO, "cannot start the HTTP server on %s port %d", o->bind,
                             port);
    }
    print_url(o, port, s.token, out);
    while (!g_stop) {
        sleep_s(o->poll_s);
        if (!g_stop)
            poll_all(&s, err, 0);
    }
    fprintf(err, "hpt-live: stopping\n");
    pthread_mutex_lock(&s.lock);
    s.stop = 1;
    pthread_cond_broadcast(&s.moved);
    pthread_mutex_unlock(&s.lock);
    MHD_stop_daemon(d);
    close(fd);
    server_free(&s);
    return HPT_OK;
}
