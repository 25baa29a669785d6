#!/bin/sh
# Bad input: a directory, a FIFO or a character device given to
# `hpt-metrics summary|csv|report` as the metrics file. A run directory
# with a metrics.h5 means that file (as hpt-live); a directory without one
# → exit 3 "DIR: is a directory with no metrics.h5"; a FIFO or device →
# exit 3 "not a regular file", at once (no hang, no HDF5 error dump).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
HM="$HPT_BUILD/src/hpt-metrics"
T="timeout 60"
"$TRAIN" --model tiny --data "$CORPUS" --steps 2 --batch 1 --seq-len 32 --eval-batches 1 --quiet \
  --run-dir "$WORK/r" > "$WORK/train.out" 2>&1 || { cat "$WORK/train.out"; fail "training run"; }
# a run directory: its metrics.h5
"$HM" summary "$WORK/r" > "$WORK/dir.txt" || fail "summary RUN_DIR"
"$HM" summary "$WORK/r/metrics.h5" > "$WORK/file.txt" || fail "summary RUN_DIR/metrics.h5"
cmp -s "$WORK/dir.txt" "$WORK/file.txt" || fail "summary RUN_DIR differs from summary RUN_DIR/metrics.h5"
"$HM" csv "$WORK/r/" > "$WORK/dir.csv" && "$HM" csv "$WORK/r/metrics.h5" > "$WORK/file.csv" &&
  cmp -s "$WORK/dir.csv" "$WORK/file.csv" || fail "csv RUN_DIR/ differs from csv RUN_DIR/metrics.h5"
"$HM" report "$WORK/r" -o "$WORK/dir.html" && grep -q "window.HPT_DATA" "$WORK/dir.html" ||
  fail "report RUN_DIR"
# a directory without metrics.h5
mkdir "$WORK/empty"
for cmd in summary csv; do
  expect_error 3 "^hpt-metrics: $WORK/empty: is a directory with no metrics.h5$" $T "$HM" $cmd "$WORK/empty"
done
expect_error 3 "^hpt-metrics: $WORK/empty: is a directory with no metrics.h5$" \
  $T "$HM" report "$WORK/r" "$WORK/empty" -o "$WORK/x.html"
[ ! -e "$WORK/x.html" ] || fail "a report was written"
# a character device and a FIFO (reading them would never end / block)
expect_error 3 "^hpt-metrics: /dev/zero: not a regular file" $T "$HM" report /dev/zero -o "$WORK/x.html"
expect_error 3 "^hpt-metrics: /dev/zero: not a regular file" $T "$HM" summary /dev/zero
mkfifo "$WORK/fifo.h5"
for cmd in summary csv; do
  expect_error 3 "^hpt-metrics: $WORK/fifo.h5: not a regular file" $T "$HM" $cmd "$WORK/fifo.h5"
done
expect_error 3 "^hpt-metrics: $WORK/fifo.h5: not a regular file" $T "$HM" report "$WORK/fifo.h5" -o "$WORK/x.html"
[ ! -e "$WORK/x.html" ] || fail "a report was written"
pass "directories and non-regular files as metrics files"
