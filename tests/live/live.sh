#!/bin/sh
# hpt-live on a real 2-rank hpt-train run (docs/LIVE.md), no browser:
# - security: no token / a wrong token -> 403 without data on the page, the
#   API and the stream; ../ paths never reach the file system; the server
#   listens on 127.0.0.1 only by default;
# - the stream delivers the rows the trainer appends (--metrics-interval 1);
#   an injected NaN (--fault-nan-steps) fires the nonfinite alert once: in
#   the stream, the history and exactly one --on-alert command;
# - kill -9 of the writer -> state "stopped", every flushed row kept, and the
#   history equals what h5py reads from the file;
# - a new run on the same file (a new segment) is followed live to "finished".
. "$HPT_SRC/tests/helpers/lib.sh"
[ -x "$HPT_BUILD/src/hpt-live" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
need_corpus
export OMP_NUM_THREADS=1
export ALERTS="$WORK/alerts.txt"
"$HPT_BUILD/src/hpt-live" --port 0 --assets "$HPT_SRC/share/live" --alert nonfinite \
  --alert 'grad_norm>1e9' \
  --on-alert 'echo "$HPT_ALERT_RULE|$HPT_ALERT_RUN|$HPT_ALERT_STEP|$HPT_ALERT_VALUE|$HPT_ALERT_FILE" >> "$ALERTS"' \
  "$WORK/run" > "$WORK/live.out" 2> "$WORK/live.err" &
LIVE=$!
trap 'kill $LIVE 2>/dev/null; rm -rf "$WORK"' EXIT
for i in $(seq 1 100); do grep -q "token=" "$WORK/live.out" && break; sleep 0.2; done
cat "$WORK/live.out"
URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]*' "$WORK/live.out" | head -1)
[ -n "$URL" ] || { cat "$WORK/live.err"; fail "no URL printed"; }
grep -q "ssh -N -L [0-9]*:127.0.0.1:[0-9]* " "$WORK/live.out" || fail "no ssh -L line"
grep -q "no such file yet; waiting for it" "$WORK/live.err" || fail "no waiting message"
[ "$(grep -c "waiting for it" "$WORK/live.err")" -eq 1 ] || fail "waiting message repeated"

export MPIEXEC TRAIN CORPUS
timeout 900 "$PYTHON" "$HPT_SRC/tests/helpers/live_check.py" "$URL" "$WORK" || {
  echo "--- hpt-live stderr"; cat "$WORK/live.err"; echo "--- train"; cat "$WORK"/train*.out
  fail "live checks"; }
kill $LIVE
wait $LIVE
st=$?
cat "$WORK/live.err"
[ $st -eq 0 ] || fail "hpt-live exit status $st after SIGTERM"

# The followed file replaced by a damaged one (the run's file cut in half),
# then by a good one again: state "error" with the message in /api/runs and
# on stderr, the server keeps running, then the good file's steps again.
size=$(stat -c %s "$WORK/run/metrics.h5")
head -c $((size / 2)) "$WORK/run/metrics.h5" > "$WORK/damaged.h5"
cp "$WORK/run/metrics.h5" "$WORK/x.h5"
"$HPT_BUILD/src/hpt-live" --port 0 "$WORK/x.h5" > "$WORK/live2.out" 2> "$WORK/live2.err" &
LIVE=$!
for i in $(seq 1 100); do grep -q "token=" "$WORK/live2.out" && break; sleep 0.2; done
URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]*' "$WORK/live2.out" | head -1)
[ -n "$URL" ] || { cat "$WORK/live2.out" "$WORK/live2.err"; fail "no URL for the copy"; }
"$PYTHON" - "$URL" "$WORK" <<'PY' || { cat "$WORK/live2.err"; fail "replaced/damaged file"; }
import json, os, shutil, sys, time, urllib.request
base, tok = sys.argv[1].split("/?token=")
work = sys.argv[2]
def run():
    return json.load(urllib.request.urlopen(base + "/api/runs?token=" + tok, timeout=60))["runs"][0]
def wait(pred, what):
    for _ in range(600):
        r = run()
        if pred(r):
            return r
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what + ": " + repr(run()))
good = wait(lambda r: r["state"] == "finished", "the copy finished")
os.rename(work + "/damaged.h5", work + "/x.h5")
r = wait(lambda r: r["state"] == "error", "state error")
assert "x.h5" in r["error"] and "HDF5" in r["error"], r
h = json.load(urllib.request.urlopen(base + "/api/history?run=0&token=" + tok, timeout=60))
assert h["state"] == "error" and h["columns"]["step"] == [], h
print("damaged file:", r["error"])
shutil.copy(work + "/run/metrics.h5", work + "/y.h5")
os.rename(work + "/y.h5", work + "/x.h5")
r = wait(lambda r: r["state"] == "finished", "the good file again")
assert r["attrs"]["steps"] == good["attrs"]["steps"] > 0, (r, good)
print("replaced by a good file again:", r["attrs"]["steps"], "steps, state", r["state"])
PY
grep -q "x.h5: .*truncated file" "$WORK/live2.err" || fail "no message on stderr"
kill $LIVE
wait $LIVE || fail "hpt-live on a damaged file: exit status $?"
pass "hpt-live: token, paths, loopback, stream, nonfinite alert once, kill -9 -> stopped, history = file, new segment live, damaged then replaced file"
