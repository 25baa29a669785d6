/* bench/flight_ops.c — cost of recording one operation in the flight
 * recorder (lib/flight.c): post + block + done, as lib/comm.c does around
 * every blocking call, timed over N operations; then again while a reader
 * thread snapshots the whole ring every millisecond (the watchdog reads
 * far less often). Build and run: bench/flight.sh, or
 *   cc -O2 -pthread -Ilib bench/flight_ops.c lib/flight.c -o /tmp/flight_ops */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "flight.h"

static volatile int stop;

static void *reader(void *arg)
{
    hpt_flight *f = arg;
    hpt_flight_rec *buf = malloc(sizeof *buf * f->n);
    size_t total = 0;
    while (!stop) {
        total += hpt_flight_snapshot(f, buf);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    free(buf);
    return (void *)total;
}

static double run(hpt_flight *f, long n)
{
    double t0 = hpt_flight_now();
    for (long i = 0; i < n; i++) {
        int64_t id = hpt_flight_post_blocking(f, (int)(i % 3), HPT_FLIGHT_ALLREDUCE, 4096, -1);
        hpt_flight_done(f, id, (int)(i % 3));
    }
    return (hpt_flight_now() - t0) / (double)n * 1e9;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000000;
    hpt_flight *f = hpt_flight_new(HPT_FLIGHT_DEFAULT);
    run(f, n / 10); /* warm-up */
    double alone = run(f, n);
    pthread_t th;
    pthread_create(&th, NULL, reader, f);
    double read = run(f, n);
    stop = 1;
    pthread_join(th, NULL);
    printf("flight recorder: %.1f ns per recorded operation (post_blocking + done, two clock reads), %.1f ns with a "
           "reader snapshotting the ring every 1 ms; %ld operations, ring %d\n",
           alone, read, n, HPT_FLIGHT_DEFAULT);
    hpt_flight_free(f);
    return 0;
}
