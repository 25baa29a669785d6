#!/bin/bash
# jobs/train_8b.sh — an 8 B model (preset llama3-8b, 8.03 B parameters, GQA with
# 8 key/value heads, 128256-token vocabulary) on 4 nodes x 8 GPUs (80 GB each):
# TP 2 inside a node with sequence parallelism, DP 16 as HSDP — ZeRO-1 sharded
# within each node's 4 DP ranks, replicated across the 4 nodes — no pipeline.
#   sbatch jobs/train_8b.sh                       submit (from hpt's directory)
#   bash jobs/train_8b.sh --dry-run               rank layout + memory plan, no training
# Every value is a default: override it in the environment, with
# `sbatch --export=ALL,HPT_STEPS=1000 jobs/train_8b.sh`, or an sbatch option.
#
# Recipe: the Llama 2 paper's (Touvron et al. 2023, section 2.2) for its 7B/13B
# models: sequence 4096 (the preset allows 8192), global batch 4 M tokens = 1024
# sequences, AdamW beta1 0.9, beta2 0.95, eps 1e-5, weight decay 0.1, clipping
# 1.0, 2000 warm-up steps, cosine decay to 10 % of the peak lr 3e-4; 2 T tokens
# = 500 000 steps.
#
# Layout: the fastest that fits by hpt-plan's search (a model, not a measurement:
# no multi-GPU machine has run hpt; its step time counts FLOPs and, per kernel
# class, the bytes the element-wise kernels move), over TP, PP, micro-batch, recomputation,
# sequence parallelism, ZeRO 0-3 and HSDP shard groups, in this template's tf32
# mode with --async-save and NCCL:
#   hpt-plan --model llama3-8b --cluster h100-80gb --nodes 4 --seq-len 4096 \
#            --global-batch 1024 --precision tf32 --async-save --search
# ranks 1st of 8646 layouts (2922 fit in 74.5 GiB):
#   TP 2 x PP 1 x DP 16, micro-batch 1 x grad-accum 64, no recomputation,
#   sequence parallelism, ZeRO-1, HSDP 4 shard groups of 4 (--sequence-parallel
#   --zero 1 --zero-shard-group 4):
#   step 27.41 s, 1.53e5 tokens/s, MFU 46.7 %; 64.3 GiB per GPU of 74.5.
#   DP per step: the gradient reduce-scatter and the parameter all-gather inside
#   the node (NVLink), the 4 GB gradient shard all-reduced across the 4 nodes
#   (InfiniBand, after backward: on the critical path); 0.17 s in all. TP 2's
#   16769 reduce-scatters and all-gathers 1.26 s.
# Runners-up: ZeRO-2 with the same shard groups 27.44 s, 68.0 GiB (2nd: with
# gradient accumulation ZeRO-2 reduce-scatters each of the 64 micro-batches into
# the shard — 64 x the reduce-scatter volume, hidden behind backward on NVLink —
# and adds a shard-sized receive buffer); ZeRO-3 27.46 s, 58.6 GiB (its
# parameter block backed only for the own shard and the units in use, through
# CUDA virtual memory management: not yet run on a GPU); without
# sequence parallelism (6th) 27.87 s, 66.2 GiB: the norms and residual adds
# then touch all the tokens on both TP ranks.
# TP 1 fits in tf32 only with PP 2 (28.12 s, ZeRO-1, 73.2 GiB) or, without PP, at
# ZeRO-3 with full recomputation (34.40 s, 60.8 GiB): the fp32 weights and gradients
# alone are 64 GB, and hpt keeps the gradients whole on a GPU at every ZeRO stage; in bf16 (HPT_PRECISION=bf16,
# not yet run on a GPU) the search picks other layouts — rerun it.
#
# Memory per GPU (hpt-plan, GiB, tf32: fp32 weights, gradients and AdamW moments,
# as hpt's CUDA backend allocates them; ZeRO-1 shards the moments over the 4 ranks
# of a shard group and adds the 4 B/parameter reduced-gradient shard):
#   parameters per rank   8.03e9 / TP 2                     = 4.02e9
#   weights 14.96, gradients 14.96, moments 7.48 (8 B / 4), gradient shard 3.74,
#   activations 20.29 (all fp32 in tf32 mode, no recomputation, FlashAttention-
#   style: no T x T scores; the norms' rows split over TP by sequence
#   parallelism), logits 0.98, CUDA context etc. 1.86 = 64.27 GiB;
#   the async-save staging buffer, 5.61 GiB of host memory per rank, beside it.
#SBATCH --job-name=hpt-8b
#SBATCH --nodes=4
#SBATCH --exclusive
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=8
#SBATCH --time=24:00:00
#SBATCH --requeue
#SBATCH --signal=B:USR1@300
#SBATCH --open-mode=append
#SBATCH --output=%x-%j.out
# Ranks per node: srun --ntasks-per-node in the launcher, not an #SBATCH line
# (with --ntasks-per-node, Slurm grants only MIN nodes of --nodes=MIN-MAX).

# sbatch runs a copy of this script: find hpt from the submit directory.
for d in "${HPT_ROOT:-}" "${SLURM_SUBMIT_DIR:-}" "${SLURM_SUBMIT_DIR:-}/.." "$(dirname "$0")/.."; do
  [ -n "$d" ] && [ -f "$d/slurm/launch.sh" ] && { export HPT_ROOT=$d; break; }
done
[ -f "${HPT_ROOT:-}/slurm/launch.sh" ] || { echo "$0: slurm/launch.sh not found: submit from hpt's directory or set HPT_ROOT" >&2; exit 2; }

export HPT_MODEL=${HPT_MODEL:-llama3-8b}
export HPT_DATA=${HPT_DATA:-${HPT_ROOT:+$HPT_ROOT/}data/llama3}             # token shards of a 128256-token vocabulary
export HPT_BACKEND=${HPT_BACKEND:-cuda}
export HPT_COMM=${HPT_COMM:-auto}              # nccl (one GPU per rank) when built with NCCL, else MPI
export HPT_PRECISION=${HPT_PRECISION:-tf32}     # tensor cores; bf16 (mixed precision) exists but has not yet run on a GPU
export HPT_TASKS_PER_NODE=${HPT_TASKS_PER_NODE:-${SLURM_NTASKS_PER_NODE:-8}} HPT_GPUS_PER_NODE=${HPT_GPUS_PER_NODE:-8}
export HPT_TP=${HPT_TP:-2} HPT_PP=${HPT_PP:-1}        # DP = 4 x 8 / 2 = 16
export HPT_SEQ_LEN=${HPT_SEQ_LEN:-4096}
export HPT_MICRO_BATCH=${HPT_MICRO_BATCH:-1}
export HPT_GLOBAL_BATCH=${HPT_GLOBAL_BATCH:-1024}     # 4 M tokens
export HPT_STEPS=${HPT_STEPS:-500000}
export HPT_LR=${HPT_LR:-3e-4} HPT_MIN_LR=${HPT_MIN_LR:-3e-5} HPT_WARMUP=${HPT_WARMUP:-2000}
# the recipe's optimizer settings; HPT_TRAIN_ARGS adds options of your own
export HPT_RECIPE_ARGS=${HPT_RECIPE_ARGS:---adam-eps 1e-5 --weight-decay 0.1 --clip 1.0}
export HPT_EVAL_INTERVAL=${HPT_EVAL_INTERVAL:-1000} HPT_EVAL_BATCHES=${HPT_EVAL_BATCHES:-8}
export HPT_SAVE_EVERY=${HPT_SAVE_EVERY:-500}
export HPT_ZERO=${HPT_ZERO:-${HPT_ZERO1:-1}} HPT_RECOMPUTE=${HPT_RECOMPUTE:-0}
export HPT_SEQUENCE_PARALLEL=${HPT_SEQUENCE_PARALLEL:-1}
# HSDP shard group: auto = the DP ranks of one node (8 GPUs / TP 2 = 4) wherever DP
# spans nodes, as planned above; N, or 0 to shard over all of DP
export HPT_ZERO_SHARD_GROUP=${HPT_ZERO_SHARD_GROUP:-auto}
# HPT_ASYNC_SAVE=1 (default): --async-save, the periodic checkpoints written in the
# background from a host staging buffer (the dry run's plan shows its size per rank);
# measured to pay (bench/ckpt-async.sh, docs/PERFORMANCE.md); 0: synchronous saves
export HPT_ASYNC_SAVE=${HPT_ASYNC_SAVE:-1}
export HPT_CLUSTER=${HPT_CLUSTER:-h100-80gb}          # hpt-plan's device model for the dry run

exec bash "$HPT_ROOT/slurm/launch.sh" "$0" "$@"
