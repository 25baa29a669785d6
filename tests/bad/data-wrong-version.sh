#!/bin/sh
# Bad input: a known magic with an unknown version is refused.
. "$HPT_SRC/tests/helpers/lib.sh"
write_shard "$WORK/v.bin" 20240520 3 200 $(seq 1 200)
expect_error 3 "v.bin: unsupported version 3" "$TRAIN" --model tiny --data "$WORK/v.bin" --seq-len 16 --steps 1
