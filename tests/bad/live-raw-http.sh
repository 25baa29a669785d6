#!/bin/sh
# Bad input: raw HTTP to hpt-live (issue 33, item 3), through Python's
# socket module:
# - a path with a percent-encoded NUL (/assets/app.js%00.html, /%00,
#   /api/runs%00) is a 400, never a file: libmicrohttpd decodes %00 into the
#   C string, so the path used to end at the NUL and app.js was served;
# - two requests in one write (HTTP/1.1 pipelining, keep-alive) get two
#   answers in order: the page's files, the API, a 400, a 403 and a 404;
#   two HEADs: the first answered, then the connection closes (never a
#   hang). (libmicrohttpd 0.9.75 did so already: the answers follow each
#   other without a line break, which a reader splitting on lines misses.)
. "$HPT_SRC/tests/helpers/lib.sh"
LIVE="$HPT_BUILD/src/hpt-live"
[ -x "$LIVE" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
"$PYTHON" -c "import h5py" 2>/dev/null || { echo "SKIP: python3-h5py missing"; exit 77; }
"$PYTHON" "$HPT_SRC/tests/helpers/live_synth.py" "$WORK/m.h5" 20 2 > /dev/null || fail "synthetic file"
printf 'abcdefghijklmnop0123\n' > "$WORK/tok"
"$LIVE" --port 0 --token-file "$WORK/tok" "$WORK/m.h5" > "$WORK/live.out" 2>&1 &
LPID=$!
trap 'kill $LPID 2>/dev/null; rm -rf "$WORK"' EXIT
for i in $(seq 1 300); do grep -q "serving 1 run at" "$WORK/live.out" && break; sleep 0.1; done
PORT=$(sed -n 's|.*serving 1 run at http://[^:]*:\([0-9]*\)/.*|\1|p' "$WORK/live.out")
[ -n "$PORT" ] || { cat "$WORK/live.out"; fail "hpt-live did not start"; }
"$PYTHON" - "$PORT" <<'PY' || { cat "$WORK/live.out"; fail "raw HTTP"; }
import re, socket, sys
port, tok = int(sys.argv[1]), "abcdefghijklmnop0123"
def responses(out):
    """The complete responses at the start of out: [(status, body)]."""
    got = []
    while True:
        head_end = out.find(b"\r\n\r\n")
        if head_end < 0:
            return got
        head = out[:head_end].decode("latin-1")
        m = re.match(r"HTTP/1\.1 (\d{3}) ", head)
        n = re.search(r"(?im)^content-length: *(\d+)", head)
        if not m or not n or len(out) < head_end + 4 + int(n.group(1)):
            return got
        body_end = head_end + 4 + int(n.group(1))
        got.append((int(m.group(1)), out[head_end + 4:body_end]))
        out = out[body_end:]
def exchange(data, what, n):
    """Send data in one write; read until n complete answers came, or the
    server closed (30 s at most: a hang fails)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(data)
    out = b""
    try:
        while len(responses(out)) < n:
            c = s.recv(65536)
            if not c:
                break
            out += c
    except socket.timeout:
        pass  # judged by the caller: fewer answers than asked
    finally:
        s.close()
    return out
def statuses(out):
    return [st for st, _ in responses(out)]
def req(path, close=False):
    return ("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (path, "Connection: close\r\n" if close else "")).encode()
bad = 0
for path in ("/assets/app.js%00.html", "/%00", "/api/runs%00", "/assets/%00style.css"):
    out = exchange(req(path + "?token=" + tok, True), path, 1)
    ok = statuses(out) == [400] and b"NUL" in out and b"function" not in out
    print("%s: %s -> %s %r" % ("ok" if ok else "FAIL", path, statuses(out), out[-80:]))
    bad += not ok
for path, want in (("/assets/app.js", 200), ("/assets/style.css", 200), ("/", 200),
                   ("/api/runs", 200), ("/api/history?run=0", 200),
                   ("/api/history?run=9", 400), ("/nothing", 404)):
    sep = "&" if "?" in path else "?"
    out = exchange(req(path + sep + "token=" + tok) * 2, path, 2)
    ok = statuses(out) == [want, want]
    print("%s: %s twice in one write -> %s" % ("ok" if ok else "FAIL", path, statuses(out)))
    bad += not ok
out = exchange(req("/api/runs?token=wrong") + req("/api/runs?token=" + tok), "403 then 200", 2)
ok = statuses(out) == [403, 200]
print("%s: a wrong token, then the right one, in one write -> %s" % ("ok" if ok else "FAIL", statuses(out)))
bad += not ok
# two HEADs: libmicrohttpd answers the first and closes the connection
# (the second is not answered, but nothing hangs)
c = socket.create_connection(("127.0.0.1", port), timeout=30)
c.sendall(("HEAD /api/runs?token=%s HTTP/1.1\r\nHost: x\r\n\r\n" % tok).encode() * 2)
out, closed = b"", False
try:
    while True:
        k = c.recv(65536)
        if not k:
            closed = True
            break
        out += k
except socket.timeout:
    pass
c.close()
heads = re.findall(rb"HTTP/1\.1 (\d{3}) ", out)
ok = heads[:1] == [b"200"] and (len(heads) == 2 or closed)
print("%s: two HEADs in one write -> %s, %s" % ("ok" if ok else "FAIL", heads,
                                               "closed" if closed else "left open"))
bad += not ok
sys.exit(1 if bad else 0)
PY
kill $LPID
wait $LPID || fail "hpt-live exit status $? after SIGTERM"
pass "hpt-live: paths with %00 are a 400; pipelined requests are answered in order"
