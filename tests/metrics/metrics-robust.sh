#!/bin/sh
# The metrics file never stops or crashes a run, and is never corrupted:
# - its file system fills up mid-run → one warning, training finishes with
#   exit 0, the rows flushed before stay readable, no crash at exit;
# - too little space to create it → one warning, training goes on;
# - a reader holding the file (h5py, SWMR) → the next segment still starts;
# - a second writer on the same file → refused (exit 5), the first unharmed;
# - a damaged HDF5 file (truncated) → moved aside, a new file is started;
# - a run stopped by --max-skips logs the step that stopped it.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
B="--model tiny --data $CORPUS --seq-len 32 --batch 1 --eval-batches 1 --eval-interval 0 --quiet"
rows() { "$PYTHON" -c "
import sys, h5py
f = h5py.File(sys.argv[1], 'r', libver='latest', swmr=True)
s = f['steps/step'][:]
assert list(s) == list(range(1, len(s) + 1)), s
print(len(s))" "$1"; }

# --- a reader holds the file while the next segment starts
"$TRAIN" $B --steps 3 --run-dir "$WORK/r" > "$WORK/r1.out" 2>&1 || { cat "$WORK/r1.out"; fail "first run"; }
"$PYTHON" -c "
import sys, time, h5py
f = h5py.File(sys.argv[1], 'r', libver='latest', swmr=True)
open(sys.argv[2], 'w').close()
time.sleep(30)" "$WORK/r/metrics.h5" "$WORK/reader.ready" &
reader=$!
i=0; until [ -f "$WORK/reader.ready" ]; do sleep 0.1; i=$((i + 1)); [ $i -lt 300 ] || fail "reader did not start"; done
"$TRAIN" $B --steps 5 --run-dir "$WORK/r" --resume none > "$WORK/r2.out" 2>&1 \
  || { cat "$WORK/r2.out"; kill $reader; fail "a reader holding the file stopped the run"; }
kill $reader 2>/dev/null; wait $reader 2>/dev/null
[ "$(rows "$WORK/r/metrics.h5" 2>/dev/null || echo bad)" != bad ] || true
"$PYTHON" -c "
import sys, h5py
f = h5py.File(sys.argv[1], 'r', libver='latest', swmr=True)
assert len(f['segments']) == 2 and len(f['steps/step']) == 8, (f['segments'][:], f['steps/step'][:])" \
  "$WORK/r/metrics.h5" || fail "second segment not appended"
echo "ok: a SWMR reader holding the file did not stop the next segment"

# --- a second writer while the first runs
"$TRAIN" $B --steps 1000 --metrics "$WORK/two.h5" --fault-slow-rank 0 --fault-slow-ms 100 > "$WORK/w1.out" 2>&1 &
w1=$!
i=0; until [ -f "$WORK/two.h5.lock" ] && grep -q "" "$WORK/w1.out" 2>/dev/null; do sleep 0.1; i=$((i + 1)); [ $i -lt 300 ] || break; done
sleep 1
expect_error 5 "metrics file $WORK/two.h5 is being written by another process" \
  "$TRAIN" $B --steps 2 --metrics "$WORK/two.h5"
kill -TERM $w1; wait $w1 || true   # no checkpoint dir: TERM terminates
n=$(rows "$WORK/two.h5") || fail "first writer's file unreadable"
echo "ok: second writer refused; the first wrote $n rows"

# --- a truncated (damaged) HDF5 metrics file is moved aside
head -c 3000 "$WORK/r/metrics.h5" > "$WORK/damaged.h5"
"$TRAIN" $B --steps 2 --metrics "$WORK/damaged.h5" > "$WORK/d.out" 2>&1 || { cat "$WORK/d.out"; fail "damaged file stopped the run"; }
grep -q "moved to $WORK/damaged.h5.unreadable-" "$WORK/d.out" || { cat "$WORK/d.out"; fail "no move-aside warning"; }
[ "$(rows "$WORK/damaged.h5")" = 2 ] || fail "no new file after the move"
ls "$WORK"/damaged.h5.unreadable-* > /dev/null || fail "damaged file deleted"
echo "ok: damaged file moved aside"

# --- --max-skips: the stopping step has its row
st=0; "$TRAIN" $B --steps 10 --max-skips 3 --fault-nan-steps 2,3,4 --run-dir "$WORK/ms" > "$WORK/ms.out" 2>&1 || st=$?
[ $st = 4 ] || { cat "$WORK/ms.out"; fail "max-skips exit $st"; }
[ "$(rows "$WORK/ms/metrics.h5")" = 4 ] || fail "the step that stopped the run has no row"
echo "ok: --max-skips run logs its last step"

# --- disk full (needs root to mount a tmpfs)
if [ "$(id -u)" != 0 ] || ! mkdir -p "$WORK/fs" || ! mount -t tmpfs -o size=3m tmpfs "$WORK/fs" 2>/dev/null; then
  echo "SKIP: disk-full cases need root to mount a tmpfs"; pass "metrics robustness (without disk-full cases)"
fi
trap 'umount "$WORK/fs" 2>/dev/null; rm -rf "$WORK"' EXIT
"$TRAIN" $B --steps 60 --metrics "$WORK/fs/m.h5" --metrics-interval 1 --fault-slow-rank 0 --fault-slow-ms 50 \
  > "$WORK/full.out" 2>&1 &
job=$!
i=0; until [ "$(rows "$WORK/fs/m.h5" 2>/dev/null || echo 0)" -ge 3 ]; do sleep 0.2; i=$((i + 1)); [ $i -lt 300 ] || { kill $job; fail "no rows"; }; done
dd if=/dev/zero of="$WORK/fs/fill" bs=64k 2>/dev/null || true   # fill the file system
i=0; until grep -q "no more metrics rows are written" "$WORK/full.out"; do sleep 0.2; i=$((i + 1)); [ $i -lt 300 ] || { kill $job; cat "$WORK/full.out"; fail "no disk-full warning"; }; done
st=0; wait $job || st=$?
cat "$WORK/full.out"
[ $st = 0 ] || fail "exit $st after the metrics disk filled"
grep -q "^done: 60 steps" "$WORK/full.out" || fail "training did not finish"
no_crash "$WORK/full.out" $st
grep -q "infinite loop\|HDF5-DIAG" "$WORK/full.out" && fail "HDF5 errors at exit"
[ "$(grep -c 'no more metrics rows are written' "$WORK/full.out")" = 1 ] || fail "warning not printed once"
n=$(rows "$WORK/fs/m.h5") || fail "file unreadable after the disk filled"
echo "ok: disk filled mid-run: warning once, $n rows readable, exit $st"
# not enough room to create the file at all: a warning, training goes on
expect_error 0 "metrics file $WORK/fs/new.h5: [0-9]+ KiB free on its file system, [0-9]+ KiB needed; training goes on without metrics" \
  "$TRAIN" $B --steps 2 --metrics "$WORK/fs/new.h5"
[ -e "$WORK/fs/new.h5" ] && fail "a file was created on a full disk"
umount "$WORK/fs"
pass "metrics robustness: disk full, readers, second writer, damaged file, --max-skips"
