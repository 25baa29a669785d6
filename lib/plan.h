/* plan.h — "estimate before you launch": per-rank memory, FLOPs,
 * communication volume and time, pipeline bubble, step time, tokens/s and
 * MFU of a training layout (TP x PP x DP) on a cluster, and a search over
 * layouts. Used by hpt-plan (src/hpt-plan.c through lib/plan_cli.c); the
 * formulas and their sources are in docs/PLAN.md.
 *
 * Two memory/communication models:
 *  - exact (cluster cpu-local): hpt's own fp32 CPU allocations and the
 *    payload its communication counters record (lib/model.c, lib/optim.c,
 *    lib/train.c, lib/comm_mpi.c), so predictions can be checked against
 *    `hpt-train --comm-stats` (comm.tsv) byte for byte and against the
 *    measured peak RSS;
 *  - analytic (GPU clusters): what hpt's CUDA backend allocates in the
 *    run's precision — bf16: fp32 weights and their bf16 working copy, fp32
 *    gradients, AdamW moments (18 bytes per parameter; ZeRO-1 shards the
 *    moments only), activations with the residual stream, statistics and
 *    gradients in fp32 and the rest in bf16; fp32 and tf32: 16 bytes per
 *    parameter and every activation in fp32 (lib/model.c layout_acts) —
 *    plus the backend's scratch (the bf16/tf32 attention's chunk scores,
 *    bf16 operands). Megatron's count (Korthikanti et al. 2022 adapted to
 *    SwiGLU and grouped-query attention) stays available for comparison.
 *
 * Units: bytes, seconds, FLOPs (floating-point operations, a multiply-add
 * counts 2), FLOP/s, bytes/s. Sizes are doubles so 405B-parameter models
 * on 16k GPUs never overflow.
 */
#ifndef HPT_PLAN_H
#define HPT_PLAN_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "error.h"

/* A cluster: identical nodes of `gpus_per_node` devices, a fast link
 * inside a node (NVLink) and a slower one between nodes (InfiniBand). */
typedef struct {
    char name[32];
    int gpus_per_node;
    double peak_flops;    /* dense FLOP/s per device at the run's precision
                           * (a preset's: bf16; hpt_plan_set_precision
                           * switches to peak_tf32 or peak_fp32)            */
    double mem_bytes;     /* usable memory per device                         */
    double intra_bw;      /* bytes/s per device, one direction, inside a node */
    double inter_bw;      /* bytes/s per device, one direction, between nodes */
    double intra_lat;     /* seconds per message step inside a node           */
    double inter_lat;     /* seconds per message step between nodes           */
    double efficiency;    /* fraction of peak the model's matmuls reach       */
    double baseline_bytes;/* per-process memory outside the model's tensors
                           * (runtime, libraries, communication library)     */
    int exact;            /* 1: model hpt's own fp32 CPU allocations         */
    int fp32_only;        /* 1: the device trains in fp32 only (cpu-local)   */
    double peak_tf32;     /* dense tf32 tensor-core FLOP/s (0: peak_flops)   */
    double peak_fp32;     /* dense fp32 FLOP/s, CUDA cores (0: peak_flops)   */
    double ckpt_bw;       /* bytes/s one node writes to the checkpoint storage
                           * (the planned save stall, hpt-plan --mtbf-hours) */
    double hbm_bw;        /* device memory bandwidth, bytes/s (datasheet peak;
                           * the memory-bound kernels reach HPT_PLAN_HBM_EFF
                           * of it; cpu-local: measured, reported only)      */
} hpt_cluster;

/* Fraction of hbm_bw the memory-bound kernels are planned to reach: a
 * device-to-device copy's 4.3 of 4.8 TB/s measured on an H200 (docs/PLAN.md,
 * "Memory-bound kernels"). */
#define HPT_PLAN_HBM_EFF 0.9

/* Kernel classes whose bytes the step-time model charges at the memory
 * bandwidth (docs/PLAN.md, "Memory-bound kernels"): what hpt's CUDA
 * backend moves through device memory besides the GEMMs' operands. */
typedef enum {
    HPT_PLAN_K_NORM,      /* RMSNorm forward (fused with the residual add),
                           * backward, recomputation                        */
    HPT_PLAN_K_ROPE,      /* RoPE of q, k and of their gradients            */
    HPT_PLAN_K_SWIGLU,    /* SwiGLU forward and backward                    */
    HPT_PLAN_K_CAST,      /* bf16 rounding of matmul_backward's fp32
                           * gradient operand (bf16 only)                   */
    HPT_PLAN_K_ATTENTION, /* the attention's score chunks through cuBLAS (S,
                           * P, dP, dS in memory); 0 on the flash kernels   */
    HPT_PLAN_K_XENT,      /* cross-entropy over the fp32 logits (last stage) */
    HPT_PLAN_K_EMBED,     /* embedding lookup and gradient (first stage)    */
    HPT_PLAN_KCLASSES
} hpt_plan_kclass;

/* "norm", "rope", "swiglu", "cast", "attention", "cross_entropy",
 * "embedding": the JSON keys and text labels. */
const char *hpt_plan_kclass_name(hpt_plan_kclass k);

/* Fill *c from a preset: a100-80gb, h100-80gb, h200-141gb (8 devices per
 * node, NVLink + InfiniBand), cpu-local (this machine: hpt's CPU backend).
 * Values and sources: docs/PLAN.md, "Cluster presets". Errors:
 * HPT_ERR_USAGE listing the presets when `name` is unknown. */
hpt_status hpt_cluster_preset(const char *name, hpt_cluster *c);

/* Pipeline schedules (hpt-train --pp-schedule), as hpt_plan_setup.pp_schedule:
 *  - 1F1B (PipeDream-Flush; Narayanan et al. 2021, section 2.2): stage s
 *    holds min(p - s, m) micro-batches' activations;
 *  - GPIPE (Huang et al. 2019): every forward before the first backward,
 *    all m on every stage;
 *  - INTERLEAVED (interleaved 1F1B; Narayanan et al. 2021, section 2.2.2;
 *    Megatron-LM's forward_backward_pipelining_with_interleaving): each
 *    rank holds V model chunks, virtual stage v = c x p + s holds layers
 *    [v L/(p V), (v+1) L/(p V)); m must be a multiple of p;
 *  - ZBH1 (zero-bubble ZB-H1; Qi et al. 2024, "Zero Bubble Pipeline
 *    Parallelism", section 3.1): the backward split into B (input
 *    gradients) and W (weight gradients of the linear layers), stage s
 *    deferring s of its W passes into the bubbles; min(p, m) micro-batches
 *    in flight on every stage (1F1B's bound, stage 0's) plus min(s + 1, m)
 *    sets of W operands (hpt_plan_wstash_bytes).
 * docs/PLAN.md, "Pipeline schedules", has the formulas. */
typedef enum {
    HPT_PLAN_SCHEDULE_1F1B,
    HPT_PLAN_SCHEDULE_GPIPE,
    HPT_PLAN_SCHEDULE_INTERLEAVED,
    HPT_PLAN_SCHEDULE_ZBH1,
} hpt_plan_schedule;

/* What to plan. */
typedef struct {
    hpt_config cfg;
    hpt_cluster cl;
    int nodes, gpus_per_node;  /* nodes x gpus_per_node = tp x pp x dp  */
    int tp, pp, dp;
    int seq_len;               /* tokens per sequence                   */
    int global_batch;          /* sequences per optimizer step          */
    int micro_batch;           /* sequences per micro-batch             */
    int recompute;             /* 0 none, 1 full, 2 selective (lib/model.h
                                * hpt_recompute)                         */
    int sequence_parallel;     /* hpt-train --sequence-parallel (TP > 1) */
    int zero;                  /* ZeRO stage over DP: 0 none, 1 AdamW
                                * state sharded, 2 also the reduced
                                * gradients, 3 also the parameters
                                * (hpt-train --zero N)                    */
    int zero_shard;            /* HSDP: ZeRO shards within groups of this
                                * many DP ranks, replicated across them;
                                * 0 = all of DP (--zero-shard-group N)   */
    int zero_requested;        /* the --zero stage asked for where the plan
                                * runs another (hpt_plan_zero_dp1), else 0 */
    int pp_schedule;           /* hpt_plan_schedule (hpt-train --pp-schedule) */
    int pp_virtual;            /* interleaved: model chunks per pipeline rank,
                                * V >= 1 (--pp-virtual; 0 or 1: one chunk).
                                * Ignored by the other schedules          */
    int fp32;                  /* 1: fp32 storage (--precision fp32 or tf32),
                                * 0: bf16 mixed precision               */
    int tf32;                  /* with fp32: products on the tensor cores in
                                * tf32 (hpt-train --precision tf32): the
                                * attention's cuBLAS chunk scratch, the
                                * tf32 peak                              */
    int attention;             /* the CUDA attention path HPT_CUDA_ATTENTION
                                * names: 0 the default (bf16: the tensor-
                                * core kernels where the head dim allows;
                                * tf32: cuBLAS chunks), 'm' mma, 'b' blas,
                                * 'f' flash (lib/attention_cuda.cu)     */
    int store_scores;          /* analytic model: keep the (B,H,T,T)
                                * softmax for backward (0 = FlashAttention-
                                * style, only the row statistics, as both
                                * of hpt's backends)                     */
    double data_bytes;         /* token shards each rank maps and touches */
    int async_save;            /* hpt-train --async-save: count its host
                                * staging buffer (mem.staging)            */
    int comm_lib;              /* hpt_plan_comm_lib: the collectives' library */
    int nccl_algo;             /* hpt_nccl_algo (comm_lib NCCL only)     */
    int cp;                    /* context parallelism (hpt-train --cp, ring
                                * attention; issue 31): 0 or 1 none. A
                                * setup with cp > 1 is in the CP view of
                                * hpt_plan_cp_view: dp, seq_len and
                                * global_batch then describe the weight
                                * replicas and sequence chunks            */
} hpt_plan_setup;

/* Memory of one rank, bytes. total = sum of the others, or the
 * initialisation peak when that is larger (exact model only). */
typedef struct {
    double weights, grads, optimizer, activations, logits, comm_buffers, baseline, total;
    double staging; /* --async-save's host staging buffer (0 without): in total
                     * when the device memory is host memory (the exact CPU
                     * model), else host memory beside the device's */
} hpt_plan_mem;

typedef enum {
    HPT_PLAN_TP,
    HPT_PLAN_PP,
    HPT_PLAN_DP,
    HPT_PLAN_MP,    /* model-parallel (TP x PP) gradient-norm sum          */
    HPT_PLAN_EMBED, /* tied embedding copies of the first and last stage   */
    HPT_PLAN_CP,    /* context parallelism's ring (K/V blocks, dK/dV)      */
    HPT_PLAN_GROUPS
} hpt_plan_group;

/* Names as in comm.tsv: "tp", "pp", "dp", "mp", "embed", "cp". */
const char *hpt_plan_group_name(hpt_plan_group g);

/* Communication of one rank in one group per optimizer step. */
typedef struct {
    double calls;
    double bytes;       /* payload handed to the calls (hpt's counters)     */
    double wire_bytes;  /* bytes each rank sends under the algorithm:
                         * ring all-reduce 2(n-1)/n, reduce-scatter and
                         * all-gather (n-1)/n, point-to-point 1 x payload   */
    double seconds;     /* alpha-beta time                                  */
} hpt_plan_comm;

#define HPT_PLAN_MAX_STAGES 1024

typedef struct {
    int l0, l1;             /* layers [l0, l1); interleaved: its first chunk's
                             * (hpt_plan_chunk_layers has every chunk)       */
    int nlayers;            /* layers on the stage, all its chunks          */
    int in_flight;          /* activation slots it holds at its peak
                             * (hpt_plan_in_flight): micro-batches, under
                             * the interleaved schedule chunk forwards      */
    double in_flight_mb;    /* the same in micro-batches through the whole
                             * stage: in_flight / V                         */
    double params;          /* elements of this stage's parameter block     */
    hpt_plan_mem mem;       /* DP rank 0 (the largest ZeRO-1 shard)         */
    hpt_plan_comm comm[HPT_PLAN_GROUPS]; /* DP rank 0                        */
    double flops_per_mb;    /* FLOPs of one micro-batch forward+backward,
                             * one TP rank (recomputation included)        */
    double compute_s;       /* flops_per_mb / (peak x efficiency)           */
    double kbytes[HPT_PLAN_KCLASSES]; /* device-memory bytes of one micro-
                             * batch per kernel class (hpt_plan_kclass)     */
    double memory_s;        /* per micro-batch: what the memory-bound classes
                             * add to compute_s (roofline: each class takes
                             * max(its FLOP time, bytes / bandwidth); 0 on
                             * cpu-local, whose efficiency covers it)       */
    double optim_bytes;     /* per step: zero_grad, gradient norm, AdamW
                             * (on the ZeRO shard), the bf16 working copy  */
} hpt_plan_stage;

/* The checkpoint interval against failures (hpt-plan --mtbf-hours; Young
 * 1974, Daly 2006: lib/goodput.h), filled by the caller of hpt_plan_eval
 * (lib/plan_cli.c) and printed by the writers when mtbf_s > 0. Seconds. */
typedef struct {
    double mtbf_s;            /* M: the job's mean time between failures   */
    double save_s;            /* delta: the training stall of one save     */
    double restart_s;         /* R: from a failure to training again       */
    double ckpt_bytes;        /* a checkpoint's bytes (12 per parameter)    */
    char save_from[4400], restart_from[200]; /* where delta and R come from */
    double young_s, daly_s;   /* training time between saves               */
    int save_every;           /* Daly's interval in steps (>= 1)           */
    double goodput_young, goodput_daly, goodput_every; /* expected, Daly's
                               * model, at Young's, Daly's and save_every's
                               * interval                                 */
} hpt_plan_ckpt;

typedef struct {
    int micro_batches;          /* m = global_batch / (micro_batch x dp)    */
    int nstages;
    hpt_plan_stage stage[HPT_PLAN_MAX_STAGES];
    int worst_stage;            /* stage with the largest memory total      */
    hpt_plan_mem worst;         /* its memory                               */
    int fits;                   /* worst.total <= cluster memory            */
    double model_flops_per_step;/* 6 N_matmul + 6 L T C per token, all GPUs */
    double flops_per_step;      /* executed: + one forward of the layers
                                 * with recomputation                       */
    hpt_plan_comm comm[HPT_PLAN_GROUPS]; /* max over stages, per rank      */
    int link_inter[HPT_PLAN_GROUPS]; /* 1: the group spans nodes (IB)       */
    double bubble;              /* idle fraction of the step, hpt_plan_bubble */
    int boundaries;             /* chunk boundaries a micro-batch crosses one
                                 * way: p V - 1 (p - 1 without interleaving) */
    double p2p_bytes;           /* point-to-point payload of one pipeline (one
                                 * TP and DP index) per step, both ways:
                                 * 2 m x boundaries x the message          */
    double compute_s;           /* m x slowest stage's micro-batch (FLOPs and
                                 * memory-bound kernels)                    */
    double memory_bound_s;      /* of the step: m x that stage's memory_s plus
                                 * the optimizer's (optim_bytes / bandwidth) */
    double optim_s;             /* the optimizer's part (slowest stage)     */
    double comm_s;              /* communication on the critical path      */
    double comm_compute_ratio;  /* all communication time / compute time   */
    double step_time_s, tokens_per_s, mfu;
    hpt_plan_ckpt ckpt;         /* zero: not asked (see hpt_plan_ckpt)      */
    /* context parallelism's ring (cp > 1; hpt_plan_cp_view), per layer and
     * micro-batch on one rank: the bytes it sends in forward ((CP - 1) K/V
     * blocks) and backward ((CP - 1) K/V blocks and CP dK/dV
     * accumulators), the seconds of one hop (a K/V block pair) against
     * the attention compute of one ring step (a 1/CP share of the
     * layer's), and the ring time not hidden behind it per step */
    double cp_fwd_bytes, cp_bwd_bytes, cp_hop_s, cp_block_s, cp_exposed_s;
} hpt_plan_result;

/* Set the run's precision from hpt-train's --precision name: "fp32" (fp32
 * storage, no tensor cores), "tf32" (fp32 storage, tf32 products) or
 * "bf16" (mixed precision); NULL: the cluster's default (cpu-local fp32,
 * else bf16). Sets s->fp32 and s->tf32 and, unless keep_peak (the user gave
 * --peak-flops), the cluster's peak for that precision (cl.peak_tf32 or
 * cl.peak_fp32 where the preset has one). Call after the cluster is set.
 * Errors: HPT_ERR_USAGE for another name (hpt_plan_validate refuses tf32 and
 * bf16 on an fp32-only cluster). */
hpt_status hpt_plan_set_precision(hpt_plan_setup *s, const char *precision, int keep_peak);

/* "fp32", "tf32" or "bf16": the precision of s, as hpt-train names it. */
const char *hpt_plan_precision_name(const hpt_plan_setup *s);

/* hpt-train's rule for ZeRO over one DP rank (lib/train.c): --zero 2 or 3
 * with DP 1 shards nothing and runs as --zero 0, with a note. Applies it to
 * s: sets s->zero_requested to the stage asked for, s->zero and
 * s->zero_shard to 0, and returns 1; returns 0 and leaves s alone
 * otherwise (ZeRO-1 on DP 1 runs as ZeRO-1, hpt-train's too). The text
 * report prints the note, the JSON "training.zero_requested". */
int hpt_plan_zero_dp1(hpt_plan_setup *s);

/* Put s (a layout of TP x CP x PP x DP ranks with sequences of T tokens,
 * s->dp the data-parallel size, s->seq_len T, s->global_batch in
 * sequences) into the CP view the rest of the planner works on: context
 * parallelism is data parallelism over sequence chunks for everything but
 * attention — every token's work and activations are local, the weights are
 * replicated over CP x DP (gradients and ZeRO-1 reduce over them) — so the
 * view plans DP' = CP x DP replicas (replica index cp + dp x CP: the grid
 * rank tp + cp*TP + dp*TP*CP + pp*TP*CP*DP is tp + dp'*TP + pp*TP*DP'),
 * T' = T/CP tokens per chunk and CP x global batch chunks per step; the
 * attention FLOPs (each chunk attends the whole causal prefix: CP x the
 * view's), the ring's buffers (10 K/V-sized blocks, lib/attention_ring.h)
 * and traffic (group cp) are added by the planner where s->cp > 1, and the
 * writers print the real DP, T and global batch. cp <= 1: nothing.
 * Errors: HPT_ERR_USAGE when 2 x CP does not divide T, with --zero 2/3
 * or HSDP (hpt-train refuses them with --cp). */
hpt_status hpt_plan_cp_view(hpt_plan_setup *s, int cp);

/* Check the setup (sizes > 0, layout = nodes x gpus_per_node, TP divides
 * heads, kv heads and intermediate_size, PP <= layers, global batch a
 * multiple of micro-batch x DP, precision available on the cluster; the
 * interleaved schedule: PP > 1, V >= 1, PP x V <= layers, m a multiple of
 * PP, the message naming the nearest valid micro-batch counts).
 * Errors: HPT_ERR_USAGE naming the option and the rule. */
hpt_status hpt_plan_validate(const hpt_plan_setup *s);

/* Evaluate a validated setup into *r. Errors: as hpt_plan_validate. */
hpt_status hpt_plan_eval(const hpt_plan_setup *s, hpt_plan_result *r);

/* The planned training stall of one synchronous checkpoint save, seconds:
 * the checkpoint's bytes — 12 per parameter, fp32 weights and AdamW's two
 * fp32 moments of every tensor once (docs/CHECKPOINT.md) — into *bytes,
 * written by all nodes at once at cl.ckpt_bw each (docs/PLAN.md,
 * "Checkpoint interval"). */
double hpt_plan_save_seconds(const hpt_plan_setup *s, double *bytes);

/* Layers [*l0, *l1) of stage `stage` of `pp` over L layers: hpt's
 * balanced split, stage s gets layers floor(sL/P) .. floor((s+1)L/P). */
void hpt_plan_stage_layers(int L, int pp, int stage, int *l0, int *l1);

/* Layers [*l0, *l1) of model chunk `chunk` of stage `stage` with V chunks
 * per stage (interleaved schedule): virtual stage v = chunk x pp + stage of
 * pp x V, hpt_plan_stage_layers(L, pp V, v). V = 1: the stage's layers. */
void hpt_plan_chunk_layers(int L, int pp, int V, int stage, int chunk, int *l0, int *l1);

/* Layers of `stage` in all: the sum over its chunks (V of them under the
 * interleaved schedule, else 1). */
int hpt_plan_stage_nlayers(const hpt_plan_setup *s, int stage);

/* --pp-schedule's names (hpt-train's and hpt-plan's): "1f1b", "gpipe",
 * "interleaved", "zb-h1" for the hpt_plan_schedule values; NULL for any
 * other value. */
const char *hpt_plan_schedule_str(int schedule);

/* --pp-schedule NAME into *out (hpt_plan_schedule). Errors: HPT_ERR_USAGE
 * "--pp-schedule 'X': expected 1f1b, gpipe, interleaved or zb-h1". */
hpt_status hpt_plan_schedule_parse(const char *name, int *out);

/* "1f1b", "gpipe", "interleaved" or "zb-h1": s's schedule as hpt-train
 * names it. */
const char *hpt_plan_schedule_name(const hpt_plan_setup *s);

/* Micro-batches per step and DP rank, m = global batch / (micro-batch x DP). */
int hpt_plan_micro_batches(const hpt_plan_setup *s);

/* Activation slots `stage` holds at its peak under s's schedule:
 *   1F1B         min(p - s, m) micro-batches (Narayanan et al. 2021, 2.2);
 *   GPipe        m (Huang et al. 2019);
 *   interleaved  min((p - s - 1) x 2 + (V - 1) x p + 1, m V) chunk forwards,
 *                each holding 1/V of the stage's layers: Megatron-LM's
 *                warm-up count (schedules.py, num_warmup_microbatches) plus
 *                the steady state's one forward ahead of its backward; on
 *                stage 0 (p V + p - 1)/V = p (1 + (p - 1)/(p V)) micro-batches,
 *                Korthikanti et al. 2022 / Narayanan et al. 2021's factor;
 *   zb-h1        min(p, m) (a micro-batch's activations stay until its
 *                deferred W: stage s holds s more than 1F1B).
 * lib/train_pipeline.c pipeline_slots allocates as many for 1F1B/GPipe. */
int hpt_plan_in_flight(const hpt_plan_setup *s, int stage);

/* zb-h1: the bytes of stage `stage`'s W operand sets (lib/model.h
 * hpt_wgrad_layer): min(s + 1, m) sets on a stage s > 0 (none on stage 0
 * and under other schedules) of, per layer, the seven projections' fp32
 * output gradients (N x (2h + 2 I/t + h/t + 2 g h/t)) and, with
 * recomputation, copies of the four GEMM inputs (ln1, atty, ln2, h in the
 * activation dtype). exact = 1: CPU sizes (64-byte rounded pieces, fp32
 * activations), 0: the GPU's (unrounded, a bytes per activation). */
double hpt_plan_wstash_bytes(const hpt_plan_setup *s, int stage, int exact);

/* zb-h1's share of 1F1B's idle time: (t_F + t_B - t_W)/(t_F + t_B + t_W)
 * (Qi et al. 2024, section 3.1: ZB-H1's bubble (p - 1)(T_F + T_B - T_W)
 * against 1F1B's (p - 1)(T_F + T_B + T_W)), from a layer's FLOPs: F the
 * GEMMs G and the attention core A, B = G + 2A (+ the recomputation), W = G
 * (the weight gradients of the GEMMs). About 1/3 for large models; 1 for
 * the other schedules. */
double hpt_plan_zb_factor(const hpt_plan_setup *s);

/* The pipeline bubble as a fraction of the step, (p - 1)/(V m + p - 1)
 * with V = 1 for 1F1B and GPipe: the p - 1 idle micro-batch slots of
 * Narayanan et al. 2021, section 2.2.1 (bubble time (p - 1)(t_f + t_b)),
 * shrunk to (p - 1)/V slots by interleaving (section 2.2.2: bubble time
 * (p - 1)(t_f + t_b)/V, i.e. (p - 1)/(V m) of the ideal time), over the
 * step's m + (p - 1)/V slots; zb-h1: (p - 1) z idle slots with z =
 * hpt_plan_zb_factor. 0 for p = 1. */
double hpt_plan_bubble(const hpt_plan_setup *s);

/* Elements of the parameter block of one rank of pipeline stage `stage`:
 * its layers' tensors (TP shards: q/k/v/gate/up by rows, o/down by
 * columns, norms replicated), the embedding (vocabulary padded to a
 * multiple of TP, V_l = ceil(V/TP) rows) on the first stage, the final
 * norm and an untied head — or a tied embedding's copy — on the last.
 * Exact model: every tensor padded to 16 elements (lib/model.c). */
double hpt_plan_stage_params(const hpt_plan_setup *s, int stage);

/* Megatron's count: activation bytes of one layer for one micro-batch of b
 * sequences of s tokens on one TP rank, without recomputation, every saved
 * tensor (the residual stream too) in a bytes:
 *   a * s*b*h * (4 + (2 + 2g)/t) + a * 3*s*b*I/t      (a = 2 bf16, 4 fp32)
 *   + store_scores ? a * b*(H/t)*s^2 : 4 * b*(H/t)*s  (softmax or its stats)
 * g = KV/H. Korthikanti et al. 2022, eq. 2 (34 + 5as/h, per layer, no
 * parallelism) with Llama's terms: RMSNorm inputs, no dropout masks, GQA's
 * smaller K and V, SwiGLU's three I-wide tensors; docs/PLAN.md derives it
 * term by term and reduces it to Korthikanti's for GPT. a = 2 is
 * Megatron-LM's default bf16 residual; the residual stream is counted on all
 * N = s*b tokens (analytic_acts takes sequence parallelism's saving off).
 * For comparison: hpt's own count is hpt_plan_layer_act_bytes. */
double hpt_plan_megatron_layer_act_bytes(const hpt_plan_setup *s);

/* Activation bytes of one layer for one micro-batch on one TP rank, without
 * recomputation, as hpt's CUDA backend keeps them (lib/model.c carve_layer,
 * without its 64-byte rounding): the residual stream in fp32, the rest in
 * a = 2 bytes (bf16) or 4 (fp32, tf32),
 *   4 * 2*N_l*h                  x, xmid (fp32)
 *   + a * N*h * (2 + (2 + 2g)/t) ln1, ln2; q, attention output; k, v
 *   + a * 3*N*I/t                gate, up, h
 *   + 4 * 2*N_l                  rstd of the two RMSNorms (fp32)
 *   + store_scores ? a * b*(H/t)*s^2 : 4 * b*(H/t)*s   (log-sum-exp, fp32)
 * N = s*b, N_l = N/t under sequence parallelism, else N. Against
 * Megatron's count with the same a this adds (4 - a)*2*N_l*h + 8*N_l
 * bytes (fp32: the rstd only). */
double hpt_plan_layer_act_bytes(const hpt_plan_setup *s);

/* Persistent device scratch of the bf16 and tf32 attention of hpt's CUDA
 * backend (lib/attention_cuda.cu att_backward_bytes: causal attention in
 * query chunks through cuBLAS), bytes, one per rank: with Tp = T rounded up
 * to a multiple of 16, e = 12 bytes per score (bf16) or 8 (tf32), the chunk
 * Tc = min(T, max(16, floor(2^29 / (e*B*Hl*Tp)) rounded down to a multiple
 * of 16)) and n = B*Hl*Tc*Tp scores, the pieces 4n (S), 4n (dP), in bf16
 * also 2n (P), 2n (dS) and 2*B*T*Hl*hd (dO in bf16) (tf32 writes P and dS
 * over S and dP), and with GQA (KV/t < Hl) 2 x 4*B*T*Hl*hd (dK, dV per
 * query head), each rounded up to 256 bytes; B the micro-batch, T the
 * sequence length, Hl = H/t, hd = h/H. 0 with fp32 (its flash kernels'
 * B*Hl*T floats of scratch are lib/model.c's dscores) and where a head's
 * row is not a multiple of 16 bytes (hd*2 in bf16, hd*4 in tf32: the
 * backend runs the flash kernels there, cuBLAS's alignment rule). */
double hpt_plan_attention_scratch_bytes(const hpt_plan_setup *s);

/* FLOP/s per device (at peak) that the plan charges the attention core
 * (QK^T, PV) at: the run's precision peak where hpt runs it through cuBLAS,
 * or in fp32 mode; the fp32 CUDA-core peak (cl.peak_fp32) where bf16 or
 * tf32 runs fall back to the flash kernels (a head row not a multiple of
 * 16 bytes). The stage's compute time is its other FLOPs at the precision
 * peak plus these at this one, both times cl.efficiency. */
double hpt_plan_attention_peak(const hpt_plan_setup *s);

/* hpt's activation block (lib/model.c layout_acts) in bytes for one rank
 * of `stage` holding `nslots` micro-batch slots; *logits gets the part that
 * holds the logits (N x V_l floats per slot on the last stage). */
double hpt_plan_exact_act_bytes(const hpt_plan_setup *s, int stage, int nslots, double *logits);

/* Communication of world rank `rank` (grid rank = tp + dp*TP + pp*TP*DP)
 * in group g per optimizer step: the calls and payload bytes hpt's
 * counters record (exact model: equal to comm.tsv), the algorithm's wire
 * bytes and the alpha-beta seconds. */
hpt_plan_comm hpt_plan_rank_comm(const hpt_plan_setup *s, int rank, hpt_plan_group g);

/* Memory of world rank `rank`. */
hpt_plan_mem hpt_plan_rank_mem(const hpt_plan_setup *s, int rank);

/* Alpha-beta time (Hockney 1994; Thakur et al. 2005 for the collectives)
 * of an operation over n ranks moving `bytes` payload: all-reduce (ring)
 * 2(n-1)/n * bytes/bw + 2(n-1)*lat; reduce-scatter and all-gather
 * (n-1)/n * bytes/bw + (n-1)*lat; point-to-point bytes/bw + lat. */
typedef enum { HPT_COLL_ALLREDUCE, HPT_COLL_REDUCE_SCATTER, HPT_COLL_ALLGATHER, HPT_COLL_P2P } hpt_coll;
double hpt_plan_coll_seconds(hpt_coll op, int n, double bytes, double bw, double lat);
double hpt_plan_coll_factor(hpt_coll op, int n);

/* The library whose collectives the plan models: hpt's MPI backend (the
 * alpha-beta model above, the link of the group's slowest member for
 * every step) or NCCL (hpt-train --backend cuda --comm nccl: NCCL's own
 * ring/tree cost model, hpt_plan_nccl_seconds). */
typedef enum { HPT_PLAN_COMM_MPI, HPT_PLAN_COMM_NCCL } hpt_plan_comm_lib;

/* NCCL's all-reduce algorithm: AUTO is what NCCL's tuner does, the faster
 * of ring and tree per call; RING / TREE force one (NCCL_ALGO=Ring/Tree).
 * Reduce-scatter, all-gather and point-to-point are always ring/direct. */
typedef enum { HPT_NCCL_AUTO, HPT_NCCL_RING, HPT_NCCL_TREE } hpt_nccl_algo;

/* Seconds of one NCCL operation over n ranks on `nodes` nodes (n/nodes
 * ranks per node) moving `bytes` payload, with bus bandwidth busbw
 * (bytes/s: the group's bottleneck link, InfiniBand when nodes > 1) and
 * per-step latencies lat_intra (NVLink) and lat_inter (network).
 * Bandwidth terms are the bus-bandwidth factors of nccl-tests'
 * doc/PERFORMANCE.md (busbw = algbw x factor): all-reduce 2(n-1)/n,
 * reduce-scatter and all-gather (n-1)/n, point-to-point 1; latency terms
 * are NCCL's model (src/graph/tuning.cc, ncclTopoTuneModel, Simple
 * protocol, without its empirical per-protocol corrections):
 *   ring:  factor * bytes/busbw + (s - s_inter)*lat_intra + s_inter*lat_inter,
 *          s = 2(n-1), n-1, 1 steps; s_inter = 2(nodes-1), nodes-1, [nodes > 1]
 *   tree (all-reduce only; NCCL's algbw = busbw / 2):
 *          2 * bytes/busbw + 2*((n/nodes - 1)*lat_intra + floor(log2 nodes)*lat_inter)
 * AUTO takes the faster for an all-reduce. *factor (may be NULL) gets the
 * chosen algorithm's bus-bandwidth factor (wire bytes / payload). n <= 1:
 * 0 seconds, factor 0. nodes is clamped to [1, n]. */
double hpt_plan_nccl_seconds(hpt_coll op, hpt_nccl_algo algo, int n, int nodes, double bytes,
                             double busbw, double lat_intra, double lat_inter, double *factor);

/* Nodes a group of kind g spans, worst over its instances (grid order
 * rank = tp + dp*TP + pp*TP*DP, gpus_per_node consecutive ranks per node);
 * 1 for a group of one rank. For mp (TP x PP ranks) an upper bound: the
 * TP span times the PP span. */
int hpt_plan_group_nodes(const hpt_plan_setup *s, hpt_plan_group g);

/* Executed FLOPs of one sequence of T tokens, forward + backward, whole
 * model: 6*N_matmul*T + 6*L*T^2*C (hpt_model_flops_per_token: PaLM's count
 * with causal attention's half square), plus with recomputation one more
 * forward of the layers (2*N_layers*T + 2*L*T^2*C). For a GPT shape (KV =
 * H, 3*I = 8*C) with recomputation this is Megatron-LM's
 * 96*s*l*h^2*(1 + s/6h + V/16lh) per sequence (Narayanan et al. 2021,
 * eq. 3) with its attention term s/6h, the full square, halved to s/12h. */
double hpt_plan_flops_per_seq(const hpt_config *c, int T, int recompute);

/* Write the result as JSON (one object); a non-finite number is written as
 * null (JSON has no NaN or infinity). */
void hpt_plan_write_json(const hpt_plan_setup *s, const hpt_plan_result *r, FILE *f);

/* Write the result as readable tables. */
void hpt_plan_write_text(const hpt_plan_setup *s, const hpt_plan_result *r, FILE *f);

/* Per-rank predictions in comm.tsv's format (rank, group, calls_per_step,
 * bytes_per_step, seconds_per_step, peak_rss_mib) for every rank. */
void hpt_plan_write_ranks_tsv(const hpt_plan_setup *s, FILE *f);

/* Search: every (TP, PP, CP, DP = gpus/(TP*PP*CP), micro-batch, recomputation
 * none/full/selective, ZeRO stage 0-3, ZeRO shard group, sequence
 * parallelism off/on where TP > 1) for `gpus` devices with TP dividing the
 * node and the heads, PP <= layers, DP dividing the global batch. Shard
 * groups (ZeRO 1-3, DP > 1): all of DP, and HSDP's where the DP group
 * spans nodes (hpt_plan_hsdp_groups). A field is kept at base's value when
 * `fixed` says so (a ZeRO stage kept means it wherever DP > 1: on DP 1 it
 * shards nothing; sequence parallelism kept on, wherever TP > 1; a shard
 * group N kept: only layouts whose DP is a multiple of N, with ZeRO 1-3
 * where DP > 1, N = DP being plain ZeRO). Pipeline schedule, where PP > 1:
 * base's when fixed, else 1F1B and interleaved with V = 2 and 4 (where the
 * layers allow p V chunks and p divides m); PP 1 has none (1F1B).
 * Context parallelism CP in {1, 2, 4, 8} where it divides gpus/(TP*PP)
 * and 2 x CP divides the sequence length, on cluster cpu-local only
 * (hpt-train's CUDA ring is not yet measured on a GPU; base's CP when
 * fixed, on any cluster), ZeRO 0 or 1 and no HSDP with CP > 1
 * (hpt_plan_cp_view; base is not in the CP view).
 * Ranks the layouts that fit by tokens/s (equally fast: less memory
 * first), prints the top `top` with their shard groups and schedules, why
 * the first wins and its hpt-train options; json = 1: as JSON.
 * Errors: HPT_ERR_USAGE when no layout is valid; HPT_ERR_INTERNAL out of
 * memory. */
typedef struct {
    int tp, pp, dp, micro_batch, recompute, zero, sequence_parallel, zero_shard,
        pp_schedule, cp; /* 1 = fixed */
} hpt_plan_fixed;

/* The HSDP shard groups --search tries for layout s (its TP, PP, DP and
 * gpus_per_node): none where a DP group fits in a node (its ranks share
 * the fast link already: smaller groups only add memory); else every N
 * with 1 < N < DP, DP a multiple of N and N a multiple of b = gcd(node's
 * GPUs / TP, DP) — b DP ranks of one node (a group of b never leaves its
 * node; b = node / TP where that divides DP), then groups of several
 * nodes (less memory, more of the all-gathers on the inter-node links).
 * Groups smaller than b shard less for a larger inter-node all-reduce;
 * groups of 1 are plain replication with ZeRO's extra shard buffer.
 * Writes at most `max` of them to out in increasing order; returns how
 * many it wrote. */
int hpt_plan_hsdp_groups(const hpt_plan_setup *s, int *out, int max);
hpt_status hpt_plan_search(const hpt_plan_setup *base, const hpt_plan_fixed *fixed, int gpus,
                           int top, int json, FILE *f);

#endif
