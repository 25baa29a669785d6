#!/bin/sh
# Goodput over restarts (issue 32): a 1-rank tiny run (each step >= 200 ms:
# the rank sleeps; a save every 4 steps, validation every 4) is killed with
# kill -9 after its checkpoint at step 4, resumed, stopped by a stop signal
# (SIGUSR1: it saves and exits 75), and resumed to the end, step 30, with
# the test's own pauses of 1.5 s between the runs. `hpt-metrics goodput`:
# - its parts add up to its wall time; the wall time lies inside what the
#   test can bracket without trusting the machine's speed: no more than from
#   before the first start to after the last exit, no less than from the
#   first run's first output line (seen by the test) to the last run's last
#   row (read from the file);
# - the redone steps are exactly the steps the killed run logged after its
#   last checkpoint (both read after the kill); 30 productive steps, each at
#   least 200 ms, redone ones too;
# - the time between segments holds the test's pauses (from the kill, and
#   from the stopped run's exit, to the next start) and no more than from
#   each segment's last row to the next run's first output line;
# - it counts one save per checkpoint_save event, some validation;
# `hpt-metrics summary` has the goodput line; analysis/hpt_metrics.py's
# goodput_text, an implementation of its own, prints the same lines.
# `hpt-plan --measured RUN_DIR`
# takes the mean save stall (checkpoint / saves). A file without the newer
# fields (/ranks/validation, /segments process_start and load_seconds, as
# older writers left) is still read, says what it lacks, and a resumed run
# appends to it, adding /ranks/validation (NaN in the earlier rows).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$PYTHON" -c "import h5py, numpy" || fail "python3-h5py missing (setup.sh installs it)"
export OMP_NUM_THREADS=1
HM="$HPT_BUILD/src/hpt-metrics"
R="$WORK/run"
A="--model tiny --data $CORPUS --seq-len 32 --batch 2 --eval-batches 1 --eval-interval 4 --save-every 4 --metrics-interval 1 --fault-slow-rank 0 --fault-slow-ms 200 --run-dir $R"
now() { date +%s.%N; }
# wait_for FILE REGEX: until FILE has a line matching REGEX (60 s at most)
wait_for() {
  j=0
  until grep -qE "$2" "$1"; do
    sleep 0.05; j=$((j + 1)); [ $j -lt 1200 ] || { cat "$1"; fail "never saw /$2/ in $1"; }
  done
}

# first_line OUT: the time the test saw OUT's first line (the process had
# started by then: a bound that load can only loosen, never break)
first_line() { wait_for "$1" "."; now; }
T0=$(now)
"$TRAIN" $A --steps 30 > "$WORK/a.out" 2>&1 &
pid=$!
TA=$(first_line "$WORK/a.out")
wait_for "$WORK/a.out" "^step +7/30"
kill -9 $pid
wait $pid 2>/dev/null
T1=$(now)
K1=$("$HM" csv "$R" | tail -1 | cut -d, -f1)
# the last checkpoint the killed run committed: step 4, or step 8 where the
# machine was so loaded that the kill came after it
C1=$(ls "$R/checkpoints" | sed -n 's/^step_0*\([0-9][0-9]*\)$/\1/p' | sort -n | tail -1)
[ "$C1" = 4 ] || [ "$C1" = 8 ] || fail "the killed run's last checkpoint: step '$C1', expected 4 (or 8)"
[ "$K1" -ge 7 ] && [ "$K1" -ge "$C1" ] || fail "the killed run logged $K1 steps, expected at least 7 and its checkpoint's $C1"
RD=$((K1 - C1))
echo "killed after $K1 logged steps; the checkpoint is at step $C1: $RD steps to redo"
sleep 1.5
T2=$(now)
"$TRAIN" $A --steps 30 > "$WORK/b.out" 2>&1 &
pid=$!
TB=$(first_line "$WORK/b.out")
wait_for "$WORK/b.out" "^step +16/30"
kill -USR1 $pid
st=0; wait $pid || st=$?
T3=$(now)
[ $st = 75 ] || { cat "$WORK/b.out"; fail "the stopped run: exit $st, expected 75"; }
N2=$(sed -n 's/.*checkpointed step \([0-9]*\) after a stop signal.*/\1/p' "$WORK/b.out")
[ -n "$N2" ] || { cat "$WORK/b.out"; fail "no stop checkpoint"; }
sleep 1.5
T4=$(now)
"$TRAIN" $A --steps 30 > "$WORK/c.out" 2>&1 &
pid=$!
TC=$(first_line "$WORK/c.out")
wait $pid || { cat "$WORK/c.out"; fail "the last run"; }
T5=$(now)
grep -q "resumed from .*step_0*$N2 " "$WORK/c.out" || { cat "$WORK/c.out"; fail "did not resume from step $N2"; }
"$HM" goodput "$R" > "$WORK/g.out" || { cat "$WORK/g.out"; fail "hpt-metrics goodput"; }
cat "$WORK/g.out"
"$HM" summary "$R" > "$WORK/s.out" || fail "hpt-metrics summary"
grep -q "^goodput: [0-9.]* % of [0-9.]* s (redone $RD steps" "$WORK/s.out" || { cat "$WORK/s.out"; fail "summary: goodput line"; }
SAVES=$(grep -c "^  step [0-9]* rank 0 checkpoint_save:" "$WORK/s.out")
"$PYTHON" - "$WORK/g.out" "$R/metrics.h5" "$T0" "$T1" "$T2" "$T3" "$T4" "$T5" "$TA" "$TB" "$TC" "$RD" "$SAVES" <<'PY' || fail "goodput figures"
import re, sys
import h5py, numpy as np
text = open(sys.argv[1]).read()
T0, T1, T2, T3, T4, T5, TA, TB, TC = map(float, sys.argv[3:12])
RD, saves = int(sys.argv[12]), int(sys.argv[13])
# each segment's last row, read here (its end is that or a later event)
with h5py.File(sys.argv[2], "r", libver="latest", swmr=True) as f:
    seg, wt = f["steps/segment"][:], f["steps/wall_time"][:]
last = [float(wt[seg == s].max()) for s in range(3)]
def part(name):
    m = re.search(r"^%s: ([0-9.]+) s(?: \(([0-9.]+) %%\))?(?:, ([0-9]+) (?:steps|saves))?" % name, text, re.M)
    assert m, name
    return float(m.group(1)), (int(m.group(3)) if m.group(3) else None)
wall = part("wall")[0]
names = ("productive", "redone", "checkpoint", "startup", "validation", "between segments", "other")
p = {n: part(n) for n in names}
total = sum(v for v, _ in p.values())
print("parts %.3f s, wall %.3f s; the test bracketed [%.3f, %.3f] s" % (total, wall, last[2] - TA, T5 - T0))
assert abs(total - wall) <= 0.01, ("parts do not add up to the wall time", total, wall)
assert wall <= T5 - T0, ("more wall time than from before the first start to after the last exit", wall, T5 - T0)
assert wall >= last[2] - TA - 0.002, ("less wall time than from the first output line to the last row", wall, last[2] - TA)
assert p["redone"][1] == RD, ("redone steps", p["redone"][1], RD)
assert p["productive"][1] == 30, ("productive steps", p["productive"][1])
assert p["productive"][0] >= 30 * 0.2, p["productive"]
assert p["redone"][0] >= RD * 0.2, p["redone"]
assert p["checkpoint"][1] == saves, ("one save per checkpoint_save event", p["checkpoint"][1], saves)
assert p["validation"][0] > 0 and p["startup"][0] > 0 and p["checkpoint"][0] > 0, p
gap = p["between segments"][0]
# at least the pauses: from the kill to the next start, from the stopped
# run's exit to the next start; at most from each segment's last row to the
# next run's first output line (the printed figures have 3 decimals)
lo, hi = (T2 - T1) + (T4 - T3), (TB - last[0]) + (TC - last[1])
assert gap >= lo - 0.002, ("the pauses between the runs are missing", gap, lo)
assert gap <= hi + 0.002, ("more time between segments than from each last row to the next run's first line", gap, hi)
m = re.search(r"^goodput: ([0-9.]+) %", text, re.M)
assert m and abs(float(m.group(1)) - 100 * p["productive"][0] / wall) < 0.02, m
print("goodput ok: redone %d steps, %d saves, between segments %.3f s in [%.3f, %.3f]" % (RD, saves, gap, lo, hi))
PY
# Python's implementation (analysis/hpt_metrics.py) prints the same lines
py_goodput() {
  "$PYTHON" -c "import sys; sys.path.insert(0, sys.argv[1]); import hpt_metrics as hm
sys.stdout.write(hm.goodput_text(hm.load(sys.argv[2])))" "$HPT_SRC/analysis" "$1"
}
py_goodput "$R" > "$WORK/g.py" || fail "hpt_metrics.goodput_text"
tail -n +2 "$WORK/g.out" | diff - "$WORK/g.py" || fail "hpt-metrics goodput and hpt_metrics.goodput_text differ"
# hpt-plan: the measured save stall is checkpoint / saves
"$HPT_BUILD/src/hpt-plan" --model tiny --cluster cpu-local --seq-len 32 --global-batch 2 --mtbf-hours 1 \
  --measured "$R" --json > "$WORK/plan.json" || { cat "$WORK/plan.json"; fail "hpt-plan --measured"; }
"$PYTHON" - "$WORK/plan.json" "$WORK/g.out" <<'PY' || fail "hpt-plan --measured"
import json, re, sys
c = json.load(open(sys.argv[1]))["checkpoint_interval"]
g = open(sys.argv[2]).read()
ck, saves = re.search(r"^checkpoint: ([0-9.]+) s \([0-9.]+ %\), ([0-9]+) saves", g, re.M).groups()
want = float(ck) / int(saves)
assert abs(c["save_stall_s"] - want) <= 0.0006 / int(saves) + 1e-9, (c["save_stall_s"], want)
assert c["save_stall_from"].startswith("measured: mean of %s saves" % saves), c["save_stall_from"]
assert c["restart_from"].startswith("measured: mean start-up of 2 resumed segments"), c["restart_from"]
print("hpt-plan --measured: save stall %.4f s, restart %.4f s" % (c["save_stall_s"], c["restart_s"]))
PY
# a file as an older writer left it: no /ranks/validation, /segments without
# process_start and load_seconds
cp "$R/metrics.h5" "$WORK/old.h5"
"$PYTHON" - "$WORK/old.h5" <<'PY' || fail "making an older file"
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r+", libver="latest")
del f["ranks/validation"]
seg = f["segments"][:]
keep = [n for n in seg.dtype.names if n not in ("process_start", "load_seconds")]
old = np.zeros(len(seg), [(n, seg.dtype[n]) for n in keep])
for n in keep:
    old[n] = seg[n]
desc = f["segments"].attrs["description"]
del f["segments"]
d = f.create_dataset("segments", data=old, maxshape=(None,), chunks=(64,))
d.attrs["description"] = desc
PY
"$HM" goodput "$WORK/old.h5" > "$WORK/o.out" || { cat "$WORK/o.out"; fail "goodput of an older file"; }
grep -q "^validation: not recorded" "$WORK/o.out" || { cat "$WORK/o.out"; fail "older file: validation"; }
grep -q "^startup: .* 0 of 3 segments with their process start recorded" "$WORK/o.out" || { cat "$WORK/o.out"; fail "older file: process start"; }
grep -q "^redone: .*, $RD steps" "$WORK/o.out" || { cat "$WORK/o.out"; fail "older file: redone steps"; }
py_goodput "$WORK/old.h5" > "$WORK/o.py" || fail "hpt_metrics.goodput_text, older file"
tail -n +2 "$WORK/o.out" | diff - "$WORK/o.py" || fail "older file: hpt-metrics goodput and hpt_metrics.goodput_text differ"
"$TRAIN" $A --steps 32 --metrics "$WORK/old.h5" > "$WORK/d.out" 2>&1 || { cat "$WORK/d.out"; fail "resume onto an older file"; }
"$PYTHON" - "$WORK/old.h5" <<'PY' || fail "the older file after a resume"
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r", libver="latest", swmr=True)
seg, segcol = f["segments"][:], f["steps/segment"][:]
assert len(seg) == 4 and "process_start" not in seg.dtype.names, seg.dtype
v = f["ranks/validation"][:, 0]
assert len(v) == len(segcol) and np.all(np.isnan(v[segcol < 3])) and np.all(v[segcol == 3] >= 0), v
assert v[segcol == 3][-1] > 0, "validation after the last step"
print("older file: segment 3 appended, /ranks/validation added (%d NaN rows before)" % int((segcol < 3).sum()))
PY
"$HM" goodput "$WORK/old.h5" | grep -q "^validation: [0-9.]* s" || fail "goodput after the resume onto the older file"
pass "goodput over kill -9, a stop signal and resumes: parts add up to the measured wall time, redone steps exact"
