#!/bin/sh
# hpt-live on metrics files damaged in place (issue 33, item 1): a run
# whose data HDF5 cannot read is "error" with the reason, in /api/runs and
# in /api/history (200, state error; before: state "stopped" with no error
# while every /api/history answered 500).
# a.h5, b.h5: read whole, then bytes overwritten at the same size:
#   a: the chunk-index leaf of /ranks/busy (per-rank values only the
#      history reads) -> error naming /ranks/busy;
#   b: the superblock's root-group address -> error "not a readable HDF5
#      file, or damaged" (the open handle never rereads the superblock:
#      the file is read afresh once it changed in place);
# c.h5: a's damage before hpt-live starts -> error from the first poll;
# d.h5: read whole, then cut to half while /api/history is asked in a loop
#   (the stale handle's reads: transient 500s before) -> every answer 200,
#   state error.
. "$HPT_SRC/tests/helpers/lib.sh"
LIVE="$HPT_BUILD/src/hpt-live"
[ -x "$LIVE" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
"$PYTHON" -c "import h5py" 2>/dev/null || { echo "SKIP: python3-h5py missing"; exit 77; }
"$PYTHON" "$HPT_SRC/tests/helpers/live_synth.py" "$WORK/good.h5" 200 2 "busy step_time" 0.05 \
  "$(( $(date +%s) - 100 ))" || fail "synthetic file"
for f in a b c d; do cp "$WORK/good.h5" "$WORK/$f.h5"; done
cat > "$WORK/damage.py" <<'PY'
import re, struct, sys
import h5py
def busy_leaf(path):
    """Offset of the v2 B-tree leaf indexing /ranks/busy's chunks."""
    with h5py.File(path, "r") as f:
        first = f["ranks/busy"].id.get_chunk_info(0).byte_offset
    b = open(path, "rb").read()
    leaves = [m.start() for m in re.finditer(b"BTLF", b)
              if struct.pack("<Q", first) in b[m.start():m.start() + 4096]]
    assert len(leaves) == 1, leaves
    return leaves[0]
def overwrite(path, off, data):
    with open(path, "r+b") as f:
        f.seek(off)
        f.write(data)
    print("%s: %d bytes overwritten at %d" % (path, len(data), off))
if __name__ == "__main__":
    path, what = sys.argv[1], sys.argv[2]
    if what == "busy":
        overwrite(path, busy_leaf(path) + 8, b"\x5a" * 4)
    else:  # the superblock (v2/v3): root group object header address
        overwrite(path, 36, b"\x5a" * 4)
PY
"$PYTHON" "$WORK/damage.py" "$WORK/c.h5" busy || fail "damage c.h5"
"$LIVE" --port 0 "$WORK/a.h5" "$WORK/b.h5" "$WORK/c.h5" "$WORK/d.h5" > "$WORK/live.out" \
  2> "$WORK/live.err" &
PID=$!
trap 'kill $PID 2>/dev/null; rm -rf "$WORK"' EXIT
for i in $(seq 1 150); do grep -q "token=" "$WORK/live.out" && break; sleep 0.2; done
URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]*' "$WORK/live.out" | head -1)
[ -n "$URL" ] || { cat "$WORK/live.out" "$WORK/live.err"; fail "no URL"; }
"$PYTHON" - "$URL" "$WORK" <<'PY' || { cat "$WORK/live.err"; fail "damaged files"; }
import json, os, sys, time, urllib.error, urllib.request
sys.path.insert(0, sys.argv[2])
from damage import busy_leaf, overwrite
base, tok = sys.argv[1].split("/?token=")
work = sys.argv[2]
def get(path, **q):
    q["token"] = tok
    url = base + path + "?" + "&".join("%s=%s" % kv for kv in q.items())
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
def run(i):
    s, d = get("/api/runs")
    assert s == 200, (s, d)
    return d["runs"][i]
def history(i, name):
    s, h = get("/api/history", run=i)
    assert s == 200, "%s: /api/history answered %d: %s" % (name, s, h)
    return h
def wait(i, name, pred, what):
    for _ in range(300):
        r = run(i)
        if pred(r):
            return r
        time.sleep(0.1)
    raise AssertionError("%s: timed out waiting for %s: %r" % (name, what, run(i)))
def read_whole(r):
    return r["state"] not in ("waiting", "error") and r["attrs"].get("steps") == 200
def is_error(r):
    return r["state"] == "error"
def check_error(i, name, pattern):
    r = wait(i, name, is_error, "state error")
    assert pattern in (r["error"] or ""), "%s: error %r lacks %r" % (name, r["error"], pattern)
    h = history(i, name)
    assert h["state"] == "error" and pattern in (h["error"] or ""), (name, h["state"], h["error"])
    print("%s: %s: %s" % (name, r["state"], r["error"]))
# c: damaged before the start: error without any history request
c = wait(2, "c.h5", lambda r: r["state"] != "waiting", "a first poll")
assert is_error(c), "c.h5 (damaged before the start) is %r, error %r" % (c["state"], c["error"])
check_error(2, "c.h5", "cannot read the per-rank column busy")
for i, name in ((0, "a.h5"), (1, "b.h5"), (3, "d.h5")):
    wait(i, name, read_whole, "the whole file read")
    history(i, name)
overwrite(work + "/a.h5", busy_leaf(work + "/a.h5") + 8, b"\x5a" * 4)
check_error(0, "a.h5", "per-rank column busy")
overwrite(work + "/b.h5", 36, b"\x5a" * 4)
check_error(1, "b.h5", "not a readable HDF5 file, or damaged")
os.truncate(work + "/d.h5", os.path.getsize(work + "/d.h5") // 2)
past = time.time() - 60  # not a file being created (tests/live/live-creating.sh)
os.utime(work + "/d.h5", (past, past))
for k in range(100):  # every answer a 200, stale handle or not
    h = history(3, "d.h5 cut to half (request %d)" % k)
    if h["state"] == "error":
        break
check_error(3, "d.h5", "d.h5")
PY
grep -q "c.h5: .*cannot read the per-rank column busy" "$WORK/live.err" ||
  { cat "$WORK/live.err"; fail "the damage of c.h5 not said on the terminal"; }
kill $PID
wait $PID || fail "hpt-live exit status $? after SIGTERM"
pass "hpt-live: files damaged in place (chunk index, superblock, cut) are 'error' with the reason; /api/history answers 200"
