#!/bin/sh
# Bad input: --port P where another server already listens on P (exit 5,
# naming the port), and --bind with something that is not an address (exit 2).
. "$HPT_SRC/tests/helpers/lib.sh"
LIVE="$HPT_BUILD/src/hpt-live"
[ -x "$LIVE" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
mkfifo "$WORK/port"
"$PYTHON" -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
open(sys.argv[1], "w").write("%d\n" % s.getsockname()[1])
time.sleep(120)' "$WORK/port" &
HOLDER=$!
trap 'kill $HOLDER 2>/dev/null; rm -rf "$WORK"' EXIT
read -r PORT < "$WORK/port"
[ -n "$PORT" ] || fail "no port from the holder"
expect_error 5 "hpt-live: --port $PORT: address 127.0.0.1 port $PORT is already in use" \
  timeout 60 "$LIVE" --port "$PORT" "$WORK/run"
expect_error 2 "hpt-live: --bind 'localhost:80': not an IPv4 or IPv6 address" \
  timeout 60 "$LIVE" --bind localhost:80 "$WORK/run"
expect_error 2 "hpt-live: --port 70000: not a TCP port" timeout 60 "$LIVE" --port 70000 "$WORK/run"
pass "a port in use and a bad --bind are refused with a message"
