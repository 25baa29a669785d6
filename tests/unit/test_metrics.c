/* test_metrics.c — the metrics writer's derived values and anomaly rules on
 * synthetic records, checked by reading the file back (run by
 * tests/metrics/metrics-unit.sh under mpiexec -n 2):
 * - gradient noise scale (McCandlish et al. 2018, A.1) on hand-computed
 *   inputs: B_big = 1000 tokens, DP = 2 (B_small = 500), each rank's
 *   pre-reduction sum of squares 0.5 → |G_small|^2 = 2^2 * 0.5 = 2,
 *   |G_big|^2 = 1.5 → |G|^2 = (1000*1.5 - 500*2)/500 = 1,
 *   tr(Sigma) = (2 - 1.5)/(1/500 - 1/1000) = 500, B_noise = 500;
 * - tokens/s and MFU from their formulas;
 * - one grad_norm_spike at step 20 (norm 10 vs ~1), one throughput_drop at
 *   step 25 (step time 3x), one slow_rank naming rank 1 (busy 0.5 s vs 0.1 s),
 *   and nothing else;
 * - with `pp` (mpiexec -n 4; TP 1 x PP 2 x DP 2): slow ranks are judged
 *   against the other ranks of their pipeline stage, so the last stage's
 *   ranks 2, 3, slower than the first stage's (0.5 s vs 0.1 s: the LM head)
 *   are not slow_rank, and rank 3 at 1.5 s, slow beside rank 2, is. */
#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "metrics.h"

static int fails;
#define CHECK(c, ...)                                                                 \
    do {                                                                              \
        if (!(c)) {                                                                   \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                      \
            fprintf(stderr, __VA_ARGS__);                                             \
            fprintf(stderr, "\n");                                                    \
            fails++;                                                                  \
        }                                                                             \
    } while (0)

static void read_col(hid_t f, const char *name, double *v)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(d);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int pp = argc == 3 && !strcmp(argv[2], "pp");
    if (world != (pp ? 4 : 2) || argc != 2 + pp) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiexec -n 2 test_metrics FILE, or -n 4 FILE pp\n");
        MPI_Finalize();
        return 2;
    }
    enum { STEPS = 30 };
    int dp_rank[4] = {0, 1, 0, 1};
    hpt_metrics_info info = {.world = world, .tp = 1, .pp = pp ? 2 : 1, .dp = 2, .grad_accum = 1,
                             .micro_batch = 1, .seq_len = 500, .resumed_from = -1,
                             .flops_per_token = 1e6, .peak_flops_per_rank = 1e9,
                             .flop_formula = "test", .model_config = "{}", .dp_rank = dp_rank,
                             .slow_factor = 1.5, .spike_factor = 4};
    hpt_metrics *m;
    hpt_status st = hpt_metrics_open(&m, MPI_COMM_WORLD, argv[1], 10, &info);
    if (st) {
        fprintf(stderr, "FAIL: open: %s\n", hpt_error_msg());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int s = 1; s <= STEPS; s++) {
        hpt_metrics_step gs = {.step = s, .loss = 5, .val_loss = NAN, .lr = 1e-3,
                               .grad_norm = s == 20 ? 10.0 : sqrt(1.5) * (1 + 0.01 * (s % 3)),
                               .clip_coef = 1, .tokens = 1000, .step_time = s == 25 ? 3.0 : 1.0};
        hpt_metrics_rank r;
        memset(&r, 0, sizeof r);
        r.v[HPT_MR_GRAD_SUMSQ] = 0.5;
        if (pp) /* stage 0: ranks 0, 1; stage 1 (slower: the LM head): 2, 3 */
            r.v[HPT_MR_BUSY] = rank == 3 ? 1.5 : rank == 2 ? 0.5 : 0.1;
        else
            r.v[HPT_MR_BUSY] = rank == 1 ? 0.5 : 0.1;
        hpt_metrics_record(m, &gs, &r);
        if (hpt_metrics_due(m))
            hpt_metrics_flush(m, rank == 0 ? stdout : NULL);
    }
    hpt_metrics_close(m, 1, rank == 0 ? stdout : NULL);
    int slow_rank = pp ? 3 : 1; /* the one rank slow_rank may name */
    if (rank == 0) {
        hid_t f = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
        double g2[STEPS], S[STEPS], bn[STEPS], tps[STEPS], mfu[STEPS];
        read_col(f, "steps/noise_g2", g2);
        read_col(f, "steps/noise_s", S);
        read_col(f, "steps/noise_scale", bn);
        read_col(f, "steps/tokens_per_s", tps);
        read_col(f, "steps/mfu", mfu);
        /* steps with the exact |G_big|^2 = 1.5 (s % 3 == 0, not 20) */
        for (int i = 0; i < STEPS; i++) {
            int s = i + 1;
            double want_tps = s == 25 ? 1000 / 3.0 : 1000;
            CHECK(fabs(tps[i] - want_tps) < 1e-9, "step %d tokens/s %g", s, tps[i]);
            CHECK(fabs(mfu[i] - want_tps * 1e6 / (world * 1e9)) < 1e-12, "step %d mfu %g", s,
                  mfu[i]);
            if (pp || s % 3 || s == 20) /* (pp: 4 ranks' sums, not the hand-computed 2) */
                continue;
            CHECK(fabs(g2[i] - 1.0) < 1e-9, "step %d |G|^2 %.12g, want 1", s, g2[i]);
            CHECK(fabs(S[i] - 500.0) < 1e-6, "step %d tr(Sigma) %.12g, want 500", s, S[i]);
        }
        CHECK(pp || (bn[2] > 0 && isfinite(bn[2])), "noise scale %g", bn[2]);
        hid_t d = H5Dopen2(f, "events", H5P_DEFAULT), t = H5Dget_type(d);
        hid_t sp = H5Dget_space(d);
        hssize_t n = H5Sget_simple_extent_npoints(sp);
        typedef struct {
            long long step;
            int rank;
            char kind[24];
        } ev;
        hid_t mt = H5Tcreate(H5T_COMPOUND, sizeof(ev)), s24 = H5Tcopy(H5T_C_S1);
        H5Tset_size(s24, 24);
        H5Tinsert(mt, "step", HOFFSET(ev, step), H5T_NATIVE_LLONG);
        H5Tinsert(mt, "rank", HOFFSET(ev, rank), H5T_NATIVE_INT);
        H5Tinsert(mt, "kind", HOFFSET(ev, kind), s24);
        ev e[64];
        CHECK(n > 0 && n <= 64, "%lld events", (long long)n);
        H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, e);
        int spike = 0, drop = 0, slow = 0, other = 0;
        for (int i = 0; i < n; i++) {
            if (!strcmp(e[i].kind, "grad_norm_spike"))
                spike += e[i].step == 20 ? 1 : 100;
            else if (!strcmp(e[i].kind, "throughput_drop"))
                drop += e[i].step == 25 ? 1 : 100;
            else if (!strcmp(e[i].kind, "slow_rank"))
                slow += e[i].rank == slow_rank ? 1 : 100;
            else
                other++;
        }
        CHECK(spike == 1, "grad_norm_spike events: %d (want one at step 20)", spike);
        CHECK(drop == 1, "throughput_drop events: %d (want one at step 25)", drop);
        CHECK(slow == 3, "slow_rank events: %d (want one per 10-step window, rank %d; +100 "
              "per event naming another)", slow, slow_rank);
        CHECK(other == 0, "%d unexpected events", other);
        printf("noise |G|^2 %.6g tr(Sigma) %.6g B_noise %.6g; events: spike %d, drop %d, slow %d\n",
               g2[2], S[2], bn[2], spike, drop, slow);
        H5Tclose(s24);
        H5Tclose(mt);
        H5Sclose(sp);
        H5Tclose(t);
        H5Dclose(d);
        H5Fclose(f);
        printf(fails ? "FAIL: %d checks\n" : "PASS: metrics derived values and anomaly rules\n",
               fails);
    }
    MPI_Bcast(&fails, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return fails ? 1 : 0;
}
