#!/bin/sh
# A non-finite gradient norm skips the update and is counted; --max-skips
# consecutive ones stop the run with exit status 4.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
args="--model tiny --data $CORPUS --batch 2 --seq-len 32 --eval-batches 1"
"$TRAIN" $args --steps 6 --fault-nan-steps 3 --run-dir "$WORK/r" > "$WORK/out" 2>&1 || { cat "$WORK/out"; fail "one skipped step must not stop the run"; }
grep -q "step 3/6 .*SKIPPED" "$WORK/out" || fail "step 3 not reported as skipped"
grep -q "done: 6 steps, 1 skipped" "$WORK/out" || fail "skip not counted"
awk -F'\t' 'NR == 4 && $6 != 1 { exit 1 }' "$WORK/r/log.tsv" || fail "log.tsv does not flag step 3"
expect_error 4 "3 consecutive steps with a non-finite loss or gradient norm" \
  "$TRAIN" $args --steps 8 --fault-nan-steps 2,3,4 --max-skips 3
