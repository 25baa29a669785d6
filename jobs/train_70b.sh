#!/bin/bash
# jobs/train_70b.sh — Llama 2 70B (preset llama2-70b, 69.0 B parameters) on 16
# nodes x 8 GPUs (80 GB each): TP 4 inside a node (two TP groups per node), PP 8
# and DP 4 across nodes; interleaved 1F1B with V = 2 model chunks per pipeline
# rank, selective recomputation, sequence parallelism, ZeRO-1 over the 4 DP ranks.
#   sbatch jobs/train_70b.sh                      submit (from hpt's directory)
#   bash jobs/train_70b.sh --dry-run              rank layout + memory plan, no training
# Every value is a default: override it in the environment, with
# `sbatch --export=ALL,HPT_PP=4 jobs/train_70b.sh`, or an sbatch option.
#
# Recipe (Llama 2 paper, Touvron et al. 2023, section 2.2): sequence 4096,
# global batch 4 M tokens = 1024 sequences, AdamW beta1 0.9, beta2 0.95, eps
# 1e-5, weight decay 0.1, clipping 1.0, 2000 warm-up steps, cosine decay to 10 %
# of the peak lr 1.5e-4; 2 T tokens = 500 000 steps.
#
# Layout: hpt-plan's search (a model, not a measurement: no multi-GPU machine
# has run hpt) over TP, PP, micro-batch, recomputation, sequence parallelism,
# ZeRO 0-3 with HSDP shard groups and, with PP > 1, 1F1B, interleaved V 2/4 or ZB-H1,
# in this template's tf32 mode with --async-save and NCCL:
#   hpt-plan --model llama2-70b --cluster h100-80gb --nodes 16 --seq-len 4096 \
#            --global-batch 1024 --precision tf32 --async-save --search --top 6
# 17064 layouts, 1025 fit in 74.5 GiB (no ZB-H1 layout among the first 12: with
# m = 256 its bubble gain is small and its W operand sets cost memory). "Fits"
# has no margin beyond hpt-plan's 2 GB baseline (CUDA context, NCCL and cuBLAS buffers, allocator fragmentation:
# an assumption, not measured), so the template takes the fastest layout that
# leaves at least 10 % of the GPU (7.5 GiB) free on its worst stage — 5th,
# 1.3 % slower than the 1st (hpt-plan's step time counts FLOPs and, per
# kernel class, the bytes the element-wise kernels move; docs/PLAN.md):
#   TP 4 x PP 8 x DP 4, micro-batch 1 x grad-accum 256, selective recomputation,
#   sequence parallelism, ZeRO-1 over all 4 DP ranks (HPT_ZERO_SHARD_GROUP=0;
#   auto would make it HSDP, 2 shard groups of 2: the 4th below), interleaved
#   1F1B, V = 2 (16 chunks of 5 layers, 2 per stage):
#   step 64.1 s, 6.544e4 tokens/s, MFU 44.3 %; 64.5 GiB on stage 0 of 74.5
#   (10.0 GiB free; stage 7 43.1 GiB); bubble 0.013 = 3.5 / (256 + 3.5)
#   ((PP - 1) / V idle micro-batch slots beside m = 256; 1F1B at this layout:
#   0.027). TP 4's 26625 collectives per step 5.92 s on NVLink; PP
#   15 chunk boundaries per micro-batch each way (V x 1F1B's sends), 0.69 s,
#   and DP 0.26 s on InfiniBand.
# Ranked above it (each with selective recomputation and ZeRO-1):
#   1st TP 4 x PP 4 x DP 8, SP, interleaved V = 4: 63.25 s, 73.7 GiB (0.8 GiB
#       free; on 8 nodes, DP 4, it needs 79.7 GiB: does not fit)
#   2nd TP 4 x PP 4 x DP 8, SP, 1F1B: 63.81 s, 67.9 GiB (6.6 GiB free; on 8
#       nodes 74.0 GiB of 74.5)
#   3rd TP 4 x PP 4 x DP 8, SP, 1F1B, HSDP 2 groups of 4: 63.82 s, 74.0 GiB
#   4th this layout as HSDP, 2 groups of 2: 63.95 s, 70.6 GiB
# The same layout with 1F1B (10th): 64.6 s, 52.3 GiB, bubble 0.027.
# This layout on 8 nodes (DP 2, the low end of `--nodes=8-16`): 70.6 GiB, 126.8
# s. The template's previous TP 8 x PP 4 x DP 4, 1F1B, full recomputation:
# 95.25 s, 4.404e4 tokens/s, MFU 29.8 %. In bf16 (HPT_PRECISION=bf16,
# not yet run on a GPU) the search ranks other layouts: rerun it.
#
# Memory per GPU on stage 0, the worst (hpt-plan, GiB; tf32: fp32 weights 4 B +
# fp32 gradients 4 B + AdamW moments 8 B per parameter, as hpt's CUDA backend
# allocates them; bf16 mode adds a 2 B bf16 working copy of the weights; ZeRO-1
# shards the moments and adds a 4 B / DP reduced-gradient shard):
#   parameters on stage 0  2.205e9 (69.0e9 / (TP 4 x PP 8) = 2.16e9 on average;
#                          stages 0 and 7 add the embedding / head slices)
#   weights, gradients     2.205e9 x 4 B each                   = 8.21 + 8.21 (bf16: + 4.11)
#   optimizer, ZeRO-1      2.205e9 x 8 B / DP 4                 = 4.11
#   communication buffers  gradient shard 2.205e9 x 4 B / DP 4  = 2.05
#                          + 23 PP gradient send slots of 1024 tokens (sequence
#                          parallel: 4096 / TP 4) x 8192 x 4 B  = 0.72 -> 2.77
#   activations (all fp32 in tf32 mode; selective recomputation keeps each
#     layer's input and GEMM outputs and redoes attention and the norms/SwiGLU;
#     sequence parallelism keeps the norms and residual stream for 1/4 of the
#     tokens; FlashAttention-style, no T x T scores):
#     interleaved 1F1B keeps 23 chunk forwards in flight on stage 0 (11.5
#     micro-batches of its 10 layers; 1F1B: 8), each 5 layers x 0.320 + the
#     chunk's end (output x_final, norm statistics) 0.031 = 1.633 -> 23 x 1.633 = 37.56
#     + the recomputed pieces, backward scratch, attention chunk scratch = 1.76 -> 39.32
#   baseline (CUDA context etc., 2 GB)                          = 1.86
#   total 8.21 + 8.21 + 4.11 + 2.77 + 39.32 + 1.86              = 64.48 GiB
#   Without recomputation this layout needs 109.0 GiB: does not fit.
#   The async-save staging buffer, 12.32 GiB of host memory per rank, beside it.
#
# The warning signal comes 10 min before the time limit: the checkpoint
# (fp32 weights and both AdamW moments, 69e9 x 12 B = 0.83 TB) must be written
# before the kill.
#SBATCH --job-name=hpt-70b
#SBATCH --nodes=16
#SBATCH --exclusive
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=8
#SBATCH --time=24:00:00
#SBATCH --requeue
#SBATCH --signal=B:USR1@600
#SBATCH --open-mode=append
#SBATCH --output=%x-%j.out
# Ranks per node: srun --ntasks-per-node in the launcher, not an #SBATCH line
# (with --ntasks-per-node, Slurm grants only MIN nodes of --nodes=MIN-MAX).

# sbatch runs a copy of this script: find hpt from the submit directory.
for d in "${HPT_ROOT:-}" "${SLURM_SUBMIT_DIR:-}" "${SLURM_SUBMIT_DIR:-}/.." "$(dirname "$0")/.."; do
  [ -n "$d" ] && [ -f "$d/slurm/launch.sh" ] && { export HPT_ROOT=$d; break; }
done
[ -f "${HPT_ROOT:-}/slurm/launch.sh" ] || { echo "$0: slurm/launch.sh not found: submit from hpt's directory or set HPT_ROOT" >&2; exit 2; }

export HPT_MODEL=${HPT_MODEL:-llama2-70b}
export HPT_DATA=${HPT_DATA:-${HPT_ROOT:+$HPT_ROOT/}data/llama2}             # token shards of a 32000-token vocabulary
export HPT_BACKEND=${HPT_BACKEND:-cuda}
export HPT_COMM=${HPT_COMM:-auto}              # nccl (one GPU per rank) when built with NCCL, else MPI
export HPT_PRECISION=${HPT_PRECISION:-tf32}     # tensor cores; bf16 (mixed precision) exists but has not yet run on a GPU
export HPT_TASKS_PER_NODE=${HPT_TASKS_PER_NODE:-${SLURM_NTASKS_PER_NODE:-8}} HPT_GPUS_PER_NODE=${HPT_GPUS_PER_NODE:-8}
export HPT_TP=${HPT_TP:-4} HPT_PP=${HPT_PP:-8}        # DP = 16 x 8 / (4 x 8) = 4
# interleaved 1F1B, V = 2 (HPT_PP_SCHEDULE=1f1b alone goes back to 1F1B: V is
# set only for the interleaved schedule)
export HPT_PP_SCHEDULE=${HPT_PP_SCHEDULE:-interleaved}
[ "$HPT_PP_SCHEDULE" != interleaved ] || export HPT_PP_VIRTUAL=${HPT_PP_VIRTUAL:-2}
export HPT_SEQ_LEN=${HPT_SEQ_LEN:-4096}
export HPT_MICRO_BATCH=${HPT_MICRO_BATCH:-1}
export HPT_GLOBAL_BATCH=${HPT_GLOBAL_BATCH:-1024}     # 4 M tokens
export HPT_STEPS=${HPT_STEPS:-500000}
export HPT_LR=${HPT_LR:-1.5e-4} HPT_MIN_LR=${HPT_MIN_LR:-1.5e-5} HPT_WARMUP=${HPT_WARMUP:-2000}
# the recipe's optimizer settings; HPT_TRAIN_ARGS adds options of your own
export HPT_RECIPE_ARGS=${HPT_RECIPE_ARGS:---adam-eps 1e-5 --weight-decay 0.1 --clip 1.0}
export HPT_EVAL_INTERVAL=${HPT_EVAL_INTERVAL:-1000} HPT_EVAL_BATCHES=${HPT_EVAL_BATCHES:-8}
export HPT_SAVE_EVERY=${HPT_SAVE_EVERY:-500}
export HPT_ZERO=${HPT_ZERO:-${HPT_ZERO1:-1}} HPT_ZERO_SHARD_GROUP=${HPT_ZERO_SHARD_GROUP:-0} # over all of DP
export HPT_RECOMPUTE=${HPT_RECOMPUTE:-selective} HPT_SEQUENCE_PARALLEL=${HPT_SEQUENCE_PARALLEL:-1}
# HPT_ASYNC_SAVE=1 (default): --async-save, the periodic checkpoints written in the
# background from a host staging buffer (the dry run's plan shows its size per rank);
# measured to pay (bench/ckpt-async.sh, docs/PERFORMANCE.md); 0: synchronous saves
export HPT_ASYNC_SAVE=${HPT_ASYNC_SAVE:-1}
export HPT_CLUSTER=${HPT_CLUSTER:-h100-80gb}          # hpt-plan's device model for the dry run

exec bash "$HPT_ROOT/slurm/launch.sh" "$0" "$@"
