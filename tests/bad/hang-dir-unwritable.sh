#!/bin/sh
# Bad input: RUN_DIR/hang (the watchdog's heartbeats and dumps) cannot be
# created — here a file is in the way: refused before training (exit 5).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
mkdir -p "$WORK/run"
: > "$WORK/run/hang"
expect_error 5 "$WORK/run/hang \(hang watchdog files\): cannot create" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --run-dir "$WORK/run"
