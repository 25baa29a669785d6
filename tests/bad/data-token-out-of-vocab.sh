#!/bin/sh
# Bad input: a token id >= vocab_size is refused with its position.
. "$HPT_SRC/tests/helpers/lib.sh"
write_shard "$WORK/o.bin" 20240520 1 200 $(seq 1 100) 9000 $(seq 1 99)
expect_error 3 "o.bin: token id 9000 at position 100 >= vocab_size 8192" "$TRAIN" --model tiny --data "$WORK/o.bin" --seq-len 16 --steps 1
