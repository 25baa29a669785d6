#!/usr/bin/env bash
# slurm/demo.sh — the README's main command (`make demo`): bring up the local
# Slurm cluster (2 emulated nodes), `sbatch jobs/train_tiny.sh`, follow the
# job's output until it has left the queue (requeues included), then plot the
# curves from the run's HDF5 metrics and stop the cluster.
#
# The trained model stays: a checkpoint of the last step in
# RUN_DIR/checkpoints (what a continued demo resumes from) and the weights
# with Hugging Face names in RUN_DIR/model.h5 (hpt-train --export).
#
# Environment: HPT_ROOT (hpt's sources), HPT_BUILD (the build), HPT_DATA
# (prepared corpus), HPT_RUN_DIR [runs/demo; a previous one is moved to
# runs/demo.prev], HPT_STEPS [50], HPT_EVAL_INTERVAL [10],
# HPT_SAVE_EVERY [HPT_STEPS: one checkpoint, at the end],
# HPT_DEMO_CONTINUE [0; 1: keep RUN_DIR and resume from its newest checkpoint
# up to HPT_STEPS in all], and every HPT_* variable of jobs/train_tiny.sh.
# Exit status: the job's (0 when it completed).
set -euo pipefail
HPT_ROOT=$(cd "${HPT_ROOT:-$(dirname "$0")/..}" && pwd)
export HPT_ROOT HPT_BUILD=$(realpath -m "${HPT_BUILD:-$HPT_ROOT}")
export HPT_DATA=$(realpath -m "${HPT_DATA:-data/gcide}")
export HPT_RUN_DIR=$(realpath -m "${HPT_RUN_DIR:-runs/demo}")
export HPT_STEPS=${HPT_STEPS:-50}
# Validation several times along the run, so the curve has points.
export HPT_EVAL_INTERVAL=${HPT_EVAL_INTERVAL:-10}
# One checkpoint, at the end (8 ranks on a small machine take a while per
# save); the warning signal still checkpoints and requeues.
export HPT_SAVE_EVERY=${HPT_SAVE_EVERY:-$HPT_STEPS}
HPT_DEMO_CONTINUE=${HPT_DEMO_CONTINUE:-0}
case $HPT_RUN_DIR in
  *[[:space:]]*) echo "demo: HPT_RUN_DIR '$HPT_RUN_DIR' has white space (it goes into HPT_TRAIN_ARGS)" >&2; exit 2;;
esac
export HPT_TRAIN_ARGS="--export $HPT_RUN_DIR/model.h5 ${HPT_TRAIN_ARGS:-}"

cluster=$(mktemp -d "${TMPDIR:-/tmp}/hpt-cluster.XXXXXX")
tailpid=
cleanup() {
  [ -z "$tailpid" ] || kill "$tailpid" 2>/dev/null || true
  bash "$HPT_ROOT/slurm/cluster.sh" stop "$cluster" > /dev/null 2>&1 || true
  rm -rf "$cluster"
}
trap cleanup EXIT
bash "$HPT_ROOT/slurm/cluster.sh" start "$cluster" --nodes 2 --cpus 4
export SLURM_CONF=$cluster/slurm.conf

if [ "$HPT_DEMO_CONTINUE" = 1 ]; then
  [ -d "$HPT_RUN_DIR/checkpoints" ] ||
    { echo "demo: HPT_DEMO_CONTINUE=1 but $HPT_RUN_DIR/checkpoints does not exist: nothing to continue" >&2; exit 2; }
  echo "demo: continuing the run in $HPT_RUN_DIR to step $HPT_STEPS"
elif [ -e "$HPT_RUN_DIR" ]; then
  rm -rf "$HPT_RUN_DIR.prev" && mv "$HPT_RUN_DIR" "$HPT_RUN_DIR.prev"
  echo "demo: previous run moved to $HPT_RUN_DIR.prev"
fi
mkdir -p "$HPT_RUN_DIR"
out=$HPT_RUN_DIR/job.out
echo "demo: sbatch $HPT_ROOT/jobs/train_tiny.sh  (output: $out)"
touch "$out"
seen=$(stat -c %s "$out") # a continued run appends: follow only this job's part
job=$(sbatch --parsable -o "$out" "$HPT_ROOT/jobs/train_tiny.sh")
tail -c +$((seen + 1)) -F "$out" 2> /dev/null &
tailpid=$!
while [ -n "$(squeue -h -j "$job" -o %i 2>/dev/null)" ]; do sleep 2; done
sleep 1
kill "$tailpid" 2>/dev/null || true
tailpid=
state=$(grep "^JobId=$job " "$cluster/log/jobcomp.txt" | tail -1 |
        sed 's/.*JobState=\([A-Z_]*\).* ExitCode=\([0-9]*\):.*/\1 \2/')
echo "demo: job $job ended: ${state:-unknown}"

plot=$HPT_ROOT/analysis/plot_metrics.py
if [ ! -f "$plot" ]; then
  echo "demo: $plot not found: no plots (per-step loss in $HPT_RUN_DIR/log.tsv)"
elif [ ! -f "$HPT_RUN_DIR/metrics.h5" ]; then
  echo "demo: $HPT_RUN_DIR/metrics.h5 not written: no plots (per-step loss in $HPT_RUN_DIR/log.tsv)"
else
  /usr/bin/python3 "$plot" "$HPT_RUN_DIR/metrics.h5" -o "$HPT_RUN_DIR/plots" &&
    echo "demo: plots in $HPT_RUN_DIR/plots"
fi
[ -f "$HPT_RUN_DIR/model.h5" ] && echo "demo: model: weights $HPT_RUN_DIR/model.h5, checkpoint in $HPT_RUN_DIR/checkpoints (continue: make demo HPT_DEMO_CONTINUE=1 HPT_DEMO_STEPS=<more>)"
exit "${state##* }"
