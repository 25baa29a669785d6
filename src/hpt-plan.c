/* hpt-plan — estimate memory, communication and step time of a training
 * layout before launching it, or search for the fastest layout that fits.
 * Parses options, calls lib/plan.c. No MPI. */
#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hpt_config.h"
#include "model.h"
#include "plan.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: hpt-plan --model M --cluster C --tp T --pp P --dp D --seq-len S\n"
            "                --global-batch GB [--micro-batch MB] [OPTION]...\n"
            "       hpt-plan --model M --cluster C --seq-len S --global-batch GB --search "
            "--gpus N\n"
            "       hpt-plan --model M --cluster C --tp T --pp P --gpus N --seq-len S "
            "--global-batch GB\n"
            "Estimate per-rank memory, FLOPs, communication per group, pipeline bubble, step\n"
            "time, tokens/s and MFU of a training layout, and whether it fits (docs/PLAN.md).\n\n"
            "Model and cluster:\n"
            "  --model NAME|PATH     preset (tiny, small, llama2-7b, llama2-13b, llama2-70b,\n"
            "                        llama3-8b, llama3-70b, llama3-405b) or a config.json\n"
            "  --tie-embeddings, --untie-embeddings   override the config\n"
            "  --cluster NAME        a100-80gb, h100-80gb, h200-141gb (8 GPUs per node,\n"
            "                        NVLink + InfiniBand) or cpu-local (this machine, hpt's\n"
            "                        fp32 CPU backend, modelled allocation by allocation)\n"
            "  --nodes N             nodes [layout / GPUs per node; cpu-local: 1]\n"
            "  --gpus-per-node G     [cluster's: 8; cpu-local: the layout's ranks]\n"
            "  --gpus N              GPUs in all: DP = N / (TP x PP) when --dp is not given;\n"
            "                        with --nodes it must equal nodes x GPUs per node\n"
            "  --peak-flops X        peak FLOP/s per GPU (cpu-local: per machine) at the run's\n"
            "                        --precision, 1e6..1e21 [the preset's bf16, tf32 or fp32\n"
            "                        peak]\n"
            "  --mem-gb X            memory per GPU, GB = 1e9 bytes (cpu-local: per machine),\n"
            "                        0.001..1e9\n"
            "  --intra-bw X, --inter-bw X   link bandwidth per GPU and direction, GB/s,\n"
            "                        1e-6..1e6\n"
            "  --intra-lat X, --inter-lat X link latency per message step, microseconds,\n"
            "                        0..1e9\n"
            "  --efficiency X        fraction of peak the matmuls reach, 1e-6..1 [cluster's]\n"
            "  --baseline-mib X      per-process memory outside the tensors, 0..1e9\n"
            "                        [cluster's]\n"
            "  --data-bytes N        token-shard bytes each rank maps and reads (hpt-train\n"
            "                        validates every token, so they count in its RSS), 0..1e18\n"
            "                        [0]\n\n"
            "Layout and training:\n"
            "  --tp N, --pp N, --dp N   tensor, pipeline, data parallel sizes [1, 1, the rest]\n"
            "  --seq-len N           tokens per sequence (required)\n"
            "  --global-batch N      sequences per optimizer step (required)\n"
            "  --micro-batch N       sequences per micro-batch [1]\n"
            "  --recompute [MODE]    activation recomputation: full (default), selective or\n"
            "                        none\n"
            "  --sequence-parallel   hpt-train's --sequence-parallel (with --tp > 1)\n"
            "  --zero1               shard the optimizer state over DP (ZeRO-1)\n"
            "  --async-save          count hpt-train --async-save's host staging buffer\n"
            "  --pp-schedule S       1f1b or gpipe, as hpt-train's [1f1b]: under GPipe every\n"
            "                        stage holds all m micro-batches' activations\n"
            "  --precision P         as hpt-train's, memory as hpt's CUDA backend allocates\n"
            "                        it: bf16 (mixed, 18 bytes/parameter; residual stream,\n"
            "                        statistics and gradients fp32, layer tensors bf16, plus\n"
            "                        the attention's chunk scratch), tf32 (16 bytes/parameter,\n"
            "                        activations fp32, attention chunk scratch; tf32 peak) or\n"
            "                        fp32 (as tf32 without the scratch; fp32 CUDA-core peak)\n"
            "                        [bf16, what large runs use (hpt-train's own default is\n"
            "                        fp32: give the run's); cpu-local fp32]\n"
            "  --comm L              the collectives' library: nccl (hpt-train --backend cuda\n"
            "                        --comm nccl: NCCL's ring/tree cost model), mpi, or auto\n"
            "                        as hpt-train's: nccl with --backend cuda on a build with\n"
            "                        NCCL and one rank per GPU, else mpi; the modelled\n"
            "                        cluster has that, so auto is nccl on the GPU presets and\n"
            "                        mpi on cpu-local (hpt's CPU backend) [auto]\n"
            "  --nccl-algo A         NCCL all-reduce algorithm: ring, tree or auto (faster\n"
            "                        of the two per call, as NCCL's tuner) [auto]; only with\n"
            "                        --comm nccl\n"
            "  --store-scores        attention keeps the softmax (B,H,T,T) for backward instead\n"
            "                        of FlashAttention's statistics (hpt's CPU and CUDA backends\n"
            "                        keep only the statistics; analytic presets only:\n"
            "                        refused with cpu-local)\n\n"
            "Output:\n"
            "  --json                JSON instead of tables\n"
            "  --ranks-tsv FILE      predicted comm.tsv rows (rank, group, calls, bytes, seconds,\n"
            "                        peak RSS MiB) of every rank, as hpt-train --comm-stats writes\n"
            "  --search              enumerate layouts (TP, PP, DP, micro-batch, recomputation\n"
            "                        none/full/selective, ZeRO-1, sequence parallelism where\n"
            "                        TP > 1) for --gpus N [nodes x GPUs per node], rank those\n"
            "                        that fit by tokens/s, explain the first and print its\n"
            "                        hpt-train options; --tp, --pp, --dp, --micro-batch,\n"
            "                        --recompute MODE given are kept, --zero1 keeps ZeRO-1 on\n"
            "                        (where DP > 1), --sequence-parallel keeps it on (TP > 1)\n"
            "  --top N               layouts listed by --search [10]\n"
            "  --help, --version\n\n"
            "Exit status: 0 done (also when the layout does not fit: see \"fits\"); 1 internal\n"
            "error; 2 bad option, model config or layout (also options that conflict, or\n"
            "that the mode does not use: --top without --search, --ranks-tsv with it);\n"
            "5 --ranks-tsv FILE cannot be written.\n");
}

enum {
    OPT_MODEL = 256, OPT_CLUSTER, OPT_NODES, OPT_GPN, OPT_TP, OPT_PP, OPT_DP, OPT_SEQ, OPT_GB,
    OPT_MB, OPT_RECOMPUTE, OPT_ZERO1, OPT_ASYNC_SAVE, OPT_PRECISION, OPT_JSON, OPT_SEARCH, OPT_GPUS, OPT_TOP,
    OPT_PEAK, OPT_MEM, OPT_INTRA_BW, OPT_INTER_BW, OPT_INTRA_LAT, OPT_INTER_LAT, OPT_EFF,
    OPT_BASELINE, OPT_DATA_BYTES, OPT_SCORES, OPT_TIE, OPT_UNTIE, OPT_RANKS_TSV, OPT_HELP,
    OPT_VERSION, OPT_SCHEDULE, OPT_COMM, OPT_NCCL_ALGO, OPT_SEQ_PAR,
};

static const struct option long_opts[] = {
    {"model", 1, 0, OPT_MODEL},           {"cluster", 1, 0, OPT_CLUSTER},
    {"nodes", 1, 0, OPT_NODES},           {"gpus-per-node", 1, 0, OPT_GPN},
    {"tp", 1, 0, OPT_TP},                 {"pp", 1, 0, OPT_PP},
    {"dp", 1, 0, OPT_DP},                 {"seq-len", 1, 0, OPT_SEQ},
    {"global-batch", 1, 0, OPT_GB},       {"micro-batch", 1, 0, OPT_MB},
    {"recompute", 2, 0, OPT_RECOMPUTE},   {"zero1", 0, 0, OPT_ZERO1},
    {"sequence-parallel", 0, 0, OPT_SEQ_PAR},
    {"async-save", 0, 0, OPT_ASYNC_SAVE},
    {"precision", 1, 0, OPT_PRECISION},   {"json", 0, 0, OPT_JSON},
    {"search", 0, 0, OPT_SEARCH},         {"gpus", 1, 0, OPT_GPUS},
    {"top", 1, 0, OPT_TOP},               {"peak-flops", 1, 0, OPT_PEAK},
    {"mem-gb", 1, 0, OPT_MEM},            {"intra-bw", 1, 0, OPT_INTRA_BW},
    {"inter-bw", 1, 0, OPT_INTER_BW},     {"intra-lat", 1, 0, OPT_INTRA_LAT},
    {"inter-lat", 1, 0, OPT_INTER_LAT},   {"efficiency", 1, 0, OPT_EFF},
    {"baseline-mib", 1, 0, OPT_BASELINE}, {"data-bytes", 1, 0, OPT_DATA_BYTES},
    {"store-scores", 0, 0, OPT_SCORES},   {"tie-embeddings", 0, 0, OPT_TIE},
    {"untie-embeddings", 0, 0, OPT_UNTIE},{"ranks-tsv", 1, 0, OPT_RANKS_TSV},
    {"help", 0, 0, OPT_HELP},             {"version", 0, 0, OPT_VERSION},
    {"pp-schedule", 1, 0, OPT_SCHEDULE},
    {"comm", 1, 0, OPT_COMM},             {"nccl-algo", 1, 0, OPT_NCCL_ALGO},
    {0, 0, 0, 0},
};

/* Everything the command line says; NOTSET / NAN = not given. */
#define NOTSET INT_MIN
typedef struct {
    const char *model, *cluster, *precision, *ranks_tsv, *schedule, *comm, *nccl_algo;
    int nodes, gpn, tp, pp, dp, seq, gb, mb, recompute, recompute_given, zero1, seqpar, async_save,
        json, search, gpus, top, scores, tie;
    double peak, mem_gb, intra_bw, inter_bw, intra_lat, inter_lat, eff, baseline_mib, data_bytes;
} cli;

/* Negative values of the numbers are left to hpt_plan_validate. */
static hpt_status apply(cli *o, int c, const char *arg, int *action)
{
    const char *n = hpt_cli_opt_name(long_opts, c);
    switch (c) {
    case OPT_MODEL: o->model = arg; return HPT_OK;
    case OPT_CLUSTER: o->cluster = arg; return HPT_OK;
    case OPT_PRECISION: o->precision = arg; return HPT_OK;
    case OPT_RANKS_TSV: o->ranks_tsv = arg; return HPT_OK;
    case OPT_SCHEDULE: o->schedule = arg; return HPT_OK;
    case OPT_COMM: o->comm = arg; return HPT_OK;
    case OPT_NCCL_ALGO: o->nccl_algo = arg; return HPT_OK;
    case OPT_NODES: return hpt_cli_parse_int(n, arg, &o->nodes);
    case OPT_GPN: return hpt_cli_parse_int(n, arg, &o->gpn);
    case OPT_TP: return hpt_cli_parse_int(n, arg, &o->tp);
    case OPT_PP: return hpt_cli_parse_int(n, arg, &o->pp);
    case OPT_DP: return hpt_cli_parse_int(n, arg, &o->dp);
    case OPT_SEQ: return hpt_cli_parse_int(n, arg, &o->seq);
    case OPT_GB: return hpt_cli_parse_int(n, arg, &o->gb);
    case OPT_MB: return hpt_cli_parse_int(n, arg, &o->mb);
    case OPT_GPUS: return hpt_cli_parse_int(n, arg, &o->gpus);
    case OPT_TOP: return hpt_cli_parse_int(n, arg, &o->top);
    case OPT_PEAK: return hpt_cli_parse_double(n, arg, &o->peak);
    case OPT_MEM: return hpt_cli_parse_double(n, arg, &o->mem_gb);
    case OPT_INTRA_BW: return hpt_cli_parse_double(n, arg, &o->intra_bw);
    case OPT_INTER_BW: return hpt_cli_parse_double(n, arg, &o->inter_bw);
    case OPT_INTRA_LAT: return hpt_cli_parse_double(n, arg, &o->intra_lat);
    case OPT_INTER_LAT: return hpt_cli_parse_double(n, arg, &o->inter_lat);
    case OPT_EFF: return hpt_cli_parse_double(n, arg, &o->eff);
    case OPT_BASELINE: return hpt_cli_parse_double(n, arg, &o->baseline_mib);
    case OPT_DATA_BYTES: return hpt_cli_parse_double(n, arg, &o->data_bytes);
    case OPT_RECOMPUTE: o->recompute_given = 1; return hpt_recompute_parse(arg, &o->recompute);
    case OPT_SEQ_PAR: o->seqpar = 1; return HPT_OK;
    case OPT_ZERO1: o->zero1 = 1; return HPT_OK;
    case OPT_ASYNC_SAVE: o->async_save = 1; return HPT_OK;
    case OPT_JSON: o->json = 1; return HPT_OK;
    case OPT_SEARCH: o->search = 1; return HPT_OK;
    case OPT_SCORES: o->scores = 1; return HPT_OK;
    case OPT_TIE: o->tie = 1; return HPT_OK;
    case OPT_UNTIE: o->tie = 0; return HPT_OK;
    case OPT_HELP: *action = 1; return HPT_OK;
    case OPT_VERSION: *action = 2; return HPT_OK;
    default: return hpt_error_set(HPT_ERR_USAGE, "unknown option (see hpt-plan --help)");
    }
}

static hpt_status apply_cb(void *ctx, int c, const char *arg, int *action)
{
    return apply(ctx, c, arg, action);
}

static hpt_status parse_args(int argc, char **argv, cli *o, int *action)
{
    return hpt_cli_parse(argc, argv, long_opts, "hpt-plan", OPT_HELP, apply_cb, o, action);
}

/* Cluster preset with the overrides. */
static hpt_status setup_cluster(const cli *o, hpt_cluster *cl)
{
    if (!o->cluster)
        return hpt_error_set(HPT_ERR_USAGE, "--cluster is required (a100-80gb, h100-80gb, "
                             "h200-141gb, cpu-local)");
    hpt_status st = hpt_cluster_preset(o->cluster, cl);
    if (st)
        return st;
    const struct {
        const char *opt;
        double v, lo, hi;
    } given[] = {{"peak-flops", o->peak, 1e6, 1e21},  {"mem-gb", o->mem_gb, 1e-3, 1e9},
                 {"intra-bw", o->intra_bw, 1e-6, 1e6}, {"inter-bw", o->inter_bw, 1e-6, 1e6},
                 {"intra-lat", o->intra_lat, 0, 1e9},  {"inter-lat", o->inter_lat, 0, 1e9},
                 {"efficiency", o->eff, 1e-6, 1},      {"baseline-mib", o->baseline_mib, 0, 1e9},
                 {"data-bytes", o->data_bytes, 0, 1e18}};
    for (size_t i = 0; i < sizeof given / sizeof given[0]; i++)
        if (!isnan(given[i].v) && !(given[i].v >= given[i].lo && given[i].v <= given[i].hi))
            return hpt_error_set(HPT_ERR_USAGE, "--%s %g: must be in [%g, %g]", given[i].opt,
                                 given[i].v, given[i].lo, given[i].hi);
    if (!isnan(o->peak)) cl->peak_flops = o->peak;
    if (!isnan(o->mem_gb)) cl->mem_bytes = o->mem_gb * 1e9;
    if (!isnan(o->intra_bw)) cl->intra_bw = o->intra_bw * 1e9;
    if (!isnan(o->inter_bw)) cl->inter_bw = o->inter_bw * 1e9;
    if (!isnan(o->intra_lat)) cl->intra_lat = o->intra_lat * 1e-6;
    if (!isnan(o->inter_lat)) cl->inter_lat = o->inter_lat * 1e-6;
    if (!isnan(o->eff)) cl->efficiency = o->eff;
    if (!isnan(o->baseline_mib))
        cl->baseline_bytes = o->baseline_mib * 1048576.0;
    return HPT_OK;
}

/* GPUs in all from --gpus and --nodes x --gpus-per-node (0: neither
 * given); errors when both are given and disagree. */
static hpt_status given_gpus(const cli *o, int gpn, long *gpus)
{
    if (o->gpn != NOTSET && o->gpn <= 0)
        return hpt_error_set(HPT_ERR_USAGE, "--gpus-per-node %d: must be > 0", o->gpn);
    if (o->nodes != NOTSET && o->nodes <= 0)
        return hpt_error_set(HPT_ERR_USAGE, "--nodes %d: must be > 0", o->nodes);
    if (o->gpus != NOTSET && o->gpus <= 0)
        return hpt_error_set(HPT_ERR_USAGE, "--gpus %d: must be > 0", o->gpus);
    long by_nodes = o->nodes != NOTSET ? (long)o->nodes * gpn : 0;
    if (o->gpus != NOTSET && by_nodes && by_nodes != o->gpus)
        return hpt_error_set(HPT_ERR_USAGE, "--gpus %d conflicts with --nodes %d x "
                             "--gpus-per-node %d = %ld GPUs", o->gpus, o->nodes, gpn, by_nodes);
    *gpus = o->gpus != NOTSET ? o->gpus : by_nodes;
    return HPT_OK;
}

/* Nodes, GPUs per node and DP from what was given (see --help). */
static hpt_status setup_grid(const cli *o, hpt_plan_setup *s)
{
    s->tp = o->tp != NOTSET ? o->tp : 1;
    s->pp = o->pp != NOTSET ? o->pp : 1;
    if (s->tp <= 0 || s->pp <= 0)
        return hpt_error_set(HPT_ERR_USAGE, "--%s %d: must be > 0", s->tp <= 0 ? "tp" : "pp",
                             s->tp <= 0 ? s->tp : s->pp);
    s->gpus_per_node = o->gpn != NOTSET ? o->gpn : s->cl.gpus_per_node;
    long given;
    hpt_status st = given_gpus(o, s->gpus_per_node, &given);
    if (st)
        return st;
    char from[64];
    if (o->gpus != NOTSET)
        snprintf(from, sizeof from, "--gpus");
    else
        snprintf(from, sizeof from, "--nodes %d x --gpus-per-node %d", o->nodes, s->gpus_per_node);
    if (o->dp != NOTSET)
        s->dp = o->dp;
    else if (given && given % ((long)s->tp * s->pp))
        return hpt_error_set(HPT_ERR_USAGE, "--tp %d x --pp %d = %ld does not divide the %ld GPUs "
                             "of %s", s->tp, s->pp, (long)s->tp * s->pp, given, from);
    else
        s->dp = given ? (int)(given / ((long)s->tp * s->pp)) : 1;
    if (s->dp <= 0)
        return hpt_error_set(HPT_ERR_USAGE, "--dp %d: must be > 0", s->dp);
    long world = (long)s->tp * s->pp * s->dp;
    if (o->gpus != NOTSET && world != given) /* --nodes: hpt_plan_validate names it */
        return hpt_error_set(HPT_ERR_USAGE, "layout --tp %d x --pp %d x --dp %d = %ld GPUs does "
                             "not match the %ld GPUs of %s", s->tp, s->pp, s->dp, world, given,
                             from);
    if (o->nodes > 0) {
        s->nodes = o->nodes;
    } else if (s->cl.exact && o->gpn == NOTSET) { /* cpu-local: every rank on this machine */
        s->nodes = 1;
        s->gpus_per_node = (int)world;
    } else if (world <= s->gpus_per_node) { /* part of one node (as --search's) */
        s->nodes = 1;
        s->gpus_per_node = (int)world;
    } else if (world % s->gpus_per_node) {
        return hpt_error_set(HPT_ERR_USAGE, "layout --tp %d x --pp %d x --dp %d = %ld GPUs is not "
                             "a whole number of %d-GPU nodes (--gpus-per-node)", s->tp, s->pp,
                             s->dp, world, s->gpus_per_node);
    } else {
        s->nodes = (int)(world / s->gpus_per_node);
    }
    return HPT_OK;
}

/* --comm and --nccl-algo. auto (the default) resolves as hpt-train's
 * (lib/train.c choose_comm: NCCL when the backend keeps its buffers on a
 * device, NCCL is built and no two ranks share a GPU, else MPI) for the
 * modelled cluster: a GPU preset is one rank per GPU with NCCL, so NCCL;
 * cpu-local is hpt's CPU backend, so MPI (it refuses --comm nccl, and so
 * does this). */
static hpt_status setup_comm(const cli *o, hpt_plan_setup *s)
{
    if (o->comm && strcmp(o->comm, "nccl") && strcmp(o->comm, "mpi") && strcmp(o->comm, "auto"))
        return hpt_error_set(HPT_ERR_USAGE, "--comm '%s': expected nccl, mpi or auto", o->comm);
    if (o->comm && !strcmp(o->comm, "nccl") && s->cl.exact)
        return hpt_error_set(HPT_ERR_USAGE, "--comm nccl: cluster %s is hpt's CPU backend, whose "
                             "buffers NCCL cannot move (use a GPU preset, or --comm mpi)",
                             s->cl.name);
    int automatic = !o->comm || !strcmp(o->comm, "auto");
    s->comm_lib = automatic ? (s->cl.exact ? HPT_PLAN_COMM_MPI : HPT_PLAN_COMM_NCCL)
                            : !strcmp(o->comm, "nccl") ? HPT_PLAN_COMM_NCCL : HPT_PLAN_COMM_MPI;
    s->nccl_algo = HPT_NCCL_AUTO;
    if (!o->nccl_algo)
        return HPT_OK;
    if (s->comm_lib != HPT_PLAN_COMM_NCCL)
        return hpt_error_set(HPT_ERR_USAGE, "--nccl-algo is only used with --comm nccl (the plan "
                             "models %s)", s->cl.exact ? "cluster cpu-local with MPI" : "MPI");
    if (!strcmp(o->nccl_algo, "ring"))
        s->nccl_algo = HPT_NCCL_RING;
    else if (!strcmp(o->nccl_algo, "tree"))
        s->nccl_algo = HPT_NCCL_TREE;
    else if (strcmp(o->nccl_algo, "auto"))
        return hpt_error_set(HPT_ERR_USAGE, "--nccl-algo '%s': expected ring, tree or auto",
                             o->nccl_algo);
    return HPT_OK;
}

static hpt_status setup(const cli *o, hpt_plan_setup *s)
{
    memset(s, 0, sizeof *s);
    if (!o->model)
        return hpt_error_set(HPT_ERR_USAGE, "--model is required (a preset or a config.json)");
    hpt_status st = hpt_config_resolve(o->model, &s->cfg);
    if (!st)
        st = setup_cluster(o, &s->cl);
    if (st)
        return st;
    if (o->tie >= 0)
        s->cfg.tie_word_embeddings = o->tie;
    const struct {
        const char *opt;
        int v, required;
    } sizes[] = {{"seq-len", o->seq, 1}, {"global-batch", o->gb, 1}, {"micro-batch", o->mb, 0}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (sizes[i].v == NOTSET && sizes[i].required)
            return hpt_error_set(HPT_ERR_USAGE, "--%s is required", sizes[i].opt);
        if (sizes[i].v != NOTSET && sizes[i].v <= 0)
            return hpt_error_set(HPT_ERR_USAGE, "--%s %d: must be > 0", sizes[i].opt, sizes[i].v);
    }
    s->seq_len = o->seq;
    s->global_batch = o->gb;
    s->micro_batch = o->mb != NOTSET ? o->mb : 1;
    s->recompute = o->recompute;
    s->sequence_parallel = o->seqpar; /* lib/plan.c applies it only with TP > 1 */
    s->zero1 = o->zero1;
    s->async_save = o->async_save;
    s->store_scores = o->scores;
    if (o->scores && s->cl.exact) /* the exact model carves hpt-train's own buffers */
        return hpt_error_set(HPT_ERR_USAGE, "--store-scores is only used with the analytic "
                             "presets (a100-80gb, h100-80gb, h200-141gb): cluster cpu-local "
                             "models hpt-train's own allocations, and its attention keeps only "
                             "the softmax statistics");
    s->data_bytes = isnan(o->data_bytes) ? 0 : o->data_bytes;
    if (o->schedule && strcmp(o->schedule, "1f1b") && strcmp(o->schedule, "gpipe"))
        return hpt_error_set(HPT_ERR_USAGE, "--pp-schedule '%s': expected 1f1b or gpipe",
                             o->schedule);
    s->gpipe = o->schedule && !strcmp(o->schedule, "gpipe");
    if ((st = hpt_plan_set_precision(s, o->precision, !isnan(o->peak))))
        return st;
    if ((st = setup_comm(o, s)))
        return st;
    return setup_grid(o, s);
}

static hpt_status run_one(const cli *o, const hpt_plan_setup *s)
{
    hpt_plan_result *r = malloc(sizeof *r);
    if (!r)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    hpt_status st = hpt_plan_eval(s, r);
    if (!st && o->ranks_tsv) {
        FILE *f = fopen(o->ranks_tsv, "w");
        if (!f)
            st = hpt_error_set(HPT_ERR_IO, "--ranks-tsv %s: cannot write: %s", o->ranks_tsv,
                               strerror(errno));
        else {
            hpt_plan_write_ranks_tsv(s, f);
            if (fclose(f))
                st = hpt_error_set(HPT_ERR_IO, "--ranks-tsv %s: write failed", o->ranks_tsv);
        }
    }
    if (!st) {
        if (o->json)
            hpt_plan_write_json(s, r, stdout);
        else
            hpt_plan_write_text(s, r, stdout);
    }
    free(r);
    return st;
}

static hpt_status run_search(const cli *o, hpt_plan_setup *s)
{
    hpt_plan_fixed fx = {.tp = o->tp != NOTSET, .pp = o->pp != NOTSET, .dp = o->dp != NOTSET,
                         .micro_batch = o->mb != NOTSET, .recompute = o->recompute_given,
                         .zero1 = o->zero1, .sequence_parallel = o->seqpar};
    long gpus;
    hpt_status st = given_gpus(o, o->gpn != NOTSET ? o->gpn : s->cl.gpus_per_node, &gpus);
    if (st)
        return st;
    if (!gpus)
        return hpt_error_set(HPT_ERR_USAGE, "--search needs --gpus N (or --nodes)");
    if (gpus > 1 << 30)
        return hpt_error_set(HPT_ERR_USAGE, "--search: %ld GPUs, at most 2^30", gpus);
    if (o->top != NOTSET && o->top <= 0)
        return hpt_error_set(HPT_ERR_USAGE, "--top %d: must be > 0", o->top);
    s->gpus_per_node = o->gpn != NOTSET ? o->gpn : s->cl.exact ? (int)gpus : s->cl.gpus_per_node;
    return hpt_plan_search(s, &fx, (int)gpus, o->top != NOTSET ? o->top : 10, o->json, stdout);
}

int main(int argc, char **argv)
{
    cli o = {.nodes = NOTSET, .gpn = NOTSET, .tp = NOTSET, .pp = NOTSET, .dp = NOTSET,
             .seq = NOTSET, .gb = NOTSET, .mb = NOTSET, .gpus = NOTSET, .top = NOTSET, .tie = -1, .peak = NAN, .mem_gb = NAN, .intra_bw = NAN,
             .inter_bw = NAN, .intra_lat = NAN, .inter_lat = NAN, .eff = NAN,
             .baseline_mib = NAN, .data_bytes = NAN};
    int action = 0;
    hpt_plan_setup s;
    hpt_status st = parse_args(argc, argv, &o, &action);
    if (!st && action == 1)
        usage(stdout);
    else if (!st && action == 2)
        printf("hpt-plan (hpt) %s\n", PACKAGE_VERSION);
    else if (!st && o.search && o.ranks_tsv)
        st = hpt_error_set(HPT_ERR_USAGE, "--ranks-tsv is not used with --search (it writes the "
                           "ranks of one layout)");
    else if (!st && !o.search && o.top != NOTSET)
        st = hpt_error_set(HPT_ERR_USAGE, "--top is only used with --search");
    else if (!st && o.search) {
        cli g = o; /* the grid is searched: plan the setup on one GPU first */
        g.nodes = NOTSET, g.gpn = NOTSET, g.gpus = NOTSET;
        g.tp = g.tp != NOTSET ? g.tp : 1, g.pp = g.pp != NOTSET ? g.pp : 1;
        g.dp = g.dp != NOTSET ? g.dp : 1;
        st = setup(&g, &s);
        if (!st)
            st = run_search(&o, &s);
    } else if (!st) {
        st = setup(&o, &s);
        if (!st)
            st = run_one(&o, &s);
    }
    if (st)
        fprintf(stderr, "hpt-plan: %s\n", hpt_error_msg());
    return hpt_status_exit_code(st);
}
