#!/bin/sh
# The step timeline on the page (issue 32): a real PP 2 run of 4
# micro-batches traced at steps 2-3 (hpt-train --trace-steps) shown by
# hpt-live and by `hpt-metrics report` in headless chromium: the panel
# offers both traced steps and draws, for each, one rectangle per compute
# and communication span of /trace (counted by h5py) on one row per rank,
# the step's extent behind them (idle time shaded). A run without a trace
# shows no timeline panel (tests/live/report.js, live-report.sh). Skipped
# (77) without node, chromium or npm's playwright-core; the live part also
# without hpt-live (configure without libmicrohttpd).
. "$HPT_SRC/tests/helpers/lib.sh"
command -v node >/dev/null 2>&1 || { echo "SKIP: node missing (setup.sh installs it)"; exit 77; }
[ -x "${HPT_CHROMIUM:-/usr/bin/chromium}" ] || { echo "SKIP: chromium missing (setup.sh installs it)"; exit 77; }
[ -d "$HPT_SRC/node_modules/playwright-core" ] || { echo "SKIP: playwright-core missing (npm ci in $HPT_SRC)"; exit 77; }
need_corpus
export OMP_NUM_THREADS=1
A="--model tiny --data $CORPUS --seq-len 32 --batch 2 --grad-accum 4 --steps 3 --quiet"
run_train r 2 --pp 2 --trace-steps 2-3
"$PYTHON" - "$WORK/r/metrics.h5" > "$WORK/want.json" <<'PY' || fail "h5py read of /trace"
import json, sys
import h5py
tr = h5py.File(sys.argv[1], "r")["trace"][:]
steps = sorted({int(s) for s in tr["step"]})
bars = {str(s): int(sum(1 for r in tr if r["step"] == s and r["stream"] != b"step")) for s in steps}
print(json.dumps({"steps": steps, "bars": bars, "ranks": len({int(r) for r in tr["rank"]})}))
PY
cat "$WORK/want.json"
"$HPT_BUILD/src/hpt-metrics" report "$WORK/r" -o "$WORK/report.html" || fail "hpt-metrics report"
node "$HPT_SRC/tests/live/timeline.js" "file://$WORK/report.html" "$WORK/want.json" || fail "report's timeline"
LIVE=$HPT_BUILD/src/hpt-live
if [ -x "$LIVE" ]; then
  mkdir -p "$WORK/assets"
  cp "$HPT_SRC/share/live/index.html" "$HPT_SRC/share/live/app.js" "$HPT_SRC/share/live/style.css" \
    "$HPT_BUILD/share/live/echarts.min.js" "$WORK/assets/"
  "$LIVE" --port 0 --assets "$WORK/assets" "$WORK/r" > "$WORK/live.out" 2> "$WORK/live.err" &
  PID=$!
  trap 'kill $PID 2>/dev/null; rm -rf "$WORK"' EXIT
  for i in $(seq 1 100); do grep -q "token=" "$WORK/live.out" && break; sleep 0.2; done
  URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]*' "$WORK/live.out" | head -1)
  [ -n "$URL" ] || { cat "$WORK/live.err"; fail "hpt-live printed no URL"; }
  node "$HPT_SRC/tests/live/timeline.js" "$URL" "$WORK/want.json" || fail "hpt-live's timeline"
else
  echo "note: hpt-live not built: only the report's timeline was checked"
fi
pass "the timeline of a traced PP 2 run in the report and in hpt-live"
