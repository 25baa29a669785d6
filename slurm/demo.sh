#!/usr/bin/env bash
# slurm/demo.sh — the README's main command (`make demo`): bring up the local
# Slurm cluster (2 emulated nodes), `sbatch jobs/train_tiny.sh`, follow the
# job's output until it has left the queue (requeues included), then plot the
# curves from the run's HDF5 metrics and stop the cluster.
#
# Environment: HPT_ROOT (hpt's sources), HPT_BUILD (the build), HPT_DATA
# (prepared corpus), HPT_RUN_DIR [runs/demo; a previous one is moved to
# runs/demo.prev], HPT_STEPS, HPT_SAVE_EVERY [0], and every HPT_* variable of
# jobs/train_tiny.sh.
# Exit status: the job's (0 when it completed).
set -euo pipefail
HPT_ROOT=$(cd "${HPT_ROOT:-$(dirname "$0")/..}" && pwd)
export HPT_ROOT HPT_BUILD=$(realpath -m "${HPT_BUILD:-$HPT_ROOT}")
export HPT_DATA=$(realpath -m "${HPT_DATA:-data/gcide}")
export HPT_RUN_DIR=$(realpath -m "${HPT_RUN_DIR:-runs/demo}")
# No periodic checkpoints (8 ranks on a small machine take minutes per save);
# the warning signal still checkpoints and requeues.
export HPT_SAVE_EVERY=${HPT_SAVE_EVERY:-0}

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

if [ -e "$HPT_RUN_DIR" ]; then
  rm -rf "$HPT_RUN_DIR.prev" && mv "$HPT_RUN_DIR" "$HPT_RUN_DIR.prev"
  echo "demo: previous run moved to $HPT_RUN_DIR.prev"
fi
mkdir -p "$HPT_RUN_DIR"
out=$HPT_RUN_DIR/job.out
echo "demo: sbatch $HPT_ROOT/jobs/train_tiny.sh  (output: $out)"
job=$(sbatch --parsable -o "$out" "$HPT_ROOT/jobs/train_tiny.sh")
touch "$out"
tail -n +1 -F "$out" 2> /dev/null &
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
exit "${state##* }"
