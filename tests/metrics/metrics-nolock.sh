#!/bin/sh
# A run directory on a file system without lock support (NFS without lockd,
# Lustre mounted without flock): flock() and fcntl(F_SETLK*) fail with
# ENOLCK (issue 17, finding 2a). Without root mounts such a file system is
# made by an LD_PRELOAD library built here (tests/helpers/metrics-nolock-shim.c)
# that answers every lock call with ENOLCK, as those mounts do; the
# trainer, HDF5 and the readers are the real ones.
# - hpt-train --metrics (with HDF5_USE_FILE_LOCKING=FALSE, as the launcher
#   sets) trains, warns once naming the cause, and writes every row
#   (before: exit 5 "is being written by another process");
# - hpt-metrics summary and plot_metrics.py read the file there;
# - with locks (no shim), a second writer is still refused
#   (tests/metrics/metrics-robust.sh).
. "$HPT_SRC/tests/helpers/lib.sh"
# a sanitizer build wants libasan first; the shim preloaded before it is fine
export ASAN_OPTIONS="$ASAN_OPTIONS:verify_asan_link_order=0"
need_corpus
export OMP_NUM_THREADS=1
CC=${CC:-cc}
command -v "$CC" > /dev/null || { echo "SKIP: no C compiler for the shim"; exit 77; }
"$CC" -shared -fPIC -o "$WORK/nolock.so" "$HPT_SRC/tests/helpers/metrics-nolock-shim.c" -ldl || fail "shim build"
# the shim works: flock(1) fails with ENOLCK under it
touch "$WORK/probe"
if LD_PRELOAD="$WORK/nolock.so" flock -n "$WORK/probe" true 2> "$WORK/probe.err"; then
  fail "the shim does not make flock fail"
fi
grep -qi "no locks available" "$WORK/probe.err" || { cat "$WORK/probe.err"; fail "flock did not fail with ENOLCK"; }

B="--model tiny --data $CORPUS --seq-len 32 --batch 1 --eval-batches 1 --eval-interval 0 --quiet --metrics-interval 1"
st=0
LD_PRELOAD="$WORK/nolock.so" HDF5_USE_FILE_LOCKING=FALSE "$TRAIN" $B --steps 3 --metrics "$WORK/m.h5" \
  > "$WORK/a.out" 2>&1 || st=$?
cat "$WORK/a.out"
no_crash "$WORK/a.out" $st
[ $st = 0 ] || fail "exit $st on a file system without locks"
W="metrics file $WORK/m.h5: its file system does not support file locks \(flock on $WORK/m.h5.lock: No locks available\); going on without the lock"
[ "$(grep -cE "$W" "$WORK/a.out")" = 1 ] || fail "no single warning naming the cause"
grep -q "is being written by another process" "$WORK/a.out" && fail "ENOLCK taken for a second writer"
# a second segment on the same file there, too
LD_PRELOAD="$WORK/nolock.so" "$TRAIN" $B --steps 2 --metrics "$WORK/m.h5" > "$WORK/b.out" 2>&1 \
  || { cat "$WORK/b.out"; fail "second segment without locks"; }
LD_PRELOAD="$WORK/nolock.so" "$HPT_BUILD/src/hpt-metrics" summary "$WORK/m.h5" > "$WORK/s.out" 2>&1 \
  || { cat "$WORK/s.out"; fail "hpt-metrics summary without locks"; }
grep -q "^segments: 2" "$WORK/s.out" || { cat "$WORK/s.out"; fail "summary: segments"; }
grep -q "^steps: 3 (1-3), 5 rows, 2 repeated rows" "$WORK/s.out" || { cat "$WORK/s.out"; fail "summary: rows"; }
LD_PRELOAD="$WORK/nolock.so" "$PYTHON" "$HPT_SRC/analysis/plot_metrics.py" "$WORK/m.h5" -o "$WORK/p" \
  > "$WORK/p.out" 2>&1 || { cat "$WORK/p.out"; fail "plot_metrics.py without locks"; }
pass "no lock support: one warning naming the cause, training and readers go on"
