#!/bin/sh
# Bad input: --sequence-parallel splits a micro-batch's batch x seq-len
# tokens into TP equal parts; 1 x 33 tokens over --tp 2 is refused (exit 2)
# before any collective, not padded; hpt-plan refuses the same layout
# (exit 2) instead of planning it. --tp 1 --sequence-parallel runs with one
# warning saying it does nothing.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
expect_error 2 "\-\-sequence-parallel: a micro-batch of \-\-batch 1 x \-\-seq-len 33 = 33 tokens does not split into \-\-tp 2 equal parts" \
  "$MPIEXEC" -n 2 "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 1 --seq-len 33 --tp 2 \
  --sequence-parallel
expect_error 2 "\-\-sequence-parallel: a micro-batch of \-\-micro-batch 1 x \-\-seq-len 17 = 17 tokens does not split into \-\-tp 2 equal parts" \
  "$HPT_BUILD/src/hpt-plan" --model tiny --cluster cpu-local --tp 2 --seq-len 17 --micro-batch 1 \
  --global-batch 1 --sequence-parallel
"$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 1 --seq-len 16 --tp 1 --sequence-parallel \
  --eval-interval 0 --quiet > "$WORK/tp1.out" 2>&1 || { cat "$WORK/tp1.out"; fail "--tp 1 --sequence-parallel run"; }
[ "$(grep -c "warning: --sequence-parallel .* with --tp 1 there is nothing to split" "$WORK/tp1.out")" -eq 1 ] ||
  { cat "$WORK/tp1.out"; fail "--tp 1 --sequence-parallel: no single warning"; }
pass "indivisible sequence-parallel micro-batch refused (hpt-train, hpt-plan); --tp 1 warned"
