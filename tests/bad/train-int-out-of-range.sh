#!/bin/sh
# Bad input: an integer option beyond the int range says so (exit 2), not
# "not an integer" (was: "--eval-batches '99999999999': not an integer").
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "\-\-eval-batches '99999999999': out of range \(at most 2147483647 in magnitude\)" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --eval-batches 99999999999
expect_error 2 "\-\-steps '-99999999999': out of range" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps -99999999999
expect_error 2 "\-\-steps '12x': not an integer" "$TRAIN" --model tiny --data "$CORPUS" --steps 12x
expect_error 2 "\-\-seed .99999999999999999999.: out of range \(at most 2\^64 - 1\)" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --seed 99999999999999999999
pass "out-of-range integers are named as such"
