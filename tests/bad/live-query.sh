#!/bin/sh
# Bad input: hpt-live's query arguments (docs/LIVE.md). Against a real
# metrics file of a 1-rank run: run=abc, run=00, run=-1, run past the last
# id, points=1, points=x, points=+5 on /api/history and from=abc, from=-3 on
# /api/stream, and a valid number followed by a percent-encoded NUL
# (run=0%00, points=5%00, from=0%00) are each a 400 with an {"error": ...}
# naming the argument (a token followed by %00 is a 403);
# ?TOKEN= (the name in another case) and token= with the right value in
# another parameter are a 403; the good request is a 200 (so the 400s are
# not a broken server).
. "$HPT_SRC/tests/helpers/lib.sh"
LIVE="$HPT_BUILD/src/hpt-live"
[ -x "$LIVE" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
need_corpus
export OMP_NUM_THREADS=1
"$TRAIN" --model tiny --data "$CORPUS" --seq-len 16 --batch 1 --steps 3 --quiet --run-dir "$WORK/r" \
  > "$WORK/train.out" 2>&1 || { cat "$WORK/train.out"; fail "training run"; }
printf 'abcdefghijklmnop0123\n' > "$WORK/tok"
"$LIVE" --port 0 --token-file "$WORK/tok" "$WORK/r" > "$WORK/live.out" 2>&1 &
LPID=$!
trap 'kill $LPID 2>/dev/null' EXIT
i=0
until grep -q "serving 1 run at" "$WORK/live.out"; do
  i=$((i + 1)); [ $i -lt 600 ] || { cat "$WORK/live.out"; fail "hpt-live did not start"; }
  kill -0 $LPID 2>/dev/null || { cat "$WORK/live.out"; fail "hpt-live exited"; }
  sleep 0.1
done
BASE=$(sed -n 's|.*serving 1 run at \(http://[^/]*\)/.*|\1|p' "$WORK/live.out")
"$PYTHON" - "$BASE" <<'PY' || fail "query arguments"
import json, sys, urllib.error, urllib.request
base, tok = sys.argv[1], "abcdefghijklmnop0123"
def get(path):
    try:
        with urllib.request.urlopen(base + path, timeout=60) as r:
            return r.status, r.read(200 if "stream" in path else -1)
    except urllib.error.HTTPError as e:
        return e.code, e.read()
bad = 0
def expect(path, code, word=None):
    global bad
    st, body = get(path)
    ok = st == code
    if ok and word:
        try:
            ok = word in json.loads(body)["error"]
        except Exception:
            ok = False
    print("%s: %s -> %d %s" % ("ok" if ok else "FAIL", path, st, body[:120]))
    bad += not ok
expect("/api/history?run=0&token=" + tok, 200)
for q in ("run=abc", "run=00", "run=-1", "run=1", "run=", "run=0x0", "run=0%00", "run=0%001"):
    expect("/api/history?%s&token=%s" % (q, tok), 400, "run=ID")
for q in ("points=1", "points=x", "points=+5", "points=02", "points=5%00"):
    expect("/api/history?run=0&%s&token=%s" % (q, tok), 400, "points=N")
for q in ("from=abc", "from=-3", "from=", "from=01", "from=0%00"):
    expect("/api/stream?%s&token=%s" % (q, tok), 400, "from=SEQ")
expect("/api/history?run=0&TOKEN=" + tok, 403)
expect("/api/history?run=0&Token=" + tok, 403)
expect("/api/history?run=0&tok=" + tok, 403)
expect("/api/history?run=0&token=" + tok + "%00", 403)
expect("/api/stream?from=0&token=" + tok, 200)
sys.exit(1 if bad else 0)
PY
pass "hpt-live refuses bad query arguments with 400/403 naming the argument"
