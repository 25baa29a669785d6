/* plan_cli.c — hpt-plan's options turned into a plan setup, and the
 * plan or search they ask for; see plan_cli.h. */
#include "plan_cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "cli.h"
#include "goodput.h"
#include "metrics_tool.h"
#include "model.h"
#include "plan.h"

void hpt_plan_opts_init(hpt_plan_opts *o)
{
    *o = (hpt_plan_opts){.nodes = HPT_PLAN_NOTSET, .gpn = HPT_PLAN_NOTSET, .tp = HPT_PLAN_NOTSET,
                         .cp = HPT_PLAN_NOTSET,
                         .pp = HPT_PLAN_NOTSET, .dp = HPT_PLAN_NOTSET, .seq = HPT_PLAN_NOTSET,
                         .gb = HPT_PLAN_NOTSET, .mb = HPT_PLAN_NOTSET, .gpus = HPT_PLAN_NOTSET,
                         .top = HPT_PLAN_NOTSET, .pp_virtual = HPT_PLAN_NOTSET, .tie = -1,
                         .peak = NAN, .mem_gb = NAN,
                         .intra_bw = NAN, .inter_bw = NAN, .intra_lat = NAN, .inter_lat = NAN,
                         .eff = NAN, .baseline_mib = NAN, .data_bytes = NAN,
                         .mtbf_hours = NAN, .save_stall = NAN, .ckpt_bw = NAN,
                         .hbm_bw = NAN};
}

/* Cluster preset with the overrides. */
static hpt_status setup_cluster(const hpt_plan_opts *o, hpt_cluster *cl)
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
                 {"data-bytes", o->data_bytes, 0, 1e18},      {"ckpt-bw", o->ckpt_bw, 1e-6, 1e6},
                 {"hbm-bw", o->hbm_bw, 1e-3, 1e6}};
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
    if (!isnan(o->ckpt_bw)) cl->ckpt_bw = o->ckpt_bw * 1e9;
    if (!isnan(o->hbm_bw)) cl->hbm_bw = o->hbm_bw * 1e9;
    if (!isnan(o->baseline_mib))
        cl->baseline_bytes = o->baseline_mib * 1048576.0;
    return HPT_OK;
}

/* GPUs in all from --gpus and --nodes x --gpus-per-node (0: neither
 * given); errors when both are given and disagree. */
static hpt_status given_gpus(const hpt_plan_opts *o, int gpn, long *gpus)
{
    if (o->gpn != HPT_PLAN_NOTSET && o->gpn <= 0)
        return hpt_error_set(HPT_ERR_USAGE, "--gpus-per-node %d: must be > 0", o->gpn);
    if (o->nodes != HPT_PLAN_NOTSET && o->nodes <= 0)
        return hpt_error_set(HPT_ERR_USAGE, "--nodes %d: must be > 0", o->nodes);
    if (o->gpus != HPT_PLAN_NOTSET && o->gpus <= 0)
        return hpt_error_set(HPT_ERR_USAGE, "--gpus %d: must be > 0", o->gpus);
    long by_nodes = o->nodes != HPT_PLAN_NOTSET ? (long)o->nodes * gpn : 0;
    if (o->gpus != HPT_PLAN_NOTSET && by_nodes && by_nodes != o->gpus)
        return hpt_error_set(HPT_ERR_USAGE, "--gpus %d conflicts with --nodes %d x "
                             "--gpus-per-node %d = %ld GPUs", o->gpus, o->nodes, gpn, by_nodes);
    *gpus = o->gpus != HPT_PLAN_NOTSET ? o->gpus : by_nodes;
    return HPT_OK;
}

/* Nodes, GPUs per node and DP from what was given (see --help). */
static hpt_status setup_grid(const hpt_plan_opts *o, hpt_plan_setup *s)
{
    s->tp = o->tp != HPT_PLAN_NOTSET ? o->tp : 1;
    s->pp = o->pp != HPT_PLAN_NOTSET ? o->pp : 1;
    if (s->tp <= 0 || s->pp <= 0)
        return hpt_error_set(HPT_ERR_USAGE, "--%s %d: must be > 0", s->tp <= 0 ? "tp" : "pp",
                             s->tp <= 0 ? s->tp : s->pp);
    s->gpus_per_node = o->gpn != HPT_PLAN_NOTSET ? o->gpn : s->cl.gpus_per_node;
    long given;
    hpt_status st = given_gpus(o, s->gpus_per_node, &given);
    if (st)
        return st;
    char from[64];
    if (o->gpus != HPT_PLAN_NOTSET)
        snprintf(from, sizeof from, "--gpus");
    else
        snprintf(from, sizeof from, "--nodes %d x --gpus-per-node %d", o->nodes, s->gpus_per_node);
    int cp = o->cp != HPT_PLAN_NOTSET ? o->cp : 1; /* the CP view comes last (setup) */
    long tcp = (long)s->tp * s->pp * cp;
    if (o->dp != HPT_PLAN_NOTSET)
        s->dp = o->dp;
    else if (given && given % tcp)
        return cp > 1 ? hpt_error_set(HPT_ERR_USAGE, "--tp %d x --cp %d x --pp %d = %ld does not "
                                      "divide the %ld GPUs of %s", s->tp, cp, s->pp, tcp, given,
                                      from)
                      : hpt_error_set(HPT_ERR_USAGE, "--tp %d x --pp %d = %ld does not divide "
                                      "the %ld GPUs of %s", s->tp, s->pp, tcp, given, from);
    else
        s->dp = given ? (int)(given / tcp) : 1;
    if (s->dp <= 0)
        return hpt_error_set(HPT_ERR_USAGE, "--dp %d: must be > 0", s->dp);
    if (s->zero_shard && (s->dp % s->zero_shard || !s->zero))
        return hpt_error_set(HPT_ERR_USAGE, s->zero ? "--zero-shard-group %d does not divide DP %d"
                             : "--zero-shard-group %d needs --zero 1, 2 or 3 (DP %d)",
                             s->zero_shard, s->dp);
    long world = tcp * s->dp;
    if (o->gpus != HPT_PLAN_NOTSET && world != given) /* --nodes: hpt_plan_validate names it */
        return cp > 1 ? hpt_error_set(HPT_ERR_USAGE, "layout --tp %d x --cp %d x --pp %d x --dp "
                                      "%d = %ld GPUs does not match the %ld GPUs of %s", s->tp,
                                      cp, s->pp, s->dp, world, given, from)
                      : hpt_error_set(HPT_ERR_USAGE, "layout --tp %d x --pp %d x --dp %d = %ld "
                                      "GPUs does not match the %ld GPUs of %s", s->tp, s->pp,
                                      s->dp, world, given, from);
    if (o->nodes > 0) {
        s->nodes = o->nodes;
    } else if (s->cl.exact && o->gpn == HPT_PLAN_NOTSET) { /* cpu-local: every rank on this machine */
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

/* The CUDA attention path the run will take, from HPT_CUDA_ATTENTION read
 * as the backend reads it (hpt_cuda_attention_path: the same values and
 * refusals). */
static hpt_status setup_attention(hpt_plan_setup *s)
{
    hpt_precision p = s->tf32 ? HPT_PRECISION_TF32 : s->fp32 ? HPT_PRECISION_FP32
                                                            : HPT_PRECISION_BF16;
    return hpt_cuda_attention_path(p, &s->attention);
}

/* --comm and --nccl-algo. auto (the default) resolves as hpt-train's
 * (lib/train.c choose_comm: NCCL when the backend keeps its buffers on a
 * device, NCCL is built and no two ranks share a GPU, else MPI) for the
 * modelled cluster: a GPU preset is one rank per GPU with NCCL, so NCCL;
 * cpu-local is hpt's CPU backend, so MPI (it refuses --comm nccl, and so
 * does this). */
static hpt_status setup_comm(const hpt_plan_opts *o, hpt_plan_setup *s)
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

/* --pp-schedule and --pp-virtual (the schedule's own rules, which need the
 * layout, are hpt_plan_validate's). */
static hpt_status setup_schedule(const hpt_plan_opts *o, hpt_plan_setup *s)
{
    const char *name = o->schedule ? o->schedule : "1f1b";
    int given = o->pp_virtual != HPT_PLAN_NOTSET;
    hpt_status st = hpt_plan_schedule_parse(name, &s->pp_schedule);
    if (st)
        return st;
    if (given && o->pp_virtual < 1)
        return hpt_error_set(HPT_ERR_USAGE, "--pp-virtual %d: must be >= 1 (model chunks per "
                             "pipeline rank)", o->pp_virtual);
    if (given && s->pp_schedule != HPT_PLAN_SCHEDULE_INTERLEAVED)
        return hpt_error_set(HPT_ERR_USAGE, "--pp-virtual %d is only used with --pp-schedule "
                             "interleaved (the schedule is %s)", o->pp_virtual, name);
    if (!given && s->pp_schedule == HPT_PLAN_SCHEDULE_INTERLEAVED)
        return hpt_error_set(HPT_ERR_USAGE, "--pp-schedule interleaved needs --pp-virtual V (model "
                             "chunks per pipeline rank, e.g. 2)");
    s->pp_virtual = given ? o->pp_virtual : 1;
    return HPT_OK;
}

static hpt_status setup(const hpt_plan_opts *o, hpt_plan_setup *s)
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
        if (sizes[i].v == HPT_PLAN_NOTSET && sizes[i].required)
            return hpt_error_set(HPT_ERR_USAGE, "--%s is required", sizes[i].opt);
        if (sizes[i].v != HPT_PLAN_NOTSET && sizes[i].v <= 0)
            return hpt_error_set(HPT_ERR_USAGE, "--%s %d: must be > 0", sizes[i].opt, sizes[i].v);
    }
    s->seq_len = o->seq;
    s->global_batch = o->gb;
    s->micro_batch = o->mb != HPT_PLAN_NOTSET ? o->mb : 1;
    s->recompute = o->recompute;
    s->sequence_parallel = o->seqpar; /* lib/plan.c applies it only with TP > 1 */
    s->zero = o->zero;
    s->zero_shard = o->zero_shard;
    s->async_save = o->async_save;
    s->store_scores = o->scores;
    if (o->scores && s->cl.exact) /* the exact model carves hpt-train's own buffers */
        return hpt_error_set(HPT_ERR_USAGE, "--store-scores is only used with the analytic "
                             "presets (a100-80gb, h100-80gb, h200-141gb): cluster cpu-local "
                             "models hpt-train's own allocations, and its attention keeps only "
                             "the softmax statistics");
    s->data_bytes = isnan(o->data_bytes) ? 0 : o->data_bytes;
    if ((st = setup_schedule(o, s)))
        return st;
    if ((st = hpt_plan_set_precision(s, o->precision, !isnan(o->peak))))
        return st;
    if ((st = setup_attention(s)))
        return st;
    if ((st = setup_comm(o, s)))
        return st;
    if ((st = setup_grid(o, s)))
        return st;
    return hpt_plan_cp_view(s, o->cp != HPT_PLAN_NOTSET ? o->cp : 1);
}

/* --measured RUN_DIR: the save stall (mean over the run's saves) and the
 * restart time (mean start-up of its resumed segments, else of all) the
 * run's metrics file measured (lib/goodput.h) into c. */
static hpt_status measured_ckpt(const char *arg, hpt_plan_ckpt *c)
{
    char path[4200];
    hpt_goodput g;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the reader's messages, not HDF5's stack */
    hpt_status st = hpt_metrics_tool_resolve(arg, path, sizeof path);
    if (!st)
        st = hpt_goodput_of_file(path, &g);
    if (st)
        return hpt_error_set(st, "--measured %s: %s", arg, hpt_error_msg());
    if (g.saves == 0)
        return hpt_error_set(HPT_ERR_DATA, "--measured %s: the run saved no checkpoint, so its "
                             "save stall is unknown (give --save-stall S)", arg);
    c->save_s = g.checkpoint / g.saves;
    snprintf(c->save_from, sizeof c->save_from, "measured: mean of %d saves in %s", g.saves, path);
    int n = g.resumes ? g.resumes : g.segments;
    c->restart_s = (g.resumes ? g.restart_startup : g.startup) / (n ? n : 1);
    snprintf(c->restart_from, sizeof c->restart_from, "measured: mean start-up of %d %ssegment%s",
             n, g.resumes ? "resumed " : "", n == 1 ? "" : "s");
    return HPT_OK;
}

/* --mtbf-hours: the checkpoint interval of the planned layout into r->ckpt
 * (Young 1974, Daly 2006; lib/goodput.h). The save stall is --save-stall,
 * or measured, or planned (hpt_plan_save_seconds); the restart time
 * measured, or planned as reading the checkpoint back at the same
 * bandwidth. */
static hpt_status plan_ckpt(const hpt_plan_opts *o, const hpt_plan_setup *s, hpt_plan_result *r)
{
    hpt_plan_ckpt *c = &r->ckpt;
    double planned = hpt_plan_save_seconds(s, &c->ckpt_bytes);
    c->mtbf_s = o->mtbf_hours * 3600;
    c->save_s = c->restart_s = planned;
    snprintf(c->save_from, sizeof c->save_from, "planned: %.4g GB at %.4g GB/s per node x %d "
             "node%s%s", c->ckpt_bytes / 1e9, s->cl.ckpt_bw / 1e9, s->nodes,
             s->nodes == 1 ? "" : "s", s->async_save ? "; with --async-save the stall is the "
             "snapshot, less: measure it" : "");
    snprintf(c->restart_from, sizeof c->restart_from, "planned: reading the checkpoint back at "
             "that bandwidth");
    if (!isnan(o->save_stall)) {
        c->save_s = o->save_stall;
        snprintf(c->save_from, sizeof c->save_from, "--save-stall");
    }
    if (o->measured) {
        hpt_status st = measured_ckpt(o->measured, c);
        if (st)
            return st;
    }
    c->young_s = hpt_goodput_young(c->save_s, c->mtbf_s);
    c->daly_s = hpt_goodput_daly(c->save_s, c->mtbf_s);
    double every = round(c->daly_s / r->step_time_s);
    c->save_every = every < 1 ? 1 : every > 1e9 ? 1000000000 : (int)every;
    c->goodput_young = hpt_goodput_expected(c->young_s, c->save_s, c->restart_s, c->mtbf_s);
    c->goodput_daly = hpt_goodput_expected(c->daly_s, c->save_s, c->restart_s, c->mtbf_s);
    c->goodput_every = hpt_goodput_expected(c->save_every * r->step_time_s, c->save_s,
                                            c->restart_s, c->mtbf_s);
    return HPT_OK;
}

static hpt_status run_one(const hpt_plan_opts *o, const hpt_plan_setup *s, FILE *out)
{
    hpt_plan_result *r = malloc(sizeof *r);
    if (!r)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    hpt_status st = hpt_plan_eval(s, r);
    if (!st && !isnan(o->mtbf_hours))
        st = plan_ckpt(o, s, r);
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
            hpt_plan_write_json(s, r, out);
        else
            hpt_plan_write_text(s, r, out);
    }
    free(r);
    return st;
}

static hpt_status run_search(const hpt_plan_opts *o, hpt_plan_setup *s, FILE *out)
{
    hpt_plan_fixed fx = {.tp = o->tp != HPT_PLAN_NOTSET, .pp = o->pp != HPT_PLAN_NOTSET, .dp = o->dp != HPT_PLAN_NOTSET,
                         .micro_batch = o->mb != HPT_PLAN_NOTSET, .recompute = o->recompute_given,
                         .zero = o->zero_given || o->zero1_given, .sequence_parallel = o->seqpar,
                         .zero_shard = o->zero_shard != 0, .pp_schedule = o->schedule != NULL,
                         .cp = o->cp != HPT_PLAN_NOTSET};
    s->cp = o->cp != HPT_PLAN_NOTSET ? o->cp : 1; /* the search puts each layout in the CP view */
    if (o->zero_shard && fx.zero && !o->zero)
        return hpt_error_set(HPT_ERR_USAGE, "--zero-shard-group %d needs --zero 1, 2 or 3",
                             o->zero_shard);
    s->zero_shard = o->zero_shard; /* kept where DP is a multiple of it (hpt_plan_search) */
    long gpus;
    hpt_status st = given_gpus(o, o->gpn != HPT_PLAN_NOTSET ? o->gpn : s->cl.gpus_per_node, &gpus);
    if (st)
        return st;
    if (!gpus)
        return hpt_error_set(HPT_ERR_USAGE, "--search needs --gpus N (or --nodes)");
    if (gpus > 1 << 30)
        return hpt_error_set(HPT_ERR_USAGE, "--search: %ld GPUs, at most 2^30", gpus);
    if (o->top != HPT_PLAN_NOTSET && o->top <= 0)
        return hpt_error_set(HPT_ERR_USAGE, "--top %d: must be > 0", o->top);
    s->gpus_per_node = o->gpn != HPT_PLAN_NOTSET ? o->gpn : s->cl.exact ? (int)gpus : s->cl.gpus_per_node;
    if (fx.cp && s->cp > 1) { /* a kept --cp: its own rules, not "no valid layout" */
        hpt_plan_setup t = *s;
        t.cp = 1;
        if ((st = hpt_plan_cp_view(&t, s->cp)))
            return st;
        if (gpus % s->cp)
            return hpt_error_set(HPT_ERR_USAGE, "--cp %d does not divide the %ld GPUs of --gpus "
                                 "(--search keeps the CP given)", s->cp, gpus);
    }
    return hpt_plan_search(s, &fx, (int)gpus, o->top != HPT_PLAN_NOTSET ? o->top : 10, o->json, out);
}

/* The --mtbf-hours options: ranges and the modes that use them. */
static hpt_status check_mtbf(const hpt_plan_opts *o)
{
    const char *given = !isnan(o->save_stall) ? "--save-stall" : o->measured ? "--measured"
                        : !isnan(o->ckpt_bw) ? "--ckpt-bw" : NULL;
    if (isnan(o->mtbf_hours))
        return given ? hpt_error_set(HPT_ERR_USAGE, "%s is only used with --mtbf-hours H", given)
                     : HPT_OK;
    if (!(o->mtbf_hours > 0 && o->mtbf_hours <= 1e6))
        return hpt_error_set(HPT_ERR_USAGE, "--mtbf-hours %g: must be > 0 and at most 1e6 (the "
                             "job's mean time between failures, hours)", o->mtbf_hours);
    if (!isnan(o->save_stall) && !(o->save_stall > 0 && o->save_stall <= 1e9))
        return hpt_error_set(HPT_ERR_USAGE, "--save-stall %g: must be > 0 and at most 1e9 "
                             "(seconds)", o->save_stall);
    if (!isnan(o->save_stall) && o->measured)
        return hpt_error_set(HPT_ERR_USAGE, "--save-stall and --measured both give the save "
                             "stall: give one");
    if (o->search)
        return hpt_error_set(HPT_ERR_USAGE, "--mtbf-hours is not used with --search (it plans "
                             "the checkpoint interval of one layout)");
    if (!isnan(o->ckpt_bw) && o->measured) /* it only plans what --measured measured */
        fprintf(stderr, "hpt-plan: note: --ckpt-bw %g is not used: --measured gives the save "
                "stall and the restart time, which --ckpt-bw would plan\n", o->ckpt_bw);
    return HPT_OK;
}

hpt_status hpt_plan_run(const hpt_plan_opts *o, FILE *out)
{
    hpt_plan_setup s;
    hpt_status st = check_mtbf(o);
    if (st)
        return st;
    if (o->search && o->ranks_tsv)
        return hpt_error_set(HPT_ERR_USAGE, "--ranks-tsv is not used with --search (it writes "
                             "the ranks of one layout)");
    if (!o->search && o->top != HPT_PLAN_NOTSET)
        return hpt_error_set(HPT_ERR_USAGE, "--top is only used with --search");
    if (o->search) {
        hpt_plan_opts g = *o; /* the grid is searched: plan the setup on one GPU first */
        g.nodes = HPT_PLAN_NOTSET, g.gpn = HPT_PLAN_NOTSET, g.gpus = HPT_PLAN_NOTSET;
        g.tp = g.tp != HPT_PLAN_NOTSET ? g.tp : 1, g.pp = g.pp != HPT_PLAN_NOTSET ? g.pp : 1;
        g.dp = g.dp != HPT_PLAN_NOTSET ? g.dp : 1;
        g.zero_shard = 0; /* DP is searched: run_search keeps the group */
        g.cp = HPT_PLAN_NOTSET; /* CP is searched too: the setup on one GPU has none */
        st = setup(&g, &s);
        return st ? st : run_search(o, &s, out);
    }
    st = setup(o, &s);
    if (!st) /* --zero 2/3 on DP 1: ZeRO 0, as hpt-train (the report notes it); the search
              * applies the stage where DP > 1 */
        hpt_plan_zero_dp1(&s);
    if (!st && s.pp == 1 && (s.pp_schedule == HPT_PLAN_SCHEDULE_GPIPE ||
                             s.pp_schedule == HPT_PLAN_SCHEDULE_ZBH1)) { /* as hpt-train runs it */
        fprintf(stderr, "hpt-plan: note: --pp-schedule %s with --pp 1 has no pipeline to schedule: "
                "planned as 1f1b, as hpt-train runs it\n", hpt_plan_schedule_str(s.pp_schedule));
        s.pp_schedule = HPT_PLAN_SCHEDULE_1F1B;
    }
    return st ? st : run_one(o, &s, out);
}
