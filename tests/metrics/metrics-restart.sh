#!/bin/sh
# The metrics file survives kill -9 and continues across restarts:
# - every rank of a 2-rank run is killed while it writes; h5py (SWMR reader)
#   opens the file and finds every row flushed before the kill, steps 1..n;
# - the resumed run (same world size) appends segment 1 without touching the
#   earlier rows; steps redone after the checkpoint are marked repeated;
# - a resume on a different world size (1 rank) appends segment 2 with its
#   layout; after the dedup rule (last row of each step) every step appears
#   exactly once.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
R="$WORK/run"
A="--model tiny --data $CORPUS --seq-len 32 --eval-batches 1 --eval-interval 0 --quiet --save-every 4 --metrics-interval 1 --run-dir $R"
# ~100 ms steps (rank 0 sleeps) so the kill lands mid-run
timeout 120 "$MPIEXEC" -n 2 "$TRAIN" $A --batch 1 --steps 1000 --fault-slow-rank 0 --fault-slow-ms 100 \
  > "$WORK/a.out" 2>&1 &
job=$!
cat > "$WORK/rows.py" <<'PY'
import sys, h5py
try:
    f = h5py.File(sys.argv[1], "r", libver="latest", swmr=True)
    print(len(f["steps/step"]))
except Exception:
    print(0)
PY
n0=0 j=0
while [ "$n0" -lt 7 ]; do
  sleep 0.2; j=$((j + 1)); [ $j -lt 300 ] || { cat "$WORK/a.out"; fail "no metrics rows appeared"; }
  n0=$("$PYTHON" "$WORK/rows.py" "$R/metrics.h5")
done
pkill -9 -f "hpt-train $A" || true
wait $job || true
echo "killed after $n0 rows were readable"
"$PYTHON" - "$R/metrics.h5" "$n0" <<'PY' || fail "metrics after kill -9"
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r", libver="latest", swmr=True)
n0, steps = int(sys.argv[2]), f["steps/step"][:]
assert len(steps) >= n0 and list(steps) == list(range(1, len(steps) + 1)), steps
assert f["ranks/busy"].shape[0] >= len(steps) and np.all(np.isfinite(f["steps/loss"][:]))
np.save(sys.argv[1] + ".before.npy", f["steps/loss"][:])
print(f"kill -9: {len(steps)} rows readable (>= {n0} seen live)")
open(sys.argv[1] + ".rows", "w").write(str(len(steps)))
PY
# The kill lands after however many steps the machine's load allowed: the
# resumed runs train past that point (B steps, then C on 1 rank).
K=$(cat "$R/metrics.h5.rows")
B=$((K + 3)) C=$((K + 7))
cp "$R/metrics.h5" "$WORK/killed.h5"
timeout 120 "$MPIEXEC" -n 2 "$TRAIN" $A --batch 1 --steps $B > "$WORK/b.out" 2>&1 \
  || { cat "$WORK/b.out"; fail "resume, same world size"; }
grep -q "resumed from" "$WORK/b.out" || { cat "$WORK/b.out"; fail "did not resume"; }
timeout 120 "$TRAIN" $A --batch 1 --steps $C > "$WORK/c.out" 2>&1 \
  || { cat "$WORK/c.out"; fail "resume on 1 rank"; }
grep -q "resumed from" "$WORK/c.out" || { cat "$WORK/c.out"; fail "did not resume on 1 rank"; }
"$PYTHON" - "$R/metrics.h5" "$WORK/killed.h5" "$B" "$C" <<'PY' || fail "segments (killed at $K rows, B=$B, C=$C)"
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r", libver="latest", swmr=True)
old = h5py.File(sys.argv[2], "r", libver="latest", swmr=True)
n_old = len(old["steps/step"])
B, C = int(sys.argv[3]), int(sys.argv[4])
seg = f["segments"][:]
assert len(seg) == 3 and list(seg["world"]) == [2, 2, 1] and list(seg["dp"]) == [2, 2, 1], seg
assert list(seg["grad_accum"]) == [1, 1, 2], seg["grad_accum"]
steps, segcol, rep = f["steps/step"][:], f["steps/segment"][:], f["steps/repeated"][:]
# earlier rows untouched (the killed run's rows, then segment 1's)
for c in ("step", "loss", "grad_norm", "lr"):
    assert np.array_equal(f["steps/" + c][:n_old], old["steps/" + c][:]), c
assert np.array_equal(f["ranks/busy"][:n_old], old["ranks/busy"][:], equal_nan=True)
r1 = seg["resumed_from"][1]
assert r1 % 4 == 0 and r1 <= n_old and seg["first_row"][1] == n_old, seg
s1 = steps[segcol == 1]
assert list(s1) == list(range(r1 + 1, B + 1)), s1
assert list(rep[segcol == 1]) == [1 if s <= n_old else 0 for s in s1], rep
s2 = steps[segcol == 2]
assert list(s2) == list(range(seg["resumed_from"][2] + 1, C + 1)), s2
# the 1-rank segment's rows have NaN in rank column 1
busy = f["ranks/busy"][:]
assert busy.shape[1] == 2 and np.all(np.isnan(busy[segcol == 2, 1])) and np.all(np.isfinite(busy[segcol == 2, 0]))
# dedup: the last row of each step
last = {}
for i, s in enumerate(steps):
    last[int(s)] = i
assert sorted(last) == list(range(1, C + 1)), sorted(last)
kinds = [k.decode() for k in f["events"]["kind"]]
assert kinds.count("resume") == 2 and kinds.count("layout_change") == 1 and kinds.count("checkpoint_load") == 2, kinds
print(f"segments {list(seg['first_row'])}, {int((rep == 1).sum())} repeated rows marked, {C} steps after dedup")
PY
pass "metrics survive kill -9 and continue across restarts (same and different world size)"
