#!/bin/sh
# hpt-live's GET /metrics scraped by a real Prometheus server (issue 32,
# docs/LIVE.md "Prometheus"): Prometheus (Debian's prometheus package) runs
# on loopback with a generated config (scrape_interval 1s, the token file as
# its Bearer credentials) and scrapes hpt-live while it follows a real
# 2-rank tiny hpt-train run; the test asks Prometheus's HTTP API
# (/api/v1/query) for hpt_step, hpt_loss and hpt_run_state and compares them
# with metrics.h5's newest row (h5py) once the run finished (and the state
# "live" while it ran). Also: promtool check rules on the shipped rules and
# the example config, promtool check metrics on a /metrics answer, 403
# without a token and with a wrong Bearer, ?token= accepted,
# --prometheus-top-k 1 bounds the slowest-rank series to one (the slowest
# rank of the newest row; quantiles 0 and 1 its min and max).
. "$HPT_SRC/tests/helpers/lib.sh"
[ -x "$HPT_BUILD/src/hpt-live" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
PROM=$(command -v prometheus) || { echo "SKIP: prometheus not installed (Debian package prometheus; setup.sh installs it)"; exit 77; }
PROMTOOL=$(command -v promtool) || { echo "SKIP: promtool not installed (Debian package prometheus)"; exit 77; }
"$PYTHON" -c "import h5py" 2>/dev/null || { echo "SKIP: python3-h5py missing"; exit 77; }
need_corpus
export OMP_NUM_THREADS=1

"$PROMTOOL" check rules "$HPT_SRC/share/prometheus/hpt-rules.yml" || fail "promtool check rules share/prometheus/hpt-rules.yml"
# the example config, with its absolute paths pointed at this tree
sed -e "s|/usr/share/hpt/prometheus/hpt-rules.yml|$HPT_SRC/share/prometheus/hpt-rules.yml|" \
  -e "s|/etc/hpt/live-token|$WORK/token|" "$HPT_SRC/share/prometheus/prometheus-scrape.yml" \
  > "$WORK/example.yml"
echo "0123456789abcdef0123456789abcdef" > "$WORK/token"
"$PROMTOOL" check config "$WORK/example.yml" || fail "promtool check config on share/prometheus/prometheus-scrape.yml"

"$HPT_BUILD/src/hpt-live" --port 0 --token-file "$WORK/token" --prometheus-top-k 1 "$WORK/run" \
  > "$WORK/live.out" 2> "$WORK/live.err" &
LIVE=$!
PROMPID=
trap 'kill $LIVE $PROMPID 2>/dev/null; rm -rf "$WORK"' EXIT
for i in $(seq 1 150); do grep -q "token=" "$WORK/live.out" && break; sleep 0.2; done
PORT=$(sed -n 's|.*http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$WORK/live.out" | head -1)
[ -n "$PORT" ] || { cat "$WORK/live.out" "$WORK/live.err"; fail "hpt-live printed no URL"; }
PPORT=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$WORK/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $HPT_SRC/share/prometheus/hpt-rules.yml
scrape_configs:
  - job_name: hpt-live
    metrics_path: /metrics
    authorization:
      type: Bearer
      credentials_file: $WORK/token
    static_configs:
      - targets: ["127.0.0.1:$PORT"]
EOF
"$PROM" --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$PPORT" > "$WORK/prom.log" 2>&1 &
PROMPID=$!
export MPIEXEC TRAIN CORPUS PORT PPORT PROMTOOL
timeout 600 "$PYTHON" - "$WORK" <<'PY' || { echo "--- hpt-live"; cat "$WORK/live.err"; echo "--- train"; cat "$WORK/train.out"; echo "--- prometheus"; tail -20 "$WORK/prom.log"; fail "Prometheus scraping hpt-live"; }
import json, os, subprocess, sys, time, urllib.error, urllib.parse, urllib.request
import h5py
work = sys.argv[1]
live = "http://127.0.0.1:%s" % os.environ["PORT"]
prom = "http://127.0.0.1:%s" % os.environ["PPORT"]
token = open(work + "/token").read().strip()

def get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode(errors="replace")
    except (urllib.error.URLError, ConnectionError):
        return None, None, ""

def query(q):
    """{frozenset(labels): value} of the instant query q, {} if none yet."""
    s, _, body = get(prom + "/api/v1/query?query=" + urllib.parse.quote(q))
    if s != 200:
        return {}
    d = json.loads(body)
    assert d["status"] == "success", d
    return {frozenset((k, v) for k, v in r["metric"].items() if k not in ("instance",)):
            float(r["value"][1]) for r in d["data"]["result"]}

def wait(what, pred, tries=600):
    for _ in range(tries):
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)

# authentication: the same token as the page, as ?token= or Bearer
s, _, body = get(live + "/metrics")
assert s == 403, "GET /metrics without a token answered %s: %r" % (s, body[:200])
s, _, body = get(live + "/metrics", {"Authorization": "Bearer wrong-token-0123456789"})
assert s == 403, "GET /metrics with a wrong Bearer answered %s: %r" % (s, body[:200])
s, _, _ = get(live + "/metrics?token=" + token)
assert s == 200, "GET /metrics?token= answered %s" % s
print("no token: 403, wrong Bearer: 403, ?token=: 200")

wait("Prometheus to scrape hpt-live (up == 1)",
     lambda: query('up{job="hpt-live"}') and list(query('up{job="hpt-live"}').values())[0] == 1)
w = wait("hpt_run_state waiting", lambda: query('hpt_run_state{state="waiting"} == 1'))
print("before the run: waiting", w)

train = [os.environ["MPIEXEC"], "-n", "2", os.environ["TRAIN"], "--model", "tiny", "--data",
         os.environ["CORPUS"], "--seq-len", "32", "--batch", "1", "--quiet",
         "--metrics-interval", "1", "--steps", "40", "--save-every", "20",
         "--fault-slow-rank", "1", "--fault-slow-ms", "150", "--run-dir", work + "/run"]
out = open(work + "/train.out", "w")
trainer = subprocess.Popen(train, stdout=out, stderr=subprocess.STDOUT)
# while the job runs: Prometheus sees it live, with steps
lv = wait("hpt_run_state{state=\"live\"} == 1 in Prometheus while the job runs",
          lambda: query('hpt_run_state{state="live"} == 1') if trainer.poll() is None else True)
assert lv is not True, "the job ended before Prometheus saw it live (see train.out)"
st = wait("hpt_step while live", lambda: query("hpt_step"))
print("while running: live, hpt_step", list(st.values()))
rc = trainer.wait(timeout=500)
assert rc == 0, "hpt-train exit status %d" % rc

with h5py.File(work + "/run/metrics.h5", "r") as f:
    steps, losses = f["steps/step"][:], f["steps/loss"][:]
    rank_t = [float(x) for x in f["ranks/step_time"][-1]]
    nranks = len(rank_t)
last_step, last_loss = int(steps[-1]), float(losses[-1])
assert last_step == 40, "metrics.h5's newest row is step %d, not 40" % last_step
wait("hpt_run_state{state=\"finished\"} == 1",
     lambda: query('hpt_run_state{state="finished"} == 1'))
got = wait("hpt_step == %d" % last_step,
           lambda: (lambda q: q if q and list(q.values())[0] == last_step else None)(query("hpt_step")))
labels = dict(next(iter(got)))
# the exposed job label ("" here: no Slurm) meets the scrape's job label:
# Prometheus's own job label; ours is slurm_job (empty outside Slurm: dropped)
assert labels["run"] == "run" and labels["job"] == "hpt-live" and \
    labels.get("slurm_job", "") == "" and "exported_job" not in labels, labels
loss = list(query("hpt_loss").values())
assert len(loss) == 1 and abs(loss[0] - last_loss) <= 1e-12 * abs(last_loss), \
    "hpt_loss in Prometheus %r, metrics.h5's newest row %r (step %d)" % (loss, last_loss, last_step)
print("finished: hpt_step %d and hpt_loss %r equal metrics.h5's newest row" % (last_step, last_loss))
ck = query("hpt_events_total")
assert any(dict(k)["kind"] == "checkpoint_save" and v >= 2 for k, v in ck.items()), ck
assert query("hpt_seconds_since_last_checkpoint"), "no hpt_seconds_since_last_checkpoint"
slow = query("hpt_slowest_rank_step_seconds")
assert len(slow) == 1, "--prometheus-top-k 1 yet %d slowest-rank series: %r" % (len(slow), slow)
(k, v), = slow.items()
want = max(range(nranks), key=lambda i: rank_t[i])
assert dict(k)["rank"] == str(want) and v == rank_t[want], \
    "slowest rank %r, metrics.h5's newest row: rank %d %r" % (slow, want, rank_t)
qs = {dict(k)["quantile"]: v for k, v in query("hpt_rank_step_seconds").items()}
assert sorted(qs) == ["0", "0.5", "0.9", "1"], qs
assert qs["0"] == min(rank_t) and qs["1"] == max(rank_t), (qs, rank_t)
assert list(query("hpt_rank_step_seconds_count").values()) == [nranks]
print("events, checkpoint age, quantiles over ranks, the top-1 slowest rank agree with metrics.h5")

s, ctype, body = get(live + "/metrics", {"Authorization": "Bearer " + token})
assert s == 200 and ctype == "text/plain; version=0.0.4; charset=utf-8", (s, ctype)
open(work + "/metrics.txt", "w").write(body)
chk = subprocess.run([os.environ["PROMTOOL"], "check", "metrics"], input=body, text=True,
                     capture_output=True)
assert chk.returncode == 0, "promtool check metrics: %s%s" % (chk.stdout, chk.stderr)
print("promtool check metrics: clean")
PY
kill $LIVE
wait $LIVE || fail "hpt-live exit status $? after SIGTERM"
pass "Prometheus scrapes hpt-live's /metrics following a 2-rank run: hpt_step and hpt_loss equal metrics.h5's newest row"
