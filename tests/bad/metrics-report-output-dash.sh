#!/bin/sh
# `hpt-metrics report|csv FILE -o -` writes to standard output (as without
# -o for csv), and creates no file named "-" (nor -.tmp).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
HM="$HPT_BUILD/src/hpt-metrics"
"$TRAIN" --model tiny --data "$CORPUS" --steps 2 --batch 1 --seq-len 32 --eval-batches 1 --quiet \
  --run-dir "$WORK/r" > "$WORK/train.out" 2>&1 || { cat "$WORK/train.out"; fail "training run"; }
mkdir "$WORK/cwd"
cd "$WORK/cwd" || fail "cd"
"$HM" report "$WORK/r/metrics.h5" -o - > "$WORK/stdout.html" || fail "report -o -"
grep -q "window.HPT_DATA" "$WORK/stdout.html" || fail "report -o - wrote no report to standard output"
tail -c 200 "$WORK/stdout.html" | grep -q "</html>" || fail "report -o -: the page is incomplete"
"$HM" csv "$WORK/r/metrics.h5" -o - > "$WORK/dash.csv" || fail "csv -o -"
"$HM" csv "$WORK/r/metrics.h5" > "$WORK/plain.csv" || fail "csv"
[ -s "$WORK/dash.csv" ] && cmp -s "$WORK/dash.csv" "$WORK/plain.csv" || fail "csv -o - differs from csv"
"$HM" csv "$WORK/r/metrics.h5" --ranks step_time -o - > "$WORK/ranks.csv" || fail "csv --ranks -o -"
head -1 "$WORK/ranks.csv" | grep -q "^step,rank_0" || fail "csv --ranks -o - header"
[ -z "$(ls -A "$WORK/cwd")" ] || { ls -la "$WORK/cwd"; fail "-o - created a file"; }
"$HM" --help | grep -q -- "-o -" || fail "--help does not document -o -"
pass "-o - writes to standard output"
