#!/bin/sh
# The same seed twice gives bitwise identical losses (log.tsv prints every
# value with 17 significant digits); a different seed gives different ones.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
run() { "$TRAIN" --model tiny --data "$CORPUS" --steps 20 --batch 4 --seq-len 64 --grad-accum 2 \
  --eval-interval 10 --eval-batches 2 --seed "$1" --quiet --run-dir "$WORK/$2" > /dev/null || fail "run $2"; }
run 7 a; run 7 b; run 8 c
cmp "$WORK/a/log.tsv" "$WORK/b/log.tsv" || fail "same seed, different losses"
cmp -s "$WORK/a/log.tsv" "$WORK/c/log.tsv" && fail "different seeds gave identical losses"
[ "$(wc -l < "$WORK/a/log.tsv")" -eq 21 ] || fail "log.tsv should have a header and 20 rows"
pass "bitwise identical losses for the same seed"
