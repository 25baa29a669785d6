#!/bin/sh
# Bad input for hpt-live's GET /metrics (issue 32): --prometheus-top-k 0,
# -1 and abc are refused (exit 2, naming the option); a followed metrics file
# damaged in place (a.h5: the chunk index of /ranks/step_time, the column
# /metrics reads per rank; b.h5: cut to half) makes the run "error" in
# /metrics (hpt_run_state{state="error"} 1, the others 0), every answer a
# 200 that promtool check metrics accepts, and hpt-live keeps serving; a
# run named we"ird\name.h5 is labelled run="we\"ird\\name.h5", its loss +Inf
# and grad norm NaN written as the format spells them.
. "$HPT_SRC/tests/helpers/lib.sh"
LIVE="$HPT_BUILD/src/hpt-live"
[ -x "$LIVE" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
expect_error 2 "hpt-live: --prometheus-top-k 0: must be >= 1" \
  timeout 60 "$LIVE" --port 0 --prometheus-top-k 0 "$WORK/run"
expect_error 2 "hpt-live: --prometheus-top-k -1: must be >= 1" \
  timeout 60 "$LIVE" --port 0 --prometheus-top-k -1 "$WORK/run"
expect_error 2 "hpt-live: --prometheus-top-k 'abc': not an integer" \
  timeout 60 "$LIVE" --port 0 --prometheus-top-k abc "$WORK/run"
"$PYTHON" -c "import h5py" 2>/dev/null || { echo "SKIP: python3-h5py missing"; exit 77; }
PROMTOOL=$(command -v promtool) || PROMTOOL=
[ -n "$PROMTOOL" ] || echo "note: promtool absent (Debian package prometheus): the answers' syntax is not checked"
"$PYTHON" "$HPT_SRC/tests/helpers/live_synth.py" "$WORK/a.h5" 200 4 "busy step_time" 0.05 \
  "$(( $(date +%s) - 100 ))" || fail "synthetic file"
cp "$WORK/a.h5" "$WORK/b.h5"
# c: a name needing escapes in a label value, a newest row with loss +Inf
# and grad_norm NaN
C="$WORK/we\"ird\\name.h5"
cp "$WORK/a.h5" "$C"
"$PYTHON" -c 'import sys, h5py; f = h5py.File(sys.argv[1], "r+"); f["steps/loss"][-1] = float("inf"); f["steps/grad_norm"][-1] = float("nan"); f.close()' "$C" ||
  fail "setting loss +Inf in $C"
echo "0123456789abcdef0123456789abcdef" > "$WORK/token"
"$LIVE" --port 0 --token-file "$WORK/token" "$WORK/a.h5" "$WORK/b.h5" "$C" > "$WORK/live.out" \
  2> "$WORK/live.err" &
PID=$!
trap 'kill $PID 2>/dev/null; rm -rf "$WORK"' EXIT
for i in $(seq 1 150); do grep -q "token=" "$WORK/live.out" && break; sleep 0.2; done
PORT=$(sed -n 's|.*http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$WORK/live.out" | head -1)
[ -n "$PORT" ] || { cat "$WORK/live.out" "$WORK/live.err"; fail "no URL"; }
export PORT PROMTOOL
"$PYTHON" - "$WORK" <<'PY' || { cat "$WORK/live.err"; fail "/metrics on damaged files"; }
import os, re, subprocess, sys, time, urllib.request
import h5py
work = sys.argv[1]
token = open(work + "/token").read().strip()
def metrics(what):
    req = urllib.request.Request("http://127.0.0.1:%s/metrics" % os.environ["PORT"],
                                 headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.status == 200, "%s: /metrics answered %d" % (what, r.status)
        body = r.read().decode()
    if os.environ["PROMTOOL"]:
        c = subprocess.run([os.environ["PROMTOOL"], "check", "metrics"], input=body, text=True,
                           capture_output=True)
        assert c.returncode == 0, "%s: promtool check metrics: %s%s" % (what, c.stdout, c.stderr)
    return body
def state(body, run):
    st = {m.group(1): float(m.group(2)) for m in re.finditer(
        r'^hpt_run_state\{run="%s",slurm_job="",state="([a-z_]+)"\} (\S+)$' % re.escape(run), body, re.M)}
    assert len(st) == 5 and sum(st.values()) == 1, (run, st)
    return [k for k, v in st.items() if v == 1][0]
def wait(what, pred):
    for _ in range(300):
        body = metrics(what)
        if pred(body):
            return body
        time.sleep(0.1)
    raise AssertionError("%s: timed out; last /metrics:\n%s" % (what, body))
def overwrite(path, off, data):
    with open(path, "r+b") as f:
        f.seek(off)
        f.write(data)
def step_time_leaf(path):
    """Offset of the v2 B-tree leaf indexing /ranks/step_time's chunks."""
    with h5py.File(path, "r") as f:
        first = f["ranks/step_time"].id.get_chunk_info(0).byte_offset
    b = open(path, "rb").read()
    leaves = [m.start() for m in re.finditer(b"BTLF", b)
              if first.to_bytes(8, "little") in b[m.start():m.start() + 4096]]
    assert len(leaves) == 1, leaves
    return leaves[0]
read = lambda b: 'hpt_step{run="a.h5",slurm_job=""} 200' in b and 'hpt_step{run="b.h5",slurm_job=""} 200' in b
body = wait("both files read whole", read)
c = 'run="we\\"ird\\\\name.h5",slurm_job=""'
body = wait("c read whole", lambda b: ('hpt_step{%s} 200' % c) in b)
for want in ('hpt_loss{%s} +Inf' % c, 'hpt_grad_norm{%s} NaN' % c):
    assert want in body.splitlines(), "no line %r in /metrics:\n%s" % (want, body)
print("escaped label value, +Inf and NaN:", c)
assert state(body, "a.h5") != "error" and 'hpt_slowest_rank_step_seconds{run="a.h5"' in body, body
overwrite(work + "/a.h5", step_time_leaf(work + "/a.h5") + 8, b"\x5a" * 4)
body = wait("a.h5's /ranks/step_time damaged", lambda b: state(b, "a.h5") == "error")
assert state(body, "b.h5") != "error", "b.h5 (sound) is error too"
assert 'hpt_slowest_rank_step_seconds{run="a.h5"' not in body, "per-rank series of a damaged file"
print("a.h5 (/ranks/step_time damaged): hpt_run_state error 1")
os.truncate(work + "/b.h5", os.path.getsize(work + "/b.h5") // 2)
past = time.time() - 60  # not a file being created
os.utime(work + "/b.h5", (past, past))
wait("b.h5 cut to half", lambda b: state(b, "b.h5") == "error")
print("b.h5 (cut to half): hpt_run_state error 1")
PY
kill -0 $PID || fail "hpt-live died on damaged files"
kill $PID
wait $PID || fail "hpt-live exit status $? after SIGTERM"
pass "--prometheus-top-k 0/-1/abc refused; /metrics on damaged files: run error, valid answers, no crash"
