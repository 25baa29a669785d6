#!/bin/sh
# Bad input under data parallelism: a missing shard is reported once, all
# ranks exit with the data status (3), no rank is left waiting.
. "$HPT_SRC/tests/helpers/lib.sh"
export OMP_NUM_THREADS=1
expect_error 3 "$WORK/none.bin: cannot open token shard" \
  timeout 120 "$MPIEXEC" -n 2 "$TRAIN" --model tiny --data "$WORK/none.bin" --steps 1
