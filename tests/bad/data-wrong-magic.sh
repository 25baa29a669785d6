#!/bin/sh
# Bad input: a file that is not an llm.c shard is refused, naming the expected magic.
. "$HPT_SRC/tests/helpers/lib.sh"
write_shard "$WORK/m.bin" 12345 1 200 $(seq 1 200)
expect_error 3 "m.bin: bad magic 12345 .*20240520" "$TRAIN" --model tiny --data "$WORK/m.bin" --seq-len 16 --steps 1
