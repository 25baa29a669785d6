#!/bin/sh
# hpt-train --alert (lib/alert.h, docs/LIVE.md): with no viewer running, a
# fired rule prints one job-log line and records an `alert` event in the
# metrics file, once per firing edge: `loss>0` holds from step 1 on (one
# line), `nonfinite` fires at the injected NaN step only; hpt-live's history
# of the file lists the events as kind "alert". A bad rule: exit 2, named.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
timeout 300 "$MPIEXEC" -n 2 "$TRAIN" --model tiny --data "$CORPUS" --seq-len 32 --batch 1 \
  --eval-interval 0 --eval-batches 1 --quiet --steps 6 --metrics-interval 2 --fault-nan-steps 3 \
  --alert nonfinite --alert 'loss > 0' --alert 'grad_norm>1e9' --run-dir "$WORK/run" \
  > "$WORK/train.out" 2>&1 || { cat "$WORK/train.out"; fail "training run"; }
cat "$WORK/train.out"
[ "$(grep -c "hpt-train: alert at step" "$WORK/train.out")" -eq 2 ] || fail "expected 2 alert lines"
grep -q "hpt-train: alert at step 1: loss>0 (value 9\.[0-9]*)" "$WORK/train.out" || fail "loss>0 line"
grep -q "hpt-train: alert at step 3: nonfinite (value nan)" "$WORK/train.out" || fail "nonfinite line"
"$PYTHON" - "$WORK/run/metrics.h5" <<'PY' || fail "alert events in the file"
import sys, h5py
f = h5py.File(sys.argv[1], "r", libver="latest", swmr=True)
ev = f["events"][:]
al = ev[ev["kind"] == b"alert"]
assert [(int(e["step"]), e["message"].decode()) for e in al] == \
    [(1, "loss>0 fired: " + e0) for e0 in [al[0]["message"].decode().split(": ")[1]]] + \
    [(3, "nonfinite fired: nan")], al
print("alert events:", [(int(e["step"]), e["message"]) for e in al])
PY
if [ -x "$HPT_BUILD/src/hpt-live" ]; then
  "$HPT_BUILD/src/hpt-live" --port 0 "$WORK/run" > "$WORK/live.out" 2>&1 &
  LIVE=$!
  trap 'kill $LIVE 2>/dev/null; rm -rf "$WORK"' EXIT
  for i in $(seq 1 100); do grep -q "token=" "$WORK/live.out" && break; sleep 0.2; done
  URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]*' "$WORK/live.out" | head -1)
  [ -n "$URL" ] || { cat "$WORK/live.out"; fail "hpt-live printed no URL"; }
  "$PYTHON" - "$URL" <<'PY' || fail "hpt-live history of the alert events"
import json, sys, urllib.request
base, tok = sys.argv[1].split("/?token=")
h = json.load(urllib.request.urlopen(base + "/api/history?run=0&token=" + tok, timeout=60))
al = [(e["step"], e["kind"], e["rank"]) for e in h["events"] if e["file_kind"] == "alert"]
assert al == [(1, "alert", -1), (3, "alert", -1)], h["events"]
assert h["state"] == "finished", h["state"]
PY
  kill $LIVE
fi
expect_error 2 "hpt-train: --alert 'lossy>1': unknown column 'lossy'" \
  "$MPIEXEC" -n 1 "$TRAIN" --model tiny --data "$CORPUS" --alert 'lossy>1'
pass "hpt-train --alert: one log line and one alert event per firing edge"
