#!/bin/sh
# Bad input: `hpt-metrics report -o OUT` where OUT cannot be written (its
# directory is missing, OUT is a directory) → exit 5 naming OUT; an existing
# OUT is left as it was when the report fails (written as OUT.tmp + rename).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
HM="$HPT_BUILD/src/hpt-metrics"
"$TRAIN" --model tiny --data "$CORPUS" --steps 2 --batch 1 --seq-len 32 --eval-batches 1 --quiet \
  --run-dir "$WORK/r" > "$WORK/train.out" 2>&1 || { cat "$WORK/train.out"; fail "training run"; }
expect_error 5 "nodir/report.html: cannot write $WORK/nodir/report.html.tmp: No such file" \
  "$HM" report "$WORK/r/metrics.h5" -o "$WORK/nodir/report.html"
mkdir "$WORK/dir.html"
expect_error 5 "dir.html: is a directory" "$HM" report "$WORK/r/metrics.h5" -o "$WORK/dir.html"
echo old > "$WORK/old.html"
expect_error 3 "nope.h5: no such file" "$HM" report "$WORK/nope.h5" -o "$WORK/old.html"
[ "$(cat "$WORK/old.html")" = old ] || fail "a failed report changed the existing OUT"
"$HM" report "$WORK/r/metrics.h5" -o "$WORK/old.html" || fail "report onto an existing file"
grep -q "window.HPT_DATA" "$WORK/old.html" || fail "the existing OUT was not replaced by the report"
pass "unwritable report outputs refused"
