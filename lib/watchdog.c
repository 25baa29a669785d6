/* watchdog.c — the hang watchdog thread, heartbeats, dumps, the laggard
 * analysis and the `hpt-metrics hang` report; see watchdog.h. */
#include "watchdog.h"

#include "durable.h"
#include "metrics_read.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NMEDIAN 31    /* steps in the running median                  */
#define MAX_SHOWN 8   /* suspects named in the one-line message       */
#define WHY_MAX 384   /* bytes of one suspect's phrase                 */

struct hpt_watchdog {
    const hpt_comm *c;
    hpt_flight *fr;
    char dir[4096];            /* RUN_DIR/hang, "" = no files           */
    double fixed;              /* > 0: fixed timeout; < 0: automatic     */
    _Atomic int64_t timeout_ns;
    double steps[NMEDIAN];     /* training thread only                   */
    int nsteps;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    char host[256], node[256];
    long pid;
    char hb_key[2048];         /* last heartbeat written, without times  */
    double hb_t;               /* when (monotonic s)                      */
    hpt_flight_rec *ring;      /* snapshot buffer, fr->n records          */
    void (*abort_fn)(void *);  /* hpt_watchdog_on_abort                    */
    void *abort_ctx;
};

/* ------------------------------------------------------------ helpers */

static double unix_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Copy s into a JSON string body: quotes, backslashes and control
 * characters become '?' (host names never hold them). */
static void json_safe(char *dst, size_t n, const char *s)
{
    size_t i = 0;
    for (; s[i] && i + 1 < n; i++)
        dst[i] = (s[i] == '"' || s[i] == '\\' || (unsigned char)s[i] < 32) ? '?' : s[i];
    dst[i] = 0;
}

/* Write `text` to path by temp name + rename (io/durable.h: readers never
 * see half a file; not synced: a heartbeat is rewritten every few seconds
 * and worthless after a crash). Returns 0 on success. */
static int write_atomic(const char *path, const char *text, size_t len)
{
    return hpt_file_write_atomic(path, text, len) ? -1 : 0;
}

static double timeout_s(const hpt_watchdog *w)
{
    return 1e-9 * (double)atomic_load(&w->timeout_ns);
}

/* ------------------------------------------------------------ prepare */

hpt_status hpt_watchdog_prepare(const char *run_dir, char *prev, size_t n)
{
    char dir[4096], path[4200];
    if (n)
        prev[0] = 0;
    snprintf(dir, sizeof dir, "%s/hang", run_dir);
    snprintf(path, sizeof path, "%s/summary.txt", dir);
    FILE *f = fopen(path, "r");
    if (f) { /* a previous hang: keep its files under hang.N */
        if (n && fgets(prev, (int)n, f))
            prev[strcspn(prev, "\n")] = 0;
        fclose(f);
        for (int i = 1; i < 100000; i++) {
            snprintf(path, sizeof path, "%s/hang.%d", run_dir, i);
            struct stat sb;
            if (stat(path, &sb) == 0)
                continue;
            if (rename(dir, path))
                return hpt_error_set(HPT_ERR_IO, "%s: cannot rename to %s: %s", dir, path,
                                     strerror(errno));
            break;
        }
    }
    if (mkdir(dir, 0777) && errno != EEXIST)
        return hpt_error_set(HPT_ERR_IO, "%s (hang watchdog files): cannot create: %s", dir,
                             strerror(errno));
    snprintf(path, sizeof path, "%s/.probe.%ld", dir, (long)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return hpt_error_set(HPT_ERR_IO, "%s (hang watchdog files): cannot create a file in it: %s",
                             dir, strerror(errno));
    close(fd);
    unlink(path);
    return HPT_OK;
}

void hpt_watchdog_tidy(const char *run_dir)
{
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s/hang", run_dir) < (int)sizeof dir)
        rmdir(dir); /* fails, leaving it, unless empty */
}

/* ------------------------------------------------------------ state */

/* This rank's state as the watchdog sees it. */
typedef struct {
    int64_t step;
    int in_step;
    double idle;          /* seconds since the last progress          */
    int blocked;          /* 1: waiting in `op`                       */
    hpt_flight_rec op;
    double waited;        /* seconds in that wait                     */
    double in_save;       /* seconds inside a checkpoint save; 0 outside */
    int64_t posted[HPT_FLIGHT_GROUPS], completed[HPT_FLIGHT_GROUPS];
} rank_state;

static void read_state(const hpt_watchdog *w, rank_state *s)
{
    const hpt_flight *f = w->fr;
    int64_t now = hpt_flight_now_ns();
    memset(s, 0, sizeof *s);
    s->step = atomic_load(&f->step);
    s->in_step = atomic_load(&f->in_step);
    s->idle = 1e-9 * (double)(now - atomic_load(&f->progress_ns));
    int64_t save = atomic_load(&f->save_ns);
    s->in_save = save ? 1e-9 * (double)(now - save) : 0;
    int64_t id = atomic_load(&f->blocked);
    if (id >= 0) {
        s->waited = 1e-9 * (double)(now - atomic_load(&f->blocked_ns));
        s->blocked = hpt_flight_get(f, id, &s->op);
        if (atomic_load(&f->blocked) != id) /* it completed meanwhile */
            s->blocked = 0;
    }
    for (int g = 0; g < HPT_FLIGHT_GROUPS; g++) {
        s->posted[g] = atomic_load(&f->posted[g]);
        s->completed[g] = atomic_load(&f->completed[g]);
    }
}

/* ------------------------------------------------------------ heartbeat */

/* The heartbeat's fields without the times (to see a change). */
static int hb_key(const hpt_watchdog *w, const rank_state *s, char *buf, size_t n)
{
    const hpt_comm *c = w->c;
    int k = snprintf(buf, n, "\"rank\":%d,\"size\":%d,\"host\":\"%s\",\"node\":\"%s\",\"pid\":%ld,"
                     "\"step\":%lld,\"in_step\":%d,\"in_save\":%d,\"blocked\":",
                     c->world_rank, c->world_size, w->host, w->node, w->pid,
                     (long long)s->step, s->in_step, s->in_save > 0);
    if (s->blocked)
        k += snprintf(buf + k, n - k, "{\"group\":%d,\"op\":%d,\"seq\":%lld,\"peer\":%d}",
                      s->op.group, s->op.op, (long long)s->op.seq, s->op.peer);
    else
        k += snprintf(buf + k, n - k, "null");
    const char *names[3] = {"posted", "completed", "color"};
    for (int a = 0; a < 3; a++) {
        k += snprintf(buf + k, n - k, ",\"%s\":[", names[a]);
        for (int g = 0; g < HPT_FLIGHT_GROUPS; g++)
            k += snprintf(buf + k, n - k, "%s%lld", g ? "," : "",
                          (long long)(a == 0 ? s->posted[g] : a == 1 ? s->completed[g]
                                                                     : c->group_color[g]));
        k += snprintf(buf + k, n - k, "]");
    }
    return k;
}

/* Rewrite RUN_DIR/hang/hb-NNNNN.json when the state changed (at most every
 * `every` s) or every 5 x `every` s; always when `force`. */
static void heartbeat(hpt_watchdog *w, const rank_state *s, double every, int force)
{
    if (!w->dir[0])
        return;
    char key[2048], text[2400], path[4200];
    hb_key(w, s, key, sizeof key);
    double now = hpt_flight_now();
    int changed = strcmp(key, w->hb_key) != 0;
    if (!force && !(changed && now - w->hb_t >= every) && now - w->hb_t < 5 * every)
        return;
    int len = snprintf(text, sizeof text, "{%s,\"time\":%.3f,\"idle\":%.3f,\"waited\":%.3f}\n",
                       key, unix_now(), s->idle, s->blocked ? s->waited : 0.0);
    snprintf(path, sizeof path, "%s/hb-%05d.json", w->dir, w->c->world_rank);
    int ok = write_atomic(path, text, (size_t)len) == 0;
    if (!ok && errno == ENOENT && mkdir(w->dir, 0777) == 0) /* deleted mid-run: re-created */
        ok = write_atomic(path, text, (size_t)len) == 0;
    if (ok) {
        snprintf(w->hb_key, sizeof w->hb_key, "%s", key);
        w->hb_t = now;
    }
}

/* ------------------------------------------------------------ analysis */



/* Seconds in a message: tenths, or four decimals below 1 s (a timeout of
 * 0.001 s is not "0.0 s"). */
static int secs_prec(double v) { return v < 1 && v > -1 ? 4 : 1; }

static int64_t jint(json_object *o, const char *k, int64_t dflt)
{
    json_object *v;
    return json_object_object_get_ex(o, k, &v) ? json_object_get_int64(v) : dflt;
}

static double jnum(json_object *o, const char *k)
{
    json_object *v;
    return json_object_object_get_ex(o, k, &v) ? json_object_get_double(v) : 0;
}

static void jstr(json_object *o, const char *k, char *dst, size_t n)
{
    json_object *v;
    snprintf(dst, n, "%s", json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : "?");
}

static void read_hb(const char *dir, int rank, hpt_hang_hb *p)
{
    char path[4200];
    memset(p, 0, sizeof *p);
    snprintf(path, sizeof path, "%s/hb-%05d.json", dir, rank);
    json_object *o = json_object_from_file(path), *b, *a;
    if (!o)
        return;
    p->ok = 1;
    jstr(o, "host", p->host, sizeof p->host);
    jstr(o, "node", p->node, sizeof p->node);
    p->time = jnum(o, "time");
    p->idle = jnum(o, "idle");
    p->waited = jnum(o, "waited");
    p->step = jint(o, "step", 0);
    p->in_save = (int)jint(o, "in_save", 0);
    if (json_object_object_get_ex(o, "blocked", &b) && json_object_is_type(b, json_type_object)) {
        p->blocked = 1;
        p->group = (int)jint(b, "group", 0);
        p->op = (int)jint(b, "op", 0);
        p->seq = jint(b, "seq", 0);
        p->peer = (int)jint(b, "peer", -1);
    }
    for (int g = 0; g < HPT_FLIGHT_GROUPS; g++) {
        p->posted[g] = json_object_object_get_ex(o, "posted", &a)
                           ? json_object_get_int64(json_object_array_get_idx(a, g)) : 0;
        p->completed[g] = json_object_object_get_ex(o, "completed", &a)
                              ? json_object_get_int64(json_object_array_get_idx(a, g)) : 0;
        p->color[g] = json_object_object_get_ex(o, "color", &a)
                          ? json_object_get_int(json_object_array_get_idx(a, g)) : -1;
    }
    json_object_put(o);
}



/* A member y that contradicts x's heartbeat, so that heartbeat is stale
 * although younger than the stale limit (the process stopped, its watchdog
 * thread too, between two writes); -1 none. Like is compared with like: in
 * a group instance both are members of, y has completed more collectives
 * than x had posted (one of them x never posted, and none completes
 * without every member). That y completed the collective x waits in is no
 * evidence: a member frozen inside an all-reduce can leave some members
 * done and others waiting (seen: DP4, rank 0 waiting in dp seq 55 that
 * ranks 1 and 3 had completed, rank 2 frozen). Applies only to a rank other than the
 * analysing one (its own state is read live) whose heartbeat is older than
 * a->current s: a live rank rewrites its heartbeat within one period and a
 * poll after its state changes, so a younger one is current. Posted counts
 * are never compared with a wait: with DP buckets in flight every live
 * member has posted several seqs past the one it waits in. */
static int overtaken_by(const hpt_hang_analysis *a, int x)
{
    const hpt_hang_hb *p = &a->hb[x];
    double current = a->current > 0 ? a->current : 5;
    if (x == a->me || !p->ok || a->now - p->time <= current)
        return -1;
    for (int y = 0; y < a->n; y++) {
        const hpt_hang_hb *q = &a->hb[y];
        if (y == x || !q->ok)
            continue;
        for (int g = 0; g < HPT_FLIGHT_GROUPS; g++)
            if (p->color[g] >= 0 && q->color[g] == p->color[g] && q->completed[g] > p->posted[g])
                return y;
    }
    return -1;
}

/* The group in which y contradicts x (see overtaken_by), for the message. */
static int overtaken_group(const hpt_hang_analysis *a, int x, int y)
{
    const hpt_hang_hb *p = &a->hb[x], *q = &a->hb[y];
    for (int g = 0; g < HPT_FLIGHT_GROUPS; g++)
        if (p->color[g] >= 0 && q->color[g] == p->color[g] && q->completed[g] > p->posted[g])
            return g;
    return 0;
}

/* The instance (colour) of group g that rank y belongs to, as comm_mpi.c
 * splits the grid; -1 when y is in none or the grid is unknown. */
static int grid_color(const hpt_hang_analysis *a, int g, int y)
{
    if (g == 0)
        return 0;
    if (a->tp <= 0 || a->pp <= 0 || a->dp <= 0)
        return -1;
    int t = y % a->tp, d = (y / a->tp) % a->dp, p = y / (a->tp * a->dp);
    switch (g) {
    case 1: return d + p * a->dp;               /* tp    */
    case 2: return t + p * a->tp;               /* dp    */
    case 3: return t + d * a->tp;               /* pp    */
    case 4: return d;                           /* mp    */
    case 5: return p == 0 || p == a->pp - 1 ? t + d * a->tp : -1; /* embed */
    default: return -1;
    }
}

/* Is y a member of x's instance of group g (y's heartbeat colour, else
 * the grid)? */
static int same_instance(const hpt_hang_analysis *a, int g, int x, int y)
{
    int c = a->hb[x].color[g];
    if (c < 0 || y == x)
        return 0;
    return a->hb[y].ok ? a->hb[y].color[g] == c : grid_color(a, g, y) == c;
}

/* Is rank y blocked in the very collective (g, seq) itself? */
static int blocked_in(const hpt_hang_hb *q, int g, int64_t seq)
{
    return q->ok && q->blocked && q->peer < 0 && q->group == g && q->seq == seq;
}

#define END (-1)       /* an end of the chain: a suspect                  */
#define END_UNSURE (-2) /* blocked, but no member is known to be behind  */

/* Ranks that rank x waits for (into out, returns the count); END when x
 * is an end of the chain (not waiting, no heartbeat, a stale heartbeat);
 * END_UNSURE when x waits in a collective every member posted and every
 * member that has not completed waits in too. */
static int waits_for(const hpt_hang_analysis *a, int x, double stale, int *out)
{
    const hpt_hang_hb *p = &a->hb[x];
    if (!p->ok || a->now - p->time > stale || overtaken_by(a, x) >= 0)
        return END;
    if (!p->blocked && p->in_save) { /* inside HDF5's collectives: for the frozen */
        int k = 0;
        for (int y = 0; y < a->n; y++)
            if (y != x && a->hb[y].ok && a->now - a->hb[y].time > stale)
                out[k++] = y;
        return k ? k : END_UNSURE;
    }
    if (!p->blocked)
        return END;
    if (p->peer >= 0 && p->peer < a->n) {
        out[0] = p->peer;
        return 1;
    }
    int k = 0, g = p->group;
    for (int y = 0; y < a->n; y++) /* not reached it */
        if (same_instance(a, g, x, y) && (!a->hb[y].ok || a->hb[y].posted[g] < p->seq))
            out[k++] = y;
    for (int y = 0; !k && y < a->n; y++) /* posted it, went elsewhere before it completed */
        if (same_instance(a, g, x, y) && a->hb[y].completed[g] < p->seq &&
            !blocked_in(&a->hb[y], g, p->seq))
            out[k++] = y;
    return k ? k : END_UNSURE;
}

static void why_phrase(const hpt_hang_analysis *a, int x, double stale, char *buf, size_t n)
{
    const hpt_hang_hb *p = &a->hb[x];
    double age = a->now - p->time;
    int y = overtaken_by(a, x);
    if (y >= 0) {
        int g = overtaken_group(a, x, y);
        char last[96];
        if (p->blocked)
            snprintf(last, sizeof last, "waiting in %s %s seq %lld", hpt_flight_op_name(p->op),
                     hpt_flight_group_name(p->group), (long long)p->seq);
        else
            snprintf(last, sizeof last, "not in a communication call");
        snprintf(buf, n, "heartbeat %.0f s old and stale: rank %d has since completed %s seq "
                 "%lld, past this rank's last record (%s, %s posted %lld, at step %lld); process "
                 "stopped or node unreachable", age, y, hpt_flight_group_name(g),
                 (long long)a->hb[y].completed[g], last, hpt_flight_group_name(g),
                 (long long)p->posted[g], (long long)p->step);
    }
    else if (!p->ok)
        snprintf(buf, n, "no heartbeat file (never started the watchdog, or its file system "
                         "is unreachable)");
    else if (age > stale)
        snprintf(buf, n, "heartbeat %.0f s old (process stopped or node unreachable)", age);
    else if (!p->blocked && p->in_save)
        snprintf(buf, n, "inside a checkpoint save (HDF5's collectives are not recorded) after "
                 "step %lld, no member's heartbeat older than %.0f s", (long long)p->step, stale);
    else if (!p->blocked)
        snprintf(buf, n, "not in a communication call, no progress for %.*f s at step %lld",
                 secs_prec(p->idle + age), p->idle + age, (long long)p->step);
    else
        snprintf(buf, n, "waiting %.*f s in %s on %s (seq %lld) at step %lld%s",
                 secs_prec(p->waited + age), p->waited + age, hpt_flight_op_name(p->op),
                 hpt_flight_group_name(p->group), (long long)p->seq, (long long)p->step,
                 a->ambiguous && !a->deadlock ? ", which every member posted: a member frozen "
                 "inside it or the network, the heartbeats cannot tell" : "");
}

/* Follow the wait chain from `me` (breadth first); the ends are the
 * suspects. Without one: the ranks blocked where no member is known to be
 * behind (and the members blocked with them), or a cycle of blocked
 * ranks — candidates, a->ambiguous set. */
void hpt_hang_analyse(hpt_hang_analysis *a, int me, double stale)
{
    a->me = me;
    int n = a->n, *queue = malloc(sizeof(int) * n), *seen = calloc(n, sizeof(int));
    int *out = malloc(sizeof(int) * n), *unsure = calloc(n, sizeof(int));
    a->suspect = calloc(n, sizeof(int));
    a->why = calloc(n, sizeof(char *));
    if (!queue || !seen || !out || !unsure || !a->suspect || !a->why)
        goto done;
    int head = 0, tail = 0, nunsure = 0;
    queue[tail++] = me;
    seen[me] = 1;
    while (head < tail) {
        int x = queue[head++];
        int k = waits_for(a, x, stale, out);
        if (k == END || k == END_UNSURE) {
            if (k == END)
                a->suspect[x] = 1;
            else
                unsure[x] = 1, nunsure++;
            continue;
        }
        for (int i = 0; i < k; i++)
            if (!seen[out[i]]) {
                seen[out[i]] = 1;
                queue[tail++] = out[i];
            }
    }
    for (int x = 0; x < n; x++)
        a->nsuspects += a->suspect[x];
    if (!a->nsuspects && nunsure) { /* everyone there posted it and waits in it */
        a->ambiguous = 1;
        for (int x = 0; x < n; x++)
            if (unsure[x]) {
                a->suspect[x] = 1;
                for (int y = 0; y < n; y++)
                    if (same_instance(a, a->hb[x].group, x, y) &&
                        blocked_in(&a->hb[y], a->hb[x].group, a->hb[x].seq))
                        a->suspect[y] = 1;
            }
        for (int x = 0; x < n; x++)
            a->nsuspects += a->suspect[x];
    } else if (!a->nsuspects) { /* a cycle: everyone reached waits for someone */
        a->deadlock = a->ambiguous = 1;
        for (int i = 0; i < tail; i++)
            a->suspect[queue[i]] = 1;
        a->nsuspects = tail;
    }
    for (int x = 0; x < n; x++)
        if (a->suspect[x] && (a->why[x] = malloc(WHY_MAX)))
            why_phrase(a, x, stale, a->why[x], WHY_MAX);
done:
    free(queue);
    free(seen);
    free(out);
    free(unsure);
}

void hpt_hang_analysis_free(hpt_hang_analysis *a)
{
    for (int x = 0; a->why && x < a->n; x++)
        free(a->why[x]);
    free(a->why);
    free(a->suspect);
    free(a->hb);
}

/* This rank's own heartbeat from memory (fresher than its file). */
static void own_hb(const hpt_watchdog *w, const rank_state *s, hpt_hang_hb *p)
{
    memset(p, 0, sizeof *p);
    p->ok = 1;
    snprintf(p->host, sizeof p->host, "%s", w->host);
    snprintf(p->node, sizeof p->node, "%s", w->node);
    p->time = unix_now();
    p->idle = s->idle;
    p->waited = s->waited;
    p->step = s->step;
    p->in_save = s->in_save > 0;
    p->blocked = s->blocked;
    p->group = s->op.group;
    p->op = s->op.op;
    p->seq = s->op.seq;
    p->peer = s->blocked ? s->op.peer : -1;
    for (int g = 0; g < HPT_FLIGHT_GROUPS; g++) {
        p->posted[g] = s->posted[g];
        p->completed[g] = s->completed[g];
        p->color[g] = w->c->group_color[g];
    }
}

/* ------------------------------------------------------------ the dump */

static void dump_op(FILE *f, const hpt_flight_rec *r, double mono2unix)
{
    fprintf(f, "{\"id\":%lld,\"group\":\"%s\",\"op\":\"%s\",\"seq\":%lld,\"bytes\":%lld,"
               "\"peer\":%d,\"start\":%.6f,\"end\":",
            (long long)r->id, hpt_flight_group_name(r->group), hpt_flight_op_name(r->op),
            (long long)r->seq, (long long)r->bytes, r->peer, r->t_start + mono2unix);
    if (r->t_end > 0)
        fprintf(f, "%.6f,\"state\":\"completed\"}", r->t_end + mono2unix);
    else
        fprintf(f, "null,\"state\":\"posted\"}");
}

/* RUN_DIR/hang/rank-NNNNN.json: this rank's state, what it waits for, the
 * suspects and its flight recorder (oldest first). Returns 0, or the errno
 * of the failure (no file left then). */
static int write_dump(hpt_watchdog *w, const rank_state *s, const hpt_hang_analysis *a, const char *reason)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/rank-%05d.json", w->dir, w->c->world_rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return errno;
    const hpt_comm *c = w->c;
    double mono2unix = unix_now() - hpt_flight_now();
    fprintf(f, "{\"format\":\"hpt-hang\",\"version\":1,\"rank\":%d,\"size\":%d,\"host\":\"%s\","
               "\"node\":\"%s\",\"pid\":%ld,\"time\":%.3f,\"timeout\":%.9g,\"step\":%lld,"
               "\"in_step\":%d,\"idle_seconds\":%.6f,\"reason\":\"%s\",\"layout\":{\"tp\":%d,"
               "\"pp\":%d,\"dp\":%d},\n\"waiting\":",
            c->world_rank, c->world_size, w->host, w->node, w->pid, unix_now(), timeout_s(w),
            (long long)s->step, s->in_step, s->idle, reason, c->tp, c->pp, c->dp);
    if (s->blocked) {
        fprintf(f, "{\"group\":\"%s\",\"op\":\"%s\",\"seq\":%lld,\"peer\":%d,\"seconds\":%.6f,"
                   "\"members\":[",
                hpt_flight_group_name(s->op.group), hpt_flight_op_name(s->op.op),
                (long long)s->op.seq, s->op.peer, s->waited);
        int g = s->op.group;
        for (int i = 0; c->group_world[g] && i < c->group_size[g]; i++)
            fprintf(f, "%s%d", i ? "," : "", c->group_world[g][i]);
        fprintf(f, "]}");
    } else {
        fprintf(f, "null");
    }
    fprintf(f, ",\n\"posted\":{");
    for (int g = 0; g < HPT_FLIGHT_GROUPS; g++)
        fprintf(f, "%s\"%s\":%lld", g ? "," : "", hpt_flight_group_name(g),
                (long long)s->posted[g]);
    fprintf(f, "},\"completed\":{");
    for (int g = 0; g < HPT_FLIGHT_GROUPS; g++)
        fprintf(f, "%s\"%s\":%lld", g ? "," : "", hpt_flight_group_name(g),
                (long long)s->completed[g]);
    fprintf(f, "},\n\"deadlock\":%d,\"ambiguous\":%d,\"suspects\":[", a ? a->deadlock : 0,
            a ? a->ambiguous : 0);
    for (int x = 0, k = 0; a && x < a->n; x++)
        if (a->suspect && a->suspect[x]) {
            char why[WHY_MAX + 44];
            json_safe(why, sizeof why, a->why && a->why[x] ? a->why[x] : "");
            fprintf(f, "%s{\"rank\":%d,\"host\":\"%s\",\"node\":\"%s\",\"why\":\"%s\"}",
                    k++ ? "," : "", x, a->hb[x].ok ? a->hb[x].host : "?",
                    a->hb[x].ok ? a->hb[x].node : "?", why);
        }
    fprintf(f, "],\n\"ops\":[\n");
    size_t k = hpt_flight_snapshot(w->fr, w->ring);
    for (size_t i = 0; i < k; i++) {
        dump_op(f, &w->ring[i], mono2unix);
        fprintf(f, "%s\n", i + 1 < k ? "," : "");
    }
    fprintf(f, "]}\n");
    int bad = ferror(f) ? (errno ? errno : EIO) : 0;
    if (fclose(f) != 0 && !bad)
        bad = errno ? errno : EIO;
    if (!bad && hpt_file_commit(tmp, path) != HPT_OK) /* fsync, rename, fsync dir */
        bad = errno ? errno : EIO;
    if (bad)
        unlink(tmp);
    return bad;
}

/* ------------------------------------------------------------ the hang */

/* The one-line message (without the "hpt-train: " prefix). */
static void hang_line(const hpt_watchdog *w, const rank_state *s, const hpt_hang_analysis *a,
                      const char *reason, char *buf, size_t n)
{
    const hpt_comm *c = w->c;
    int k = snprintf(buf, n, "hang: rank %d (%s) %s", c->world_rank, w->node, reason);
    if (a && a->nsuspects) {
        k += snprintf(buf + k, n - k, "; %s:",
                      a->deadlock ? "deadlock among (ambiguous: no node excluded)"
                      : a->ambiguous ? "no rank known to be behind (ambiguous: no node "
                                       "excluded); candidates"
                                     : "suspect");
        for (int x = 0, shown = 0; x < a->n && k < (int)n; x++)
            if (a->suspect[x] && shown++ < MAX_SHOWN)
                k += snprintf(buf + k, n - k, "%s rank %d on %s (%s)", shown > 1 ? "," : "", x,
                              a->hb[x].ok ? a->hb[x].node : "?",
                              a->why[x] ? a->why[x] : "?");
        if (a->nsuspects > MAX_SHOWN && k < (int)n)
            k += snprintf(buf + k, n - k, " and %d more", a->nsuspects - MAX_SHOWN);
    } else if (!w->dir[0] && k < (int)n) {
        k += snprintf(buf + k, n - k, "; no --run-dir: the other ranks' state is unknown");
    }
    if (k < (int)n)
        snprintf(buf + k, n - k, "; %s%s%saborting the job (exit status %d)",
                 w->dir[0] ? "flight recorders in " : "", w->dir, w->dir[0] ? "; " : "",
                 HPT_EXIT_HANG);
    (void)s;
}

/* Count the rank-*.json dumps in the hang directory. */
static int count_dumps(const char *dir)
{
    DIR *d = opendir(dir);
    int k = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, "rank-", 5) && strstr(e->d_name, ".json") &&
            !strstr(e->d_name, ".tmp"))
            k++;
    closedir(d);
    return k;
}

/* Dump, name the suspects, print (first rank only), give the other ranks a
 * bounded moment to dump, and end the job. Never returns. */
static void on_hang(hpt_watchdog *w, const rank_state *s, const char *reason)
{
    const hpt_comm *c = w->c;
    hpt_hang_analysis a = {.n = c->world_size};
    char line[2048];
    double T = timeout_s(w), every = T / 4 < 0.5 ? 0.5 : T / 4 > 5 ? 5 : T / 4;
    int first = 1, err = 0;    /* err: the first file that could not be written */
    char bad[4200] = "";
    if (w->dir[0]) {
        if (mkdir(w->dir, 0777) == 0) /* deleted mid-run: re-created */
            fprintf(stderr, "hpt-train: warning: rank %d: %s was deleted during the run; "
                    "re-created for the hang files\n", c->world_rank, w->dir);
        heartbeat(w, s, every, 1);
        if ((a.hb = calloc((size_t)a.n, sizeof *a.hb))) {
            for (int x = 0; x < a.n; x++)
                if (x == c->world_rank)
                    own_hb(w, s, &a.hb[x]);
                else
                    read_hb(w->dir, x, &a.hb[x]);
            a.now = unix_now();
            a.tp = c->tp, a.pp = c->pp, a.dp = c->dp;
            a.current = 2 * every + 1; /* a changed state is rewritten within every + a poll */
            hpt_hang_analyse(&a, c->world_rank, 6 * every + 10);
        }
        if ((err = write_dump(w, s, a.hb ? &a : NULL, reason)))
            snprintf(bad, sizeof bad, "%s/rank-%05d.json", w->dir, c->world_rank);
        char path[4200];
        snprintf(path, sizeof path, "%s/summary.txt", w->dir);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        first = fd >= 0 || errno != EEXIST; /* another rank's summary: it prints */
        if (fd < 0 && first && !err) {
            err = errno;
            snprintf(bad, sizeof bad, "%s", path);
        }
        hang_line(w, s, a.hb ? &a : NULL, reason, line, sizeof line);
        if (fd >= 0) {
            char text[2600];
            /* the launcher excludes the nodes of this line: none when ambiguous */
            int len = snprintf(text, sizeof text, "%s\nsuspects:", line);
            for (int x = 0; a.suspect && !a.ambiguous && x < a.n && len < (int)sizeof text; x++)
                if (a.suspect[x])
                    len += snprintf(text + len, sizeof text - len, " %d@%s", x,
                                    a.hb[x].ok ? a.hb[x].node : "?");
            if (len < (int)sizeof text)
                len += snprintf(text + len, sizeof text - len, "\n");
            int e = write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : errno ? errno : EIO;
            if (close(fd) && !e)
                e = errno;
            if (e) { /* no empty or half summary for the launcher and the next run */
                unlink(path);
                if (!err) {
                    err = e;
                    snprintf(bad, sizeof bad, "%s", path);
                }
            }
        }
    } else {
        hang_line(w, s, NULL, reason, line, sizeof line);
    }
    if (first)
        fprintf(stderr, "hpt-train: %s\n", line);
    if (err) /* the line above (or the first rank's) is then the only record */
        fprintf(stderr, "hpt-train: warning: rank %d: cannot write %s: %s (the hang files are "
                "incomplete)\n", c->world_rank, bad, strerror(err));
    fflush(stderr);
    /* the other ranks detect the hang within about one step and a poll:
     * wait (bounded) for their dumps, then end the job */
    double until = hpt_flight_now() + (T < 10 ? T : 10);
    while (w->dir[0] && hpt_flight_now() < until && count_dumps(w->dir) < c->world_size)
        nanosleep(&(struct timespec){0, 200000000}, NULL);
    if (!w->dir[0])
        nanosleep(&(struct timespec){1, 0}, NULL);
    hpt_hang_analysis_free(&a);
    alarm(15);
    if (w->abort_fn)
        w->abort_fn(w->abort_ctx); /* should MPI_Abort not return control to the system: SIGALRM kills */
    MPI_Abort(MPI_COMM_WORLD, HPT_EXIT_HANG);
    _exit(HPT_EXIT_HANG);
}

/* One check: returns the reason when the timeout is exceeded, else NULL. */
static const char *check(const hpt_watchdog *w, const rank_state *s, char *buf, size_t n)
{
    double T = timeout_s(w);
    if (!(T > 0))
        return NULL;
    if (s->blocked && s->waited > T) {
        char peer[48] = "";
        if (s->op.peer >= 0)
            snprintf(peer, sizeof peer, ", peer rank %d", s->op.peer);
        snprintf(buf, n, "waited %.*f s (--collective-timeout %g s) in %s on group %s "
                 "(seq %lld%s) at step %lld", secs_prec(s->waited), s->waited, T,
                 hpt_flight_op_name(s->op.op),
                 hpt_flight_group_name(s->op.group), (long long)s->op.seq, peer,
                 (long long)s->step);
        return buf;
    }
    if (!s->blocked && s->in_save > T && w->dir[0] && w->c->world_size > 1) {
        /* a save waits inside HDF5's MPI-IO collectives, which are not
         * recorded: a slow disk is no hang as long as every heartbeat is
         * fresh (the watchdogs keep writing them); the next rank's being
         * older than the stale limit is. Each rank reads only its
         * successor's (a rank frozen after a frozen one is found by the
         * rank before it), one small read per poll */
        double every = T / 4 < 0.5 ? 0.5 : T / 4 > 5 ? 5 : T / 4, stale = 6 * every + 10;
        int y = (w->c->world_rank + 1) % w->c->world_size;
        hpt_hang_hb q;
        read_hb(w->dir, y, &q);
        if (q.ok && unix_now() - q.time > stale) {
            snprintf(buf, n, "has been inside a checkpoint save for %.*f s (--collective-timeout "
                     "%g s) after step %lld, and rank %d's heartbeat is %.1f s old (stale "
                     "limit %.1f s)",
                     secs_prec(s->in_save), s->in_save, T, (long long)s->step, y,
                     unix_now() - q.time, stale);
            return buf;
        }
    }
    if (!s->blocked && s->in_step && s->idle > T) {
        snprintf(buf, n, "made no progress for %.*f s (--collective-timeout %g s) outside "
                 "communication at step %lld", secs_prec(s->idle), s->idle, T,
                 (long long)s->step);
        return buf;
    }
    return NULL;
}

static void *thread_main(void *arg)
{
    hpt_watchdog *w = arg;
    char reason[512];
    rank_state s0;
    read_state(w, &s0);
    heartbeat(w, &s0, 0, 1); /* at once: a rank frozen before its first poll is still placed */
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        double T = timeout_s(w);
        double poll = T / 10 < 0.1 ? 0.1 : T / 10 > 1 ? 1 : T / 10;
        double every = T / 4 < 0.5 ? 0.5 : T / 4 > 5 ? 5 : T / 4;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long ns = until.tv_nsec + (long)(poll * 1e9);
        until.tv_sec += ns / 1000000000;
        until.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&w->cv, &w->mu, &until);
        if (w->stop)
            break;
        pthread_mutex_unlock(&w->mu);
        rank_state s;
        read_state(w, &s);
        heartbeat(w, &s, every, 0);
        const char *why = check(w, &s, reason, sizeof reason);
        if (why)
            on_hang(w, &s, why);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* ------------------------------------------------------------ start/stop */

hpt_status hpt_watchdog_start(hpt_watchdog **wp, const hpt_comm *c, const char *run_dir,
                              double timeout)
{
    *wp = NULL;
    if (timeout == 0 || !c->fr)
        return HPT_OK;
    hpt_watchdog *w = calloc(1, sizeof *w);
    if (!w || !(w->ring = malloc(sizeof *w->ring * c->fr->n))) {
        free(w);
        return hpt_error_set(HPT_ERR_INTERNAL, "hang watchdog: out of memory");
    }
    w->c = c;
    w->fr = c->fr;
    w->fixed = timeout;
    atomic_store(&w->timeout_ns, (int64_t)((timeout > 0 ? timeout : HPT_HANG_FLOOR_S) * 1e9));
    if (run_dir)
        snprintf(w->dir, sizeof w->dir, "%s/hang", run_dir);
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    json_safe(w->host, sizeof w->host, host);
    const char *node = getenv("SLURMD_NODENAME");
    /* under mpiexec inside an allocation every rank inherits the batch
     * shell's SLURMD_NODENAME: only srun's (SLURM_STEP_ID set) is per node */
    json_safe(w->node, sizeof w->node, node && getenv("SLURM_STEP_ID") ? node : w->host);
    w->pid = (long)getpid();
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    /* the thread takes no signal: stop signals reach the training thread */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int e = pthread_create(&w->th, NULL, thread_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) {
        free(w->ring);
        free(w);
        return hpt_error_set(HPT_ERR_INTERNAL, "hang watchdog: cannot start a thread: %s",
                             strerror(e));
    }
    *wp = w;
    return HPT_OK;
}

void hpt_watchdog_on_abort(hpt_watchdog *w, void (*fn)(void *ctx), void *ctx)
{
    if (!w)
        return;
    w->abort_ctx = ctx; /* before the thread can see fn */
    atomic_thread_fence(memory_order_release);
    w->abort_fn = fn;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void hpt_watchdog_step(hpt_watchdog *w, double seconds)
{
    if (!w || w->fixed > 0)
        return;
    w->steps[w->nsteps++ % NMEDIAN] = seconds;
    int n = w->nsteps < NMEDIAN ? w->nsteps : NMEDIAN;
    double v[NMEDIAN];
    memcpy(v, w->steps, sizeof(double) * n);
    qsort(v, n, sizeof v[0], cmp_double);
    double t = 10 * v[n / 2];
    atomic_store(&w->timeout_ns, (int64_t)((t > HPT_HANG_FLOOR_S ? t : HPT_HANG_FLOOR_S) * 1e9));
}

void hpt_watchdog_stop(hpt_watchdog *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    if (w->dir[0]) { /* a clean end: no heartbeat left to mislead a later analysis */
        char path[4200];
        snprintf(path, sizeof path, "%s/hb-%05d.json", w->dir, w->c->world_rank);
        unlink(path);
        /* every rank tries, after its own unlink: the last one out removes
         * the directory prepare made (rank 0 alone raced the others) */
        rmdir(w->dir);
    }
    free(w->ring);
    free(w);
}

/* ------------------------------------------------------------ the report */

static int has_dumps(const char *dir) { return count_dumps(dir) > 0; }

/* The hang directory for `dir`: DIR/hang, the newest DIR/hang.N, or DIR. */
static int find_hang_dir(const char *dir, char *out, size_t n)
{
    snprintf(out, n, "%s/hang", dir);
    if (has_dumps(out))
        return 1;
    int best = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char *end;
        if (strncmp(e->d_name, "hang.", 5))
            continue;
        long v = strtol(e->d_name + 5, &end, 10);
        if (!*end && v > best) {
            char p[4200];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            if (has_dumps(p))
                best = (int)v;
        }
    }
    if (d)
        closedir(d);
    if (best) {
        snprintf(out, n, "%s/hang.%d", dir, best);
        return 1;
    }
    snprintf(out, n, "%s", dir);
    return has_dumps(out);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *js(json_object *o, const char *k)
{
    json_object *v;
    return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v) : "?";
}

/* Does the key `k` of o, when present, have a type report_rank reads
 * safely: an array of objects (elem_obj) or of anything, or an object or
 * null? Writes the rule broken to why (empty when fine). */
static void check_field(json_object *o, const char *name, const char *k, int want_array,
                        int elem_obj, char *why, size_t n)
{
    json_object *v;
    if (why[0] || !json_object_object_get_ex(o, k, &v))
        return;
    if (!want_array) {
        if (v && !json_object_is_type(v, json_type_object))
            snprintf(why, n, "%s is not an object or null", name);
        return;
    }
    if (!json_object_is_type(v, json_type_array)) {
        snprintf(why, n, "%s is not an array", name);
        return;
    }
    for (size_t i = 0; elem_obj && i < json_object_array_length(v); i++)
        if (!json_object_is_type(json_object_array_get_idx(v, i), json_type_object)) {
            snprintf(why, n, "%s[%zu] is not an object", name, i);
            return;
        }
}

/* Why a parsed hpt-hang dump o cannot be reported (a field of the wrong
 * JSON type: "waiting" not an object or null, its "members", "suspects" or
 * "ops" not an array, an element of the last two not an object), written
 * to why; empty when report_rank can read it. */
static void dump_damage(json_object *o, char *why, size_t n)
{
    json_object *wt;
    why[0] = 0;
    check_field(o, "waiting", "waiting", 0, 0, why, n);
    if (!why[0] && json_object_object_get_ex(o, "waiting", &wt) && wt)
        check_field(wt, "waiting.members", "members", 1, 0, why, n);
    check_field(o, "suspects", "suspects", 1, 1, why, n);
    check_field(o, "ops", "ops", 1, 1, why, n);
}

/* One rank's part of the report; o has passed dump_damage. */
static void report_rank(json_object *o, FILE *out)
{
    json_object *wt, *v;
    fprintf(out, "rank %lld (%s, pid %lld): ", (long long)jint(o, "rank", -1), js(o, "node"),
            (long long)jint(o, "pid", 0));
    if (json_object_object_get_ex(o, "waiting", &wt) && json_object_is_type(wt, json_type_object)) {
        fprintf(out, "waiting %.*f s in %s on group %s (seq %lld", secs_prec(jnum(wt, "seconds")),
                jnum(wt, "seconds"), js(wt, "op"), js(wt, "group"), (long long)jint(wt, "seq", 0));
        if (jint(wt, "peer", -1) >= 0)
            fprintf(out, ", peer rank %lld", (long long)jint(wt, "peer", -1));
        fprintf(out, ") at step %lld; group members:", (long long)jint(o, "step", 0));
        if (json_object_object_get_ex(wt, "members", &v))
            for (size_t i = 0; i < json_object_array_length(v); i++)
                fprintf(out, " %d", json_object_get_int(json_object_array_get_idx(v, i)));
        fprintf(out, "\n");
    } else {
        fprintf(out, "not in a communication call; no progress for %.*f s at step %lld%s\n",
                secs_prec(jnum(o, "idle_seconds")), jnum(o, "idle_seconds"), (long long)jint(o, "step", 0),
                jint(o, "in_step", 0) ? "" : " (between steps)");
    }
    if (json_object_object_get_ex(o, "suspects", &v) && json_object_array_length(v)) {
        fprintf(out, "  %s:", jint(o, "deadlock", 0) ? "deadlock among (ambiguous)"
                              : jint(o, "ambiguous", 0) ? "candidates (ambiguous)" : "suspects");
        for (size_t i = 0; i < json_object_array_length(v); i++) {
            json_object *x = json_object_array_get_idx(v, i);
            fprintf(out, "%s rank %lld on %s (%s)", i ? "," : "", (long long)jint(x, "rank", -1),
                    js(x, "node"), js(x, "why"));
        }
        fprintf(out, "\n");
    }
    if (!json_object_object_get_ex(o, "ops", &v))
        return;
    size_t n = json_object_array_length(v), shown = 0;
    for (size_t i = n; i-- > 0 && shown < 3;) { /* the last completed, newest first */
        json_object *r = json_object_array_get_idx(v, i);
        if (strcmp(js(r, "state"), "completed"))
            continue;
        if (!shown)
            fprintf(out, "  last completed operations, newest first:\n");
        fprintf(out, "    %s on %s, seq %lld, %lld bytes", js(r, "op"), js(r, "group"),
                (long long)jint(r, "seq", 0), (long long)jint(r, "bytes", 0));
        if (jint(r, "peer", -1) >= 0)
            fprintf(out, ", peer rank %lld", (long long)jint(r, "peer", -1));
        fprintf(out, ", %.3f s\n", jnum(r, "end") - jnum(r, "start"));
        shown++;
    }
    if (!shown)
        fprintf(out, "  no completed operation in the recorder\n");
}

/* A note when the run directory's metrics.h5 shows the job ran again
 * after the dumps in `hang` were written (their newest mtime): the hang
 * is history, not the state of the job. Silent when there is no file, it
 * cannot be read, or no run started after the dumps. */
static void later_runs_note(const char *dir, const char *hang, FILE *out)
{
    char path[4600];
    double dumped = 0;
    DIR *d = opendir(hang);
    for (struct dirent *e; d && (e = readdir(d));) {
        struct stat sb;
        if (strncmp(e->d_name, "rank-", 5))
            continue;
        snprintf(path, sizeof path, "%s/%s", hang, e->d_name);
        if (stat(path, &sb) == 0) {
            double t = (double)sb.st_mtim.tv_sec + 1e-9 * (double)sb.st_mtim.tv_nsec;
            dumped = t > dumped ? t : dumped;
        }
    }
    if (d)
        closedir(d);
    snprintf(path, sizeof path, "%s/metrics.h5", dir);
    if (dumped <= 0 || access(path, R_OK) != 0)
        return;
    hpt_mread m;
    hpt_mread_event *ev = NULL;
    size_t nev = 0;
    if (hpt_mread_open(&m, path) == HPT_OK && hpt_mread_events(&m, &ev, &nev) == HPT_OK) {
        size_t first = nev, later = 0;
        int done = 0;
        for (size_t i = 0; i < nev; i++) {
            if (ev[i].wall_time <= dumped)
                continue;
            if (!strcmp(ev[i].kind, "run_start")) {
                first = first < nev ? first : i;
                later++;
            } else if (!strcmp(ev[i].kind, "run_end"))
                done = !strcmp(ev[i].message, "done");
        }
        if (first < nev) {
            char when[64] = "?";
            time_t t = (time_t)ev[first].wall_time;
            struct tm tm;
            if (gmtime_r(&t, &tm))
                strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
            fprintf(out, "  note: this hang is from an earlier run: %s shows %zu run%s started after "
                    "these dumps were written (the first at %s, from step %lld)%s\n", path, later,
                    later == 1 ? "" : "s", when, (long long)ev[first].step,
                    done ? ", and the last one finished" : "");
        }
    }
    free(ev);
    hpt_mread_close(&m);
}

hpt_status hpt_hang_report(const char *dir, FILE *out)
{
    char hang[4200], path[4400];
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return hpt_error_set(HPT_ERR_IO, "%s: no such directory", dir);
    if (!find_hang_dir(dir, hang, sizeof hang))
        return hpt_error_set(HPT_ERR_IO, "%s: no hang dumps (looked for rank-*.json in %s/hang, "
                             "%s/hang.N and %s)", dir, dir, dir, dir);
    fprintf(out, "hang dumps in %s\n", hang);
    later_runs_note(dir, hang, out);
    snprintf(path, sizeof path, "%s/summary.txt", hang);
    FILE *f = fopen(path, "r");
    if (f) {
        char line[4096];
        while (fgets(line, sizeof line, f))
            fprintf(out, "  %s", line);
        fclose(f);
    }
    DIR *d = opendir(hang);
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "rank-", 5) || len < 5 || strcmp(e->d_name + len - 5, ".json"))
            continue;
        if (n == cap) {
            char **p = realloc(names, sizeof *names * (cap = cap ? 2 * cap : 64));
            if (!p)
                break;
            names = p;
        }
        names[n++] = strdup(e->d_name);
    }
    if (d)
        closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    hpt_status st = HPT_OK;
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", hang, names[i]);
        json_object *o = names[i] ? json_object_from_file(path) : NULL;
        if (!o || !json_object_is_type(o, json_type_object) || strcmp(js(o, "format"), "hpt-hang")) {
            if (!st)
                st = hpt_error_set(HPT_ERR_DATA, "%s: not an hpt hang dump (format \"hpt-hang\")",
                                   path);
        } else {
            char why[128];
            dump_damage(o, why, sizeof why);
            if (!why[0])
                report_rank(o, out);
            else if (!st)
                st = hpt_error_set(HPT_ERR_DATA, "%s: damaged dump (%s)", path, why);
        }
        json_object_put(o);
        free(names[i]);
    }
    free(names);
    return st;
}
