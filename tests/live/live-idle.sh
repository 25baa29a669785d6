#!/bin/sh
# hpt-live: 100 idle TCP connections (no request sent) do not lock the token
# holder out: a request with the token still gets its answer (within a
# generous bound; the server drops connections idle for 10 s and accepts
# many more than 100). Before: 64 connections at most, idle ones kept 120 s.
# An event stream is not cut by that idle timeout: it gets its pings (every
# 5 s) and stays open for 25 s.
. "$HPT_SRC/tests/helpers/lib.sh"
[ -x "$HPT_BUILD/src/hpt-live" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
"$HPT_BUILD/src/hpt-live" --port 0 "$WORK/run" > "$WORK/live.out" 2> "$WORK/live.err" &
LIVE=$!
trap 'kill $LIVE 2>/dev/null; rm -rf "$WORK"' EXIT
for i in $(seq 1 100); do grep -q "token=" "$WORK/live.out" && break; sleep 0.2; done
URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]*' "$WORK/live.out" | head -1)
[ -n "$URL" ] || { cat "$WORK/live.out" "$WORK/live.err"; fail "no URL printed"; }
"$PYTHON" - "$URL" <<'PY' || { cat "$WORK/live.err"; fail "idle connections lock the token holder out"; }
import json, socket, sys, time, urllib.request
base, tok = sys.argv[1].split("/?token=")
port = int(base.rsplit(":", 1)[1])
idle = []
for _ in range(100):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    idle.append(s)
time.sleep(1)
t0 = time.time()
last = None
while time.time() - t0 < 30:
    try:
        r = json.load(urllib.request.urlopen(base + "/api/runs?token=" + tok, timeout=5))
        assert r["runs"][0]["state"] == "waiting", r
        print("answered with 100 idle connections open after %.1f s" % (time.time() - t0))
        break
    except (OSError, ValueError) as e:
        last = e
        time.sleep(0.5)
else:
    raise SystemExit("no answer within 30 s with 100 idle connections open: %r" % (last,))
for s in idle:
    s.close()
r = urllib.request.urlopen(base + "/api/stream?token=" + tok, timeout=60)
t0, pings = time.time(), 0
while time.time() - t0 < 25:
    line = r.readline()
    if not line:
        raise SystemExit("the event stream was closed after %.1f s (%d pings)" % (time.time() - t0, pings))
    pings += line.startswith(b": ping")
assert pings >= 1, "no ping in 25 s"
print("the event stream stayed open 25 s with %d pings" % pings)
PY
kill $LIVE
wait $LIVE || fail "hpt-live exit status $? after SIGTERM"
pass "hpt-live: 100 idle connections do not lock the token holder out"
