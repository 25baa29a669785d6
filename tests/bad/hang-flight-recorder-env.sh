#!/bin/sh
# Bad input: HPT_FLIGHT_RECORDER that is not a number of operations 0..2^20
# is refused naming the value and the range, exit 2 (was: silently the
# default 256, or silently clamped), on one rank and on every rank of a
# parallel run (one message); 0 (off) is accepted.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
B="--model tiny --data $CORPUS --steps 1 --batch 1 --seq-len 16 --eval-interval 0 --quiet"
for v in abc -1 12x 1048577; do
  expect_error 2 "HPT_FLIGHT_RECORDER=$v: expected the number of operations the flight recorder keeps, 0 \(off\) to 1048576" \
    env HPT_FLIGHT_RECORDER=$v "$TRAIN" $B --run-dir "$WORK/r$v"
done
expect_error 2 "HPT_FLIGHT_RECORDER=abc: expected the number of operations" \
  env HPT_FLIGHT_RECORDER=abc "$MPIEXEC" -n 2 "$TRAIN" $B --dp 2 --run-dir "$WORK/mp"
env HPT_FLIGHT_RECORDER=0 "$TRAIN" $B --run-dir "$WORK/off" > /dev/null || fail "HPT_FLIGHT_RECORDER=0 refused"
pass "HPT_FLIGHT_RECORDER: bad values refused, 0 accepted"
