#!/bin/sh
# Bad input: --trace-steps malformed, reversed, beyond the run, without a
# metrics file, or with the flight recorder off (it captures the
# communication from it): each a usage error naming the value and the rule
# (exit 2), before any step runs.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
A="--model tiny --data $CORPUS --seq-len 32 --batch 2 --steps 5 --quiet"
for v in abc 3- -2 0-2 2-x 1-2-3 ""; do
  expect_error 2 "\-\-trace-steps '$v': expected the steps to trace as A-B or A \(1-based step numbers, A <= B\)" \
    "$TRAIN" $A --run-dir "$WORK/r" --trace-steps "$v"
done
expect_error 2 "\-\-trace-steps '5-2': reversed: the first step 5 is after the last 2" \
  "$TRAIN" $A --run-dir "$WORK/r" --trace-steps 5-2
expect_error 2 "\-\-trace-steps 4-9: beyond the run: it has 5 steps \(--steps\)" \
  "$TRAIN" $A --run-dir "$WORK/r" --trace-steps 4-9
expect_error 2 "\-\-trace-steps 6: beyond the run" "$TRAIN" $A --run-dir "$WORK/r" --trace-steps 6
expect_error 2 "\-\-trace-steps 2-3: the trace goes into the metrics file: needs --run-dir DIR or --metrics PATH \(not --metrics none\)" \
  "$TRAIN" $A --trace-steps 2-3
expect_error 2 "\-\-trace-steps 2-3: the trace goes into the metrics file" \
  "$TRAIN" $A --run-dir "$WORK/r" --metrics none --trace-steps 2-3
HPT_FLIGHT_RECORDER=0 expect_error 2 "\-\-trace-steps 2-3 records the communication from the flight recorder, which HPT_FLIGHT_RECORDER=0 turns off" \
  "$TRAIN" $A --run-dir "$WORK/r2" --trace-steps 2-3
[ ! -e "$WORK/r2/metrics.h5" ] && [ ! -e "$WORK/r2/log.tsv" ] ||
  fail "the run directory was written before --trace-steps was refused: $(ls "$WORK/r2")"
pass "malformed, reversed, beyond the run, no metrics file, no flight recorder"
