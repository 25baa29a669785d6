/* test_comm_stage.c — host staging of device buffers (lib/comm_stage.c),
 * under mpiexec (2..8 ranks), without a GPU.
 *
 * "Device memory" is emulated by a mapping that is PROT_NONE except inside
 * the staging layer's download/upload callbacks: if any MPI operation
 * touched a device buffer directly, the rank would die with SIGSEGV. Every
 * operation of the communication table is run twice on the same inputs —
 * staged on emulated device buffers and unstaged on host buffers — and the
 * results must be equal bit for bit; host buffers given to the staged table
 * must pass straight through (no download/upload counted).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "comm.h"
#include "../helpers/expect.h"

static char *dev_lo, *dev_hi;
static size_t dev_cap, dev_used, n_down, n_up;

static int is_dev(const void *p) { return (const char *)p >= dev_lo && (const char *)p < dev_hi; }

static void open_dev(int on) { mprotect(dev_lo, dev_cap, on ? PROT_READ | PROT_WRITE : PROT_NONE); }

static void down(void *host, const void *dev, size_t bytes)
{
    open_dev(1);
    memcpy(host, dev, bytes);
    open_dev(0);
    n_down++;
}

static void up(void *dev, const void *host, size_t bytes)
{
    open_dev(1);
    memcpy(dev, host, bytes);
    open_dev(0);
    n_up++;
}

/* A device buffer holding a copy of host (n floats, or bytes with n = bytes). */
static void *dev_copy(const void *host, size_t bytes)
{
    size_t off = (dev_used + 63) & ~(size_t)63;
    HPT_CHECK(off + bytes <= dev_cap);
    dev_used = off + bytes;
    up(dev_lo + off, host, bytes);
    return dev_lo + off;
}

static int same_dev(const void *dev, const void *host, size_t bytes)
{
    open_dev(1);
    int eq = memcmp(dev, host, bytes) == 0;
    open_dev(0);
    return eq;
}

static void fill(float *x, size_t n, int rank, int salt)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 2654435761u + (unsigned)rank * 40503u + (unsigned)salt) % 1000) / 7.0f -
               50.0f;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int tp = size % 2 == 0 ? 2 : 1;
    hpt_comm c, ref;
    HPT_CHECK(hpt_comm_init(&c, MPI_COMM_WORLD, tp, 1, size / tp, NULL) == HPT_OK);
    HPT_CHECK(hpt_comm_init(&ref, MPI_COMM_WORLD, tp, 1, size / tp, NULL) == HPT_OK);

    dev_cap = (size_t)16 << 20;
    dev_lo = mmap(NULL, dev_cap, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    HPT_CHECK(dev_lo != MAP_FAILED);
    dev_hi = dev_lo + dev_cap;
    hpt_comm_stage st;
    const hpt_comm_backend *before = c.be; /* the flight recorder's table, or MPI's */
    hpt_comm_stage_on(&c, &st, is_dev, down, up);
    EXPECT(!strcmp(c.be->name, "mpi+host-staging"), "staged backend name %s", c.be->name);

    const size_t n = 1000;
    float *a = malloc(n * sizeof(float) * (size_t)size), *b = malloc(n * sizeof(float) * size);
    const hpt_group groups[] = {HPT_GROUP_WORLD, HPT_GROUP_TP, HPT_GROUP_DP};
    for (int gi = 0; gi < 3; gi++) {
        hpt_group g = groups[gi];
        int gs = c.group_size[g], gr = c.group_rank[g];

        /* all-reduce sum / max (f32) */
        fill(a, n, rank, 1 + gi);
        float *d = dev_copy(a, n * sizeof(float));
        c.be->allreduce_sum_f32(&c, g, d, n);
        ref.be->allreduce_sum_f32(&ref, g, a, n);
        EXPECT(same_dev(d, a, n * sizeof(float)), "group %d: allreduce_sum_f32 differs", g);
        fill(a, n, rank, 2 + gi);
        d = dev_copy(a, n * sizeof(float));
        c.be->allreduce_max_f32(&c, g, d, n);
        ref.be->allreduce_max_f32(&ref, g, a, n);
        EXPECT(same_dev(d, a, n * sizeof(float)), "group %d: allreduce_max_f32 differs", g);

        /* f64 on device, and on the host (passes through) */
        double x[3] = {rank + 0.25, -rank * 1.5, 1e-3 * rank}, y[3];
        memcpy(y, x, sizeof x);
        double *dd = dev_copy(x, sizeof x);
        c.be->allreduce_sum_f64(&c, g, dd, 3);
        ref.be->allreduce_sum_f64(&ref, g, y, 3);
        EXPECT(same_dev(dd, y, sizeof y), "group %d: allreduce_sum_f64 differs", g);
        memcpy(y, x, sizeof x);
        double z[3];
        memcpy(z, x, sizeof x);
        size_t d0 = n_down, u0 = n_up;
        c.be->allreduce_max_f64(&c, g, z, 3);
        ref.be->allreduce_max_f64(&ref, g, y, 3);
        EXPECT(!memcmp(z, y, sizeof y) && n_down == d0 && n_up == u0,
               "group %d: host f64 buffer not passed straight through (%zu downloads)", g,
               n_down - d0);

        /* broadcast from the last group rank */
        fill(a, n, rank, 3 + gi);
        d = dev_copy(a, n * sizeof(float));
        c.be->broadcast(&c, g, d, n * sizeof(float), gs - 1);
        ref.be->broadcast(&ref, g, a, n * sizeof(float), gs - 1);
        EXPECT(same_dev(d, a, n * sizeof(float)), "group %d: broadcast differs", g);

        /* two nonblocking all-reduces in flight at once (DP buckets) */
        fill(a, 2 * n, rank, 4 + gi);
        d = dev_copy(a, 2 * n * sizeof(float));
        hpt_comm_req r1, r2, q1, q2;
        c.be->iallreduce_sum_f32(&c, g, d, n, &r1);
        c.be->iallreduce_sum_f32(&c, g, d + n, n, &r2);
        ref.be->iallreduce_sum_f32(&ref, g, a, n, &q1);
        ref.be->iallreduce_sum_f32(&ref, g, a + n, n, &q2);
        c.be->wait(&c, &r2);
        c.be->wait(&c, &r1);
        ref.be->wait(&ref, &q1);
        ref.be->wait(&ref, &q2);
        EXPECT(same_dev(d, a, 2 * n * sizeof(float)), "group %d: iallreduce_sum_f32 differs", g);

        /* ring: isend to the next group rank, recv from the previous */
        if (gs > 1) {
            fill(a, n, rank, 5 + gi);
            d = dev_copy(a, n * sizeof(float));
            float *dr = dev_copy(b, n * sizeof(float));
            hpt_comm_req sr;
            c.be->isend_f32(&c, g, d, n, (gr + 1) % gs, 7, &sr);
            c.be->recv_f32(&c, g, dr, n, (gr + gs - 1) % gs, 7);
            c.be->wait(&c, &sr);
            float *want = b;
            hpt_comm_req qr;
            ref.be->isend_f32(&ref, g, a, n, (gr + 1) % gs, 8, &qr);
            ref.be->recv_f32(&ref, g, want, n, (gr + gs - 1) % gs, 8);
            ref.be->wait(&ref, &qr);
            EXPECT(same_dev(dr, want, n * sizeof(float)), "group %d: isend/recv ring differs", g);
        }

        /* all-gather: device send and recv; host send, device recv */
        fill(a, n, rank, 6 + gi);
        d = dev_copy(a, n * sizeof(float));
        float *dr = dev_copy(b, n * sizeof(float) * (size_t)gs);
        c.be->allgather_f32(&c, g, d, dr, n);
        ref.be->allgather_f32(&ref, g, a, b, n);
        EXPECT(same_dev(dr, b, n * sizeof(float) * gs), "group %d: allgather_f32 differs", g);
        dr = dev_copy(b, n * sizeof(float) * (size_t)gs);
        c.be->allgather_f32(&c, g, a, dr, n);
        EXPECT(same_dev(dr, b, n * sizeof(float) * gs), "group %d: allgather_f32 (host send) "
                                                         "differs", g);

        /* uneven counts: in-place all-gather, reduce-scatter */
        int counts[64];
        size_t total = 0;
        for (int i = 0; i < gs; i++)
            total += (size_t)(counts[i] = 37 + 11 * i);
        fill(a, total, rank, 9 + gi);
        d = dev_copy(a, total * sizeof(float));
        c.be->allgather_inplace_f32(&c, g, d, counts);
        ref.be->allgather_inplace_f32(&ref, g, a, counts);
        EXPECT(same_dev(d, a, total * sizeof(float)), "group %d: allgather_inplace_f32 differs",
               g);
        fill(a, total, rank, 10 + gi);
        d = dev_copy(a, total * sizeof(float));
        dr = dev_copy(b, (size_t)counts[gr] * sizeof(float));
        c.be->reduce_scatter_sum_f32(&c, g, d, dr, counts);
        ref.be->reduce_scatter_sum_f32(&ref, g, a, b, counts);
        EXPECT(same_dev(dr, b, (size_t)counts[gr] * sizeof(float)),
               "group %d: reduce_scatter_sum_f32 differs", g);

        /* two nonblocking reduce-scatters in flight (ZeRO-2 buckets), the
         * second with an empty block for group rank 0 */
        int counts2[64];
        size_t total2 = 0;
        for (int i = 0; i < gs; i++)
            total2 += (size_t)(counts2[i] = i ? 5 + 3 * i : 0);
        fill(a, total + total2, rank, 11 + gi);
        d = dev_copy(a, (total + total2) * sizeof(float));
        size_t own = (size_t)counts[gr], own2 = (size_t)counts2[gr];
        dr = dev_copy(b, (own + own2 + 1) * sizeof(float));
        hpt_comm_req s1, s2, p1, p2;
        c.be->ireduce_scatter_sum_f32(&c, g, d, dr, counts, &s1);
        c.be->ireduce_scatter_sum_f32(&c, g, d + total, dr + own, counts2, &s2);
        ref.be->ireduce_scatter_sum_f32(&ref, g, a, b, counts, &p1);
        ref.be->ireduce_scatter_sum_f32(&ref, g, a + total, b + own, counts2, &p2);
        c.be->wait(&c, &s2);
        c.be->wait(&c, &s1);
        ref.be->wait(&ref, &p1);
        ref.be->wait(&ref, &p2);
        EXPECT(same_dev(dr, b, (own + own2) * sizeof(float)),
               "group %d: ireduce_scatter_sum_f32 differs", g);

        /* two nonblocking in-place all-gathers in flight (ZeRO-3's gather
         * and its prefetch), the second with an empty block for group
         * rank 0, waited for in reverse order */
        int displs[64], displs2[64];
        for (int i = 0, o = 0, o2 = 0; i < gs; i++) {
            displs[i] = o, displs2[i] = o2;
            o += counts[i], o2 += counts2[i];
        }
        fill(a, total + total2, rank, 12 + gi);
        d = dev_copy(a, (total + total2) * sizeof(float));
        c.be->iallgather_inplace_f32(&c, g, d, counts, displs, &s1);
        c.be->iallgather_inplace_f32(&c, g, d + total, counts2, displs2, &s2);
        ref.be->iallgather_inplace_f32(&ref, g, a, counts, displs, &p1);
        ref.be->iallgather_inplace_f32(&ref, g, a + total, counts2, displs2, &p2);
        c.be->wait(&c, &s2);
        c.be->wait(&c, &s1);
        ref.be->wait(&ref, &p1);
        ref.be->wait(&ref, &p2);
        EXPECT(same_dev(d, a, (total + total2) * sizeof(float)),
               "group %d: iallgather_inplace_f32 differs", g);
        dev_used = 0;
    }
    EXPECT(n_down > 0 && n_up > 0, "staging never used (%zu downloads, %zu uploads)", n_down, n_up);
    EXPECT(c.counters[HPT_GROUP_WORLD].calls == ref.counters[HPT_GROUP_WORLD].calls + 1,
           "calls counted by the inner backend: staged %lld, plain %lld (+1: the host-send all-gather)",
           (long long)c.counters[HPT_GROUP_WORLD].calls,
           (long long)ref.counters[HPT_GROUP_WORLD].calls);

    hpt_comm_stage_off(&c);
    EXPECT(c.be == before && !c.stage, "stage_off restores the previous backend");
    int bad = failures, any;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_comm_stage: %d ranks: %s\n", size, any ? "FAILED" : "all staged operations "
                                                                       "equal the plain backend");
    hpt_comm_free(&c);
    hpt_comm_free(&ref);
    free(a);
    free(b);
    munmap(dev_lo, dev_cap);
    MPI_Finalize();
    return any ? 1 : 0;
}
