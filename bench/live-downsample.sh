#!/bin/sh
# bench/live-downsample.sh — hpt-live on a large synthetic metrics file
# (docs/PERFORMANCE.md): the time to read its history at start, the time and
# size of GET /api/history (server-side downsampling), and the size of one
# pushed update (10 new rows).
#
#   bash bench/live-downsample.sh BUILD_DIR [STEPS] [RANKS] [WRITTEN_RANK_COLS]
#
# The file (tests/helpers/live_synth.py) has the layout of docs/METRICS.md: every
# /steps column for STEPS rows, and the /ranks datasets [STEPS, RANKS]
# chunked 64 x 16 as hpt-train writes them. Only the per-rank columns named in WRITTEN_RANK_COLS (default
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
[ -f "$F" ] || /usr/bin/python3 "$(dirname "$0")/../tests/helpers/live_synth.py" "$F" "$STEPS" "$RANKS" "$COLS"
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
