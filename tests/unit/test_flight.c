/* test_flight.c — the flight recorder (lib/flight.c): ring order and
 * eviction, per-group sequence numbers, completion of an evicted
 * operation, blocked state, and consistent records under a concurrent
 * reader (seqlock). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "../helpers/expect.h"
#include "flight.h"

/* A ring of 8: 20 operations on alternating groups keep the last 8, oldest
 * first, with per-group sequence numbers. */
static void test_ring(void)
{
    hpt_flight *f = hpt_flight_new(8);
    hpt_flight_rec r[8];
    EXPECT(f != NULL, "hpt_flight_new(8)");
    for (int i = 0; i < 20; i++) {
        int64_t id = hpt_flight_post_blocking(f, i % 2, HPT_FLIGHT_ALLREDUCE, 4 * i, -1);
        EXPECT(id == i, "id %lld, want %d", (long long)id, i);
        EXPECT(atomic_load(&f->blocked) == id, "blocked %lld", (long long)atomic_load(&f->blocked));
        if (i != 19) /* the last stays posted */
            hpt_flight_done(f, id, i % 2);
    }
    size_t k = hpt_flight_snapshot(f, r);
    EXPECT(k == 8, "snapshot of %zu records, want 8", k);
    for (size_t j = 0; j < k; j++) {
        int64_t id = 12 + (int64_t)j;
        EXPECT(r[j].id == id, "record %zu: id %lld, want %lld", j, (long long)r[j].id,
               (long long)id);
        EXPECT(r[j].seq == id / 2 + 1, "id %lld: seq %lld, want %lld", (long long)id,
               (long long)r[j].seq, (long long)(id / 2 + 1));
        EXPECT(r[j].group == id % 2 && r[j].bytes == 4 * id, "id %lld: group %d bytes %lld",
               (long long)id, r[j].group, (long long)r[j].bytes);
        EXPECT((r[j].t_end > 0) == (id != 19), "id %lld: t_end %g", (long long)id, r[j].t_end);
    }
    EXPECT(atomic_load(&f->posted[0]) == 10 && atomic_load(&f->posted[1]) == 10, "posted %lld %lld",
           (long long)atomic_load(&f->posted[0]), (long long)atomic_load(&f->posted[1]));
    EXPECT(atomic_load(&f->completed[1]) == 9, "completed[1] %lld",
           (long long)atomic_load(&f->completed[1]));
    hpt_flight_rec one;
    EXPECT(!hpt_flight_get(f, 3, &one), "id 3 was evicted but is still returned");
    EXPECT(!hpt_flight_get(f, 20, &one), "id 20 was never posted but is returned");
    /* completing an evicted nonblocking operation leaves the ring alone */
    int64_t a = hpt_flight_post(f, 2, HPT_FLIGHT_IALLREDUCE, 8, -1);
    for (int i = 0; i < 8; i++)
        hpt_flight_post(f, 0, HPT_FLIGHT_ISEND, 1, 3);
    hpt_flight_block(f, a);
    hpt_flight_done(f, a, 2);
    EXPECT(atomic_load(&f->blocked) == -1, "still blocked after done");
    EXPECT(atomic_load(&f->completed[2]) == 1, "completed[2] %lld",
           (long long)atomic_load(&f->completed[2]));
    k = hpt_flight_snapshot(f, r);
    for (size_t j = 0; j < k; j++)
        EXPECT(r[j].op == HPT_FLIGHT_ISEND && r[j].t_end == 0 && r[j].peer == 3,
               "record %zu overwritten by an evicted completion", j);
    hpt_flight_free(f);
}

static atomic_int stop;
static atomic_long torn;

/* Reader: every record must be internally consistent (bytes == 8 x id,
 * seq == id + 1), never half-written. */
/* The capture (the step timeline): ops posted after hpt_flight_capture
 * are copied in order, their completion time set; those beyond the buffer
 * are counted by _take, not written; _take restarts at buf[0]; an op
 * posted before the capture and completed during it is not written. */
static void test_capture(void)
{
    hpt_flight *f = hpt_flight_new(4);
    hpt_flight_rec buf[3] = {{0}};
    int64_t before = hpt_flight_post(f, 1, HPT_FLIGHT_IALLREDUCE, 8, -1);
    hpt_flight_capture(f, buf, 3);
    int64_t ids[5];
    for (int i = 0; i < 5; i++)
        ids[i] = hpt_flight_post(f, i % 2, HPT_FLIGHT_ALLREDUCE, 100 + i, -1);
    hpt_flight_done(f, before, 1);
    for (int i = 0; i < 4; i++) /* the last one stays posted */
        hpt_flight_done(f, ids[i], i % 2);
    for (int i = 0; i < 3; i++)
        EXPECT(buf[i].id == ids[i] && buf[i].bytes == 100 + i && buf[i].t_end >= buf[i].t_start &&
               buf[i].t_end > 0, "captured %d: id %lld bytes %lld t_end %g", i,
               (long long)buf[i].id, (long long)buf[i].bytes, buf[i].t_end);
    EXPECT(hpt_flight_capture_take(f) == 5, "take: not the 5 ops posted");
    int64_t next = hpt_flight_post(f, 2, HPT_FLIGHT_ISEND, 7, 1);
    EXPECT(buf[0].id == next && buf[0].peer == 1 && buf[0].t_end == 0, "after take: buf[0] id %lld",
           (long long)buf[0].id);
    EXPECT(hpt_flight_capture_take(f) == 1, "second take: not 1 op");
    hpt_flight_capture(f, NULL, 0);
    hpt_flight_post(f, 2, HPT_FLIGHT_ISEND, 9, 1);
    EXPECT(buf[0].id == next, "stopped capture still writes");
    hpt_flight_free(f);
}

static void *reader(void *arg)
{
    hpt_flight *f = arg;
    hpt_flight_rec *r = malloc(sizeof *r * f->n);
    while (!atomic_load(&stop)) {
        size_t k = hpt_flight_snapshot(f, r);
        for (size_t j = 0; j < k; j++)
            if (r[j].bytes != 8 * r[j].id || r[j].seq != r[j].id + 1 ||
                (j && r[j].id <= r[j - 1].id))
                atomic_fetch_add(&torn, 1);
    }
    free(r);
    return NULL;
}

static void test_concurrent(void)
{
    hpt_flight *f = hpt_flight_new(16);
    pthread_t th;
    pthread_create(&th, NULL, reader, f);
    for (int64_t i = 0; i < 2000000; i++)
        hpt_flight_done(f, hpt_flight_post_blocking(f, 1, HPT_FLIGHT_RECV, 8 * i, 0), 1);
    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    EXPECT(atomic_load(&torn) == 0, "%ld inconsistent records seen by the reader",
           (long)atomic_load(&torn));
    hpt_flight_free(f);
}

int main(void)
{
    test_ring();
    test_capture();
    test_concurrent();
    EXPECT(hpt_flight_new(0) == NULL, "a ring of 0 slots");
    if (failures)
        fprintf(stderr, "test_flight: %d failures\n", failures);
    else
        printf("test_flight: all passed\n");
    return failures != 0;
}
