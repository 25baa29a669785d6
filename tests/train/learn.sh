#!/bin/sh
# Learning: the tiny model, 300 steps on the real corpus, must reach a
# validation loss below 6.2 nats — well under ln(8192) = 9.01, the loss of a
# uniform guess (measured here: 5.50).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
BOUND=6.2
"$TRAIN" --model tiny --data "$CORPUS" --steps 300 --batch 8 --seq-len 64 --lr 3e-3 \
  --warmup 30 --eval-interval 100 --run-dir "$WORK/run" > "$WORK/out" 2>&1 || { cat "$WORK/out"; fail "training failed"; }
tail -5 "$WORK/out"
val=$(sed -n 's/.*final val loss \([0-9.]*\).*/\1/p' "$WORK/out")
[ -n "$val" ] || fail "no final val loss printed"
awk -v v="$val" -v b="$BOUND" 'BEGIN { exit !(v < b) }' || fail "val loss $val not below $BOUND"
pass "val loss $val < $BOUND (ln 8192 = 9.01)"
