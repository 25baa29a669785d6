#!/bin/sh
# Bad input: `hpt-metrics report` of a metrics file that does not exist — as
# the only file or after a good one — names it (exit 3) and writes no report
# (no OUT, no OUT.tmp); -o is required (exit 2).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
HM="$HPT_BUILD/src/hpt-metrics"
"$TRAIN" --model tiny --data "$CORPUS" --steps 2 --batch 1 --seq-len 32 --eval-batches 1 --quiet \
  --run-dir "$WORK/r" > "$WORK/train.out" 2>&1 || { cat "$WORK/train.out"; fail "training run"; }
expect_error 3 "nope/metrics.h5: no such file" "$HM" report "$WORK/nope/metrics.h5" -o "$WORK/out.html"
expect_error 3 "nope/metrics.h5: no such file" "$HM" report "$WORK/r/metrics.h5" "$WORK/nope/metrics.h5" -o "$WORK/out.html"
[ ! -e "$WORK/out.html" ] && [ ! -e "$WORK/out.html.tmp" ] || fail "a report was written for a missing file"
expect_error 2 "report needs -o OUT.html" "$HM" report "$WORK/r/metrics.h5"
pass "a missing metrics file is named and no report is written"
