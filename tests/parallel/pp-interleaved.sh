#!/bin/sh
# The interleaved 1F1B schedule (--pp-schedule interleaved --pp-virtual V:
# Narayanan et al. 2021, section 2.2) trains like one rank: per-step loss,
# lr, grad norm and validation loss over 3 steps and the exported weights
# within 1e-5 (tests/helpers/compare_runs.py) for a tiny model of 8 layers
# at PP 2 x V 2 (4 micro-batches), PP 4 x V 2 (8 micro-batches, a layer per
# chunk), PP 2 x V 2 with TP 2 and sequence parallelism and selective
# recomputation, PP 2 x V 2 x DP 2 with ZeRO-1 and full recomputation, with
# ZeRO-2 (gradients accumulated in the shard), with ZeRO-3 (each chunk's
# layers gathered as the schedule reaches them, the prefetch running on
# into the next chunk in unit order), with tied embeddings (the
# first stage's embedding and the last stage's copy), and an uneven
# --pp-split of P x V counts. Against 1F1B at PP 2 the loss is bitwise
# (each layer's work and each parameter's accumulation over micro-batches
# in the same order); the gradient norm is not (its sum of squares runs over
# other per-rank partitions of the layers). The schedule itself: per stage,
# the ordered forwards and backwards (chunk, micro-batch) of a traced step
# equal Megatron's interleaved order for p = 4, m = 8, V = 2, with
# (p - s - 1) x 2 + (V - 1) x p warm-up forwards on stage s. Checkpoints
# hold global tensors: a 1F1B checkpoint resumed interleaved, and an
# interleaved one at 1F1B, compute the next step's loss bitwise as the
# schedule that wrote it; interleaved resumed interleaved is bitwise the
# straight run.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1   # up to 4 ranks on 2 cores
tiny8_configs   # $WORK/t8.json, $WORK/t8tied.json (tests/helpers/lib.sh)
A="--data $CORPUS --seq-len 32 --steps 3 --lr 1e-3 --warmup 2 --clip 0.5 --eval-interval 3 --eval-batches 1 --quiet"
M8="--model $WORK/t8.json $A"
IL="--pp-schedule interleaved --pp-virtual"
run() { run_train "$@"; } # NAME RANKS ARGS... (tests/helpers/lib.sh)
run ref 1 $M8 --batch 8 --export "$WORK/ref.h5"
run reft 1 --model "$WORK/t8tied.json" $A --batch 8 --export "$WORK/reft.h5"
run i22 2 $M8 --batch 2 --grad-accum 4 --pp 2 $IL 2 --export "$WORK/i22.h5"
run f22 2 $M8 --batch 2 --grad-accum 4 --pp 2 --export "$WORK/f22.h5"
run i42 4 $M8 --batch 1 --grad-accum 8 --pp 4 $IL 2 --export "$WORK/i42.h5" --trace-steps 2
run tp 4 $M8 --batch 2 --grad-accum 4 --tp 2 --pp 2 $IL 2 --sequence-parallel --recompute selective \
  --export "$WORK/tp.h5"
run dp 4 $M8 --batch 1 --grad-accum 4 --pp 2 --dp 2 --zero 1 --recompute full $IL 2 --export "$WORK/dp.h5"
run z2 4 $M8 --batch 1 --grad-accum 4 --pp 2 --dp 2 --zero 2 $IL 2 --export "$WORK/z2.h5"
run z3 4 $M8 --batch 1 --grad-accum 4 --pp 2 --dp 2 --zero 3 $IL 2 --export "$WORK/z3.h5"
run tied 2 --model "$WORK/t8tied.json" $A --batch 2 --grad-accum 4 --pp 2 $IL 2 --export "$WORK/tied.h5"
run split 2 $M8 --batch 2 --grad-accum 4 --pp 2 $IL 2 --pp-split 3,1,1,3 --export "$WORK/split.h5"
grep -q "layout TP 1 x PP 2 x DP 1 on 2 ranks" "$WORK/i22.out" || fail "i22: banner"
grep -q "interleaved 1F1B, 2 model chunks per stage" "$WORK/i22.out" ||
  fail "i22: the banner does not name the schedule: $(grep layout "$WORK/i22.out")"
"$PYTHON" "$HPT_SRC/tests/helpers/compare_runs.py" "$WORK" 3 ref=i22,f22,i42,tp,dp,z2,z3,split reft=tied ||
  fail "interleaved runs differ from one rank"
cut -f1,2 "$WORK/i22/log.tsv" > "$WORK/i22.loss" && cut -f1,2 "$WORK/f22/log.tsv" > "$WORK/f22.loss"
cmp "$WORK/i22.loss" "$WORK/f22.loss" || fail "i22: the losses are not bitwise those of 1F1B at PP 2"
# the schedule, from the trace of step 2 (PP 4, V 2, 8 micro-batches)
"$PYTHON" - "$WORK/i42/metrics.h5" <<'PY' || fail "i42: not Megatron's interleaved order"
import sys
import h5py
P, V, M = 4, 2, 8
tr = h5py.File(sys.argv[1], "r")["trace"][:]
bad = []
for s in range(P):
    ev = sorted((r for r in tr if r["rank"] == s and r["name"] in (b"forward", b"backward")),
                key=lambda r: r["t_start"])
    got = [(r["name"][0:1].decode().upper(), int(r["micro"])) for r in ev]
    total, warm = M * V, (M * V if M == P else min(M * V, (P - s - 1) * 2 + (V - 1) * P))
    micro = lambda k: (k // (P * V)) * P + k % P
    order = [("F", micro(k)) for k in range(warm)]
    for k in range(total - warm):
        order += [("F", micro(warm + k)), ("B", micro(k))]
    order += [("B", micro(k)) for k in range(total - warm, total)]
    if got != order:
        bad.append(f"stage {s}: {got}\n  expected {order}")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
# resume across schedules (checkpoints hold global tensors): the step after
# the resume computes its loss from the loaded weights alone, so it is
# bitwise the loss of the schedule that wrote them
loss3() { awk -F'\t' 'NR == 4 { print $2 }' "$WORK/$1/log.tsv"; }
run b1 2 $M8 --batch 2 --grad-accum 4 --pp 2 --stop-at 2
mkdir -p "$WORK/r1" && cp -r "$WORK/b1/checkpoints" "$WORK/b1/log.tsv" "$WORK/r1/"
run r1 2 $M8 --batch 2 --grad-accum 4 --pp 2 $IL 2
grep -q "resumed from .*written by TP 1 x PP 2 x DP 1" "$WORK/r1.out" || fail "r1 did not resume"
[ "$(loss3 r1)" = "$(loss3 f22)" ] || fail "r1: 1F1B -> interleaved: step 3 loss $(loss3 r1), 1F1B's $(loss3 f22)"
run b2 2 $M8 --batch 2 --grad-accum 4 --pp 2 $IL 2 --stop-at 2
for sched in r2 r3; do
  mkdir -p "$WORK/$sched" && cp -r "$WORK/b2/checkpoints" "$WORK/b2/log.tsv" "$WORK/$sched/"
done
run r2 2 $M8 --batch 2 --grad-accum 4 --pp 2 $IL 2
cmp "$WORK/i22/log.tsv" "$WORK/r2/log.tsv" || fail "r2: interleaved resumed interleaved differs from the straight run"
run r3 2 $M8 --batch 2 --grad-accum 4 --pp 2
[ "$(loss3 r3)" = "$(loss3 i22)" ] || fail "r3: interleaved -> 1F1B: step 3 loss $(loss3 r3), interleaved's $(loss3 i22)"
pass "interleaved 1F1B equals one rank (PP 2/4 x V 2, TP 2 + SP, DP 2 ZeRO-1/2, tied, uneven split), Megatron's order, resumes across schedules"
