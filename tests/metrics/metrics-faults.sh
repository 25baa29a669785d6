#!/bin/sh
# Anomaly events from injected faults on a real multi-rank run:
# - a NaN in one rank's own gradients (--fault-nan-rank) → exactly one
#   skipped_step event naming that rank, a log line, and the weights on
#   every rank equal those of a run that stopped before that step;
# - one slow rank (--fault-slow-rank) → a slow_rank event naming it, and its
#   column of the per-rank busy time stands out.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
common="--model tiny --data $CORPUS --seq-len 32 --batch 1 --eval-interval 0 --eval-batches 1 --quiet"
timeout 300 "$MPIEXEC" -n 4 "$TRAIN" $common --tp 2 --steps 3 --fault-nan-steps 3 --fault-nan-rank 2 \
  --metrics-interval 2 --run-dir "$WORK/nan" --export "$WORK/nan.h5" > "$WORK/nan.out" 2>&1 \
  || { cat "$WORK/nan.out"; fail "NaN run"; }
cat "$WORK/nan.out"
grep -q "anomaly at step 3: skipped_step: non-finite values first seen on rank 2" "$WORK/nan.out" \
  || fail "no anomaly line naming rank 2"
timeout 300 "$MPIEXEC" -n 4 "$TRAIN" $common --tp 2 --steps 2 --export "$WORK/ref.h5" \
  > "$WORK/ref.out" 2>&1 || { cat "$WORK/ref.out"; fail "reference run"; }
timeout 300 "$MPIEXEC" -n 2 "$TRAIN" $common --steps 6 --fault-slow-rank 1 --fault-slow-ms 250 \
  --metrics-interval 3 --run-dir "$WORK/slow" > "$WORK/slow.out" 2>&1 \
  || { cat "$WORK/slow.out"; fail "slow run"; }
cat "$WORK/slow.out"
grep -q "anomaly at step [36]: slow_rank: rank 1 computes" "$WORK/slow.out" || fail "no slow-rank line"
"$PYTHON" - "$WORK" <<'PY' || fail "events or weights"
import sys
import h5py, numpy as np
w = sys.argv[1]
f = h5py.File(w + "/nan/metrics.h5", "r", libver="latest", swmr=True)
ev = f["events"][:]
sk = ev[ev["kind"] == b"skipped_step"]
assert len(sk) == 1 and sk["rank"][0] == 2 and sk["step"][0] == 3, ev
assert list(f["steps/skipped"][:]) == [0, 0, 1]
nf = f["ranks/nonfinite"][:]
assert list(nf[2]) == [0, 0, 1, 0] and nf[:2].sum() == 0, nf
a, b = h5py.File(w + "/nan.h5", "r"), h5py.File(w + "/ref.h5", "r")
names = []
a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) else None)
assert names and all(np.array_equal(a[n][()], b[n][()]) for n in names), "weights changed"
print(f"NaN on rank 2 at step 3: one skipped_step event naming rank 2; {len(names)} tensors unchanged")
f = h5py.File(w + "/slow/metrics.h5", "r", libver="latest", swmr=True)
ev = f["events"][:]
slow = ev[ev["kind"] == b"slow_rank"]
assert len(slow) >= 1 and set(slow["rank"]) == {1}, ev
busy = f["ranks/busy"][:]
assert busy.shape == (6, 2) and np.median(busy[:, 1]) > np.median(busy[:, 0]) + 0.2, busy
print("slow rank 1: events", len(slow), "median busy", np.median(busy, axis=0))
PY
pass "NaN on one rank and a slow rank are reported as events naming the rank"
