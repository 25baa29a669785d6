#!/bin/sh
# hpt-metrics (C, no Python) against h5py on real metrics files:
# - a 2-rank DP run with a NaN injected on rank 1 at step 3: `csv` equals
#   every /steps column (last row of each step) bit for bit, `-o` writes the
#   same bytes, `csv --ranks COL` equals /ranks/COL; `summary` states the
#   same facts as analysis/hpt_metrics.summary_text (line by line, numbers
#   to 1e-9) and the right ones (final loss, 1 skipped step, the
#   skipped_step event naming rank 1);
# - `-o` onto something that is not a regular file writes into it and leaves
#   it as it was: a FIFO stays a FIFO (and carries the CSV), a link to
#   /dev/null stays a link and /dev/null a character device, a link to
#   /proc/self/fd/1 (= /dev/stdout) with stdout redirected to a file stays a
#   link and the CSV reaches stdout; a link to a regular file stays a link
#   and its target gets the CSV;
# - a file whose columns have unequal lengths (a writer killed mid-append)
#   is read up to the shortest column, by hpt-metrics and hpt_metrics.py;
# - the file of a run killed with kill -9 opens (SWMR read) and `csv` holds
#   the rows h5py finds; its one-rank summary says "the only rank" (no
#   "nanx") and equals the Python summary.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$PYTHON" -c "import h5py, numpy" || fail "python3-h5py missing (setup.sh installs it)"
export OMP_NUM_THREADS=1
HM="$HPT_BUILD/src/hpt-metrics"
F="$WORK/r/metrics.h5"
"$MPIEXEC" -n 2 "$TRAIN" --model tiny --data "$CORPUS" --seq-len 32 --batch 2 --steps 6 --eval-interval 2 \
  --eval-batches 1 --metrics-interval 2 --fault-nan-steps 3 --fault-nan-rank 1 --quiet --run-dir "$WORK/r" \
  > "$WORK/r.out" 2>&1 || { cat "$WORK/r.out"; fail "training run"; }
"$HM" --help | grep -q "usage: hpt-metrics summary FILE" || fail "--help"
"$HM" --version | grep -q "metrics format version 1" || fail "--version"
"$HM" csv "$F" > "$WORK/steps.csv" || fail "csv"
"$HM" csv "$F" -o "$WORK/steps-o.csv" || fail "csv -o"
cmp "$WORK/steps.csv" "$WORK/steps-o.csv" || fail "csv -o differs from standard output"
[ ! -e "$WORK/steps-o.csv.tmp" ] || fail "csv -o left its .tmp"
# -o onto a FIFO, a link to /dev/null, a link to a regular file
mkfifo "$WORK/fifo" || fail "mkfifo"
cat "$WORK/fifo" > "$WORK/fifo.out" &
reader=$!
st=0
"$HM" csv "$F" -o "$WORK/fifo" || st=$?
[ -p "$WORK/fifo" ] || { kill $reader; fail "csv -o replaced the FIFO"; }
[ $st = 0 ] || { kill $reader; fail "csv -o FIFO: exit $st"; }
wait $reader
cmp "$WORK/steps.csv" "$WORK/fifo.out" || fail "csv -o FIFO: the reader got other bytes"
ln -s /dev/null "$WORK/null"
"$HM" csv "$F" -o "$WORK/null" || fail "csv -o link to /dev/null"
[ -L "$WORK/null" ] && [ -c /dev/null ] || fail "csv -o replaced the link to /dev/null"
[ ! -e "$WORK/null.tmp" ] && [ ! -e /dev/null.tmp ] || fail "csv -o /dev/null left a .tmp"
ln -s /proc/self/fd/1 "$WORK/fd1"   # what /dev/stdout is, here with stdout a regular file
"$HM" csv "$F" -o "$WORK/fd1" > "$WORK/fd1.csv" || fail "csv -o link to /proc/self/fd/1"
[ -L "$WORK/fd1" ] || fail "csv -o replaced the link to /proc/self/fd/1"
cmp "$WORK/steps.csv" "$WORK/fd1.csv" || fail "csv -o /proc/self/fd/1: standard output does not hold the CSV"
echo old > "$WORK/target.csv"
ln -s target.csv "$WORK/link.csv"
"$HM" csv "$F" -o "$WORK/link.csv" || fail "csv -o link to a file"
[ -L "$WORK/link.csv" ] || fail "csv -o replaced the link by a file"
cmp "$WORK/steps.csv" "$WORK/target.csv" || fail "csv -o link: the target does not hold the CSV"
# unequal column lengths: /steps/loss one row short, /ranks/comm_dp two
cp "$F" "$WORK/short.h5"
"$PYTHON" - "$WORK/short.h5" <<'PY' || fail "shortening columns"
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f["steps/loss"].resize((f["steps/loss"].shape[0] - 1,))
    d = f["ranks/comm_dp"]
    d.resize((d.shape[0] - 2, d.shape[1]))
PY
"$HM" csv "$WORK/short.h5" > "$WORK/short.csv" || fail "csv of a file with unequal columns"
"$HM" csv --ranks comm_dp "$WORK/short.h5" > "$WORK/short-dp.csv" || fail "csv --ranks comm_dp (short)"
"$HM" summary "$WORK/short.h5" > "$WORK/short-summary" || fail "summary of a file with unequal columns"
for c in busy loss comm_dp bytes_dp; do
  "$HM" csv --ranks "$c" "$F" > "$WORK/ranks-$c.csv" || fail "csv --ranks $c"
done
"$HM" summary "$F" > "$WORK/c-summary" || fail "summary"
cat "$WORK/c-summary"

PYTHONPATH="$HPT_SRC/analysis:$HPT_SRC/tests/helpers" "$PYTHON" - "$F" "$WORK" <<'PY' || fail "hpt-metrics vs h5py"
import csv, re, sys
import numpy as np
import hpt_metrics as hm
from metrics_check import h5_last_rows
path, w = sys.argv[1:]
steps, ranks, raw = h5_last_rows(path)
rows = list(csv.reader(open(w + "/steps.csv")))
head, body = rows[0], rows[1:]
assert set(head) == set(steps) and head[:4] == ["step", "segment", "repeated", "skipped"], head
assert len(body) == len(steps["step"]) == 6, len(body)
for j, col in enumerate(head):
    got = np.array([float(r[j]) for r in body])
    assert np.array_equal(got, steps[col].astype(np.float64), equal_nan=True), (col, got, steps[col])
assert list(steps["skipped"]) == [0, 0, 1, 0, 0, 0], steps["skipped"]
for col in ("busy", "loss", "comm_dp", "bytes_dp"):
    r = list(csv.reader(open(w + "/ranks-%s.csv" % col)))
    assert r[0] == ["step", "rank_0", "rank_1"], r[0]
    got = np.array([[float(x) for x in row] for row in r[1:]])
    assert np.array_equal(got[:, 0], steps["step"]), col
    assert np.array_equal(got[:, 1:], ranks[col], equal_nan=True), (col, got, ranks[col])
# summary: the same lines as the Python module, numbers to 1e-9
c = open(w + "/c-summary").read().splitlines()
p = hm.summary_text(hm.load(path)).splitlines()
assert len(c) == len(p), (c, p)
num = re.compile(r"-?[0-9.]+(?:e[-+]?[0-9]+)?|nan")
for a, b in zip(c, p):
    assert num.sub("#", a) == num.sub("#", b), (a, b)
    for x, y in zip(num.findall(a), num.findall(b)):
        assert x == y or abs(float(x) - float(y)) <= 1e-9 * abs(float(y)), (a, b)
# and the facts themselves
ok = steps["skipped"] == 0
loss = steps["loss"][ok]
assert "steps: 6 (1-6), 6 rows, 0 repeated rows, 1 skipped" in c, c
assert "train loss: final %.6g (step 6), best %.6g (step %d)" % (
    loss[-1], loss.min(), steps["step"][ok][np.argmin(loss)]) in c, c
v = steps["val_loss"][np.isfinite(steps["val_loss"])]
assert len(v) == 3 and "val loss: final %.6g (step 6), best %.6g" % (v[-1], v.min()) in "\n".join(c), c
assert "mean tokens/s: %.6g" % steps["tokens_per_s"][ok].mean() in c, c
assert "tokens: %.0f" % steps["tokens"].sum() in c, c
# MFU in percent, labelled, as the plots show it (the file stores a fraction)
assert "mean MFU (%%): %.6g" % (100 * steps["mfu"][ok].mean()) in c, c
assert "mean MFU (%%): %.6g" % (100 * steps["mfu"][ok].mean()) in p, p
ev = [l for l in c if re.match(r"  step 3 rank 1 skipped_step: ", l)]
assert len(ev) == 1, c
# unequal columns: the 4 rows every column holds (6 rows, comm_dp 2 short)
short = hm.load(w + "/short.h5")
assert short.rows == 4 and list(short.steps["step"]) == [1, 2, 3, 4], short.rows
for name in ("short.csv", "short-dp.csv"):
    body = list(csv.reader(open(w + "/" + name)))[1:]
    assert [int(r[0]) for r in body] == [1, 2, 3, 4], (name, body)
assert "steps: 4 (1-4), 4 rows, 0 repeated rows, 1 skipped" in open(w + "/short-summary").read()
print("hpt-metrics csv/summary equal h5py and hpt_metrics.py")
PY

# kill -9 while the run writes (one process, ~150 ms steps, a row per step)
K="$WORK/k"
"$TRAIN" --model tiny --data "$CORPUS" --seq-len 32 --batch 1 --steps 1000 --eval-interval 0 --metrics-interval 1 \
  --fault-slow-rank 0 --fault-slow-ms 150 --quiet --run-dir "$K" > "$WORK/k.out" 2>&1 &
pid=$!
n=0 i=0
while [ "$n" -lt 4 ]; do   # header + 3 rows
  sleep 0.3; i=$((i + 1)); [ $i -lt 200 ] || { kill -9 $pid; cat "$WORK/k.out"; fail "no rows appeared"; }
  n=$("$HM" csv "$K/metrics.h5" 2>/dev/null | wc -l)
done
kill -9 $pid; wait $pid 2>/dev/null || true
"$HM" summary "$K/metrics.h5" > "$WORK/k-summary" || { cat "$WORK/k-summary"; fail "summary of a killed run's file"; }
"$HM" csv "$K/metrics.h5" > "$WORK/k.csv" || fail "csv of a killed run's file"
PYTHONPATH="$HPT_SRC/tests/helpers" "$PYTHON" - "$K/metrics.h5" "$WORK/k.csv" <<'PY' || fail "killed file"
import csv, sys
import numpy as np
from metrics_check import h5_last_rows
steps, _, raw = h5_last_rows(sys.argv[1])
body = list(csv.DictReader(open(sys.argv[2])))
n = len(steps["step"])
assert n >= 3 and list(steps["step"]) == list(range(1, n + 1)), steps["step"]
assert [int(r["step"]) for r in body] == list(range(1, n + 1)), (len(body), n)
assert np.array_equal([float(r["loss"]) for r in body], steps["loss"]), "loss"
print("killed run: %d rows readable by hpt-metrics and h5py" % n)
PY
PYTHONPATH="$HPT_SRC/analysis" "$PYTHON" - "$K/metrics.h5" "$WORK/k-summary" <<'PY' || fail "one-rank summary"
import sys
import hpt_metrics as hm
c = open(sys.argv[2]).read()
line = [l for l in c.splitlines() if l.startswith("  rank 0: ")]
assert len(line) == 1 and line[0].endswith("(the only rank)") and "nan" not in line[0], c
p = [l for l in hm.summary_text(hm.load(sys.argv[1])).splitlines() if l.startswith("  rank 0: ")]
assert len(p) == 1 and p[0].endswith("(the only rank)"), p
PY
pass "hpt-metrics summary/csv equal h5py's values; a killed run's file opens"
