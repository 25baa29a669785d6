"""Checks of hpt-live against real hpt-train runs (tests/live/live.sh).

argv: URL (with ?token=), WORK (the run directory is WORK/run; --on-alert
appends to WORK/alerts.txt). Environment: MPIEXEC, TRAIN, CORPUS. Starts the
trainers itself; never asserts timings (generous polling only)."""
import json, os, re, signal, socket, subprocess, sys, threading, time, urllib.error, urllib.parse
import urllib.request

import h5py
import numpy as np

URL, WORK = sys.argv[1], sys.argv[2]
m = re.match(r"http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]+)$", URL)
assert m, URL
PORT, TOKEN = int(m.group(1)), m.group(2)
BASE = f"http://127.0.0.1:{PORT}"
H5 = os.path.join(WORK, "run", "metrics.h5")


def get(path, token=TOKEN, raw=False):
    """(status, body bytes) of GET path (token appended when not None)."""
    if token is not None:
        path += ("&" if "?" in path else "?") + "token=" + token
    try:
        with urllib.request.urlopen(BASE + path, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def raw_get(path):
    """GET path exactly as given (no normalisation of ../ by the client)."""
    s = socket.create_connection(("127.0.0.1", PORT), timeout=30)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def wait_for(what, cond, limit=300):
    t0 = time.time()
    while time.time() - t0 < limit:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


# ---------------------------------------------------------------- security
for path in ["/", "/api/runs", "/api/history?run=0", "/api/stream", "/api/goodput?run=0",
             "/assets/index.html", "/nonexistent"]:
    st, body = get(path, token=None)
    assert st == 403 and b"runs" not in body and b"<html" not in body, (path, st, body)
    st, body = get(path, token="0" * 32)
    assert st == 403 and b"runs" not in body, (path, st, body)
    st, body = get(path, token=TOKEN[:-1])
    assert st == 403, (path, st)
print("no token / wrong token -> 403 on the page, the API and the stream")
for path in ["/../etc/passwd", "/assets/../../../../etc/passwd", "/assets/..%2f..%2fetc%2fpasswd",
             "/%2e%2e/%2e%2e/etc/passwd", "/assets/%2e%2e/%2e%2e/etc/passwd", "/assets/passwd",
             "/assets/../index.html", "/assets//etc/passwd", "/assets/", "/api/../../etc/passwd"]:
    for p in (path + "?token=" + TOKEN, path):
        st, body = raw_get(p)
        assert st in (400, 403, 404) and b"root:" not in body, (p, st, body[:200])
st, body = get("/")
assert st == 200 and (b"<html" in body.lower() or b"<!doctype" in body.lower()), (st, body[:100])
print("../ and unknown paths refused (403/404), never file contents; / serves index.html")
ss = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True).stdout
mine = [l.split()[3] for l in ss.splitlines() if l.split()[3].endswith(":%d" % PORT)]
assert mine == ["127.0.0.1:%d" % PORT], (mine, ss)
addrs = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
for a in addrs:
    if a.startswith("127.") or a == "::1":
        continue
    try:
        socket.create_connection((a, PORT), timeout=5).close()
        raise AssertionError("hpt-live answers on " + a)
    except OSError:
        pass
print("listens on 127.0.0.1 only (ss: %s; refused on %s)" % (mine, addrs or "no other address"))

# ------------------------------------------------------------------ stream
events, lock = [], threading.Lock()


def follow():
    req = urllib.request.urlopen(f"{BASE}/api/stream?token={TOKEN}", timeout=600)
    assert req.headers["Content-Type"].startswith("text/event-stream")
    ev = None
    for line in req:
        line = line.decode().rstrip("\n")
        if line.startswith("event: "):
            ev = line[7:]
        elif line.startswith("data: "):
            with lock:
                events.append((ev, json.loads(line[6:])))


threading.Thread(target=follow, daemon=True).start()


def seen(kind, pred=lambda d: True):
    with lock:
        return [d for e, d in events if e == kind and pred(d)]


wait_for("the stream's first state", lambda: seen("state"))
train_args = [os.environ["MPIEXEC"], "-n", "2", os.environ["TRAIN"], "--model", "tiny", "--data",
              os.environ["CORPUS"], "--seq-len", "32", "--batch", "1", "--eval-interval", "4",
              "--eval-batches", "1", "--quiet", "--metrics-interval", "1", "--run-dir",
              os.path.join(WORK, "run")]
out1 = open(os.path.join(WORK, "train1.out"), "w")
trainer = subprocess.Popen(train_args + ["--steps", "400", "--fault-nan-steps", "3",
                                         "--fault-slow-rank", "1", "--fault-slow-ms", "150"],
                           stdout=out1, stderr=subprocess.STDOUT)
wait_for("state live", lambda: seen("state", lambda d: d["state"] == "live"))
rows = wait_for("rows of 24 steps in the stream",  # enough to downsample (below)
                lambda: (lambda s: s if len(s) >= 24 else None)(
                    {st for d in seen("rows") for st in d["columns"]["step"]}))
print("stream: state live, rows of steps", sorted(rows)[:10], "...")
al = wait_for("the nonfinite alert in the stream", lambda: seen("alert"))
assert al[0]["rule"] == "nonfinite" and al[0]["step"] == 3 and al[0]["run"] == 0, al
ev = wait_for("the skipped step event", lambda: seen("event", lambda d: d["kind"] == "nonfinite"))
assert ev[0]["step"] == 3 and ev[0]["file_kind"] == "skipped_step", ev
print("stream: alert", al[0], "and event", ev[0]["kind"], "at step", ev[0]["step"])


# ------------------------------------------------------ kill -9 the writer
def writer_pid():
    """The pid holding the writer's flock on metrics.h5.lock (/proc/locks)."""
    s = os.stat(H5 + ".lock")
    want = "%02x:%02x:%d" % (os.major(s.st_dev), os.minor(s.st_dev), s.st_ino)
    for line in open("/proc/locks"):
        f = line.split()
        if "FLOCK" in f and want in f:
            return int(f[f.index("FLOCK") + 3])
    return None


pid = wait_for("the writer's lock", writer_pid)
os.kill(pid, signal.SIGKILL)
trainer.wait(timeout=300)
wait_for("state stopped", lambda: seen("state", lambda d: d["state"] == "stopped"))
st, body = get("/api/runs")
runs = json.loads(body)["runs"]
assert st == 200 and runs[0]["state"] == "stopped" and runs[0]["name"] == "run", runs
assert runs[0]["layout"] == {"tp": 1, "cp": 1, "pp": 1, "dp": 2, "world": 2}, runs[0]["layout"]
print("kill -9 of the writer (pid %d) -> state stopped" % pid)


def file_view():
    """The file as h5py reads it, the last row of each step kept."""
    f = h5py.File(H5, "r", libver="latest", swmr=True)
    step = f["steps/step"][:]
    keep = {int(s): i for i, s in enumerate(step)}
    rows = np.array([keep[s] for s in sorted(keep)])
    cols = {k: f["steps/" + k][:][rows] for k in
            ["step", "loss", "lr", "grad_norm", "clip_coef", "tokens_per_s", "mfu", "val_loss"]}
    busy, st = f["ranks/busy"][:][rows], f["ranks/step_time"][:][rows]
    nseg = len(f["segments"])
    f.close()
    return cols, busy, st, nseg


def same(a, b, what):
    b = [None if not np.isfinite(x) else float(x) for x in b]
    assert list(a) == b, (what, a[:5], b[:5])


def close6(a, b, what):
    """Per-rank matrices are sent to 6 significant digits (docs/LIVE.md)."""
    assert len(a) == len(b), what
    for x, y in zip(a, b):
        assert (x is None) == (not np.isfinite(y)), (what, a, b)
        assert x is None or abs(x - y) <= 5e-6 * abs(y), (what, x, y)


def check_history():
    cols, busy, stt, nseg = file_view()
    st, body = get("/api/history?run=0&points=100000")
    h = json.loads(body)
    assert st == 200, h
    c = h["columns"]
    same(c["step"], cols["step"], "step")
    for k, fk in [("loss", "loss"), ("lr", "lr"), ("grad_norm", "grad_norm"),
                  ("clip", "clip_coef"), ("tokens_per_s", "tokens_per_s"), ("mfu", "mfu")]:
        same(c[k], cols[fk], k)
    v = np.isfinite(cols["val_loss"])
    same(c["val_step"], cols["step"][v], "val_step")
    same(c["val_loss"], cols["val_loss"][v], "val_loss")
    same(h["ranks"]["step"], cols["step"], "ranks.step")
    for i in range(len(busy)):
        close6(h["ranks"]["busy_s"][i], busy[i], "busy_s")
        close6(h["ranks"]["step_s"][i], stt[i], "step_s")
    assert len(h["segments"]) == nseg, h["segments"]
    assert [a["rule"] for a in h["alerts"]] == ["nonfinite"] and h["alerts"][0]["step"] == 3
    return h, cols


h, cols = check_history()
n1 = len(cols["step"])
assert n1 >= 24
# every row the stream sent before the kill carries the file's values
for d in seen("rows"):
    for s, loss in zip(d["columns"]["step"], d["columns"]["loss"]):
        i = list(cols["step"]).index(s)
        assert loss == (float(cols["loss"][i]) if np.isfinite(cols["loss"][i]) else None)
print("history = h5py: %d steps, %d per-rank rows, values equal (NaN as null)" % (n1, n1))

# a small downsampled history keeps the first and last step and the event
st, body = get("/api/history?run=0&points=4")
hd = json.loads(body)
assert hd["columns"]["step"][0] == 1 and hd["columns"]["step"][-1] == n1, hd["columns"]["step"]
assert 3 in hd["columns"]["step"], hd["columns"]["step"]
# at most max(points, 8) + 2 rows besides the event and alert steps
# (lib/live_json.c select_rows); how many events a run has depends on the
# machine's load (slow_rank), so the bound counts them rather than assuming
kept = {e["step"] for e in h["events"]} | {a["step"] for a in h["alerts"]}
bound = max(4, 8) + 2 + len(kept)
assert len(hd["columns"]["step"]) <= bound, (len(hd["columns"]["step"]), bound)
assert n1 <= bound or len(hd["columns"]["step"]) < n1, (n1, bound)
print("points=4: %d of %d steps, first/last/event steps kept" % (len(hd["columns"]["step"]), n1))
for q in ["/api/history?run=1", "/api/history?run=x", "/api/history?run=0&points=1",
          "/api/history?run=-1", "/api/history", "/api/goodput?run=1", "/api/goodput"]:
    st, body = get(q)
    assert st == 400 and b"error" in body, (q, st, body)
# the goodput (the file no longer changes: the writer was killed) as the
# history has it; its parts add up to its wall time
st, body = get("/api/goodput?run=0")
g = json.loads(body)
assert st == 200 and g["run"] == 0 and g["goodput"] == h["goodput"], (st, g, h["goodput"])
g = g["goodput"]
parts = sum(g[k] for k in ("productive", "redone", "checkpoint", "startup", "validation", "between", "other"))
assert g["steps"] == n1 and g["segments"] == 1 and abs(parts - g["wall"]) < 1e-5, g
print("/api/goodput = the history's goodput: %.1f %% of %.3f s" % (100 * g["fraction"], g["wall"]))

# -------------------------------------------------- --on-alert exactly once
lines = wait_for("the --on-alert line", lambda: open(os.path.join(WORK, "alerts.txt")).readlines()
                 if os.path.exists(os.path.join(WORK, "alerts.txt")) else None)
time.sleep(2)  # a second command would have run by now (several polls)
lines = open(os.path.join(WORK, "alerts.txt")).readlines()
assert len(lines) == 1, lines
rule, run, step, value, path = lines[0].rstrip("\n").split("|")
assert (rule, run, step, value) == ("nonfinite", "run", "3", "nan"), lines
assert os.path.samefile(path, H5), path
print("--on-alert ran exactly once:", lines[0].strip())

# ------------------------------------- a new run on the file: a new segment
nseg_before = len(seen("segment"))
out2 = open(os.path.join(WORK, "train2.out"), "w")
t2 = subprocess.Popen(train_args + ["--steps", "5"], stdout=out2, stderr=subprocess.STDOUT)
assert t2.wait(timeout=600) == 0, open(os.path.join(WORK, "train2.out")).read()
wait_for("the new segment in the stream", lambda: len(seen("segment")) > nseg_before)
wait_for("state finished", lambda: seen("state", lambda d: d["state"] == "finished"))
h, cols = check_history()
assert len(h["segments"]) == 2 and h["segments"][1]["step"] == 1, h["segments"]
assert h["state"] == "finished"
assert len(open(os.path.join(WORK, "alerts.txt")).readlines()) == 1
print("a new run on the file: segment", h["segments"][1], "followed live; state finished;"
      " history = h5py again (steps 1-5 from the new segment)")
