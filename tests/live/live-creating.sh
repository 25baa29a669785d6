#!/bin/sh
# hpt-live on a metrics file being created: only its first 48 bytes (the
# HDF5 superblock, which records a larger end of file) and recently
# modified -> state "waiting" ("being created"), never "error"; the whole
# file in its place -> its steps. The same 48 bytes last modified a minute
# ago (a writer gone) -> "error" naming HDF5's "truncated file"; so is a
# whole file that was read and is then cut short (it kept its old state).
. "$HPT_SRC/tests/helpers/lib.sh"
LIVE="$HPT_BUILD/src/hpt-live"
[ -x "$LIVE" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
"$PYTHON" "$HPT_SRC/tests/helpers/live_synth.py" "$WORK/full.h5" 50 2 "busy step_time" 0.05 "$(date +%s)" \
  || fail "synthetic file"
head -c 48 "$WORK/full.h5" > "$WORK/m.h5"
head -c 48 "$WORK/full.h5" > "$WORK/old.h5"
touch -d '-60 seconds' "$WORK/old.h5"
cp "$WORK/full.h5" "$WORK/cut.h5"
"$LIVE" --port 0 "$WORK/m.h5" "$WORK/old.h5" "$WORK/cut.h5" > "$WORK/live.out" 2> "$WORK/live.err" &
PID=$!
trap 'kill $PID 2>/dev/null; rm -rf "$WORK"' EXIT
for i in $(seq 1 150); do grep -q "token=" "$WORK/live.out" && break; sleep 0.2; done
URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]*' "$WORK/live.out" | head -1)
[ -n "$URL" ] || { cat "$WORK/live.out" "$WORK/live.err"; fail "no URL"; }
"$PYTHON" - "$URL" "$WORK" <<'PY' || { cat "$WORK/live.err"; fail "file being created"; }
import json, os, sys, time, urllib.request
base, tok = sys.argv[1].split("/?token=")
work = sys.argv[2]
def runs():
    return json.load(urllib.request.urlopen(base + "/api/runs?token=" + tok, timeout=60))["runs"]
def wait(i, pred, what, touch=False):
    for _ in range(600):
        if touch:
            os.utime(work + "/m.h5")  # the writer is at work
        r = runs()[i]
        assert not touch or r["state"] == "waiting", "file being created: " + repr(r)
        if pred(r):
            return r
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what + ": " + repr(runs()[i]))
r = wait(0, lambda r: r["state"] == "waiting" and "being created" in (r["error"] or ""),
         "waiting: being created", touch=True)
print("48 bytes, recent:", r["state"], r["error"])
for _ in range(10):  # several polls: it stays waiting while the writer is at work
    wait(0, lambda r: True, "", touch=True)
    time.sleep(0.3)
o = wait(1, lambda r: r["state"] == "error", "the old truncated file: error")
assert "truncated file" in o["error"], o
print("48 bytes, a minute old:", o["state"], o["error"])
# a whole file, read, then cut short under the reader (its handle open):
# an error, not its old state (it used to stay "finished"/"stopped")
c = wait(2, lambda r: r["state"] not in ("waiting", "error") and r["attrs"].get("steps"),
         "the whole file read")
print("whole file:", c["state"])
os.truncate(work + "/cut.h5", os.path.getsize(work + "/cut.h5") // 2)
past = time.time() - 60
os.utime(work + "/cut.h5", (past, past))
c = wait(2, lambda r: r["state"] == "error", "the file cut short: error")
assert "truncated file" in c["error"], c
print("cut short:", c["state"], c["error"])
os.rename(work + "/full.h5", work + "/m.h5")
r = wait(0, lambda r: r["state"] not in ("waiting", "error") and r["attrs"].get("steps"),
         "the whole file's steps")
print("whole file:", r["state"], r["attrs"]["steps"], "steps")
PY
kill $PID
wait $PID || fail "hpt-live exit status $? after SIGTERM"
pass "hpt-live: a file being created is waited for, a truncated one that stays so is an error, and so is one cut short under the reader"
