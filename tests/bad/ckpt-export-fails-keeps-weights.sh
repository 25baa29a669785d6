#!/bin/sh
# A final --export that fails after training (here: its directory is a
# 1 MB tmpfs, the disk full; a tester removed the directory mid-run) used
# to lose the trained model when --save-every was 0 (exit 5, no
# checkpoint). Now: exit 5, a checkpoint of the final step is saved and the
# message names it with the hpt-ckpt export command, which then works.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
[ "$(id -u)" = 0 ] || { echo "SKIP: mounting a tmpfs needs root"; exit 77; }
mkdir "$WORK/fs"
mount -t tmpfs -o size=1m tmpfs "$WORK/fs" 2>/dev/null || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
trap 'umount "$WORK/fs" 2>/dev/null; rm -rf "$WORK"' EXIT
A="--model tiny --data $CORPUS --seq-len 32 --batch 2 --eval-batches 1 --quiet --metrics none --steps 2"
C="$WORK/r/checkpoints/step_00000002"
expect_error 5 "No space left on device.*; the trained weights are in checkpoint $C: write the export with hpt-ckpt export $C $WORK/fs/model.safetensors" \
  "$TRAIN" $A --run-dir "$WORK/r" --export "$WORK/fs/model.safetensors"
[ -d "$C" ] || fail "no checkpoint $C after the failed export"
"$HPT_BUILD/src/hpt-ckpt" export "$C" "$WORK/model.safetensors" > /dev/null ||
  fail "hpt-ckpt export $C: the saved checkpoint does not export"
# without a run or checkpoint directory the message says nothing was kept
expect_error 5 "No space left on device.*\(no --run-dir or --checkpoint-dir: the trained weights are not saved\)" \
  "$TRAIN" $A --export "$WORK/fs/model.safetensors"
pass "a failed final export keeps the trained weights in a checkpoint and says so"
