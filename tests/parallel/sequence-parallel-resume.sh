#!/bin/sh
# A resume names sequence parallelism and the recomputation mode like TP,
# PP and DP: the resume line says how the checkpoint was written
# (checkpoint attributes sequence_parallel, recompute) and how the run
# continues; metrics.h5's /segments rows carry sequence_parallel and
# recompute, the run_start events and hpt-metrics summary (C and Python)
# name them, and a resume that turns sequence parallelism off records a
# layout_change. TP 2 on 2 ranks, tiny
# model, 4 steps in three segments.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
A="--model tiny --data $CORPUS --seq-len 32 --batch 2 --tp 2 --save-every 1 --quiet --run-dir $WORK/r"
seg() { # NAME STEPS ARGS...
  name=$1 steps=$2; shift 2
  timeout 300 "$MPIEXEC" -n 2 "$TRAIN" $A --steps "$steps" "$@" > "$WORK/$name.out" 2>&1 ||
    { cat "$WORK/$name.out"; fail "segment $name"; }
}
seg a 2 --sequence-parallel --recompute selective
seg b 3 --sequence-parallel --recompute selective
seg c 4
grep "resumed from" "$WORK/b.out" "$WORK/c.out"
grep -q "resumed from .*step_00000002 (written by TP 2 x PP 1 x DP 1, sequence parallel, selective recomputation) in [0-9.]* s, continuing as TP 2 x PP 1 x DP 1, sequence parallel, selective recomputation$" \
  "$WORK/b.out" || fail "resume line does not name sequence parallelism and selective recomputation"
grep -q "resumed from .*step_00000003 (written by TP 2 x PP 1 x DP 1, sequence parallel, selective recomputation) in [0-9.]* s, continuing as TP 2 x PP 1 x DP 1$" \
  "$WORK/c.out" || fail "resume line of the segment without sequence parallelism"
"$PYTHON" - "$WORK/r/metrics.h5" <<'PY' || fail "metrics segments / events"
import sys, h5py
f = h5py.File(sys.argv[1], "r", libver="latest", swmr=True)
seg = f["segments"][:]
print([(int(s["resumed_from"]), int(s["tp"]), int(s["sequence_parallel"]), int(s["recompute"])) for s in seg])
assert [(int(s["sequence_parallel"]), int(s["recompute"])) for s in seg] == [(1, 2), (1, 2), (0, 0)], seg
ev = [(e["kind"].decode(), e["message"].decode()) for e in f["events"][:]]
starts = [m for k, m in ev if k == "run_start"]
assert len(starts) == 3 and all("sequence parallel, selective recomputation" in m for m in starts[:2]), starts
assert "sequence parallel" not in starts[2], starts[2]
changes = [m for k, m in ev if k == "layout_change"]
assert changes == ["checkpoint written by TP 2 x PP 1 x DP 1 SP, re-sharded to TP 2 x PP 1 x DP 1 (grad-accum 1)"], changes
PY
# hpt-metrics summary (C) and analysis/hpt_metrics.py name them per segment, alike
"$HPT_BUILD/src/hpt-metrics" summary "$WORK/r" > "$WORK/sum.c" || fail "hpt-metrics summary"
PYTHONPATH="$HPT_SRC/analysis" "$PYTHON" -c 'import sys, hpt_metrics as h; print(h.summary_text(h.load(sys.argv[1])))' \
  "$WORK/r/metrics.h5" > "$WORK/sum.py" || fail "hpt_metrics.summary_text"
for f in sum.c sum.py; do
  grep "^  segment" "$WORK/$f"
  [ "$(grep -c '^  segment [01]: .*(TP 2 x PP 1 x DP 1, sequence parallel, selective recomputation), ' "$WORK/$f")" = 2 ] &&
    grep -q '^  segment 2: .*(TP 2 x PP 1 x DP 1), ' "$WORK/$f" || fail "$f: segments do not name SP / recomputation"
done
pass "resume line, /segments, run_start and the summaries name sequence parallelism and the recomputation mode"
