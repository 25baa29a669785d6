#!/bin/sh
# hpt-live's server-side downsampling (docs/LIVE.md) on a synthetic metrics
# file of 5,000 steps x 40 ranks (tests/helpers/live_synth.py) with a loss spike and
# a dip: a history of points=100 keeps the first and last step, every event
# step, the global loss maximum and minimum (the spike and the dip), about
# `points` rows, values equal to the file's; points=2 keeps only the first
# and last step, the event and alert steps and the curves' global extremes
# (at most 8 + 2 rows besides events and alerts); the heat map has at most
# min(points, 512) step columns; points above the steps returns every step.
# A second path that does not exist yet is a second run, "waiting".
. "$HPT_SRC/tests/helpers/lib.sh"
LIVE="$HPT_BUILD/src/hpt-live"
[ -x "$LIVE" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
"$PYTHON" "$HPT_SRC/tests/helpers/live_synth.py" "$WORK/m.h5" 5000 40 || fail "synthetic file"
"$LIVE" --port 0 "$WORK/m.h5" "$WORK/later" > "$WORK/live.out" 2> "$WORK/live.err" &
PID=$!
trap 'kill $PID 2>/dev/null; rm -rf "$WORK"' EXIT
for i in $(seq 1 150); do grep -q "token=" "$WORK/live.out" && break; sleep 0.2; done
URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]*' "$WORK/live.out" | head -1)
[ -n "$URL" ] || { cat "$WORK/live.out" "$WORK/live.err"; fail "no URL"; }
"$PYTHON" - "$URL" "$WORK/m.h5" <<'PY' || fail "downsampling"
import json, sys, urllib.request
import h5py, numpy as np
base, tok = sys.argv[1].split("/?token=")
def hist(points):
    u = "%s/api/history?run=0&points=%d&token=%s" % (base, points, tok)
    return json.load(urllib.request.urlopen(u, timeout=120))
f = h5py.File(sys.argv[2], "r", libver="latest", swmr=True)
step, loss = f["steps/step"][:], f["steps/loss"][:]
gn, tps = f["steps/grad_norm"][:], f["steps/tokens_per_s"][:]
evs = set(int(s) for s in f["events"]["step"])
h = hist(100)
c = h["columns"]
s = c["step"]
assert h["steps"] == 5000 and s == sorted(s) and len(set(s)) == len(s), s[:10]
assert s[0] == 1 and s[-1] == 5000, (s[0], s[-1])
assert evs <= set(s), sorted(evs - set(s))
assert 5000 // 3 in s and 2 * 5000 // 3 in s, "spike or dip dropped"
assert max(c["loss"]) == loss.max() == 50.0 and min(c["loss"]) == loss.min() == 0.5
assert max(c["grad_norm"]) == gn.max() and min(c["tokens_per_s"]) == tps.min()
assert len(s) <= 100 + len(evs) + 2, len(s)
idx = np.array(s) - 1
assert c["loss"] == [float(x) for x in loss[idx]] and c["lr"] == list(f["steps/lr"][:][idx])
vs = [int(x) for x in step[np.isfinite(f["steps/val_loss"][:])]]
assert c["val_step"] == vs, c["val_step"][:5]
assert len(h["ranks"]["step"]) == 100 and len(h["ranks"]["busy_s"][0]) == 40
assert len(h["comm"]["seconds"]) == 6 and len(h["comm"]["seconds"][0]) == 40
busy = f["ranks/busy"][:]
for st_, row in zip(h["ranks"]["step"], h["ranks"]["busy_s"]):
    ref = busy[st_ - 1]
    assert all(abs(a - b) <= 5e-6 * abs(b) for a, b in zip(row, ref)), st_
runs = json.load(urllib.request.urlopen(base + "/api/runs?token=" + tok, timeout=60))["runs"]
# m.h5: no run_end event, its last row long ago, no lock: stopped
assert [(r["id"], r["name"], r["state"]) for r in runs] == [(0, "m.h5", "stopped"),
                                                             (1, "later", "waiting")], runs
assert runs[1]["error"].endswith("later/metrics.h5: no such file yet; waiting for it"), runs[1]
assert runs[0]["layout"] == {"tp": 1, "cp": 1, "pp": 1, "dp": 40, "world": 40}, runs[0]["layout"]
h1 = json.load(urllib.request.urlopen(base + "/api/history?run=1&token=" + tok, timeout=60))
assert h1["state"] == "waiting" and h1["columns"]["step"] == [] and h1["run"] == 1, h1
# points=2: the first and last step, the event and alert steps and the
# global extremes only (at most max(points, 8) + 2 rows besides events and
# alerts; docs/LIVE.md)
h2 = hist(2)
s2, al = h2["columns"]["step"], set(a["step"] for a in h2["alerts"])
extra = set(s2) - evs - al
assert {1, 5000} <= set(s2) and len(extra) <= 8 + 2, (len(extra), len(s2), sorted(extra)[:20])
l2 = h2["columns"]["loss"]
assert max(l2) == loss.max() and min(l2) == loss.min(), (max(l2), min(l2))
full = hist(6000)
assert full["columns"]["step"] == list(range(1, 5001))
assert len(full["ranks"]["step"]) == 512, len(full["ranks"]["step"])
print("points=100: %d of 5000 steps (first, last, %d event steps, the loss spike %.1f and dip "
      "%.1f kept); heat map %d x 40; points=6000: every step, heat map 512 steps" % (
          len(s), len(evs), max(c["loss"]), min(c["loss"]), len(h["ranks"]["step"])))
PY
pass "downsampling keeps extremes, first/last and event steps"
