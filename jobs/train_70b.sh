#!/bin/bash
# jobs/train_70b.sh — Llama 2 70B (preset llama2-70b, 69.0 B parameters) on 16
# nodes x 8 GPUs (80 GB each): TP 8 inside a node, PP 4 and DP 4 across nodes.
#   sbatch jobs/train_70b.sh                      submit (from hpt's directory)
#   bash jobs/train_70b.sh --dry-run              rank layout + memory plan, no training
# Every value is a default: override it in the environment, with
# `sbatch --export=ALL,HPT_PP=8 jobs/train_70b.sh`, or an sbatch option.
#
# Recipe (Llama 2 paper, Touvron et al. 2023, section 2.2): sequence 4096,
# global batch 4 M tokens = 1024 sequences, AdamW beta1 0.9, beta2 0.95, eps
# 1e-5, weight decay 0.1, clipping 1.0, 2000 warm-up steps, cosine decay to 10 %
# of the peak lr 1.5e-4; 2 T tokens = 500 000 steps.
#
# Memory per GPU in the default tf32 mode (fp32 weights 4 B + fp32 gradients 4 B +
# AdamW moments 8 B = 16 B per parameter, as hpt's CUDA backend allocates them
# and hpt-plan counts; bf16 mode adds a 2 B bf16 working copy of the weights;
# ZeRO-1 shards the moments and adds a 4 B gradient shard):
#   parameters per rank   69.0e9 / (TP 8 x PP 4)           = 2.16e9
#   weights + gradients   2.16e9 x (4 + 4) B               = 17.3 GB  (bf16: + 4.3 GB)
#   optimizer, ZeRO-1     2.16e9 x (8 + 4) B / DP 4        =  6.5 GB  (17.3 GB without ZeRO-1)
#   (hpt-plan, GiB: weights 8.09 (bf16 12.14), gradients 8.09, optimizer 4.05)
#   activations (hpt's CUDA allocations: all fp32 in tf32 mode, plus the
#     attention's chunk scratch; in bf16 mode the residual stream, statistics and
#     activation gradients fp32, the rest bf16 (docs/PLAN.md); TP 8, no sequence
#     parallelism; `bash jobs/train_70b.sh --dry-run` runs hpt-plan):
#     1F1B keeps PP = 4 micro-batches in flight on stage 0 over 80/4 = 20 layers:
#     with --recompute (layer inputs kept, one layer redone)  = 12.2 GiB -> 36.8 GiB in all
#                                                     (bf16: 12.0 GiB -> 40.7 GiB)
#     stored in full, FlashAttention-style (no T x T scores)  = 57.4 GiB -> 82.1 GiB: does not
#       fit                                           (bf16: 39.5 GiB -> 68.2 GiB, fits)
#   Recompute is on by default: tf32 does not fit without it. In bf16 mode it
#   would fit (HPT_PRECISION=bf16 HPT_RECOMPUTE=0, ~25 % fewer FLOPs per step),
#   with little room for the allocator's fragmentation.
#   logits, vocab / TP (their gradient overwrites them): 4096 x 4000 x 4 B = 0.07 GB
#   plus communication buffers (2.5 GiB: PP gradient send slots, the ZeRO-1
#   gradient shard) and a 1.9 GiB CUDA context (hpt-plan's baseline).
#   micro-batch 1 x grad-accum 256 x DP 4 = 1024 sequences; pipeline bubble
#   (PP - 1) / (accum + PP - 1) = 1.2 %.
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
export HPT_TP=${HPT_TP:-8} HPT_PP=${HPT_PP:-4}        # DP = 16 x 8 / (8 x 4) = 4
export HPT_SEQ_LEN=${HPT_SEQ_LEN:-4096}
export HPT_MICRO_BATCH=${HPT_MICRO_BATCH:-1}
export HPT_GLOBAL_BATCH=${HPT_GLOBAL_BATCH:-1024}     # 4 M tokens
export HPT_STEPS=${HPT_STEPS:-500000}
export HPT_LR=${HPT_LR:-1.5e-4} HPT_MIN_LR=${HPT_MIN_LR:-1.5e-5} HPT_WARMUP=${HPT_WARMUP:-2000}
# the recipe's optimizer settings; HPT_TRAIN_ARGS adds options of your own
export HPT_RECIPE_ARGS=${HPT_RECIPE_ARGS:---adam-eps 1e-5 --weight-decay 0.1 --clip 1.0}
export HPT_EVAL_INTERVAL=${HPT_EVAL_INTERVAL:-1000} HPT_EVAL_BATCHES=${HPT_EVAL_BATCHES:-8}
export HPT_SAVE_EVERY=${HPT_SAVE_EVERY:-500}
export HPT_ZERO=${HPT_ZERO:-${HPT_ZERO1:-1}} HPT_RECOMPUTE=${HPT_RECOMPUTE:-1}
# HPT_ASYNC_SAVE=1 (default): --async-save, the periodic checkpoints written in the
# background from a host staging buffer (the dry run's plan shows its size per rank);
# measured to pay (bench/ckpt-async.sh, docs/PERFORMANCE.md); 0: synchronous saves
export HPT_ASYNC_SAVE=${HPT_ASYNC_SAVE:-1}
export HPT_CLUSTER=${HPT_CLUSTER:-h100-80gb}          # hpt-plan's device model for the dry run

exec bash "$HPT_ROOT/slurm/launch.sh" "$0" "$@"
