/* train_metrics.c — the training run's records beyond log.tsv: opening
 * the metrics file (docs/METRICS.md) with the run's events, each step's
 * global and per-rank record, the skipped-step event, and the
 * communication summary of --comm-stats. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "fsutil.h"
#include "plan.h"
#include "train_metrics.h"
#include "train_rundir.h"

/* A skipped (non-finite) step: find the lowest world rank whose own loss
 * or pre-reduction gradient was non-finite (one all-reduce; every rank
 * takes this branch together) and record it as an event, with a job-log
 * line within --event-window's rate limit. */
void skipped_step_event(run_state *r, int step, double loss, double norm, FILE *out)
{
    if (!r->metrics)
        return;
    int own = !isfinite(r->local_sumsq) || (r->model.last && !isfinite(r->local_loss));
    int first = own ? r->comm.world_rank : r->comm.world_size;
    if (r->comm.world_size > 1) {
        hpt_comm_watch w = hpt_comm_watch_begin(r->comm.comms[HPT_GROUP_WORLD],
                                                HPT_FLIGHT_ALLREDUCE, sizeof first);
        MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, r->comm.comms[HPT_GROUP_WORLD]);
        hpt_comm_watch_end(w);
    }
    if (!r->root)
        return;
    int tp = r->comm.tp, tc = r->comm.tp * r->comm.cp, dp = r->comm.dp;
    if (first < r->comm.world_size) {
        hpt_metrics_event(r->metrics, step, first, "skipped_step",
                          "non-finite loss %g / gradient norm %g: step skipped, no update; first "
                          "seen on rank %d (TP %d, DP %d, PP %d)",
                          loss, norm, first, first % tp, (first / tc) % dp, first / (tc * dp));
        if (hpt_metrics_log_anomaly(r->metrics, out, step, first, "skipped_step"))
            fprintf(out, "hpt-train: anomaly at step %d: skipped_step: non-finite values first "
                    "seen on rank %d\n", step, first);
    } else
        hpt_metrics_event(r->metrics, step, -1, "skipped_step",
                          "non-finite loss %g / gradient norm %g: step skipped, no update; no "
                          "rank's own values were non-finite before the reductions",
                          loss, norm);
}

/* This step's global and per-rank record (metrics.h). t0, t_acc, t1:
 * start of the step, end of forward/backward, end of the optimizer. */
void record_metrics(run_state *r, const hpt_train_opts *o, int step, double t0,
                           double t_acc, double t1, double loss, double val, float lr, double norm,
                           int skip)
{
    static const int gmap[][2] = {{HPT_GROUP_TP, HPT_MR_COMM_TP}, {HPT_GROUP_PP, HPT_MR_COMM_PP},
                                  {HPT_GROUP_DP, HPT_MR_COMM_DP}, {HPT_GROUP_MP, HPT_MR_COMM_MP},
                                  {HPT_GROUP_EMBED, HPT_MR_COMM_EMBED}};
    double tok_rank = (double)o->grad_accum * o->batch * o->seq_len; /* of a DP rank */
    double tok_own = tok_rank / r->comm.cp; /* this rank's: its CP chunks */
    hpt_metrics_step s = {.step = step + 1, .loss = loss, .val_loss = val, .lr = lr,
                          .grad_norm = norm, .skipped = skip,
                          .clip_coef = skip ? NAN : hpt_clip_coef(&r->opt.o, norm),
                          .tokens = tok_rank * r->comm.dp, .step_time = t1 - t0};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s.wall_time = ts.tv_sec + 1e-9 * ts.tv_nsec;
    hpt_metrics_rank m;
    double comm = 0, *v = m.v;
    for (size_t i = 0; i < sizeof gmap / sizeof gmap[0]; i++) {
        v[gmap[i][1]] = r->step_ctr[gmap[i][0]].seconds;
        v[gmap[i][1] + (HPT_MR_BYTES_TP - HPT_MR_COMM_TP)] = (double)r->step_ctr[gmap[i][0]].bytes;
    }
    for (int g = 0; g < HPT_GROUP_COUNT; g++)
        comm += r->step_ctr[g].seconds;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    v[HPT_MR_STEP_TIME] = t1 - t0;
    v[HPT_MR_FORWARD] = r->t_fwd;
    v[HPT_MR_BACKWARD] = r->t_bwd;
    v[HPT_MR_OPTIMIZER] = (t1 - t_acc) - (comm_seconds(r) - r->comm_s_acc);
    v[HPT_MR_DATA] = r->t_data;
    v[HPT_MR_PIPE_WAIT] = r->t_wait;
    v[HPT_MR_CHECKPOINT] = r->ckpt_save_s;
    r->ckpt_save_s = 0;
    v[HPT_MR_TOKENS] = tok_own;
    v[HPT_MR_LOSS] = r->model.last ? r->local_loss / tok_own : NAN;
    v[HPT_MR_GRAD_SUMSQ] = r->local_sumsq;
    v[HPT_MR_PEAK_RSS] = ru.ru_maxrss * 1024.0;
    v[HPT_MR_DEVICE_MEM] = r->model.be->mem_peak ? (double)r->model.be->mem_peak()
                                                  : NAN; /* CPU: no device memory */
    v[HPT_MR_BUSY] = (t1 - t0) - comm;
    v[HPT_MR_NONFINITE] = !isfinite(r->local_sumsq) || (r->model.last && !isfinite(r->local_loss));
    v[HPT_MR_VALIDATION] = r->val_s;
    const hpt_comm_kind_counter *kg = &r->step_kinds[HPT_CK_GATHER], *kr = &r->step_kinds[HPT_CK_RS];
    v[HPT_MR_COMM_DP_GATHER] = kg->seconds;
    v[HPT_MR_BYTES_DP_GATHER] = (double)kg->bytes;
    v[HPT_MR_COMM_DP_RS] = kr->seconds;
    v[HPT_MR_BYTES_DP_RS] = (double)kr->bytes;
    v[HPT_MR_DP_GATHER_HIDDEN] = kg->inflight > 0 ? fmax(0, 1 - kg->seconds / kg->inflight) : NAN;
    v[HPT_MR_PIPE_BUBBLE] = r->comm.pp > 1 ? fmax(0, r->t_pipe_end - r->t_pipe0 - r->t_pipe_busy)
                                           : NAN;
    v[HPT_MR_COMM_CP] = r->step_ctr[HPT_GROUP_CP].seconds;
    v[HPT_MR_BYTES_CP] = (double)r->step_ctr[HPT_GROUP_CP].bytes;
    v[HPT_MR_CP_RING_HIDDEN] = r->step_ring[1] > 0 ? fmax(0, 1 - r->step_ring[0] / r->step_ring[1])
                                                   : NAN; /* NaN > 0 is false */
    r->val_s = 0;
    if (v[HPT_MR_OPTIMIZER] < 0)
        v[HPT_MR_OPTIMIZER] = 0;
    hpt_metrics_record(r->metrics, &s, &m);
}

/* Unix time this process started, as near as a program can tell: read by
 * a constructor before main (before MPI_Init, the data's and the model's
 * set-up, the checkpoint load), for the goodput's start-up
 * (docs/METRICS.md, /segments process_start). */
static double process_start = NAN;

__attribute__((constructor)) static void note_process_start(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
        process_start = ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Default peak FLOP/s of one rank for MFU: the SGEMM peak measured on the
 * reference 2-core machine (docs/PERFORMANCE.md) shared by the ranks of a
 * node. --peak-flops overrides it (e.g. 989e12 for an H100's dense bf16). */
#define HPT_CPU_NODE_PEAK_FLOPS 233e9

/* "dir/base" with dir resolved (symbolic links, ..), for comparing output
 * paths; the file itself need not exist. */
static void resolved(const char *path, char *out, size_t n)
{
    char dir[4096], real[4096];
    const char *slash = strrchr(path, '/');
    hpt_path_dir(path, dir, sizeof dir);
    if (!realpath(dir, real))
        snprintf(real, sizeof real, "%s", dir);
    snprintf(out, n, "%s/%s", real, slash ? slash + 1 : path);
}

/* The metrics file must not be another output of the run. Same verdict on
 * every rank (no communication). */
static hpt_status check_metrics_path(const char *path, const hpt_train_opts *o)
{
    char m[8500], other[8500], p[4300];
    resolved(path, m, sizeof m);
    static const char *const run_files[] = {"config.json", "log.tsv", "comm.tsv"};
    for (size_t i = 0; o->run_dir && i < sizeof run_files / sizeof run_files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", o->run_dir, run_files[i]);
        resolved(p, other, sizeof other);
        if (!strcmp(m, other))
            return hpt_error_set(HPT_ERR_USAGE, "--metrics %s: is the run directory's %s", path,
                                 run_files[i]);
    }
    if (o->export_path) {
        resolved(o->export_path, other, sizeof other);
        if (!strcmp(m, other))
            return hpt_error_set(HPT_ERR_USAGE, "--metrics %s: same file as --export", path);
    }
    return HPT_OK;
}

hpt_status open_metrics(run_state *r, const hpt_train_opts *o, const hpt_ckpt_meta *meta)
{
    char path[4096];
    if (o->metrics && !strcmp(o->metrics, "none"))
        return HPT_OK;
    if (o->metrics)
        snprintf(path, sizeof path, "%s", o->metrics);
    else if (o->run_dir)
        snprintf(path, sizeof path, "%s/metrics.h5", o->run_dir);
    else
        return HPT_OK;
    int W = r->comm.world_size;
    int *dp_rank = malloc(sizeof(int) * (size_t)W);
    char cfg[8192] = "";
    FILE *f = fmemopen(cfg, sizeof cfg - 1, "w");
    if (f) {
        hpt_config_write(&r->cfg, f);
        fclose(f);
    }
    if (!dp_rank)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory (metrics)");
    for (int w = 0; w < W; w++)
        dp_rank[w] = (w / (r->comm.tp * r->comm.cp)) % r->comm.dp;
    /* the schedule's bubble in theory (hpt-plan's formula for this run) */
    hpt_plan_setup ps = {.cfg = r->cfg, .tp = r->comm.tp, .pp = r->comm.pp, .dp = r->comm.dp,
                         .seq_len = o->seq_len, .micro_batch = o->batch,
                         .global_batch = o->batch * o->grad_accum * r->comm.dp,
                         .recompute = o->recompute, .pp_virtual = r->nchunks,
                         .pp_schedule = o->pp_schedule};
    hpt_metrics_info info = {
        .world = W, .tp = r->comm.tp, .pp = r->comm.pp, .dp = r->comm.dp, .cp = r->comm.cp,
        .zero1 = o->zero,
        .sequence_parallel = o->sequence_parallel && r->comm.tp > 1, .recompute = o->recompute,
        .grad_accum = o->grad_accum, .micro_batch = o->batch, .seq_len = o->seq_len,
        .first_step = r->start_step, .resumed_from = r->resume_from,
        .process_start = process_start, .load_seconds = r->resume_from >= 0 ? r->ckpt_load_s : 0,
        .pp_schedule = ps.pp_schedule, .pp_virtual = r->nchunks,
        .bubble_theory = r->comm.pp > 1 ? hpt_plan_bubble(&ps) : 0,
        .flops_per_token = hpt_model_flops_per_token(&r->cfg, o->seq_len),
        .peak_flops_per_rank = o->peak_flops > 0 ? o->peak_flops
                                                 : HPT_CPU_NODE_PEAK_FLOPS / r->comm.node_size,
        .flop_formula = "per token: 6*N_matmul + 6*L*T*C (PaLM, Chowdhery et al. 2022, appendix "
                        "B, attention over the causal half: PaLM's 12*L*T*C halved); N_matmul = "
                        "weights used in matrix products incl. the LM head",
        .model_config = cfg, .dp_rank = dp_rank, .slow_factor = o->slow_factor,
        .spike_factor = o->spike_factor, .trace = o->trace_steps != NULL,
        .sumsq_micro = o->zero >= 2 && o->grad_accum > 1 && r->comm.dp > 1, .alerts = o->alerts, .nalerts = o->nalerts,
        .event_window = o->event_window, .fault_anomaly = o->fault_anomaly_kind,
        .fault_from = o->fault_anomaly_from, .fault_to = o->fault_anomaly_to};
    hpt_status st = check_metrics_path(path, o);
    if (!st)
        st = hpt_metrics_open(&r->metrics, r->comm.comms[HPT_GROUP_WORLD], path,
                              o->metrics_interval < o->steps ? o->metrics_interval : o->steps,
                              &info);
    free(dp_rank);
    if (st || !r->root)
        return st;
    hpt_metrics *m = r->metrics;
    char cpw[24] = ""; /* /segments has no cp field: world / (TP x PP x DP) */
    if (r->comm.cp > 1)
        snprintf(cpw, sizeof cpw, "CP %d x ", r->comm.cp);
    hpt_metrics_event(m, r->start_step, 0, "run_start",
                      "TP %d x %sPP %d x DP %d%s%s%s on %d rank%s, micro-batch %d x grad-accum %d, "
                      "%d steps, backend %s, precision %s",
                      r->comm.tp, cpw, r->comm.pp, r->comm.dp, zero_words(o->zero),
                      info.sequence_parallel ? ", sequence parallel" : "",
                      o->recompute == HPT_RECOMPUTE_SELECTIVE ? ", selective recomputation"
                      : o->recompute ? ", full recomputation" : "", W, W == 1 ? "" : "s", o->batch,
                      o->grad_accum, o->steps, r->model.be->name,
                      hpt_precision_name(o->precision));
    if (r->resume_from >= 0) {
        hpt_metrics_event(m, r->resume_from, 0, "checkpoint_load",
                          "step %lld loaded in %.2f s", (long long)r->resume_from, r->ckpt_load_s);
        hpt_metrics_event(m, r->resume_from, 0, "resume", "resumed from step %lld",
                          (long long)r->resume_from);
        char mcpw[24] = ""; /* the checkpoint's CP: attribute cp, 1 when absent */
        if (meta->cp > 1)
            snprintf(mcpw, sizeof mcpw, "CP %d x ", meta->cp);
        if (meta->tp != r->comm.tp || meta->pp != r->comm.pp || meta->dp != r->comm.dp ||
            meta->cp != r->comm.cp || meta->zero1 != o->zero ||
            (meta->sequence_parallel >= 0 && meta->sequence_parallel != info.sequence_parallel))
            hpt_metrics_event(m, r->resume_from, 0, "layout_change",
                              "checkpoint written by TP %d x %sPP %d x DP %d%s%s, re-sharded to TP %d "
                              "x %sPP %d x DP %d%s%s (grad-accum %d)",
                              meta->tp, mcpw, meta->pp, meta->dp, zero_words(meta->zero1),
                              meta->sequence_parallel > 0 ? " SP" : "",
                              r->comm.tp, cpw, r->comm.pp, r->comm.dp, zero_words(o->zero),
                              info.sequence_parallel ? " SP" : "", o->grad_accum);
    }
    hpt_metrics_write_events(m); /* a run killed before its first flush keeps them */
    return HPT_OK;
}

static const char *const group_names[HPT_GROUP_COUNT] = {"world", "tp", "dp", "pp", "mp", "embed",
                                                         "dp-shard", "dp-replica", "cp"};

/* Per-rank communication of the training steps, gathered to rank 0:
 * printed as a per-group summary and, with --run-dir, written to
 * RUN_DIR/comm.tsv (rank, group, calls, bytes, seconds per step, peak RSS).
 * Collective. */
void comm_stats(run_state *r, const hpt_train_opts *o, FILE *out)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int W = r->comm.world_size, G = HPT_GROUP_COUNT, steps = r->train_steps ? r->train_steps : 1;
    double mine[HPT_GROUP_COUNT * 3 + 1], *all = r->root ? malloc(sizeof mine * W) : NULL;
    for (int g = 0; g < G; g++) {
        mine[3 * g] = (double)r->train_ctr[g].calls / steps;
        mine[3 * g + 1] = (double)r->train_ctr[g].bytes / steps;
        mine[3 * g + 2] = r->train_ctr[g].seconds / steps;
    }
    mine[3 * G] = ru.ru_maxrss / 1024.0; /* MiB */
    hpt_comm_watch w = hpt_comm_watch_begin(r->comm.comms[HPT_GROUP_WORLD], HPT_FLIGHT_GATHER,
                                            sizeof mine);
    MPI_Gather(mine, 3 * G + 1, MPI_DOUBLE, all, 3 * G + 1, MPI_DOUBLE, 0,
               r->comm.comms[HPT_GROUP_WORLD]);
    hpt_comm_watch_end(w);
    if (!r->root)
        return;
    FILE *tsv = NULL;
    if (o->run_dir && open_in_run_dir(o->run_dir, "comm.tsv", &tsv) == HPT_OK)
        fprintf(tsv, "rank\tgroup\tcalls_per_step\tbytes_per_step\tseconds_per_step\tpeak_rss_mib\n");
    fprintf(out, "communication per training step (per rank, min..max over %d ranks):\n", W);
    for (int g = 1; g < G; g++) {
        if (hpt_group_counted(g) != g) /* the shard and replica groups count as dp */
            continue;
        double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {0, 0, 0};
        for (int w = 0; w < W; w++)
            for (int k = 0; k < 3; k++) {
                double v = all[w * (3 * G + 1) + 3 * g + k];
                lo[k] = v < lo[k] ? v : lo[k];
                hi[k] = v > hi[k] ? v : hi[k];
            }
        for (int w = 0; tsv && w < W; w++)
            fprintf(tsv, "%d\t%s\t%.17g\t%.17g\t%.6g\t%.1f\n", w, group_names[g],
                    all[w * (3 * G + 1) + 3 * g], all[w * (3 * G + 1) + 3 * g + 1],
                    all[w * (3 * G + 1) + 3 * g + 2], all[w * (3 * G + 1) + 3 * G]);
        if (hi[0] > 0)
            fprintf(out, "  %-5s %6.0f..%-6.0f calls  %10.0f..%-10.0f bytes  %8.4f..%-8.4f s\n",
                    group_names[g], lo[0], hi[0], lo[1], hi[1], lo[2], hi[2]);
    }
    double rlo = INFINITY, rhi = 0;
    for (int w = 0; w < W; w++) {
        double v = all[w * (3 * G + 1) + 3 * G];
        rlo = v < rlo ? v : rlo;
        rhi = v > rhi ? v : rhi;
    }
    fprintf(out, "peak RSS per rank: %.1f..%.1f MiB\n", rlo, rhi);
    if (tsv)
        fclose(tsv);
    free(all);
}
