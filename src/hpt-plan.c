/* hpt-plan — estimate memory, communication and step time of a training
 * layout before launching it, or search for the fastest layout that fits.
 * Parses options into hpt_plan_opts and calls hpt_plan_run
 * (lib/plan_cli.c, on top of lib/plan.c). No MPI. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "hpt_config.h"
#include "model.h"
#include "plan_cli.h"

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
            "  --gpus N              GPUs in all: DP = N / (TP x CP x PP) when --dp is not\n"
            "                        given;\n"
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
            "  --hbm-bw X            device memory bandwidth, GB/s, 1e-3..1e6: the\n"
            "                        memory-bound kernels run at 0.9 of it [cluster's]\n"
            "  --baseline-mib X      per-process memory outside the tensors, 0..1e9\n"
            "                        [cluster's]\n"
            "  --data-bytes N        token-shard bytes each rank maps and reads (hpt-train\n"
            "                        validates every token, so they count in its RSS), 0..1e18\n"
            "                        [0]\n\n"
            "Layout and training:\n"
            "  --tp N, --pp N, --dp N   tensor, pipeline, data parallel sizes [1, 1, the rest]\n"
            "  --cp N                context parallel size (hpt-train --cp; ring attention) [1]\n"
            "  --seq-len N           tokens per sequence (required)\n"
            "  --global-batch N      sequences per optimizer step (required)\n"
            "  --micro-batch N       sequences per micro-batch [1]\n"
            "  --recompute [MODE]    activation recomputation: full (default), selective or\n"
            "                        none\n"
            "  --sequence-parallel   hpt-train's --sequence-parallel (with --tp > 1)\n"
            "  --zero N              ZeRO stage over DP: 0 none, 1 optimizer state sharded,\n"
            "                        2 also the gradients (bucket reduce-scatters), 3 also\n"
            "                        the parameters (per-layer all-gathers) [0]\n"
            "  --zero1               the same as --zero 1\n"
            "  --zero-shard-group N  HSDP: ZeRO shards within groups of N DP ranks [DP]\n"
            "  --async-save          count hpt-train --async-save's host staging buffer\n"
            "  --pp-schedule S       1f1b, gpipe (every stage holds all m micro-batches),\n"
            "                        interleaved (m a multiple of PP) or zb-h1, as hpt-train's\n"
            "  --pp-virtual V        interleaved: model chunks per pipeline rank, >= 1\n"
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
            "Checkpoint interval against failures (Young 1974, Daly 2006; docs/PLAN.md):\n"
            "  --mtbf-hours H        the job's mean time between failures, hours (> 0): the\n"
            "                        save interval and the expected goodput\n"
            "  --save-stall S        the training stall of one save, seconds [planned: 12\n"
            "                        bytes/parameter at --ckpt-bw GB/s per node]\n"
            "  --ckpt-bw X           checkpoint storage bandwidth per node, GB/s [cluster's]\n"
            "  --measured RUN_DIR    the save stall and restart time a run measured\n\n"
            "Output:\n"
            "  --json                JSON instead of tables\n"
            "  --ranks-tsv FILE      predicted comm.tsv rows (rank, group, calls, bytes, seconds,\n"
            "                        peak RSS MiB) of every rank, as hpt-train --comm-stats writes\n"
            "  --search              enumerate layouts (TP, PP, DP, micro-batch, recomputation\n"
            "                        none/full/selective, ZeRO 0-3 with HSDP shard groups,\n"
            "                        sequence parallelism, PP > 1: 1F1B, interleaved V 2/4 or\n"
            "                        ZB-H1; cpu-local: CP 1, 2, 4, 8)\n"
            "                        for --gpus N [nodes x GPUs per node], rank those that fit\n"
            "                        by tokens/s, explain the first, print its hpt-train\n"
            "                        options; kept when given: --tp, --pp, --dp, --micro-batch,\n"
            "                        --recompute MODE, --zero N (DP > 1), --zero-shard-group N,\n"
            "                        --sequence-parallel (TP > 1), --pp-schedule (PP > 1),\n"
            "                        --cp N\n"
            "  --top N               layouts listed by --search [10]\n"
            "  --help, --version\n\n"
            "Exit status: 0 done (also when the layout does not fit: see \"fits\"); 1 internal\n"
            "error; 2 bad option, model config or layout (also options that conflict, or\n"
            "that the mode does not use: --top without --search, --ranks-tsv with it);\n"
            "3 --measured RUN_DIR missing, damaged or without a save; 5 --ranks-tsv FILE\n"
            "cannot be written.\n");
}

enum {
    OPT_MODEL = 256, OPT_CLUSTER, OPT_NODES, OPT_GPN, OPT_TP, OPT_CP, OPT_PP, OPT_DP, OPT_SEQ, OPT_GB,
    OPT_MB, OPT_RECOMPUTE, OPT_ZERO1, OPT_ZERO, OPT_ZERO_SHARD, OPT_ASYNC_SAVE, OPT_PRECISION, OPT_JSON, OPT_SEARCH, OPT_GPUS, OPT_TOP,
    OPT_PEAK, OPT_MEM, OPT_INTRA_BW, OPT_INTER_BW, OPT_INTRA_LAT, OPT_INTER_LAT, OPT_EFF,
    OPT_BASELINE, OPT_DATA_BYTES, OPT_SCORES, OPT_TIE, OPT_UNTIE, OPT_RANKS_TSV, OPT_HELP,
    OPT_VERSION, OPT_SCHEDULE, OPT_COMM, OPT_NCCL_ALGO, OPT_SEQ_PAR, OPT_MTBF, OPT_STALL,
    OPT_CKPT_BW, OPT_MEASURED, OPT_VIRTUAL, OPT_HBM_BW,
};

static const struct option long_opts[] = {
    {"model", 1, 0, OPT_MODEL},           {"cluster", 1, 0, OPT_CLUSTER},
    {"nodes", 1, 0, OPT_NODES},           {"gpus-per-node", 1, 0, OPT_GPN},
    {"tp", 1, 0, OPT_TP}, {"cp", 1, 0, OPT_CP}, {"pp", 1, 0, OPT_PP},
    {"dp", 1, 0, OPT_DP},                 {"seq-len", 1, 0, OPT_SEQ},
    {"global-batch", 1, 0, OPT_GB},       {"micro-batch", 1, 0, OPT_MB},
    {"recompute", 2, 0, OPT_RECOMPUTE},   {"zero1", 0, 0, OPT_ZERO1}, {"zero", 1, 0, OPT_ZERO},
    {"sequence-parallel", 0, 0, OPT_SEQ_PAR}, {"zero-shard-group", 1, 0, OPT_ZERO_SHARD},
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
    {"pp-schedule", 1, 0, OPT_SCHEDULE},  {"pp-virtual", 1, 0, OPT_VIRTUAL},
    {"comm", 1, 0, OPT_COMM},             {"nccl-algo", 1, 0, OPT_NCCL_ALGO},
    {"mtbf-hours", 1, 0, OPT_MTBF},       {"save-stall", 1, 0, OPT_STALL},
    {"ckpt-bw", 1, 0, OPT_CKPT_BW},       {"measured", 1, 0, OPT_MEASURED},
    {"hbm-bw", 1, 0, OPT_HBM_BW},
    {0, 0, 0, 0},
};

/* Negative values of the numbers are left to hpt_plan_validate. ctx: the
 * hpt_plan_opts (hpt_cli_parse's callback). */
static hpt_status apply(void *ctx, int c, const char *arg, int *action)
{
    hpt_plan_opts *o = ctx;
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
    case OPT_CP: return hpt_cli_parse_int_min(n, arg, 1, "ranks per sequence", &o->cp);
    case OPT_PP: return hpt_cli_parse_int(n, arg, &o->pp);
    case OPT_VIRTUAL: return hpt_cli_parse_int(n, arg, &o->pp_virtual);
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
    case OPT_MTBF: return hpt_cli_parse_double(n, arg, &o->mtbf_hours);
    case OPT_STALL: return hpt_cli_parse_double(n, arg, &o->save_stall);
    case OPT_CKPT_BW: return hpt_cli_parse_double(n, arg, &o->ckpt_bw);
    case OPT_HBM_BW: return hpt_cli_parse_double(n, arg, &o->hbm_bw);
    case OPT_MEASURED: o->measured = arg; return HPT_OK;
    case OPT_RECOMPUTE: o->recompute_given = 1; return hpt_recompute_parse(arg, &o->recompute);
    case OPT_SEQ_PAR: o->seqpar = 1; return HPT_OK;
    case OPT_ZERO1:
    case OPT_ZERO:
        return hpt_cli_zero_option(c == OPT_ZERO ? arg : NULL, &o->zero, &o->zero_given,
                                   &o->zero1_given);
    case OPT_ZERO_SHARD: return hpt_cli_parse_int_min(n, arg, 1, HPT_CLI_SHARD_WHAT, &o->zero_shard);
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

static hpt_status parse_args(int argc, char **argv, hpt_plan_opts *o, int *action)
{
    return hpt_cli_parse(argc, argv, long_opts, "hpt-plan", OPT_HELP, apply, o, action);
}

int main(int argc, char **argv)
{
    hpt_plan_opts o;
    hpt_plan_opts_init(&o);
    int action = 0;
    hpt_status st = parse_args(argc, argv, &o, &action);
    if (!st && action == 1)
        usage(stdout);
    else if (!st && action == 2)
        printf("hpt-plan (hpt) %s\n", PACKAGE_VERSION);
    else if (!st)
        st = hpt_plan_run(&o, stdout);
    if (st)
        fprintf(stderr, "hpt-plan: %s\n", hpt_error_msg());
    return hpt_status_exit_code(st);
}
