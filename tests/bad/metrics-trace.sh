#!/bin/sh
# Bad input: hpt-metrics trace on a run that was not traced (exit 3, it
# says how to trace), a --step that was not traced (exit 2, naming the
# traced steps), --step on another command or not a step number (exit 2),
# a damaged metrics file (exit 3), and -o naming the input (exit 2, the
# input untouched).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
HM="$HPT_BUILD/src/hpt-metrics"
A="--model tiny --data $CORPUS --seq-len 32 --batch 2 --steps 2 --quiet"
run_train plain 1 $A
expect_error 3 "has no /trace: the run was not traced \(hpt-train --trace-steps A-B\)" "$HM" trace "$WORK/plain"
run_train traced 1 $A --trace-steps 2
expect_error 2 "\-\-step 1: not traced in .* \(traced steps: 2-2\)" "$HM" trace "$WORK/traced" --step 1
expect_error 2 "\-\-step: only trace takes it" "$HM" summary "$WORK/traced" --step 2
expect_error 2 "\-\-step 0: must be >= 1" "$HM" trace "$WORK/traced" --step 0
expect_error 2 "\-\-step 'x': not an integer" "$HM" trace "$WORK/traced" --step x
cp "$WORK/traced/metrics.h5" "$WORK/before.h5"
expect_error 2 "is the input" "$HM" trace "$WORK/traced/metrics.h5" -o "$WORK/traced/metrics.h5"
cmp -s "$WORK/before.h5" "$WORK/traced/metrics.h5" || fail "-o the input: the input changed"
# damaged: the file cut in half
head -c $(( $(stat -c %s "$WORK/before.h5") / 2 )) "$WORK/before.h5" > "$WORK/cut.h5"
expect_error 3 "cut.h5: not a readable HDF5 file, or truncated" "$HM" trace "$WORK/cut.h5"
pass "not traced, step not traced, --step misplaced or malformed, damaged, -o the input"
