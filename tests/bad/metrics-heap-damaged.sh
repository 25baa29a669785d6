#!/bin/sh
# A metrics file whose global heap (the variable-length strings of its
# attributes: format, model_config, units, ...; no checksum) has one
# overwritten object-size byte (issue 33, item 2). HDF5 1.10 trusts that
# size: reading the attribute crashed h5py (plot_metrics.py: SIGSEGV),
# hpt-metrics, hpt-live at start and hpt-train resuming on the run
# directory (all SIGSEGV). Each reader first reads the attributes in a
# child process (hpt_metrics_h5_probe, hpt_metrics.probe):
# - plot_metrics.py and hpt-metrics exit 3 naming the file and the crash;
# - hpt-live shows the run as error with that reason;
# - hpt-train moves the file aside with a warning and finishes.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
R="$WORK/run"
A="--model tiny --data $CORPUS --seq-len 16 --batch 1 --eval-batches 1 --eval-interval 0 --quiet --save-every 0 --metrics-interval 1 --run-dir $R"
"$TRAIN" $A --steps 3 > "$WORK/a.out" 2>&1 || { cat "$WORK/a.out"; fail "first run"; }
"$PYTHON" - "$R/metrics.h5" <<'PY' || fail "damage"
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
heap = b.find(b"GCOL")      # the first global heap collection
assert heap > 0, "no global heap collection"
# collection: signature, version, 3 reserved, 8-byte size; then object 1:
# index (2), reference count (2), reserved (4), size (8, little-endian)
b[heap + 16 + 9] = 0xff     # its size + 0xff00 bytes
open(p, "wb").write(b)
print("overwrote the size of object 1 of the global heap at %d" % heap)
PY
cp "$R/metrics.h5" "$WORK/heap.h5"
# (a sanitizer build's child ends with a status instead of the signal)
WHY="(crashed reading its attributes \(signal [0-9]+, SIG[A-Z]+|failed reading its attributes \(the reader ended with status [0-9]+); a damaged global heap"
MSG="heap.h5: damaged file: HDF5 $WHY"
expect_error 3 "$MSG" timeout -s KILL 300 "$PYTHON" "$HPT_SRC/analysis/plot_metrics.py" "$WORK/heap.h5" -o "$WORK/plots"
expect_error 3 "$MSG" timeout -s KILL 300 "$HPT_BUILD/src/hpt-metrics" summary "$WORK/heap.h5"
LIVE="$HPT_BUILD/src/hpt-live"
if [ -x "$LIVE" ]; then
  "$LIVE" --port 0 "$WORK/heap.h5" > "$WORK/live.out" 2> "$WORK/live.err" &
  PID=$!
  for i in $(seq 1 300); do grep -qE "crashed|failed reading" "$WORK/live.err" && break; sleep 0.1; done
  kill $PID; st=0; wait $PID || st=$?
  cat "$WORK/live.err"
  [ $st = 0 ] || fail "hpt-live exit status $st (a crash?)"
  grep -qE "$MSG" "$WORK/live.err" || fail "hpt-live did not name the damage"
fi
st=0; timeout -s KILL 300 "$TRAIN" $A --steps 5 > "$WORK/b.out" 2>&1 || st=$?
cat "$WORK/b.out"
no_crash "$WORK/b.out" $st
[ $st = 0 ] || fail "resume on the damaged metrics file: exit $st"
grep -qE "warning: metrics file $R/metrics.h5: damaged file: HDF5 $WHY.*moved to $R/metrics.h5.unreadable-" "$WORK/b.out" ||
  fail "no warning naming the damage and the move"
cmp -s "$R"/metrics.h5.unreadable-* "$WORK/heap.h5" || fail "the damaged file was not kept as it was"
pass "a damaged global heap: readers exit 3 naming it, hpt-live says error, training moves it aside"
