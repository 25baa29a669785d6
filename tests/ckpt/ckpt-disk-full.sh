#!/bin/sh
# Disk full: checkpoints on a 20 MiB tmpfs — the first (~13 MiB) fits, the
# second cannot be written beside it → the save fails with a clear error and
# exit status 5, without a hang; the previous checkpoint stays intact and
# loadable and no partial one is left.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
mkdir "$WORK/fs"
mount -t tmpfs -o size=20m tmpfs "$WORK/fs" 2>/dev/null || { echo "SKIP: cannot mount a tmpfs (needs root)"; exit 77; }
trap 'umount "$WORK/fs" 2>/dev/null; rm -rf "$WORK"' EXIT
B="--model tiny --data $CORPUS --seq-len 32 --batch 2 --eval-batches 1 --quiet --steps 6 --checkpoint-dir $WORK/fs/ckpt --keep 2"
st=0; "$TRAIN" $B --stop-at 2 > /dev/null 2>&1 || st=$?
[ $st = 75 ] || fail "first run: exit $st"
before=$(md5sum < "$WORK/fs/ckpt/step_00000002/checkpoint.h5")
expect_error 5 "not enough space for a checkpoint: need [0-9.]+ MiB, [0-9.]+ MiB free" timeout 120 "$TRAIN" $B --stop-at 4
[ "$(md5sum < "$WORK/fs/ckpt/step_00000002/checkpoint.h5")" = "$before" ] || fail "previous checkpoint changed"
ls "$WORK/fs/ckpt" | grep -q '\.tmp$' && fail "partial checkpoint left behind"
grep -q step_00000002 "$WORK/fs/ckpt/latest" || fail "latest moved"
"$TRAIN" $B --steps 2 --resume strict > "$WORK/o" 2>&1 || { cat "$WORK/o"; fail "resume after the failed save"; }
grep -q "resumed from .*step_00000002" "$WORK/o" || fail "did not resume from the intact checkpoint"
pass "a failed save (disk full) leaves the previous checkpoint intact"
