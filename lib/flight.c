/* flight.c — the collective flight recorder; see flight.h. */
#include "flight.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const op_names[HPT_FLIGHT_OP_COUNT] = {
    "allreduce", "iallreduce", "allgather", "allgatherv",
    "reduce_scatter", "broadcast", "isend", "recv", "gather",
    "barrier"};
static const char *const group_names[HPT_FLIGHT_GROUPS] = {"world", "tp", "dp", "pp", "mp",
                                                           "embed", "dp-shard", "dp-replica", "cp"};

const char *hpt_flight_op_name(int op)
{
    return op >= 0 && op < HPT_FLIGHT_OP_COUNT ? op_names[op] : "?";
}

const char *hpt_flight_group_name(int group)
{
    return group >= 0 && group < HPT_FLIGHT_GROUPS ? group_names[group] : "?";
}

int64_t hpt_flight_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double hpt_flight_now(void) { return 1e-9 * (double)hpt_flight_now_ns(); }

/* HPT_FLIGHT_RECORDER as a slot count: -1 when set but not 0..2^20. */
static long env_slots(void)
{
    const char *s = getenv("HPT_FLIGHT_RECORDER");
    if (!s || !*s)
        return HPT_FLIGHT_DEFAULT;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return *end || errno || v < 0 || v > HPT_FLIGHT_MAX ? -1 : v;
}

size_t hpt_flight_size_from_env(void)
{
    long v = env_slots();
    return v < 0 ? HPT_FLIGHT_DEFAULT : (size_t)v;
}

hpt_status hpt_flight_check_env(void)
{
    if (env_slots() >= 0)
        return HPT_OK;
    return hpt_error_set(HPT_ERR_USAGE, "HPT_FLIGHT_RECORDER=%s: expected the number of "
                         "operations the flight recorder keeps, 0 (off) to %d",
                         getenv("HPT_FLIGHT_RECORDER"), HPT_FLIGHT_MAX);
}

hpt_flight *hpt_flight_new(size_t n)
{
    hpt_flight *f = calloc(1, sizeof *f);
    if (!f || !n || !(f->slots = calloc(n, sizeof *f->slots))) {
        free(f);
        return NULL;
    }
    f->n = n;
    atomic_store(&f->blocked, -1);
    atomic_store(&f->progress_ns, hpt_flight_now_ns());
    return f;
}

void hpt_flight_free(hpt_flight *f)
{
    if (f)
        free(f->slots);
    free(f);
}

/* Seqlock write of slot s (single writer). */
static void slot_write(hpt_flight_slot *s, const hpt_flight_rec *r)
{
    uint32_t v = atomic_load_explicit(&s->ver, memory_order_relaxed);
    atomic_store_explicit(&s->ver, v + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    s->rec = *r;
    atomic_store_explicit(&s->ver, v + 2, memory_order_release);
}

/* Seqlock read; 0 if the writer kept it busy for too long (never in
 * practice: a write is a few stores). */
static int slot_read(const hpt_flight_slot *s, hpt_flight_rec *r)
{
    for (int tries = 0; tries < 1000; tries++) {
        uint32_t v1 = atomic_load_explicit(&s->ver, memory_order_acquire);
        if (v1 & 1)
            continue;
        memcpy(r, (const void *)&s->rec, sizeof *r);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&s->ver, memory_order_relaxed) == v1)
            return 1;
    }
    return 0;
}

/* Post at time `now` (ns). */
static int64_t post_at(hpt_flight *f, int group, int op, int64_t bytes, int peer, int64_t now)
{
    int64_t id = atomic_load_explicit(&f->nops, memory_order_relaxed);
    int64_t seq = atomic_load_explicit(&f->posted[group], memory_order_relaxed) + 1;
    hpt_flight_rec r = {.id = id, .seq = seq, .bytes = bytes, .t_start = 1e-9 * (double)now,
                        .group = group, .op = op, .peer = peer};
    slot_write(&f->slots[(size_t)id % f->n], &r);
    if (f->cap && id - f->cap_first < (int64_t)f->cap_n)
        f->cap[id - f->cap_first] = r;
    atomic_store_explicit(&f->posted[group], seq, memory_order_relaxed);
    atomic_store_explicit(&f->progress_ns, now, memory_order_relaxed);
    atomic_store_explicit(&f->nops, id + 1, memory_order_release);
    return id;
}

int64_t hpt_flight_post(hpt_flight *f, int group, int op, int64_t bytes, int peer)
{
    return post_at(f, group, op, bytes, peer, hpt_flight_now_ns());
}

int64_t hpt_flight_post_blocking(hpt_flight *f, int group, int op, int64_t bytes, int peer)
{
    int64_t now = hpt_flight_now_ns(), id = post_at(f, group, op, bytes, peer, now);
    atomic_store_explicit(&f->blocked_ns, now, memory_order_relaxed);
    atomic_store_explicit(&f->blocked, id, memory_order_release);
    return id;
}

void hpt_flight_block(hpt_flight *f, int64_t id)
{
    atomic_store_explicit(&f->blocked_ns, hpt_flight_now_ns(), memory_order_relaxed);
    atomic_store_explicit(&f->blocked, id, memory_order_release);
}

void hpt_flight_done(hpt_flight *f, int64_t id, int group)
{
    int64_t now = hpt_flight_now_ns();
    hpt_flight_slot *s = &f->slots[(size_t)id % f->n];
    if (s->rec.id == id) { /* the writer's own slot: no race with itself */
        hpt_flight_rec r = s->rec;
        r.t_end = 1e-9 * (double)now;
        slot_write(s, &r);
    }
    if (f->cap && id >= f->cap_first && id - f->cap_first < (int64_t)f->cap_n)
        f->cap[id - f->cap_first].t_end = 1e-9 * (double)now;
    atomic_store_explicit(&f->completed[group],
                          atomic_load_explicit(&f->completed[group], memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&f->blocked, -1, memory_order_release);
    atomic_store_explicit(&f->progress_ns, now, memory_order_relaxed);
}

void hpt_flight_capture(hpt_flight *f, hpt_flight_rec *buf, size_t n)
{
    f->cap = buf;
    f->cap_n = buf ? n : 0;
    f->cap_first = atomic_load_explicit(&f->nops, memory_order_relaxed);
}

int64_t hpt_flight_capture_take(hpt_flight *f)
{
    int64_t n = atomic_load_explicit(&f->nops, memory_order_relaxed), posted = n - f->cap_first;
    f->cap_first = n;
    return posted;
}

void hpt_flight_step_begin(hpt_flight *f, int64_t step)
{
    atomic_store_explicit(&f->progress_ns, hpt_flight_now_ns(), memory_order_relaxed);
    atomic_store_explicit(&f->step, step, memory_order_relaxed);
    atomic_store_explicit(&f->in_step, 1, memory_order_release);
}

void hpt_flight_step_end(hpt_flight *f)
{
    atomic_store_explicit(&f->in_step, 0, memory_order_release);
    atomic_store_explicit(&f->progress_ns, hpt_flight_now_ns(), memory_order_relaxed);
}

void hpt_flight_save_begin(hpt_flight *f)
{
    if (f)
        atomic_store_explicit(&f->save_ns, hpt_flight_now_ns(), memory_order_release);
}

void hpt_flight_save_end(hpt_flight *f)
{
    if (f)
        atomic_store_explicit(&f->save_ns, 0, memory_order_release);
}

int hpt_flight_get(const hpt_flight *f, int64_t id, hpt_flight_rec *out)
{
    if (id < 0 || id >= atomic_load_explicit(&f->nops, memory_order_acquire))
        return 0;
    return slot_read(&f->slots[(size_t)id % f->n], out) && out->id == id;
}

size_t hpt_flight_snapshot(const hpt_flight *f, hpt_flight_rec *out)
{
    int64_t n = atomic_load_explicit(&f->nops, memory_order_acquire);
    int64_t first = n > (int64_t)f->n ? n - (int64_t)f->n : 0;
    size_t k = 0;
    for (int64_t id = first; id < n; id++)
        if (hpt_flight_get(f, id, &out[k]))
            k++;
    return k;
}
