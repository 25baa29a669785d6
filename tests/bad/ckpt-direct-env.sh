#!/bin/sh
# Bad input: HPT_CKPT_DIRECT other than 0 or 1 is refused at start-up,
# exit 2, naming the value (was: any value but "0" silently meant direct
# I/O); on every rank of a parallel run, one message. 0 and 1 are accepted,
# and an empty value is as unset.
. "$HPT_SRC/tests/helpers/lib.sh"
write_shard "$WORK/s.bin" 20240520 1 400 $(seq 1 400)
B="--model tiny --data $WORK/s.bin --steps 2 --batch 2 --seq-len 16 --save-every 2 --metrics none --quiet"
for v in abc 2 off; do
  expect_error 2 "^hpt-train: HPT_CKPT_DIRECT=$v: expected 1 \(checkpoint data written with direct I/O, the default\) or 0 \(through the page cache\)$" \
    env HPT_CKPT_DIRECT=$v "$TRAIN" $B --run-dir "$WORK/r$v"
done
expect_error 2 "HPT_CKPT_DIRECT=abc: expected 1" env HPT_CKPT_DIRECT=abc "$MPIEXEC" -n 2 "$TRAIN" $B --dp 2 --run-dir "$WORK/mp"
for v in 0 1 ""; do
  env HPT_CKPT_DIRECT=$v "$TRAIN" $B --run-dir "$WORK/ok$v" > "$WORK/o" 2>&1 || { cat "$WORK/o"; fail "HPT_CKPT_DIRECT=$v refused"; }
  [ -f "$WORK/ok$v/checkpoints/step_00000002/checkpoint.h5" ] || fail "HPT_CKPT_DIRECT=$v: no checkpoint"
done
pass "HPT_CKPT_DIRECT: bad values refused, 0, 1 and empty accepted"
