#!/bin/sh
# The pipeline bubble on the page (issue 30, "Metrics"): a real PP 2 run
# under --pp-schedule zb-h1 traced at step 2, a PP 1 run, and the PP 2 file
# as an older writer left it (no /ranks/pipeline_bubble, /segments without
# pp_schedule, pp_virtual and bubble_theory), shown by `hpt-metrics report`
# and by hpt-live in headless chromium (tests/live/bubble.js). The
# history's segments carry pp_schedule "zb-h1", pp_virtual 1 and the
# file's bubble_theory (null in the older file), its ranks bubble_s
# (/ranks/pipeline_bubble, null throughout in the older file) and
# step_time (/steps/step_time, exact). The page's bubble line beside the
# heat map shows the measured bubble equal, to its 3 digits, to
# `hpt-metrics summary`'s and the theory "(ZB-H1)" equal to the segment's
# bubble_theory; its "pipeline bubble" heat map has a cell per rank x step;
# the step timeline draws each "weight" span of /trace in its own colour;
# the PP 1 run has no bubble line, the older file one without a measure or
# a theory, and no page error. Skipped (77) without node, chromium or
# npm's playwright-core; the live part also without hpt-live.
. "$HPT_SRC/tests/helpers/lib.sh"
command -v node >/dev/null 2>&1 || { echo "SKIP: node missing (setup.sh installs it)"; exit 77; }
[ -x "${HPT_CHROMIUM:-/usr/bin/chromium}" ] || { echo "SKIP: chromium missing (setup.sh installs it)"; exit 77; }
[ -d "$HPT_SRC/node_modules/playwright-core" ] || { echo "SKIP: playwright-core missing (npm ci in $HPT_SRC)"; exit 77; }
need_corpus
"$PYTHON" -c "import h5py, numpy" || fail "python3-h5py missing (setup.sh installs it)"
export OMP_NUM_THREADS=1
HM="$HPT_BUILD/src/hpt-metrics"
A="--model tiny --data $CORPUS --seq-len 32 --batch 2 --grad-accum 4 --steps 3 --quiet"
run_train zb 2 --pp 2 --pp-schedule zb-h1 --trace-steps 2
run_train one 1
# the same PP 2 file as a writer before the bubble columns left it
mkdir -p "$WORK/old" && cp "$WORK/zb/metrics.h5" "$WORK/old/"
"$PYTHON" - "$WORK/old/metrics.h5" <<'PY' || fail "making an older file"
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r+", libver="latest")
del f["ranks/pipeline_bubble"]
seg = f["segments"][:]
keep = [n for n in seg.dtype.names if n not in ("pp_schedule", "pp_virtual", "bubble_theory")]
old = np.zeros(len(seg), [(n, seg.dtype[n]) for n in keep])
for n in keep:
    old[n] = seg[n]
desc = f["segments"].attrs["description"]
del f["segments"]
d = f.create_dataset("segments", data=old, maxshape=(None,), chunks=(64,))
d.attrs["description"] = desc
PY
"$HM" summary "$WORK/zb/metrics.h5" > "$WORK/sum.out" || { cat "$WORK/sum.out"; fail "hpt-metrics summary"; }
grep '^pipeline bubble' "$WORK/sum.out" || { cat "$WORK/sum.out"; fail "the summary has no bubble line"; }
"$HM" summary "$WORK/old/metrics.h5" > "$WORK/sumold.out" || { cat "$WORK/sumold.out"; fail "summary of the older file"; }
! grep -q '^pipeline bubble' "$WORK/sumold.out" || fail "the older file's summary has a bubble line"
"$PYTHON" - "$WORK/zb/metrics.h5" "$WORK/sum.out" > "$WORK/want.json" <<'PY' || fail "h5py read"
import json, re, sys
import h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
seg = f["segments"][-1]
assert int(seg["pp"]) == 2 and int(seg["pp_schedule"]) == 3, seg  # ZB-H1 (docs/METRICS.md)
pb = f["ranks/pipeline_bubble"][:]
tr = f["trace"][:]
m = re.search(r"^pipeline bubble: (\S+) of the step \(the most idle stage's, median of (\d+) steps\)",
              open(sys.argv[2]).read(), re.M)
print(json.dumps({"measured": float(m.group(1)), "measured_steps": int(m.group(2)),
                  "theory": float(seg["bubble_theory"]), "pp_virtual": int(seg["pp_virtual"]),
                  "cells": int(np.isfinite(pb).sum()), "steps": int(pb.shape[0]),
                  "ranks": int(pb.shape[1]), "trace_step": 2,
                  "weight": int(((tr["step"] == 2) & (tr["name"] == b"weight")).sum())}))
PY
cat "$WORK/want.json"
"$HM" report "$WORK/zb" "$WORK/one" "$WORK/old" -o "$WORK/report.html" || fail "hpt-metrics report"
# the history's JSON (the report inlines what hpt-live serves)
"$PYTHON" - "$WORK/report.html" "$WORK/want.json" "$WORK/zb/metrics.h5" "$WORK/one/metrics.h5" <<'PY' || fail "the history's bubble fields"
import json, math, sys
import h5py, numpy as np
text = open(sys.argv[1]).read()
hist = json.loads(text.split("window.HPT_DATA = ", 1)[1].split(";\n</script>", 1)[0])["history"]
want = json.load(open(sys.argv[2]))
zb, one, old = hist
s = zb["segments"][-1]
assert (s["pp_schedule"], s["pp_virtual"], s["bubble_theory"]) == ("zb-h1", 1, want["theory"]), s
f = h5py.File(sys.argv[3], "r")
st = f["steps/step_time"][:]
pb = f["ranks/pipeline_bubble"][:]
assert zb["ranks"]["step_time"] == [float(v) for v in st], (zb["ranks"]["step_time"], st)
for got, row in zip(zb["ranks"]["bubble_s"], pb):
    for g, v in zip(got, row):
        assert g is not None and abs(g - v) <= 5e-6 * abs(v) + 1e-12, (got, row)
s1 = one["segments"][-1]
assert (s1["pp"], s1["pp_schedule"], s1["pp_virtual"]) == (1, "1f1b", 1), s1
assert s1["bubble_theory"] == float(h5py.File(sys.argv[4], "r")["segments"][-1]["bubble_theory"]), s1
assert all(v is None for row in one["ranks"]["bubble_s"] for v in row), one["ranks"]["bubble_s"]
so = old["segments"][-1]
assert (so["pp_schedule"], so["pp_virtual"], so["bubble_theory"]) == (None, None, None), so
assert len(old["ranks"]["bubble_s"]) == want["steps"], old["ranks"]
assert all(v is None for row in old["ranks"]["bubble_s"] for v in row), old["ranks"]["bubble_s"]
print("history: zb-h1 segment", s, "; PP 1:", s1["pp_schedule"], s1["bubble_theory"],
      "; older file: nulls")
PY
node "$HPT_SRC/tests/live/bubble.js" "file://$WORK/report.html" "$WORK/want.json" || fail "the report's bubble"
LIVE=$HPT_BUILD/src/hpt-live
if [ -x "$LIVE" ]; then
  mkdir -p "$WORK/assets"
  cp "$HPT_SRC/share/live/index.html" "$HPT_SRC/share/live/app.js" "$HPT_SRC/share/live/style.css" \
    "$HPT_BUILD/share/live/echarts.min.js" "$WORK/assets/"
  "$LIVE" --port 0 --assets "$WORK/assets" "$WORK/zb" "$WORK/one" "$WORK/old" > "$WORK/live.out" \
    2> "$WORK/live.err" &
  PID=$!
  trap 'kill $PID 2>/dev/null; rm -rf "$WORK"' EXIT
  for i in $(seq 1 100); do grep -q "token=" "$WORK/live.out" && break; sleep 0.2; done
  URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]*' "$WORK/live.out" | head -1)
  [ -n "$URL" ] || { cat "$WORK/live.err"; fail "hpt-live printed no URL"; }
  node "$HPT_SRC/tests/live/bubble.js" "$URL" "$WORK/want.json" || fail "hpt-live's bubble"
else
  echo "note: hpt-live not built: only the report's bubble was checked"
fi
pass "the pipeline bubble (measured and theory), its heat map and the weight spans in the report and in hpt-live"
