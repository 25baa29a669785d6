#!/bin/sh
# A straggler stands out in the analysis. A 2-rank DP run where rank 1
# computes 300 ms slower per step (--fault-slow-rank 1): in the heat-map data
# (busy time, [steps x ranks]) rank 1's column is larger at every step by
# most of the 300 ms; rank 0 spends that time waiting in the DP all-reduce
# (the breakdown's comm_dp), rank 1 in its forward; the Python summary and
# hpt-metrics summary list rank 1 first among the slowest ranks, many times
# the other rank, and list its slow_rank events; the grad-norm panel marks
# them.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$PYTHON" -c "import h5py, numpy, matplotlib" || fail "python3-h5py/numpy/matplotlib missing (setup.sh installs them)"
export OMP_NUM_THREADS=1
"$MPIEXEC" -n 2 "$TRAIN" --model tiny --data "$CORPUS" --seq-len 32 --batch 2 --steps 6 --eval-interval 0 \
  --metrics-interval 3 --fault-slow-rank 1 --fault-slow-ms 300 --quiet --run-dir "$WORK/r" > "$WORK/r.out" 2>&1 ||
  { cat "$WORK/r.out"; fail "training run"; }
"$PYTHON" "$HPT_SRC/analysis/plot_metrics.py" "$WORK/r/metrics.h5" -o "$WORK/fig" --format png > "$WORK/plot.out" 2>&1 ||
  { cat "$WORK/plot.out"; fail "plot_metrics.py"; }
"$HPT_BUILD/src/hpt-metrics" summary "$WORK/r/metrics.h5" > "$WORK/c-summary" || fail "hpt-metrics summary"
cat "$WORK/c-summary"

PYTHONPATH="$HPT_SRC/analysis:$HPT_SRC/tests/helpers" "$PYTHON" - "$WORK" <<'PY' || fail "slow rank"
import re, sys
import numpy as np
import hpt_metrics as hm
import plot_metrics as pm
from metrics_check import manifest, plots
w = sys.argv[1]
run = hm.load(w + "/r/metrics.h5")
busy = pm.heatmap_data(run, "busy")
assert busy.shape == (6, 2), busy.shape
assert np.all(busy[:, 1] - busy[:, 0] > 0.2), busy  # every step, most of the 300 ms
assert busy[:, 1].mean() > 3 * busy[:, 0].mean(), busy
m = manifest(w + "/fig", "heatmap")
img = plots(m)[0]["images"][0]
assert img["data_shape"] == [6, 2] and img["row_means"][1] - img["row_means"][0] > 0.2, img
parts, _ = pm.breakdown_parts(run)
assert parts["forward"][1] - parts["forward"][0] > 0.2, parts["forward"]
assert parts["comm_dp"][0] - parts["comm_dp"][1] > 0.15, parts["comm_dp"]  # rank 0 waits
m = manifest(w + "/fig", "breakdown")
slow_steps = sorted(e["step"] for e in run.events if e["kind"] == "slow_rank" and e["rank"] == 1)
assert slow_steps, run.events
p = plots(manifest(w + "/fig", "curves"))[3]
# each drawn: a line, or inside the span of a run of slow_rank events
assert all(s in p["event_steps"] or any(a < s < b for a, b in p["event_spans"]) for s in slow_steps), (slow_steps, p)
for name in ("fig/summary.txt", "c-summary"):
    lines = open(w + "/" + name).read().splitlines()
    i = next(i for i, l in enumerate(lines) if l.startswith("slowest ranks"))
    mm = re.match(r"  rank (\d+): ([0-9.e-]+) \(([0-9.]+)x, others ([0-9.e-]+)\)$", lines[i + 1])
    assert mm and mm.group(1) == "1" and float(mm.group(3)) > 3, (name, lines[i + 1])
    assert abs(float(mm.group(2)) - busy[:, 1].mean()) < 1e-5 * busy[:, 1].mean(), (name, lines[i + 1])
    assert sum(1 for l in lines if re.match(r"  step \d+ rank 1 slow_rank: rank 1 computes", l)) == len(slow_steps), name
print("slow rank 1: busy %.3f vs %.3f s/step" % (busy[:, 1].mean(), busy[:, 0].mean()))
PY
pass "a slow rank stands out in the heat-map data, the breakdown and both summaries"
