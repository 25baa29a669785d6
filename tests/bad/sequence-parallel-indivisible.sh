#!/bin/sh
# Bad input: --sequence-parallel splits a micro-batch's batch x seq-len
# tokens into TP equal parts; 1 x 33 tokens over --tp 2 is refused (exit 2)
# before any collective, not padded.
. "$HPT_SRC/tests/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
expect_error 2 "\-\-sequence-parallel: a micro-batch of \-\-batch 1 x \-\-seq-len 33 = 33 tokens does not split into \-\-tp 2 equal parts" \
  "$MPIEXEC" -n 2 "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 1 --seq-len 33 --tp 2 \
  --sequence-parallel
pass "indivisible sequence-parallel micro-batch refused"
