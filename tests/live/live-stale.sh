#!/bin/sh
# hpt-live's "stopped" without the writer's lock in view (a writer on
# another node: docs/LIVE.md): with no new row for 5 x the usual flush interval (at least 10 s) it turns
# "stopped"; rows appended by a SWMR writer make it "live" again and reach
# the history. Generous polling only, no timing asserted.
. "$HPT_SRC/tests/helpers/lib.sh"
LIVE="$HPT_BUILD/src/hpt-live"
[ -x "$LIVE" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
# 100 steps of 0.05 s ending now: first guess of the flush interval 0.5 s
"$PYTHON" "$HPT_SRC/tests/helpers/live_synth.py" "$WORK/m.h5" 100 4 "busy step_time" 0.05 "$(date +%s)" \
  || fail "synthetic file"
"$LIVE" --port 0 "$WORK/m.h5" > "$WORK/live.out" 2> "$WORK/live.err" &
PID=$!
trap 'kill $PID 2>/dev/null; rm -rf "$WORK"' EXIT
for i in $(seq 1 150); do grep -q "token=" "$WORK/live.out" && break; sleep 0.2; done
URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]*' "$WORK/live.out" | head -1)
[ -n "$URL" ] || { cat "$WORK/live.out" "$WORK/live.err"; fail "no URL"; }
"$PYTHON" - "$URL" "$WORK/m.h5" <<'PY' || { cat "$WORK/live.err"; fail "stale writer"; }
import json, sys, time, urllib.request
import h5py, numpy as np
base, tok = sys.argv[1].split("/?token=")
def run():
    return json.load(urllib.request.urlopen(base + "/api/runs?token=" + tok, timeout=60))["runs"][0]
def wait(state):
    for _ in range(1500):
        r = run()
        if r["state"] == state:
            return r
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + state + ": " + repr(run()))
states = [run()["state"]]
wait("stopped")
# (the first state is "live" unless this machine took over 10 s to get here)
print("no lock file, no new row: %s at first, then stopped" % states[0])
f = h5py.File(sys.argv[2], "r+", libver="latest")
f.swmr_mode = True
n = f["steps/step"].shape[0]
for k, d in f["steps"].items():
    last = d[n - 1]
    d.resize((n + 3,))
    d[n:] = last + np.arange(1, 4) if k == "step" else (time.time() if k == "wall_time" else last)
for k, d in f["ranks"].items():
    d.resize((n + 3, d.shape[1]))
    d[n:] = 1.0
f.flush()
wait("live")
h = json.load(urllib.request.urlopen(base + "/api/history?run=0&token=" + tok, timeout=60))
assert h["columns"]["step"][-3:] == [101, 102, 103] and h["steps"] == 103, h["columns"]["step"][-5:]
f.close()
print("3 rows appended by a SWMR writer: live again, steps 101-103 in the history")
PY
pass "stopped after no new row for a while; live again when rows come"
