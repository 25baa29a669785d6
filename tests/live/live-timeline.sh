#!/bin/sh
# The step timeline on the page (issue 32): a real PP 2 run of 4
# micro-batches traced at steps 2-3 (hpt-train --trace-steps) shown by
# hpt-live and by `hpt-metrics report` in headless chromium: the panel
# offers both traced steps and draws, for each, one rectangle per compute
# and communication span of /trace (counted by h5py) on one row per rank,
# the step's extent behind them (idle time shaded); a step of more spans
# than the page draws (110,000 calls added to its /trace with h5py) keeps
# its compute spans and says its communication is left out. A run without a trace
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
# a step with more spans than the page draws (100,000): its communication
# is left out, with a note, its compute kept; /trace itself is untouched
mkdir -p "$WORK/big" && cp "$WORK/r/metrics.h5" "$WORK/big/"
"$PYTHON" - "$WORK/big/metrics.h5" "$WORK/want.json" "$WORK/wantbig.json" <<'PY' || fail "the big trace"
import json, sys
import h5py, numpy as np
with h5py.File(sys.argv[1], "a") as f:
    d = f["trace"]
    tr = d[:]
    s3 = tr[(tr["step"] == 3) & (tr["stream"] == b"step")][0]
    extra = np.zeros(110000, d.dtype)
    extra["segment"], extra["step"], extra["rank"], extra["micro"], extra["peer"] = 0, 3, 0, -1, -1
    extra["t_start"] = s3["t_start"] + np.linspace(0, 1e-3, 110000)
    extra["t_end"] = extra["t_start"] + 1e-6
    extra["name"], extra["stream"], extra["bytes"] = b"allreduce", b"dp", 8
    n = d.shape[0]
    d.resize((n + 110000,))
    d[n:] = extra
    tr = d[:]
want = json.load(open(sys.argv[2]))
s3 = tr[tr["step"] == 3]
comp = int(np.isin(s3["stream"], [b"compute"]).sum())
want["bars"]["3"] = comp
want["notes"] = {"3": "communication spans are left out"}
json.dump(want, open(sys.argv[3], "w"))
print("step 3: %d compute spans kept, %d communication spans left out" % (comp, len(s3) - comp - 2))
PY
"$HPT_BUILD/src/hpt-metrics" report "$WORK/big" -o "$WORK/big.html" || fail "hpt-metrics report (big)"
"$PYTHON" - "$WORK/big.html" "$WORK/big/metrics.h5" <<'PY' || fail "big: the history's trace"
import json, sys
import h5py, numpy as np
text = open(sys.argv[1]).read()
t = json.loads(text.split("window.HPT_DATA = ", 1)[1].split(";\n</script>", 1)[0])["history"][0]["trace"]
tr = h5py.File(sys.argv[2], "r")["trace"][:]
s3 = tr[tr["step"] == 3]
comm = int((~np.isin(s3["stream"], [b"step", b"compute"])).sum())
assert t["steps"] == [2, 3] and not t["truncated"], (t["steps"], t["truncated"])
assert t["comm_left_out"] == {"3": comm}, t["comm_left_out"]
assert len(t["spans"]["3"]) == len(s3) - comm, len(t["spans"]["3"])
print("big: step 3's", comm, "communication spans left out, noted")
PY
node "$HPT_SRC/tests/live/timeline.js" "file://$WORK/big.html" "$WORK/wantbig.json" || fail "the big report's timeline"
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
