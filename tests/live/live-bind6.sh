#!/bin/sh
# hpt-live --bind ::1 prints URLs with the IPv6 loopback ([::1]), in the
# "serving" line, the ssh -L line's near end and the "then open" line, and
# the printed URL answers. Skipped (77) without an IPv6 loopback.
. "$HPT_SRC/tests/helpers/lib.sh"
[ -x "$HPT_BUILD/src/hpt-live" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
"$PYTHON" -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null ||
  { echo "SKIP: no IPv6 loopback"; exit 77; }
"$HPT_BUILD/src/hpt-live" --bind ::1 --port 0 "$WORK/run" > "$WORK/live.out" 2> "$WORK/live.err" &
LIVE=$!
trap 'kill $LIVE 2>/dev/null; rm -rf "$WORK"' EXIT
for i in $(seq 1 100); do grep -q "then open" "$WORK/live.out" && break; sleep 0.2; done
cat "$WORK/live.out"
grep -q "serving 1 run at http://\[::1\]:[0-9]*/?token=" "$WORK/live.out" || fail "serving line without [::1]"
grep -q "ssh -N -L \[::1\]:[0-9]*:\[::1\]:[0-9]* " "$WORK/live.out" || fail "ssh -L line without [::1]"
URL=$(grep -o 'then open http://\[::1\]:[0-9]*/?token=[0-9a-f]*' "$WORK/live.out" | sed 's/^then open //')
[ -n "$URL" ] || fail "the 'then open' line does not name [::1]"
"$PYTHON" - "$URL" <<'PY' || fail "the printed URL does not answer"
import json, sys, urllib.request
base, tok = sys.argv[1].split("/?token=")
r = json.load(urllib.request.urlopen(base + "/api/runs?token=" + tok, timeout=60))
assert r["runs"][0]["state"] == "waiting", r
PY
kill $LIVE
wait $LIVE || fail "hpt-live exit status $? after SIGTERM"
pass "hpt-live --bind ::1: URLs name [::1] and answer"
