#!/bin/sh
# Bad input: a FIFO given as --val-data is refused at once (its open() used
# to wait for a writer for ever). `timeout` turns a hang into a failure.
. "$HPT_SRC/tests/helpers/lib.sh"
write_shard "$WORK/t.bin" 20240520 1 200 $(seq 1 200)
mkfifo "$WORK/v.bin" || fail "mkfifo"
expect_error 3 "v.bin: not a regular file \(a FIFO\)" \
  timeout -k 5 60 "$TRAIN" --model tiny --data "$WORK/t.bin" --val-data "$WORK/v.bin" --seq-len 16 --steps 1
