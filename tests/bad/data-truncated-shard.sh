#!/bin/sh
# Bad input: a shard shorter than its header says is refused with both sizes.
. "$HPT_SRC/tests/helpers/lib.sh"
write_shard "$WORK/t.bin" 20240520 1 1000 $(seq 1 200)
expect_error 3 "t.bin: truncated" "$TRAIN" --model tiny --data "$WORK/t.bin" --seq-len 16 --steps 1
