#!/bin/sh
# hpt-metrics summary's "pipeline bubble" line of a run resumed onto
# another schedule measures the last segment only, the one whose theory it
# prints: 2 steps of ZB-H1 on PP 2, then 3 steps of GPipe resumed from
# them: "median of 3 steps" beside GPipe's (p-1)/(m+p-1) (before, the
# median took all 5 steps, the ZB-H1 ones too). analysis/hpt_metrics.py
# prints the same line, and the report's page (share/live/app.js, as
# hpt-live's) the same figure (tests/live/bubble-resume.js; without node,
# chromium or playwright-core that part is left out with a note).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
A="--model tiny --data $CORPUS --steps 5 --seq-len 32 --batch 1 --grad-accum 2 --pp 2 --eval-interval 0 --eval-batches 1 --quiet"
run_train r 2 --pp-schedule zb-h1 --stop-at 2
run_train r 2 --pp-schedule gpipe
grep -q "^hpt-train: resumed from .*step_00000002" "$WORK/r.out" || { cat "$WORK/r.out"; fail "no resume"; }
"$HPT_BUILD/src/hpt-metrics" summary "$WORK/r/metrics.h5" > "$WORK/r.sum" || fail "hpt-metrics summary"
grep "^pipeline bubble" "$WORK/r.sum"
grep -q "^pipeline bubble: [0-9.e-]* of the step (the most idle stage's, median of 3 steps); theory (p-1)/(m+p-1) = 0.333333 (PP 2, 2 micro-batches)$" \
  "$WORK/r.sum" || { cat "$WORK/r.sum"; fail "the bubble line is not the last segment's 3 steps"; }
grep "^pipeline bubble" "$WORK/r.sum" > "$WORK/c.b"
PYTHONPATH="$HPT_SRC/analysis" "$PYTHON" -c 'import sys, hpt_metrics as h; print(h.summary_text(h.load(sys.argv[1])))' \
  "$WORK/r/metrics.h5" | grep "^pipeline bubble" > "$WORK/p.b"
cmp "$WORK/c.b" "$WORK/p.b" || { cat "$WORK/p.b"; fail "analysis/hpt_metrics.py's bubble line differs"; }
# the page (hpt-metrics report, hpt-live's app.js) measures the same steps
if command -v node >/dev/null 2>&1 && [ -x "${HPT_CHROMIUM:-/usr/bin/chromium}" ] &&
   [ -d "$HPT_SRC/node_modules/playwright-core" ]; then
  "$HPT_BUILD/src/hpt-metrics" report "$WORK/r" -o "$WORK/report.html" || fail "hpt-metrics report"
  m=$(sed -n 's/^pipeline bubble: \([0-9.e-]*\) of the step.*/\1/p' "$WORK/c.b")
  node "$HPT_SRC/tests/live/bubble-resume.js" "file://$WORK/report.html" 3 "$m" || fail "the page's bubble line"
else
  echo "note: node, chromium or playwright-core missing: the page's bubble line not checked"
fi
pass "the pipeline bubble line of a run resumed across schedules measures its last segment"
