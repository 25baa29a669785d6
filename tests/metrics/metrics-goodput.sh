#!/bin/sh
# Goodput over restarts (issue 32): a 1-rank tiny run (each step >= 200 ms:
# the rank sleeps; a save every 4 steps, validation every 4) is killed with
# kill -9 after its checkpoint at step 4, resumed, stopped by a stop signal
# (SIGUSR1: it saves and exits 75), and resumed to the end, step 30, with
# the test's own pauses of 1.5 s between the runs. `hpt-metrics goodput`:
# - its parts add up to the wall time the test measured itself, from before
#   the first start to after the last exit, within 2 %, and never exceed it;
# - the redone steps are exactly the steps the killed run logged after its
#   checkpoint (read from the file after the kill); 30 productive steps,
#   each at least 200 ms, redone ones too;
# - the time between segments holds the test's pauses and no more than the
#   time from the kill / the signal to the next start;
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

T0=$(now)
"$TRAIN" $A --steps 30 > "$WORK/a.out" 2>&1 &
pid=$!
wait_for "$WORK/a.out" "^step +7/30"
kill -9 $pid
wait $pid 2>/dev/null
T1=$(now)
grep -q "step 8: checkpoint" "$WORK/a.out" && fail "the kill came after the save at step 8 (a step took < 200 ms?)"
K1=$("$HM" csv "$R" | tail -1 | cut -d, -f1)
ls "$R/checkpoints" | grep -qx step_00000004 || fail "no checkpoint at step 4"
[ "$K1" -ge 6 ] && [ "$K1" -le 8 ] || fail "the killed run logged $K1 steps, expected 6-8"
echo "killed after $K1 logged steps; the checkpoint is at step 4"
sleep 1.5
T2=$(now)
"$TRAIN" $A --steps 30 > "$WORK/b.out" 2>&1 &
pid=$!
wait_for "$WORK/b.out" "^step +16/30"
kill -USR1 $pid
T3=$(now)
st=0; wait $pid || st=$?
[ $st = 75 ] || { cat "$WORK/b.out"; fail "the stopped run: exit $st, expected 75"; }
N2=$(sed -n 's/.*checkpointed step \([0-9]*\) after a stop signal.*/\1/p' "$WORK/b.out")
[ -n "$N2" ] || { cat "$WORK/b.out"; fail "no stop checkpoint"; }
sleep 1.5
T4=$(now)
"$TRAIN" $A --steps 30 > "$WORK/c.out" 2>&1 || { cat "$WORK/c.out"; fail "the last run"; }
T5=$(now)
grep -q "resumed from .*step_0*$N2 " "$WORK/c.out" || { cat "$WORK/c.out"; fail "did not resume from step $N2"; }
"$HM" goodput "$R" > "$WORK/g.out" || { cat "$WORK/g.out"; fail "hpt-metrics goodput"; }
cat "$WORK/g.out"
"$HM" summary "$R" > "$WORK/s.out" || fail "hpt-metrics summary"
grep -q "^goodput: [0-9.]* % of [0-9.]* s (redone $((K1 - 4)) steps" "$WORK/s.out" || { cat "$WORK/s.out"; fail "summary: goodput line"; }
SAVES=$(grep -c "^  step [0-9]* rank 0 checkpoint_save:" "$WORK/s.out")
"$PYTHON" - "$WORK/g.out" "$T0" "$T1" "$T2" "$T3" "$T4" "$T5" "$K1" "$SAVES" <<'PY' || fail "goodput figures"
import re, sys
text = open(sys.argv[1]).read()
T0, T1, T2, T3, T4, T5 = map(float, sys.argv[2:8])
K1, saves = int(sys.argv[8]), int(sys.argv[9])
def part(name):
    m = re.search(r"^%s: ([0-9.]+) s(?: \(([0-9.]+) %%\))?(?:, ([0-9]+) (?:steps|saves))?" % name, text, re.M)
    assert m, name
    return float(m.group(1)), (int(m.group(3)) if m.group(3) else None)
wall = part("wall")[0]
names = ("productive", "redone", "checkpoint", "startup", "validation", "between segments", "other")
p = {n: part(n) for n in names}
total = sum(v for v, _ in p.values())
ext = T5 - T0
print("parts %.3f s, wall %.3f s; the test measured %.3f s" % (total, wall, ext))
assert abs(total - wall) <= 0.01, ("parts do not add up to the wall time", total, wall)
assert wall <= ext, ("more wall time than the test measured", wall, ext)
assert abs(total - ext) <= 0.02 * ext, ("parts differ from the measured wall time by more than 2 %", total, ext)
assert p["redone"][1] == K1 - 4, ("redone steps", p["redone"][1], K1 - 4)
assert p["productive"][1] == 30, ("productive steps", p["productive"][1])
assert p["productive"][0] >= 30 * 0.2, p["productive"]
assert p["redone"][0] >= (K1 - 4) * 0.2, p["redone"]
assert p["checkpoint"][1] == saves, ("one save per checkpoint_save event", p["checkpoint"][1], saves)
assert p["validation"][0] > 0 and p["startup"][0] > 0 and p["checkpoint"][0] > 0, p
gap = p["between segments"][0]
# the pauses, less the stop save after the signal; at most the pauses, the
# signal's wait and the time the killed run ran after its last logged row
assert gap >= (T2 - T1) + (T4 - T3) - 0.5, ("the pauses between the runs are missing", gap)
assert gap <= (T2 - T1) + (T4 - T3) + 1.0, ("more time between segments than from the kill/signal to the next start", gap)
m = re.search(r"^goodput: ([0-9.]+) %", text, re.M)
assert m and abs(float(m.group(1)) - 100 * p["productive"][0] / wall) < 0.02, m
print("goodput ok: redone %d steps, %d saves, between segments %.3f s" % (K1 - 4, saves, gap))
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
grep -q "^redone: .*, $((K1 - 4)) steps" "$WORK/o.out" || { cat "$WORK/o.out"; fail "older file: redone steps"; }
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
