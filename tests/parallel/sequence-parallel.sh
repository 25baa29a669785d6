#!/bin/sh
# Sequence parallelism (--sequence-parallel, Korthikanti et al. 2022,
# section 4.2.2) trains like one rank: TP 2 and TP 4 (GQA, vocabulary not
# divisible by TP), TP 2 x PP 2 (pipeline boundaries carry the sequence
# shard), TP 2 x DP 2 with ZeRO-1, TP 2 x PP 2 x DP 2 with ZeRO-1 and
# selective recomputation, and TP 2 with tied embeddings → per-step loss,
# grad norm and validation loss within 1e-5 relative of the single-rank
# run, and the final weights within 1e-5 per tensor. Every run ends with
# hpt-train's replica check (lib/export.c check_replicas): the RMSNorm
# weights, whose gradients each TP rank computes over its own tokens only,
# must be bitwise identical across the TP ranks — without the sum over TP
# (hpt_model_sp_sum_grads; Megatron-LM#1446) they drift apart and the run
# fails. A run stopped and resumed from its checkpoint equals the straight run.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1   # up to 8 ranks on 2 cores
A="--model tiny --data $CORPUS --steps 6 --seq-len 32 --lr 1e-3 --warmup 2 --clip 0.5 --eval-interval 3 --eval-batches 1 --quiet"
run() { # NAME RANKS ARGS...
  name=$1 n=$2; shift 2
  timeout 300 "$MPIEXEC" -n "$n" "$TRAIN" $A --run-dir "$WORK/$name" --export "$WORK/$name.h5" "$@" \
    > "$WORK/$name.out" 2>&1 || { cat "$WORK/$name.out"; fail "run $name"; }
}
cat > "$WORK/v.json" <<'JSON'
{"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 8,
 "num_key_value_heads": 4, "vocab_size": 8195, "max_position_embeddings": 256, "rms_norm_eps": 1e-5}
JSON
run ref 1 --batch 4
run sp2 2 --batch 4 --tp 2 --sequence-parallel
run sp2pp2 4 --batch 2 --grad-accum 2 --tp 2 --pp 2 --sequence-parallel --comm-stats
run sp2dp2z 4 --batch 2 --tp 2 --zero1 --sequence-parallel
run sp222 8 --batch 1 --grad-accum 2 --tp 2 --pp 2 --zero1 --sequence-parallel --recompute selective \
  --comm-stats
run tref 1 --batch 4 --tie-embeddings
run tsp2 2 --batch 4 --tp 2 --tie-embeddings --sequence-parallel
run vref 1 --batch 4 --model "$WORK/v.json"
run vsp4 4 --batch 4 --tp 4 --model "$WORK/v.json" --sequence-parallel
grep -q "layout TP 2 x PP 1 x DP 1 on 2 ranks, sequence parallel" "$WORK/sp2.out" ||
  fail "banner does not show sequence parallelism"
# hpt-plan --sequence-parallel predicts every rank's calls and bytes per
# step and group exactly (all-gathers, reduce-scatters, the norm-gradient
# all-reduce, the pipeline's sequence shards)
DATA=$(cat "$CORPUS"/train_*.bin "$CORPUS"/val_*.bin | wc -c)
for p in "sp2pp2 --pp 2 --global-batch 4 --micro-batch 2" \
         "sp222 --pp 2 --dp 2 --zero1 --global-batch 4 --micro-batch 1 --recompute selective"; do
  set -- $p; name=$1; shift
  "$HPT_BUILD/src/hpt-plan" --cluster cpu-local --model tiny --seq-len 32 --tp 2 --sequence-parallel \
    --data-bytes "$DATA" --ranks-tsv "$WORK/$name.pred" "$@" > /dev/null || fail "plan $name"
  "$PYTHON" - "$name" "$WORK/$name/comm.tsv" "$WORK/$name.pred" <<'PY' || fail "$name: hpt-plan differs"
import sys
rows = lambda p: [l.rstrip("\n").split("\t") for l in open(p)][1:]
pred = {(r[0], r[1]): r for r in rows(sys.argv[3])}
bad = 0
for r in rows(sys.argv[2]):
    q = pred.get((r[0], r[1]))
    if r[1] != "world" and (float(r[2]), float(r[3])) != (float(q[2]), float(q[3])):
        print(f"{sys.argv[1]} rank {r[0]} {r[1]}: measured {r[2]} calls {r[3]} bytes, predicted {q[2]} {q[3]}")
        bad += 1
print(f"{sys.argv[1]}: hpt-plan's calls and bytes per group equal the measured ones" if not bad else "")
sys.exit(bad > 0)
PY
done
# stopped after step 3 (checkpoint) and resumed: equals sp2 step for step
timeout 300 "$MPIEXEC" -n 2 "$TRAIN" $A --run-dir "$WORK/res" --batch 4 --tp 2 --sequence-parallel \
  --stop-at 3 > "$WORK/res1.out" 2>&1; st=$?
[ "$st" -eq 75 ] || { cat "$WORK/res1.out"; fail "stop-at run exited $st, expected 75"; }
run res 2 --batch 4 --tp 2 --sequence-parallel
cmp "$WORK/sp2/log.tsv" "$WORK/res/log.tsv" || fail "resumed sequence-parallel run differs"
"$PYTHON" "$HPT_SRC/tests/helpers/compare_runs.py" "$WORK" 6 ref=sp2,sp2pp2,sp2dp2z,sp222 tref=tsp2 vref=vsp4 ||
  fail "sequence-parallel runs differ from one rank"
pass "sequence parallelism: TP 2/4, with PP, DP, ZeRO-1, selective recomputation, tied; resume"
