#!/bin/sh
# hpt-metrics report (issue 13): the report of a real 2-rank run with a NaN
# injected at step 5 is one self-contained HTML file (no src=/href= to
# another file), and headless chromium (Debian's, driven by playwright-core)
# opened on it with every request refused and the network off makes no
# request, shows every step of the file in each chart, and holds the values
# h5py reads (columns bit for bit, rank x step busy/step time, events
# newest first with the skipped step, the segment; the throughput drops
# forced at steps 30-38 one entry and one shaded span, every event of the
# file counted by the entries), and its goodput panel shows the figures
# `hpt-metrics goodput` prints. Two files give two runs.
# --points 6 downsamples: fewer steps, yet the first and last, the event
# steps and every curve's extremes are kept with their exact values.
# Skipped (77) without node, chromium or npm's playwright-core.
. "$HPT_SRC/tests/helpers/lib.sh"
command -v node >/dev/null 2>&1 || { echo "SKIP: node missing (setup.sh installs it)"; exit 77; }
[ -x "${HPT_CHROMIUM:-/usr/bin/chromium}" ] || { echo "SKIP: chromium missing (setup.sh installs it)"; exit 77; }
[ -d "$HPT_SRC/node_modules/playwright-core" ] || { echo "SKIP: playwright-core missing (npm ci in $HPT_SRC)"; exit 77; }
need_corpus
"$PYTHON" -c "import h5py, numpy" || fail "python3-h5py missing (setup.sh installs it)"
export OMP_NUM_THREADS=1
HM="$HPT_BUILD/src/hpt-metrics"
"$MPIEXEC" -n 2 "$TRAIN" --model tiny --data "$CORPUS" --seq-len 32 --batch 2 --steps 40 --eval-interval 4 \
  --eval-batches 1 --metrics-interval 2 --fault-nan-steps 5 --fault-nan-rank 1 --quiet --run-dir "$WORK/r" \
  --fault-anomaly throughput_drop:30-38 > "$WORK/r.out" 2>&1 || { cat "$WORK/r.out"; fail "training run"; }
"$HM" report "$WORK/r/metrics.h5" -o "$WORK/report.html" || fail "hpt-metrics report"
[ ! -e "$WORK/report.html.tmp" ] || fail "report left its .tmp"
grep -qiE '<script[^>]* src=|<link[^>]* href="[^d]' "$WORK/report.html" && fail "report.html refers to another file"
grep -q 'window.HPT_DATA = ' "$WORK/report.html" || fail "report.html does not inline the data"
"$PYTHON" "$HPT_SRC/tests/live/h5points.py" "$WORK/r/metrics.h5" > "$WORK/want.json" || fail "h5py read"
# move the report away from the run: it must not need anything beside it
mkdir "$WORK/elsewhere" && mv "$WORK/report.html" "$WORK/elsewhere/"
# the goodput panel holds what `hpt-metrics goodput` prints (3 decimals)
GP=$("$HM" goodput "$WORK/r/metrics.h5" | awk -F'[: ]+' '
  /^wall:/ {w=$2} /^productive:/ {p=$2} /^checkpoint:/ {c=$2} /^validation:/ {v=$2} /^startup:/ {s=$2}
  END {printf "{\"wall\":%s,\"productive\":%s,\"checkpoint\":%s,\"validation\":%s,\"startup\":%s}", w, p, c, v, s}')
echo "hpt-metrics goodput: $GP"
HPT_EXPECT_GOODPUT="$GP" HPT_EXPECT_STATE=finished HPT_EXPECT_FLOOD=throughput_drop:30-38 node "$HPT_SRC/tests/live/report.js" "$WORK/elsewhere/report.html" "$WORK/want.json" \
  ${HPT_LIVE_SCREENSHOT:+"$HPT_LIVE_SCREENSHOT"} || fail "report in chromium"
# two runs overlaid: the same file twice (two entries, one per run)
"$HM" report "$WORK/r/metrics.h5" "$WORK/r/metrics.h5" -o "$WORK/two.html" || fail "report of two files"
HPT_EXPECT_RUNS=2 node "$HPT_SRC/tests/live/report.js" "$WORK/two.html" "$WORK/want.json" || fail "two runs in chromium"
# downsampling keeps extremes
"$HM" report "$WORK/r/metrics.h5" --points 6 -o "$WORK/small.html" || fail "report --points 6"
"$PYTHON" - "$WORK/small.html" "$WORK/want.json" <<'PY' || fail "downsampled report"
import json, sys
text = open(sys.argv[1]).read()
data = json.loads(text.split("window.HPT_DATA = ", 1)[1].split(";\n</script>", 1)[0])
want = json.load(open(sys.argv[2]))
h = data["history"][0]["columns"]
steps, n = h["step"], len(want["step"])
at = {s: i for i, s in enumerate(want["step"])}
assert 0 < len(steps) < n, "not downsampled: %d of %d steps" % (len(steps), n)
assert steps == sorted(set(steps)), "steps not sorted/unique"
assert steps[0] == want["step"][0] and steps[-1] == want["step"][-1], "first/last step lost"
for c in ("loss", "lr", "grad_norm", "clip", "tokens_per_s", "mfu"):
    assert h[c] == [want[c][at[s]] for s in steps], c + ": a kept value differs from h5py"
    fin = [(v, s) for v, s in zip(want[c], want["step"]) if v is not None]
    for v, s in (min(fin), max(fin)):
        assert s in steps or v in h[c], "%s: extreme %r at step %d lost" % (c, v, s)
for e in want["events"]:
    if e["step"] in at:
        assert e["step"] in steps, "event step %d lost" % e["step"]
vs, vl = h["val_step"], h["val_loss"]
wv = dict(zip(want["val_step"], want["val_loss"]))
assert 0 < len(vs) < len(wv), "validation not downsampled: %d of %d" % (len(vs), len(wv))
assert vl == [wv[s] for s in vs], "val_loss differs"
assert min(wv.values()) in vl and max(wv.values()) in vl, "validation extremes lost"
print("downsampled: %d of %d steps, %d of %d validation points, extremes kept" % (len(steps), n, len(vs), len(wv)))
PY
pass "report.html is self-contained and shows the file's values"
