#!/bin/sh
# Tensor, pipeline and data parallelism train exactly like one rank: with
# the same global batch, every (TP,PP,DP) in {1,2}^3 (DP with bucketed
# all-reduce or ZeRO-1; (2,2,2) with ZeRO-1), TP=4, PP=4 with 4 micro-batches,
# DP=4, 1F1B and GPipe, fewer micro-batches than stages, an explicit
# --pp-split, tied embeddings (DP, TP and across PP stages), and a GQA config
# with a vocabulary not divisible by TP → per-step loss, grad norm and
# validation loss over 20 steps within 1e-5 relative of the single-rank run, and the final
# weights (gathered and exported to HDF5) within 1e-5 (‖a−b‖/‖b‖ per tensor).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1   # up to 4 ranks on 2 cores
A="--model tiny --data $CORPUS --steps 20 --seq-len 32 --lr 1e-3 --warmup 2 --clip 0.5 --eval-interval 10 --eval-batches 2 --quiet"
run() { # NAME RANKS ARGS...
  name=$1 n=$2; shift 2
  timeout 300 "$MPIEXEC" -n "$n" "$TRAIN" $A --run-dir "$WORK/$name" --export "$WORK/$name.h5" "$@" \
    > "$WORK/$name.out" 2>&1 || { cat "$WORK/$name.out"; fail "run $name"; }
}
run ref 1 --batch 4
run dp2 2 --batch 2
run dp2z 2 --batch 1 --grad-accum 2 --zero1
run dp4 4 --batch 1
run tp2 2 --batch 4 --tp 2
run tp2dp2z 4 --batch 2 --tp 2 --zero1
run pp2 2 --batch 2 --grad-accum 2 --pp 2
run pp2g 2 --batch 2 --grad-accum 2 --pp 2 --pp-schedule gpipe
run pp2m1 2 --batch 4 --pp 2
run pp2dp2z 4 --batch 1 --grad-accum 2 --pp 2 --zero1
run tp2pp2 4 --batch 2 --grad-accum 2 --tp 2 --pp 2
run tp2pp2dp2z 8 --batch 1 --grad-accum 2 --tp 2 --pp 2 --zero1
run tref 1 --batch 4 --tie-embeddings
run tdp2z 2 --batch 2 --zero1 --tie-embeddings
run ttp2 2 --batch 4 --tp 2 --tie-embeddings
run tpp2 2 --batch 2 --grad-accum 2 --pp 2 --tie-embeddings
# GQA (8 query heads, 4 kv heads) and vocab 8195 = not a multiple of 2 or 4
cat > "$WORK/v.json" <<'JSON'
{"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 8,
 "num_key_value_heads": 4, "vocab_size": 8195, "max_position_embeddings": 256, "rms_norm_eps": 1e-5}
JSON
run vref 1 --batch 4 --model "$WORK/v.json"
run vtp4 4 --batch 4 --tp 4 --model "$WORK/v.json"
run vtp2dp2 4 --batch 2 --tp 2 --model "$WORK/v.json"
# 4 layers for 4 stages
sed 's/"num_hidden_layers": 2/"num_hidden_layers": 4/' "$WORK/v.json" > "$WORK/v4.json"
run v4ref 1 --batch 4 --model "$WORK/v4.json"
run v4pp4 4 --batch 1 --grad-accum 4 --pp 4 --model "$WORK/v4.json"
run v4split 2 --batch 2 --grad-accum 2 --pp 2 --pp-split 1,3 --model "$WORK/v4.json"
grep -q "layout TP 1 x PP 1 x DP 2 (ZeRO-1) on 2 ranks" "$WORK/dp2z.out" || fail "banner does not show the layout"
[ "$(grep -c "^done:" "$WORK/dp4.out")" -eq 1 ] || fail "more than one rank printed progress"
"$PYTHON" "$HPT_SRC/tests/helpers/compare_runs.py" "$WORK" 20 \
  ref=dp2,dp2z,dp4,tp2,tp2dp2z,pp2,pp2g,pp2m1,pp2dp2z,tp2pp2,tp2pp2dp2z tref=tdp2z,ttp2,tpp2 \
  vref=vtp4,vtp2dp2 v4ref=v4pp4,v4split || fail "data-parallel runs differ from one rank"
grep -q "layout TP 4 x PP 1 x DP 1 on 4 ranks" "$WORK/vtp4.out" || fail "banner does not show TP 4"
grep -q "layout TP 2 x PP 2 x DP 2 (ZeRO-1) on 8 ranks, 1F1B" "$WORK/tp2pp2dp2z.out" || fail "banner (2,2,2)"
grep -q "GPipe" "$WORK/pp2g.out" || fail "banner does not show GPipe"
pass "every TP x PP x DP layout (ZeRO-1, 1F1B/GPipe, tied, GQA, padded vocabulary) equals one rank"
