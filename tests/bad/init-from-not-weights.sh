#!/bin/sh
# Bad input: --init-from something that is not a weights file — a directory
# with no safetensors in it, a run directory, a checkpoint's checkpoint.h5
# (not an export), a FIFO: exit 3 with a message that says what the path is
# and what to do. (Was: "DIR/model.safetensors: cannot open", "tensor
# model.embed_tokens.weight is missing" for a checkpoint, and a hang on the
# FIFO.)
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
T="$TRAIN --model tiny --data $CORPUS --steps 1 --batch 2 --seq-len 32 --metrics none"
mkdir "$WORK/empty"
expect_error 3 "\-\-init-from $WORK/empty: a directory with neither model.safetensors.index.json nor model.safetensors" \
  $T --init-from "$WORK/empty"
$T --quiet --run-dir "$WORK/run" --save-every 1 > "$WORK/o" 2>&1 || { cat "$WORK/o"; fail "train"; }
expect_error 3 "\-\-init-from $WORK/run: a checkpoint or run directory, not weights: .*hpt-ckpt export $WORK/run OUT.h5" \
  $T --init-from "$WORK/run"
C="$WORK/run/checkpoints/step_00000001/checkpoint.h5"
expect_error 3 "\-\-init-from $C: an hpt checkpoint, not an export: write its weights with hpt-ckpt export" \
  $T --init-from "$C"
mkfifo "$WORK/fifo" || { echo "SKIP: no mkfifo"; exit 77; }
expect_error 3 "\-\-init-from $WORK/fifo: not a regular file" timeout 60 $T --init-from "$WORK/fifo"
pass "--init-from refuses what is not weights, saying what it is"
