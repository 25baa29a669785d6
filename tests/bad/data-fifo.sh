#!/bin/sh
# Bad input: a FIFO given as --data, or matched by a --data glob, is refused
# at once (its open() used to wait for a writer for ever, on every rank).
# `timeout` turns such a hang into a failure (124) instead of a stuck test.
. "$HPT_SRC/tests/helpers/lib.sh"
mkdir -p "$WORK/d"
mkfifo "$WORK/d/train_000000.bin" || fail "mkfifo"
expect_error 3 "train_000000.bin: not a regular file \(a FIFO\)" \
  timeout -k 5 60 "$TRAIN" --model tiny --data "$WORK/d/train_000000.bin" --seq-len 16 --steps 1
expect_error 3 "train_000000.bin: not a regular file \(a FIFO\)" \
  timeout -k 5 60 "$TRAIN" --model tiny --data "$WORK/d/train_*.bin" --seq-len 16 --steps 1
