#!/bin/sh
# A context-parallel run's metrics name CP: /segments has no cp field, so
# hpt-metrics summary (and analysis/hpt_metrics.summary_text) derive it
# as world / (TP x PP x DP) — before, a CP 2 x PP 2 run on 4 ranks read
# "world 4 (TP 1 x PP 2 x DP 1)" — and the run_start event names it as
# hpt-train's layout line does. A run without CP keeps the old line; one
# rank reads "on 1 rank".
# analysis/plot_metrics.py's per-rank breakdown has the ring's comm_cp.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
A="--model tiny --data $CORPUS --steps 1 --seq-len 32 --batch 1 --grad-accum 2 --eval-interval 0 --eval-batches 1 --quiet"
run_train cp 4 --cp 2 --pp 2
run_train nocp 2 --pp 2
M="$HPT_BUILD/src/hpt-metrics"
for r in cp nocp; do
  "$M" summary "$WORK/$r/metrics.h5" > "$WORK/$r.sum" || fail "hpt-metrics summary $r"
  PYTHONPATH="$HPT_SRC/analysis" "$PYTHON" -c 'import sys, hpt_metrics as h; print(h.summary_text(h.load(sys.argv[1])))' \
    "$WORK/$r/metrics.h5" > "$WORK/$r.py" || fail "summary_text $r"
done
cat "$WORK/cp.sum"
for f in cp.sum cp.py; do
  grep -q "segment 0: first row 0, fresh start, world 4 (TP 1 x CP 2 x PP 2 x DP 1), " "$WORK/$f" ||
    fail "$f: the segment line does not name CP 2"
done
grep -q "run_start: TP 1 x CP 2 x PP 2 x DP 1 on 4 ranks," "$WORK/cp.sum" ||
  fail "the run_start event does not name CP 2"
for f in nocp.sum nocp.py; do
  grep -q "world 2 (TP 1 x PP 2 x DP 1), " "$WORK/$f" || fail "$f: the line without CP changed"
done
grep -q "run_start: TP 1 x PP 2 x DP 1 on 2 ranks," "$WORK/nocp.sum" || fail "run_start without CP"
# one rank: "on 1 rank" in the layout line and the run_start event
"$TRAIN" --model tiny --data "$CORPUS" --steps 1 --seq-len 32 --batch 1 --eval-interval 0 \
  --eval-batches 1 --run-dir "$WORK/one" > "$WORK/one.out" 2>&1 || { cat "$WORK/one.out"; fail "one-rank run"; }
grep -q "^hpt-train: layout TP 1 x PP 1 x DP 1 on 1 rank;" "$WORK/one.out" ||
  { cat "$WORK/one.out"; fail "one rank: the layout line"; }
"$M" summary "$WORK/one/metrics.h5" | grep -q "run_start: TP 1 x PP 1 x DP 1 on 1 rank," ||
  fail "one rank: the run_start event"
# analysis/plot_metrics.py's breakdown stacks the CP ring's time (comm_cp)
# too: its parts add up to step_time + checkpoint per rank (they fell short
# by the ring's seconds)
PYTHONPATH="$HPT_SRC/analysis" "$PYTHON" - "$WORK/cp/metrics.h5" "$WORK/nocp/metrics.h5" <<'PY' ||
import sys
import numpy as np
import hpt_metrics as hm, plot_metrics as pm
for path in sys.argv[1:]:
    run = hm.load(path)
    parts, st = pm.breakdown_parts(run)
    tot = sum(parts[k] for k in pm.BREAKDOWN)
    want = st + np.nan_to_num(hm.rank_means(run, "checkpoint"))
    assert np.allclose(tot, want, rtol=0.05, atol=2e-3), (path, tot, want)
    print(path, "breakdown", np.round(tot, 4).tolist(), "step + checkpoint", np.round(want, 4).tolist())
PY
  fail "plot_metrics.py's breakdown does not add up to the step time of a CP run"
pass "metrics of a CP run name CP (summary in C and Python, run_start event, the breakdown's ring)"
