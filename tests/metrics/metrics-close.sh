#!/bin/sh
# `hpt-metrics close FILE` (issue 17, finding 3): the metrics file of a run
# killed with kill -9 keeps HDF5's "open for write" flag, so a plain reader
# (h5py.File(FILE, "r"), h5dump) refuses it; close clears the flag, after
# which both open it and see every row. While a live hpt-train writes the
# file, close is refused (exit 5, naming the lock) and the writer goes on.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
HM="$HPT_BUILD/src/hpt-metrics"
F="$WORK/m.h5"
# ~100 ms steps so that the run is live while we look at it
"$TRAIN" --model tiny --data "$CORPUS" --seq-len 32 --batch 1 --eval-batches 1 --eval-interval 0 \
  --quiet --steps 100000 --metrics-interval 1 --fault-slow-rank 0 --fault-slow-ms 100 --metrics "$F" \
  > "$WORK/a.out" 2>&1 &
job=$!
rows() { "$PYTHON" -c "
import sys, h5py
try:
    print(len(h5py.File(sys.argv[1], 'r', libver='latest', swmr=True)['steps/step']))
except Exception:
    print(0)" "$F"; }
i=0; until [ "$(rows)" -ge 3 ]; do sleep 0.2; i=$((i + 1)); [ $i -lt 600 ] || { kill -9 $job; cat "$WORK/a.out"; fail "no rows"; }; done
# a live writer: refused, the writer unharmed
expect_error 5 "m.h5: a live hpt-train is writing it \(.*m.h5.lock is locked\); not cleared" "$HM" close "$F"
kill -0 $job || fail "the writer died"
kill -9 $job; wait $job 2>/dev/null || true
cat > "$WORK/plain.py" <<'PY'
import sys, h5py
try:
    f = h5py.File(sys.argv[1], "r")
except OSError as e:
    print("refused:", e)
    sys.exit(1)
print(len(f["steps/step"]))
PY
"$PYTHON" "$WORK/plain.py" "$F" > "$WORK/p1.out" 2>&1 && { cat "$WORK/p1.out"; fail "a killed writer's file opened plainly before close (the test shows nothing)"; }
grep -q "already open for write" "$WORK/p1.out" || { cat "$WORK/p1.out"; fail "plain open failed for another reason"; }
h5dump -H "$F" > /dev/null 2>&1 && fail "h5dump opened the flagged file"
"$HM" close "$F" > "$WORK/c.out" 2>&1 || { cat "$WORK/c.out"; fail "close"; }
grep -q "cleared HDF5's open-for-write flag" "$WORK/c.out" || { cat "$WORK/c.out"; fail "close message"; }
n=$("$PYTHON" "$WORK/plain.py" "$F") || fail "plain h5py open after close: $n"
[ "$n" -ge 3 ] || fail "rows after close: $n"
if command -v h5dump > /dev/null; then h5dump -H "$F" > /dev/null || fail "h5dump after close"; fi
"$HM" close "$F" | grep -q "nothing to clear" || fail "second close"
"$HM" summary "$F" > /dev/null || fail "summary after close"
pass "hpt-metrics close: refused while live; after kill -9 plain readers open the file once closed"
