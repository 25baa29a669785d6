#!/bin/sh
# A resume appends a segment and the analysis counts each step once. Run 1
# (1 rank, grad-accum 2) checkpoints at steps 3 and 6 with a metrics row
# per step; removing step 6's checkpoint stands for a crash after the rows
# of steps 4-6 were flushed but before their checkpoint committed. Run 2
# (2 ranks, DP 2, same global batch) resumes from step 3, redoes 4-6 and
# goes on to 8: 11 rows, 3 of them repeated. hpt_metrics.load, the figures,
# the Python summary and hpt-metrics summary/csv must all show steps 1..8
# once each, with the later segment's row for 4..8 (told apart by
# wall_time), 8 x 128 tokens, rank 1 absent (NaN) in steps 1-3, and the
# resume marked on the gradient-norm panel.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$PYTHON" -c "import h5py, numpy, matplotlib" || fail "python3-h5py/numpy/matplotlib missing (setup.sh installs them)"
export OMP_NUM_THREADS=1
R="$WORK/run"
A="--model tiny --data $CORPUS --seq-len 32 --batch 2 --eval-interval 3 --eval-batches 1 --metrics-interval 1 --save-every 3 --quiet --run-dir $R"
"$TRAIN" $A --grad-accum 2 --steps 6 > "$WORK/a.out" 2>&1 || { cat "$WORK/a.out"; fail "run 1"; }
[ -d "$R/checkpoints/step_00000006" ] || fail "run 1 did not checkpoint step 6"
rm -rf "$R/checkpoints/step_00000006"
"$MPIEXEC" -n 2 "$TRAIN" $A --steps 8 > "$WORK/b.out" 2>&1 || { cat "$WORK/b.out"; fail "run 2"; }
grep -q "resumed from .*step_00000003" "$WORK/b.out" || { cat "$WORK/b.out"; fail "run 2 did not resume from step 3"; }

"$PYTHON" "$HPT_SRC/analysis/plot_metrics.py" "$R/metrics.h5" -o "$WORK/fig" --format png > "$WORK/plot.out" 2>&1 ||
  { cat "$WORK/plot.out"; fail "plot_metrics.py"; }
"$HPT_BUILD/src/hpt-metrics" summary "$R/metrics.h5" > "$WORK/c-summary" || fail "hpt-metrics summary"
"$HPT_BUILD/src/hpt-metrics" csv "$R/metrics.h5" -o "$WORK/steps.csv" || fail "hpt-metrics csv"

PYTHONPATH="$HPT_SRC/analysis:$HPT_SRC/tests/helpers" "$PYTHON" - "$R/metrics.h5" "$WORK" <<'PY' || fail "resume"
import csv, sys
import numpy as np
import hpt_metrics as hm
from metrics_check import manifest, plots
path, w = sys.argv[1:]
run = hm.load(path)
raw = run.raw_steps
# the file: 11 rows, segment 1 redid steps 4-6 and marked them
assert run.rows == 11 and list(raw["step"]) == [1, 2, 3, 4, 5, 6, 4, 5, 6, 7, 8], raw["step"]
assert list(raw["repeated"]) == [0] * 6 + [1, 1, 1, 0, 0], raw["repeated"]
assert [s["world"] for s in run.segments] == [1, 2], run.segments
# loaded: each step once, the later segment's row
s = run.steps
assert list(s["step"]) == list(range(1, 9)), s["step"]
assert list(s["segment"]) == [0, 0, 0, 1, 1, 1, 1, 1], s["segment"]
for i, step in enumerate(s["step"]):
    last = np.flatnonzero(raw["step"] == step)[-1]
    for col in raw:
        assert np.array_equal(s[col][i], raw[col][last], equal_nan=True), (step, col)
seg1 = (raw["segment"] == 1) & (raw["step"] <= 6)
assert np.array_equal(s["wall_time"][3:6], raw["wall_time"][seg1]), "steps 4-6 not from segment 1"
assert np.all(s["wall_time"][3:6] > raw["wall_time"][:6].max()), "kept rows are not the later ones"
busy = run.ranks["busy"]
assert busy.shape == (8, 2) and np.all(np.isnan(busy[:3, 1])) and np.all(np.isfinite(busy[3:])), busy
# figures: 8 points per curve, 8 x 2 heat map, the resume on the grad-norm panel
m = manifest(w + "/fig", "curves")
p = plots(m)
assert all(sr["points"] == 8 for a in p if a["title"] != "validation loss" for sr in a["series"]), p
assert p[1]["series"][0]["points"] == 3, p[1]  # val loss after steps 3, 6, 8 (6 once)
assert 3.0 in p[3]["event_steps"] and p[3]["events"] >= 2, p[3]  # resume, checkpoint_load
m = manifest(w + "/fig", "heatmap")
for a in plots(m):
    assert a["images"][0]["data_shape"] == [8, 2], a
# summaries: 8 steps, 11 rows, 3 repeated, 1024 tokens; C and Python agree
py = open(w + "/fig/summary.txt").read().splitlines()
c = open(w + "/c-summary").read().splitlines()
for line in ("steps: 8 (1-8), 11 rows, 3 repeated rows, 0 skipped", "tokens: 1024", "segments: 2"):
    assert line in py and line in c, (line, py, c)
assert [l for l in py if l.startswith("  segment")] == [l for l in c if l.startswith("  segment")], (py, c)
assert "resumed from step 3" in py[4], py[4]
# hpt-metrics csv: the same 8 rows
rows = list(csv.DictReader(open(w + "/steps.csv")))
assert [int(r["step"]) for r in rows] == list(range(1, 9)), rows
for col in ("wall_time", "loss", "grad_norm", "segment", "repeated"):
    assert np.array_equal([float(r[col]) for r in rows], s[col].astype(float)), col
print("resume: 11 rows -> 8 steps, later segment wins, figures and summaries count each step once")
PY
pass "a resumed run is analysed with each step once (the later segment's row)"
