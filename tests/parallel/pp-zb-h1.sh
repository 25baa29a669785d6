#!/bin/sh
# The zero-bubble ZB-H1 schedule (--pp-schedule zb-h1: Qi et al. 2024, "Zero
# Bubble Pipeline Parallelism", section 3.1): each backward on a stage
# after the first split into B (input gradients, sent on at once) and a
# deferred W (the linear layers' weight gradients). It trains like one
# rank: per-step loss, lr, grad norm and validation loss over 3 steps and
# the exported weights within 1e-5 (tests/helpers/compare_runs.py) for a
# tiny model of 8 layers at PP 2 (4 micro-batches), PP 4 (8, and 2: fewer
# micro-batches than stages), PP 2 with TP 2 + sequence parallelism +
# selective recomputation, PP 2 x DP 2 with ZeRO-1 and full recomputation,
# PP 2 x DP 2 without ZeRO (the DP all-reduce started by the last W), tied
# embeddings, an uneven --pp-split and context parallelism (CP 2: the
# ring attention's backward inside B). Against 1F1B it is bitwise: log.tsv
# and the exports at PP 2 and PP 4 (B and W passes run in micro-batch
# order, so every gradient element sums the same terms in the same order;
# each GEMM's tiles are the same products). The schedule: per stage, the
# ordered F, B and W passes of a traced step (p = 4, m = 8) equal the
# published ZB-H1 order (built here independently: stage s runs
# p - s - 1 warm-up forwards, then F and B with the oldest pending W after
# every B from the (s+1)-th on, then B and W, then the pending W; stage 0
# runs whole backwards). Resume across schedules: 1F1B for step 1,
# interleaved (V 2) for step 2, zb-h1 for step 3 gives bitwise the
# exports and losses of a straight 1F1B run (no clipping: the grad norm's
# rounding differs between schedules, the gradients do not). kill -9 of
# one rank at random moments of a zb-h1 run checkpointing every step: the
# automatic resume finishes with log.tsv bitwise the uninterrupted run's.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1   # up to 4 ranks on 2 cores
tiny8_configs   # $WORK/t8.json, $WORK/t8tied.json (tests/helpers/lib.sh)
A="--data $CORPUS --seq-len 32 --steps 3 --lr 1e-3 --warmup 2 --clip 0.5 --eval-interval 3 --eval-batches 1 --quiet"
M8="--model $WORK/t8.json $A"
ZB="--pp-schedule zb-h1"
run() { run_train "$@"; } # NAME RANKS ARGS... (tests/helpers/lib.sh)
run ref 1 $M8 --batch 8 --export "$WORK/ref.h5"
run reft 1 --model "$WORK/t8tied.json" $A --batch 8 --export "$WORK/reft.h5"
run f22 2 $M8 --batch 2 --grad-accum 4 --pp 2 --export "$WORK/f22.h5"
run z22 2 $M8 --batch 2 --grad-accum 4 --pp 2 $ZB --export "$WORK/z22.h5"
run f48 4 $M8 --batch 1 --grad-accum 8 --pp 4 --export "$WORK/f48.h5"
run z48 4 $M8 --batch 1 --grad-accum 8 --pp 4 $ZB --export "$WORK/z48.h5" --trace-steps 2
run z42 4 $M8 --batch 4 --grad-accum 2 --pp 4 $ZB --export "$WORK/z42.h5"
run tp 4 $M8 --batch 2 --grad-accum 4 --tp 2 --pp 2 $ZB --sequence-parallel --recompute selective \
  --export "$WORK/tp.h5"
run dp 4 $M8 --batch 1 --grad-accum 4 --pp 2 --dp 2 --zero 1 --recompute full $ZB --export "$WORK/dp.h5"
run dp0 4 $M8 --batch 1 --grad-accum 4 --pp 2 --dp 2 $ZB --export "$WORK/dp0.h5"
run tied 2 --model "$WORK/t8tied.json" $A --batch 2 --grad-accum 4 --pp 2 $ZB --export "$WORK/tied.h5"
run split 2 $M8 --batch 2 --grad-accum 4 --pp 2 $ZB --pp-split 3,5 --export "$WORK/split.h5"
run cp 4 $M8 --batch 2 --grad-accum 4 --pp 2 --cp 2 $ZB --export "$WORK/cp.h5"
grep -q "layout TP 1 x PP 2 x DP 1 on 2 ranks, zero-bubble ZB-H1;" "$WORK/z22.out" ||
  fail "z22: the banner does not name the schedule: $(grep layout "$WORK/z22.out")"
"$PYTHON" "$HPT_SRC/tests/helpers/compare_runs.py" "$WORK" 3 ref=z22,z48,z42,tp,dp,dp0,split,cp reft=tied ||
  fail "zb-h1 runs differ from one rank"
for p in 22:f22 48:f48; do
  z=z${p%%:*} f=${p#*:}
  cmp "$WORK/$f/log.tsv" "$WORK/$z/log.tsv" || fail "$z: log.tsv is not bitwise 1F1B's ($f)"
  h5diff "$WORK/$f.h5" "$WORK/$z.h5" > "$WORK/h5diff.out" 2>&1 ||
    { head "$WORK/h5diff.out"; fail "$z: the exported weights are not bitwise 1F1B's ($f)"; }
done
# the summary sets the measured bubble beside ZB-H1's theory, hpt-plan's
# figure for the same layout (/segments bubble_theory), from C and Python alike
"$HPT_BUILD/src/hpt-metrics" summary "$WORK/z22" | grep "^pipeline bubble" > "$WORK/z22.b" ||
  fail "z22: no pipeline bubble line in the summary"
PYTHONPATH="$HPT_SRC/analysis" "$PYTHON" -c 'import sys, hpt_metrics as h; print(h.summary_text(h.load(sys.argv[1])), end="")' \
  "$WORK/z22/metrics.h5" | grep "^pipeline bubble" > "$WORK/z22.pyb"
cmp -s "$WORK/z22.b" "$WORK/z22.pyb" || { cat "$WORK/z22.b" "$WORK/z22.pyb"; fail "z22: the bubble lines of C and Python differ"; }
"$HPT_BUILD/src/hpt-plan" --model "$WORK/t8.json" --cluster cpu-local --seq-len 32 --pp 2 --global-batch 8 \
  --micro-batch 2 --pp-schedule zb-h1 --json > "$WORK/z22.plan" || fail "plan z22"
"$PYTHON" - "$WORK/z22.b" "$WORK/z22.plan" <<'PY' || fail "z22: the summary's theory is not hpt-plan's ZB-H1 bubble"
import json, re, sys
line = open(sys.argv[1]).read()
m = re.search(r"theory ZB-H1, \(p-1\)z/\(m\+\(p-1\)z\) \(z = \(F\+B-W\)/\(F\+B\+W\) from FLOPs\) = ([0-9.e-]+) \(PP 2, 4 micro-batches\)$", line)
assert m, line
want = json.load(open(sys.argv[2]))["bubble_fraction"]
assert abs(float(m.group(1)) - want) <= 1e-5 * want, (m.group(1), want)
PY
# the schedule, from the trace of step 2 (PP 4, 8 micro-batches)
"$PYTHON" - "$WORK/z48/metrics.h5" <<'PY' || fail "z48: not the ZB-H1 order"
import sys
import h5py
P, M = 4, 8
tr = h5py.File(sys.argv[1], "r")["trace"][:]
bad = []
for s in range(P):
    ev = sorted((r for r in tr if r["rank"] == s and r["name"] in (b"forward", b"backward", b"weight")),
                key=lambda r: r["t_start"])
    got = [r["name"][0:1].decode().upper() + str(int(r["micro"])) for r in ev]
    # ZB-H1 (Qi et al. 2024, figure 3): warm-up as 1F1B; stage s holds back
    # s weight passes, so in the steady phase F, B, then (from the (s+1)-th
    # on) the oldest W; the cool-down B, W; then the rest of the W
    warm = min(P - s - 1, M)
    order = ["F%d" % i for i in range(warm)]
    f = b = w = 0
    f = warm
    for k in range(M - warm):
        order += ["F%d" % f, "B%d" % b]; f += 1; b += 1
        if s and k >= s:
            order.append("W%d" % w); w += 1
    while b < M:
        order.append("B%d" % b); b += 1
        if s:
            order.append("W%d" % w); w += 1
    while s and w < M:
        order.append("W%d" % w); w += 1
    if got != order:
        bad.append(f"stage {s}: {' '.join(got)}\n  expected {' '.join(order)}")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
# resume across schedules: 1F1B -> interleaved V 2 -> zb-h1, no clipping
A=""   # run_train's common options: each run below gives all of its own
C="--model $WORK/t8.json --data $CORPUS --seq-len 32 --steps 3 --lr 1e-3 --warmup 2 --clip 0 --eval-interval 0 --quiet --batch 2 --grad-accum 4 --pp 2"
run straight 2 $C --export "$WORK/straight.h5"
run chain 2 $C --stop-at 1
run chain 2 $C --pp-schedule interleaved --pp-virtual 2 --stop-at 2
grep -q "resumed from .*step_00000001" "$WORK/chain.out" || { cat "$WORK/chain.out"; fail "chain: interleaved did not resume step 1"; }
run chain 2 $C $ZB --export "$WORK/chain.h5"
grep -q "resumed from .*step_00000002" "$WORK/chain.out" || { cat "$WORK/chain.out"; fail "chain: zb-h1 did not resume step 2"; }
cut -f1,2 "$WORK/straight/log.tsv" > "$WORK/s.loss" && cut -f1,2 "$WORK/chain/log.tsv" > "$WORK/c.loss"
cmp "$WORK/s.loss" "$WORK/c.loss" || { paste "$WORK/s.loss" "$WORK/c.loss"; fail "chain: losses are not the straight run's"; }
h5diff "$WORK/straight.h5" "$WORK/chain.h5" > "$WORK/h5diff.out" 2>&1 ||
  { head "$WORK/h5diff.out"; fail "chain: 1F1B -> interleaved -> zb-h1 weights are not bitwise the straight run's"; }
# kill -9 of one rank mid-run (checkpoint every step), automatic resume; 200
# steps, so a fast machine does not finish before the kill lands
K="--model $WORK/t8.json --data $CORPUS --seq-len 32 --batch 1 --grad-accum 4 --pp 2 $ZB --eval-batches 1 --eval-interval 0 --quiet --steps 200 --keep 2"
run_train kref 2 $K
i=0
while [ $i -lt 2 ]; do
  timeout 120 "$MPIEXEC" -n 2 "$TRAIN" $K --save-every 1 --run-dir "$WORK/k" > "$WORK/k$i.out" 2>&1 &
  job=$!
  j=0
  until grep -q "^step [0-9]*: checkpoint" "$WORK/k$i.out"; do
    sleep 0.02; j=$((j + 1))
    [ $j -lt 5000 ] || { cat "$WORK/k$i.out"; fail "kill point $i: no checkpoint reported"; }
  done
  sleep "0.$(printf %03d $(( $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 400 )))"
  kill -9 "$(pgrep -n -f "hpt-train $K")" 2>/dev/null || true
  st=0; wait $job || st=$?
  [ $st != 124 ] || fail "kill point $i: the job hung after the kill"
  grep -q "^done: 200 steps" "$WORK/k$i.out" && fail "kill point $i: the run ended before the kill (raise --steps)"
  i=$((i + 1))
done
timeout 300 "$MPIEXEC" -n 2 "$TRAIN" $K --run-dir "$WORK/k" > "$WORK/kfinal.out" 2>&1 ||
  { cat "$WORK/kfinal.out"; fail "the run after the kills"; }
grep -q "resumed from " "$WORK/kfinal.out" || { cat "$WORK/kfinal.out"; fail "the final run did not resume"; }
cmp "$WORK/kref/log.tsv" "$WORK/k/log.tsv" ||
  { diff "$WORK/kref/log.tsv" "$WORK/k/log.tsv" | head; fail "zb-h1 through 2 kill -9 points differs from the uninterrupted run"; }
pass "zb-h1 equals one rank (PP 2/4, m < p, TP 2 + SP, DP 2 with and without ZeRO-1, tied, uneven split, CP 2), bitwise 1F1B, the published order, resumes 1F1B -> interleaved -> zb-h1 bitwise, survives kill -9"
