#!/bin/sh
# Bad input: an unknown --fault-stall-at point is refused (exit 2) naming
# the five points; save, bucket and end without a stalled rank are refused too.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "\-\-fault-stall-at 'nowhere': expected step, boundary, bucket, save or end" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --fault-stall-at nowhere
for at in bucket save end; do
  expect_error 2 "\-\-fault-stall-at $at needs \-\-fault-stall-rank and \-\-fault-stall-step" \
    "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --fault-stall-at $at
done
