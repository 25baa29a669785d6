#!/bin/sh
# bench/live-downsample.sh — hpt-live on a large synthetic metrics file
# (docs/PERFORMANCE.md): the time to read its history at start, the time and
# size of GET /api/history (server-side downsampling), and the size of one
# pushed update (10 new rows).
#
#   bash bench/live-downsample.sh BUILD_DIR [STEPS] [RANKS] [WRITTEN_RANK_COLS]
#
# The file has the layout of docs/METRICS.md: every /steps column for STEPS
# rows, and the /ranks datasets [STEPS, RANKS] chunked 64 x 16 as hpt-train
# writes them. Only the per-rank columns named in WRITTEN_RANK_COLS (default
# "busy step_time", the heat map's) are written: 500,000 x 1,024 float64 is
# 4.1 GB per column and all 24 would be 98 GB. Unwritten chunks read as NaN
# without disk I/O, so the communication summary costs less than it would on
# a real file. Needs /usr/bin/python3 with h5py and numpy, and curl.
set -eu
BUILD=${1:?usage: live-downsample.sh BUILD_DIR [STEPS] [RANKS] [WRITTEN_RANK_COLS]}
STEPS=${2:-500000}
RANKS=${3:-1024}
COLS=${4:-busy step_time}
# BENCH_DIR=DIR keeps the file there (and reuses one already there)
DIR=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/hpt-live-bench.XXXXXX")}
LIVE=
trap 'kill $LIVE 2>/dev/null; [ -n "${BENCH_DIR:-}" ] || rm -rf "$DIR"' EXIT
F="$DIR/metrics.h5"
t0=$(date +%s.%N)
[ -f "$F" ] || /usr/bin/python3 - "$F" "$STEPS" "$RANKS" "$COLS" <<'PY'
import sys, time, h5py, numpy as np
path, S, W, cols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
step_cols = ["step", "segment", "repeated", "skipped", "wall_time", "loss", "val_loss", "lr",
             "grad_norm", "clip_coef", "tokens", "step_time", "tokens_per_s", "flops", "mfu",
             "noise_g2", "noise_s", "noise_scale"]
rank_cols = ["step_time", "forward", "backward", "optimizer", "data", "pipeline_wait",
             "checkpoint", "comm_tp", "comm_pp", "comm_dp", "comm_mp", "comm_embed", "bytes_tp",
             "bytes_pp", "bytes_dp", "bytes_mp", "bytes_embed", "tokens", "loss", "grad_sumsq",
             "peak_rss", "device_mem", "busy", "nonfinite"]
rng = np.random.default_rng(0)
f = h5py.File(path, "w", libver="latest")
f.attrs["format"] = "hpt-metrics"
f.attrs["format_version"] = np.int32(1)
f.attrs["hpt_version"] = "bench"
f.attrs["model_config"] = '{"hidden_size": 8192}'
f.attrs["flops_per_token"] = 8.4e11
f.attrs["peak_flops_per_rank"] = 989e12
t = np.arange(S, dtype=np.float64)
vals = {"step": np.arange(1, S + 1), "segment": np.zeros(S), "repeated": np.zeros(S),
        "skipped": np.zeros(S), "wall_time": 1.7e9 + 10 * t,
        "loss": 2 + 8 * np.exp(-t / 5e4) + 0.05 * rng.standard_normal(S),
        "val_loss": np.where((t + 1) % 1000 == 0, 2.1 + 8 * np.exp(-t / 5e4), np.nan),
        "lr": 3e-4 * np.minimum(1, (t + 1) / 2000), "grad_norm": 1 + 0.2 * rng.random(S),
        "clip_coef": np.ones(S), "tokens": np.full(S, 4.2e6), "step_time": 10 + rng.random(S),
        "flops": np.full(S, 3.5e18)}
vals["tokens_per_s"] = vals["tokens"] / vals["step_time"]
vals["mfu"] = vals["flops"] / vals["step_time"] / (W * 989e12)
for k in ["noise_g2", "noise_s", "noise_scale"]:
    vals[k] = np.full(S, np.nan)
for k in step_cols:
    dt = {"step": "i8", "segment": "i4", "repeated": "i1", "skipped": "i1"}.get(k, "f8")
    f.create_dataset("steps/" + k, data=vals[k].astype(dt), maxshape=(None,), chunks=(1024,))
t0 = time.time()
for k in rank_cols:
    d = f.create_dataset("ranks/" + k, shape=(S, W), maxshape=(None, None), chunks=(64, 16),
                         dtype="f8", fillvalue=np.nan)
    if k in cols:
        for a in range(0, S, 4096):
            b = min(S, a + 4096)
            d[a:b] = 1 + 0.1 * rng.random((b - a, W))
seg_t = np.dtype([("segment", "i4"), ("first_row", "i8"), ("first_step", "i8"),
                  ("resumed_from", "i8"), ("last_step_before", "i8"), ("world", "i4"), ("tp", "i4"),
                  ("pp", "i4"), ("dp", "i4"), ("zero1", "i4"), ("grad_accum", "i4"),
                  ("micro_batch", "i4"), ("seq_len", "i4"), ("start_time", "f8"),
                  ("flops_per_token", "f8"), ("peak_flops_per_rank", "f8"), ("hpt_version", "S32"),
                  ("slurm_job_id", "S32"), ("host", "S64")])
seg = np.zeros(1, seg_t)
seg[0]["world"], seg[0]["tp"], seg[0]["pp"], seg[0]["dp"] = W, 8, 4, W // 32
seg[0]["resumed_from"] = -1
f.create_dataset("segments", data=seg, maxshape=(None,), chunks=(64,))
ev_t = np.dtype([("step", "i8"), ("wall_time", "f8"), ("rank", "i4"), ("kind", "S24"),
                 ("message", "S256")])
ev = np.zeros(100, ev_t)
ev["step"] = np.linspace(1, S, 100).astype(int)
ev["kind"] = b"checkpoint_save"
f.create_dataset("events", data=ev, maxshape=(None,), chunks=(64,))
f.close()
print(f"wrote {path}: {S} steps x {W} ranks, per-rank columns written: {cols} "
      f"({time.time() - t0:.0f} s)")
PY
echo "file: $(du -h "$F" | cut -f1) ($(( $(date +%s) - ${t0%.*} )) s to write)"
sync
t1=$(date +%s.%N)
"$BUILD/src/hpt-live" --port 0 "$F" > "$DIR/live.out" 2> "$DIR/live.err" &
LIVE=$!
while ! grep -q token= "$DIR/live.out"; do sleep 0.1; done
t2=$(date +%s.%N)
echo "hpt-live: history of $STEPS steps read at start in $(echo "$t2 - $t1" | bc) s (to the URL line)"
URL=$(grep -o 'http://[^ ]*token=[0-9a-f]*' "$DIR/live.out" | head -1)
BASE=${URL%%/\?*}
TOK=${URL##*token=}
for p in 2000 2000 500; do
  curl -s -o "$DIR/h.json" -w "GET /api/history?points=$p: %{time_total} s, %{size_download} bytes\n" \
    "$BASE/api/history?run=0&points=$p&token=$TOK"
done
/usr/bin/python3 - "$DIR/h.json" <<'PY'
import json, sys
h = json.load(open(sys.argv[1]))
print("  points=500 answer: %d steps of %d, heat map %d x %d, %d events" % (
    len(h["columns"]["step"]), h["steps"], len(h["ranks"]["step"]), h["nranks"], len(h["events"])))
PY
# one pushed update: append 10 rows as a SWMR writer and catch the rows record
curl -sN "$BASE/api/stream?token=$TOK" > "$DIR/stream.txt" &
CURL=$!
sleep 1
/usr/bin/python3 - "$F" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r+", libver="latest")
f.swmr_mode = True
n = f["steps/step"].shape[0]
for k, d in f["steps"].items():
    last = d[n - 1]
    d.resize((n + 10,))
    d[n:] = last + np.arange(1, 11) if k == "step" else np.full(10, last)
for k, d in f["ranks"].items():
    d.resize((n + 10, d.shape[1]))
    d[n:] = 1.0
f.flush()
f.close()
PY
for i in $(seq 1 100); do grep -q "^event: rows" "$DIR/stream.txt" && break; sleep 0.2; done
kill $CURL
awk '/^event: rows/{getline; print "stream: one rows record of 10 new steps (all ranks): " length($0) " bytes"}' "$DIR/stream.txt"
echo "hpt-live RSS: $(ps -o rss= -p $LIVE) kB"
