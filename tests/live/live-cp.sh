#!/bin/sh
# hpt-live names a context-parallel run's CP: /api/runs' layout and
# /api/history's segments carry "cp" (world / (TP x PP x DP): /segments has
# no cp field), 2 for a CP 2 run on 2 ranks and 1 for a run without CP
# (before, a CP 2 run read as TP 1 x PP 1 x DP 1 on 2 ranks), and the
# communication per group has "cp" (comm_cp: the ring's seconds; missing
# before, so the page's communication panel left the ring out).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
LIVE="$HPT_BUILD/src/hpt-live"
[ -x "$LIVE" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
export OMP_NUM_THREADS=1
A="--model tiny --data $CORPUS --seq-len 32 --batch 1 --steps 1 --eval-interval 0 --eval-batches 1 --quiet"
run_train cp 2 --cp 2
run_train dp 2
"$LIVE" --port 0 "$WORK/cp/metrics.h5" "$WORK/dp/metrics.h5" > "$WORK/live.out" 2> "$WORK/live.err" &
PID=$!
trap 'kill $PID 2>/dev/null; rm -rf "$WORK"' EXIT
for i in $(seq 1 150); do grep -q "token=" "$WORK/live.out" && break; sleep 0.2; done
URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]*' "$WORK/live.out" | head -1)
[ -n "$URL" ] || { cat "$WORK/live.out" "$WORK/live.err"; fail "no URL"; }
"$PYTHON" - "$URL" <<'PY' || fail "layout JSON"
import json, sys, time, urllib.request
base, tok = sys.argv[1].split("/?token=")
def get(path):
    sep = "&" if "?" in path else "?"
    return json.load(urllib.request.urlopen("%s%s%stoken=%s" % (base, path, sep, tok), timeout=60))
for _ in range(150):
    runs = get("/api/runs")["runs"]
    if all(r["layout"]["world"] == 2 for r in runs):
        break
    time.sleep(0.2)
want = {"cp": (2, 1), "dp": (1, 2)}  # run name: (cp, dp)
for r in runs:
    cp, dp = want[r["name"]]
    assert r["layout"] == {"tp": 1, "cp": cp, "pp": 1, "dp": dp, "world": 2}, r["layout"]
    h = get("/api/history?run=%d" % r["id"])
    seg = h["segments"]
    assert [(s["cp"], s["dp"]) for s in seg] == [(cp, dp)], seg
    # the communication panel has the ring's group: its seconds on a CP run, 0 without
    g = h["comm"]["groups"]
    assert "cp" in g, g
    ring = h["comm"]["seconds"][g.index("cp")]
    assert len(ring) == 2 and all((v > 0) if cp > 1 else (v == 0) for v in ring), (r["name"], ring)
    print(r["name"], r["layout"])
PY
pass "hpt-live: layout and segments name CP"
