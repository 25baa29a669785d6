#!/bin/sh
# Disk full DURING a save, on 2 ranks (DP=2, then TP=2): checkpoints on a 20 MiB tmpfs;
# the first (~14 MiB) fits, the second is started with the space checks and
# the reservation switched off (HPT_CKPT_TEST_SKIP_RESERVE=1, testing only),
# so the data writes themselves hit ENOSPC half-way. Every rank must stop
# with exit status 5 and one message naming the file and the cause, without
# a hang or a crash at exit; the .tmp directory is removed, the previous
# checkpoint is unchanged and verifies, `latest` does not move, and a
# resume loads it. Then the same without the test switch: a `ulimit -f`
# below the checkpoint's size is refused before anything is written.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
[ "$(id -u)" = 0 ] || { echo "SKIP: mounting a tmpfs needs root"; exit 77; }
mkdir "$WORK/fs"
mount -t tmpfs -o size=20m tmpfs "$WORK/fs" 2>/dev/null || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
trap 'umount "$WORK/fs" 2>/dev/null; rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1
C="$WORK/fs/ckpt"
B="--model tiny --data $CORPUS --seq-len 32 --batch 1 --eval-batches 1 --quiet --steps 6 --checkpoint-dir $C --keep 2"
st=0; timeout 120 $MPIEXEC -n 2 "$TRAIN" $B --stop-at 2 > "$WORK/o1" 2>&1 || st=$?
[ $st = 75 ] || { cat "$WORK/o1"; fail "first run: exit $st"; }
before=$(md5sum < "$C/step_00000002/checkpoint.h5")

unchanged() { # WHAT
  [ "$(md5sum < "$C/step_00000002/checkpoint.h5")" = "$before" ] || fail "$1: previous checkpoint changed"
  ls "$C" | grep -q '\.tmp$' && fail "$1: partial checkpoint left behind"
  [ "$(cat "$C/latest")" = step_00000002 ] || fail "$1: latest moved"
  [ "$(ls "$C" | grep -c '^step_')" = 1 ] || fail "$1: a new checkpoint directory appeared"
}

# ENOSPC in the middle of the data writes (nothing refused it up front).
expect_error 5 \
  "step_00000004\.tmp/checkpoint\.h5: saving the checkpoint failed: writing /[a-z_/.0-9]+ failed: No space left on device" \
  env HPT_CKPT_TEST_SKIP_RESERVE=1 timeout 120 $MPIEXEC -n 2 "$TRAIN" $B --stop-at 4
unchanged "disk full mid-save"
grep -q "removed .*step_00000004.tmp, existing checkpoints are untouched" "$WORK/out.$$" ||
  fail "message does not say the .tmp was removed"
"$HPT_BUILD/src/hpt-ckpt" verify "$C" > "$WORK/v" 2>&1 || { cat "$WORK/v"; fail "previous checkpoint does not verify"; }

# The same at TP=2 (the column-split tensors use collective transfer; the
# failures of later writes must be agreed inside them, or a rank would hang).
expect_error 5 "step_00000004\.tmp/checkpoint\.h5: saving the checkpoint failed: writing /[a-z_/.0-9]+ failed: No space left on device" \
  env HPT_CKPT_TEST_SKIP_RESERVE=1 timeout 120 $MPIEXEC -n 2 "$TRAIN" $B --tp 2 --batch 2 --stop-at 4
unchanged "disk full mid-save at TP=2"

# A file-size limit below the checkpoint (sh counts 512-byte blocks: 7.2 MiB;
# much lower limits kill MPI start-up itself): refused before writing (EFBIG).
expect_error 5 "file size limit \(ulimit -f\) of [0-9.]+ MiB is below the checkpoint's [0-9.]+ MiB" \
  sh -c "ulimit -f 14700 && exec timeout 120 $MPIEXEC -n 2 $TRAIN $B --stop-at 4"
unchanged "ulimit -f"

# The intact checkpoint resumes.
timeout 120 $MPIEXEC -n 2 "$TRAIN" $B --steps 3 --resume strict > "$WORK/o" 2>&1 ||
  { cat "$WORK/o"; fail "resume after the failed saves"; }
grep -q "resumed from .*step_00000002" "$WORK/o" || fail "did not resume from the intact checkpoint"
pass "a save that runs out of space half-way fails cleanly on every rank; previous checkpoint intact"
