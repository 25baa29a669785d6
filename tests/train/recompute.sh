#!/bin/sh
# Activation recomputation changes memory, not results: --recompute gives
# bitwise identical losses and grad norms (one rank, TP=2, PP=2), and a smaller
# activation block.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
A="--model tiny --data $CORPUS --steps 5 --seq-len 64 --batch 4 --eval-batches 2 --quiet"
"$TRAIN" $A --run-dir "$WORK/a" > "$WORK/a.out" || fail "run without recomputation"
"$TRAIN" $A --recompute --run-dir "$WORK/b" > "$WORK/b.out" || fail "run with recomputation"
cmp "$WORK/a/log.tsv" "$WORK/b/log.tsv" || fail "recomputation changed the results"
mib() { sed -n 's/.*; \([0-9.]*\) MiB of activations per rank/\1/p' "$1"; }
echo "activations: $(mib "$WORK/a.out") MiB without, $(mib "$WORK/b.out") MiB with recomputation"
awk -v a="$(mib "$WORK/a.out")" -v b="$(mib "$WORK/b.out")" 'BEGIN { exit !(b < a) }' ||
  fail "recomputation did not reduce the activation memory"
"$MPIEXEC" -n 2 "$TRAIN" $A --tp 2 --run-dir "$WORK/c" > /dev/null || fail "TP=2 run"
"$MPIEXEC" -n 2 "$TRAIN" $A --tp 2 --recompute --run-dir "$WORK/d" > /dev/null || fail "TP=2 recompute run"
cmp "$WORK/c/log.tsv" "$WORK/d/log.tsv" || fail "recomputation changed the TP=2 results"
B="--model tiny --data $CORPUS --steps 4 --seq-len 64 --batch 2 --grad-accum 2 --eval-batches 1 --quiet --pp 2"
"$MPIEXEC" -n 2 "$TRAIN" $B --run-dir "$WORK/e" > /dev/null || fail "PP=2 run"
"$MPIEXEC" -n 2 "$TRAIN" $B --recompute --run-dir "$WORK/f" > /dev/null || fail "PP=2 recompute run"
cmp "$WORK/e/log.tsv" "$WORK/f/log.tsv" || fail "recomputation changed the PP=2 results"
pass "recomputation: identical results, less activation memory"
