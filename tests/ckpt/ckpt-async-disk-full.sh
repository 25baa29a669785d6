#!/bin/sh
# Disk full during a background checkpoint write (--async-save), on 2 ranks
# (DP=2): checkpoints on a 20 MiB tmpfs; the first (~14 MiB, step 2) fits;
# the space checks and the reservation are switched off
# (HPT_CKPT_TEST_SKIP_RESERVE=1, testing only), so the writer threads
# themselves hit ENOSPC. The failure is reported once, the .tmp directory is
# removed, the previous checkpoint and `latest` are untouched, training goes
# on to the end — and the final (synchronous) save, which cannot fit
# either, stops the run with exit 5.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
[ "$(id -u)" = 0 ] || { echo "SKIP: mounting a tmpfs needs root"; exit 77; }
mkdir "$WORK/fs"
mount -t tmpfs -o size=20m tmpfs "$WORK/fs" 2>/dev/null || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
trap 'umount "$WORK/fs" 2>/dev/null; rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1
C="$WORK/fs/ckpt"
B="--model tiny --data $CORPUS --seq-len 32 --batch 1 --eval-batches 1 --eval-interval 0 --checkpoint-dir $C --keep 2"
st=0; timeout 120 $MPIEXEC -n 2 "$TRAIN" $B --quiet --steps 6 --stop-at 2 > "$WORK/o1" 2>&1 || st=$?
[ $st = 75 ] || { cat "$WORK/o1"; fail "first run: exit $st"; }
before=$(md5sum < "$C/step_00000002/checkpoint.h5")
expect_error 5 "step_00000004\.tmp/checkpoint\.h5: saving the checkpoint failed: writing /[a-z_/.0-9]+ failed: No space left on device; removed .*step_00000004\.tmp, existing checkpoints are untouched; training goes on" \
  env HPT_CKPT_TEST_SKIP_RESERVE=1 timeout 120 $MPIEXEC -n 2 "$TRAIN" $B --steps 6 --save-every 4 --async-save
out="$WORK/out.$$"
grep -q "^step 6/6 " "$out" || fail "training did not go on after the failed background save"
grep -q "step_00000006\.tmp/checkpoint\.h5: saving the checkpoint failed" "$out" || fail "the final save did not fail"
[ "$(md5sum < "$C/step_00000002/checkpoint.h5")" = "$before" ] || fail "previous checkpoint changed"
ls "$C" | grep -q '\.tmp$' && fail "partial checkpoint left behind"
[ "$(cat "$C/latest")" = step_00000002 ] || fail "latest moved"
[ "$(ls "$C" | grep -c '^step_')" = 1 ] || fail "a new checkpoint directory appeared"
"$HPT_BUILD/src/hpt-ckpt" verify "$C" > "$WORK/v" 2>&1 || { cat "$WORK/v"; fail "previous checkpoint does not verify"; }
timeout 120 $MPIEXEC -n 2 "$TRAIN" $B --quiet --steps 3 --resume strict > "$WORK/o" 2>&1 ||
  { cat "$WORK/o"; fail "resume after the failed saves"; }
grep -q "resumed from .*step_00000002" "$WORK/o" || fail "did not resume from the intact checkpoint"
pass "a background write that runs out of space: one message, previous checkpoint intact, training goes on"
