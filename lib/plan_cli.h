/* plan_cli.h — hpt-plan's work behind its option parser: what the command
 * line says (hpt_plan_opts) turned into a plan setup (cluster preset with
 * overrides, layout grid, precision, communication library) and one plan
 * or a layout search written to a FILE. src/hpt-plan.c parses the options
 * into hpt_plan_opts and calls hpt_plan_run, as the other thin mains do. */
#ifndef HPT_PLAN_CLI_H
#define HPT_PLAN_CLI_H

#include <stdio.h>

#include "error.h"

/* An int option not given. */
#define HPT_PLAN_NOTSET (-2147483647 - 1)

/* Everything the command line says, as given (names as hpt-plan's
 * options; units as the options': GB, GB/s, microseconds, MiB, bytes).
 * Ints HPT_PLAN_NOTSET and doubles NAN when not given; strings NULL;
 * tie: -1 not given, 0 --untie-embeddings, 1 --tie-embeddings. Strings
 * are borrowed (argv). Negative numbers are refused by hpt_plan_run. */
typedef struct {
    const char *model, *cluster, *precision, *ranks_tsv, *schedule, *comm, *nccl_algo;
    int nodes, gpn, tp, cp, pp, dp, seq, gb, mb, recompute, recompute_given, zero, zero_given, zero1_given, zero_shard, seqpar, async_save,
        json, search, gpus, top, scores, tie, pp_virtual /* --pp-virtual V */;
    double peak, mem_gb, intra_bw, inter_bw, intra_lat, inter_lat, eff, baseline_mib, data_bytes;
    /* --mtbf-hours H (the checkpoint interval), --save-stall S, --ckpt-bw
     * GB/s per node, --measured RUN_DIR (the save stall and restart time
     * a run's metrics file measured) */
    double mtbf_hours, save_stall, ckpt_bw;
    double hbm_bw; /* --hbm-bw X: device memory bandwidth, GB/s (NAN: preset's) */
    const char *measured;
} hpt_plan_opts;

/* *o with nothing given. */
void hpt_plan_opts_init(hpt_plan_opts *o);

/* Plan the layout o describes, or with o->search rank the layouts for its
 * GPUs, and write tables (or JSON with o->json) to out; with o->ranks_tsv
 * also that file (predicted comm.tsv rows of every rank); with
 * o->mtbf_hours the checkpoint interval (plan.h hpt_plan_ckpt) from the
 * planned save stall, o->save_stall, or the one measured in the metrics
 * of the run o->measured (lib/goodput.h; HPT_ERR_DATA for a file that is
 * missing, damaged or holds no save). Errors:
 * HPT_ERR_USAGE naming the option and the rule (missing --model,
 * --cluster, --seq-len or --global-batch; out-of-range overrides; a layout
 * that does not divide the GPUs; options the mode does not use), the
 * model config's errors, HPT_ERR_IO when --ranks-tsv cannot be written,
 * HPT_ERR_INTERNAL out of memory. A layout that does not fit is a result,
 * not an error. */
hpt_status hpt_plan_run(const hpt_plan_opts *o, FILE *out);

#endif
