#!/bin/sh
# hpt-live's /api/history segments carry each run segment's sequence
# parallelism and recomputation mode, as /segments records them (docs/LIVE.md,
# as hpt-metrics summary names them): two real hpt-train runs on one file —
# TP 2 with --sequence-parallel --recompute selective, then TP 2 with
# --recompute full — give [true, "selective"] and [false, "full"], equal to
# the file's rows read with h5py; a file written before /segments had those
# fields (tests/helpers/live_synth.py's layout) gives null for both. The stream's
# segment record of the second run, started while the stream is open, too.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
LIVE="$HPT_BUILD/src/hpt-live"
[ -x "$LIVE" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
export OMP_NUM_THREADS=1
T="--model tiny --data $CORPUS --seq-len 32 --batch 1 --steps 2 --eval-interval 0 --eval-batches 1 --quiet --tp 2 --run-dir $WORK/run"
timeout 300 "$MPIEXEC" -n 2 "$TRAIN" $T --sequence-parallel --recompute selective > "$WORK/t1.out" 2>&1 ||
  { cat "$WORK/t1.out"; fail "hpt-train TP 2, sequence parallel, selective recomputation"; }
# hpt-live follows the file; the second run (TP 2, --recompute full) starts
# while the stream is open, so its segment arrives as a stream record
"$PYTHON" "$HPT_SRC/tests/helpers/live_synth.py" "$WORK/old.h5" 10 2 > /dev/null || fail "synthetic file"
"$LIVE" --port 0 "$WORK/run/metrics.h5" "$WORK/old.h5" > "$WORK/live.out" 2> "$WORK/live.err" &
PID=$!
trap 'kill $PID 2>/dev/null; rm -rf "$WORK"' EXIT
for i in $(seq 1 150); do grep -q "token=" "$WORK/live.out" && break; sleep 0.2; done
URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]*' "$WORK/live.out" | head -1)
[ -n "$URL" ] || { cat "$WORK/live.out" "$WORK/live.err"; fail "no URL"; }
"$PYTHON" - "$URL" "$WORK/run/metrics.h5" "$WORK/t2.out" "$MPIEXEC" "$TRAIN" $T --recompute full <<'PY' || fail "segments JSON"
import json, subprocess, sys, threading, time, urllib.request
import h5py
base, tok = sys.argv[1].split("/?token=")
t2_out, t2_cmd = sys.argv[3], [sys.argv[4], "-n", "2"] + sys.argv[5:]
def get(path):
    sep = "&" if "?" in path else "?"
    return json.load(urllib.request.urlopen("%s%s%stoken=%s" % (base, path, sep, tok), timeout=60))
def wait_segments(run, n):
    for _ in range(300):
        h = get("/api/history?run=%d" % run)
        if len(h["segments"]) >= n:
            return h
        time.sleep(0.2)
    raise AssertionError("run %d: %d segments never came" % (run, n))
# the stream, from now on: the second run's segment record
wait_segments(0, 1)
seq = get("/api/history?run=0")["seq"]
stream = []
def follow():
    req = urllib.request.urlopen("%s/api/stream?from=%d&token=%s" % (base, seq, tok), timeout=600)
    ev = None
    for line in req:
        line = line.decode().rstrip("\n")
        if line.startswith("event: "):
            ev = line[7:]
        elif line.startswith("data: ") and ev == "segment":
            d = json.loads(line[6:])
            if d["run"] == 0:
                stream.append((d["sequence_parallel"], d["recompute"]))
threading.Thread(target=follow, daemon=True).start()
time.sleep(1)
with open(t2_out, "w") as out:
    assert subprocess.run(["timeout", "300"] + t2_cmd, stdout=out, stderr=subprocess.STDOUT).returncode == 0, \
        open(t2_out).read()
h = wait_segments(0, 2)
f = h5py.File(sys.argv[2], "r", libver="latest", swmr=True)
rows = f["segments"][:]
f.close()
rc_name = {0: "none", 1: "full", 2: "selective"}
want = [(bool(r["sequence_parallel"]), rc_name[int(r["recompute"])]) for r in rows]
assert want == [(True, "selective"), (False, "full")], want   # what the two runs asked for
got = [(s["sequence_parallel"], s["recompute"]) for s in h["segments"]]
print("real file: /segments", want, "-> /api/history", got)
assert got == want, (got, want)
assert [(s["tp"], s["world"]) for s in h["segments"]] == [(2, 2), (2, 2)], h["segments"]
for _ in range(300):
    if stream:
        break
    time.sleep(0.2)
print("stream segment records:", stream)
assert stream == want[1:], stream
old = wait_segments(1, 1)["segments"]
print("file without the fields:", old)
assert len(old) == 1 and old[0]["sequence_parallel"] is None and old[0]["recompute"] is None, old
PY
pass "/api/history and the stream's segments carry sequence_parallel and recompute (null for older files)"
