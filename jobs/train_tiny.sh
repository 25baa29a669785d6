#!/bin/bash
# jobs/train_tiny.sh — CPU ranks on the local cluster (slurm/cluster.sh) or any
# Slurm cluster: the `small` model (20 M parameters) on the real corpus
# (data/gcide, from `make demo` or hpt-data), TP 2 x PP 2 x DP 2 on 2 nodes x 4
# tasks (1 CPU each). Every value below is a default: override it in the environment or with
# `sbatch --export=ALL,HPT_STEPS=50 jobs/train_tiny.sh`; sbatch options on the
# command line override the #SBATCH lines. Submit from the hpt directory.
# The launcher (slurm/launch.sh) derives DP from the nodes granted, keeps the
# global batch, forwards the warning signal and requeues after a checkpoint.
#SBATCH --job-name=hpt-tiny
#SBATCH --nodes=2
#SBATCH --exclusive
#SBATCH --time=01:00:00
#SBATCH --requeue
#SBATCH --signal=B:USR1@60
#SBATCH --open-mode=append
#SBATCH --output=%x-%j.out

# sbatch runs a copy of this script: find hpt from the submit directory.
for d in "${HPT_ROOT:-}" "${SLURM_SUBMIT_DIR:-}" "${SLURM_SUBMIT_DIR:-}/.." "$(dirname "$0")/.."; do
  [ -n "$d" ] && [ -f "$d/slurm/launch.sh" ] && { export HPT_ROOT=$d; break; }
done
[ -f "${HPT_ROOT:-}/slurm/launch.sh" ] || { echo "$0: slurm/launch.sh not found: submit from hpt's directory or set HPT_ROOT" >&2; exit 2; }

export HPT_MODEL=${HPT_MODEL:-small}
# Ranks per node (srun --ntasks-per-node); not an #SBATCH line, so that an
# elastic --nodes=MIN-MAX gets as many nodes as are free (see docs/SLURM.md).
export HPT_TASKS_PER_NODE=${HPT_TASKS_PER_NODE:-${SLURM_NTASKS_PER_NODE:-4}}
export HPT_TP=${HPT_TP:-2} HPT_PP=${HPT_PP:-2}        # DP = nodes x tasks / (TP x PP)
export HPT_SEQ_LEN=${HPT_SEQ_LEN:-256}
export HPT_MICRO_BATCH=${HPT_MICRO_BATCH:-1}
export HPT_GLOBAL_BATCH=${HPT_GLOBAL_BATCH:-8}        # sequences per step, any node count
export HPT_STEPS=${HPT_STEPS:-200}
export HPT_LR=${HPT_LR:-1e-3} HPT_MIN_LR=${HPT_MIN_LR:-1e-4} HPT_WARMUP=${HPT_WARMUP:-20}
export HPT_EVAL_INTERVAL=${HPT_EVAL_INTERVAL:-50} HPT_EVAL_BATCHES=${HPT_EVAL_BATCHES:-4}
export HPT_SAVE_EVERY=${HPT_SAVE_EVERY:-50}
export HPT_ZERO=${HPT_ZERO:-${HPT_ZERO1:-1}}
# HPT_ASYNC_SAVE=1: --async-save, checkpoints written in the background (off until
# bench/ckpt.sh shows it pays on the target machines; docs/CHECKPOINT.md)
export HPT_ASYNC_SAVE=${HPT_ASYNC_SAVE:-0}

exec bash "$HPT_ROOT/slurm/launch.sh" "$0" "$@"
