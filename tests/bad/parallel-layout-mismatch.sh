#!/bin/sh
# Bad input: --tp x --pp x --dp must equal the number of ranks, TP must divide
# the heads, stages fit the layers; every rank exits non-zero, the message is printed once, nothing hangs.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
expect_error 2 "\-\-tp 1 x \-\-pp 1 x \-\-dp 2 = 2 ranks, but the job has 3 ranks" \
  timeout 120 "$MPIEXEC" -n 3 "$TRAIN" --model tiny --data "$CORPUS" --dp 2 --steps 1
expect_error 2 "3 ranks cannot be split into \-\-tp 1 x \-\-pp 2" \
  timeout 120 "$MPIEXEC" -n 3 "$TRAIN" --model tiny --data "$CORPUS" --pp 2 --steps 1
expect_error 2 "\-\-tp 3 must divide num_attention_heads = 4" \
  timeout 120 "$MPIEXEC" -n 3 "$TRAIN" --model tiny --data "$CORPUS" --tp 3 --steps 1
expect_error 2 "\-\-pp 3: more pipeline stages than the model's 2 layers" \
  timeout 120 "$MPIEXEC" -n 3 "$TRAIN" --model tiny --data "$CORPUS" --pp 3 --steps 1
expect_error 2 "\-\-pp-split '1,2': expected 2 positive layer counts" \
  timeout 120 "$MPIEXEC" -n 2 "$TRAIN" --model tiny --data "$CORPUS" --pp 2 --pp-split 1,2 --steps 1
expect_error 2 "\-\-pp-schedule 'zb': expected 1f1b, gpipe, interleaved or zb-h1" \
  "$TRAIN" --model tiny --data "$CORPUS" --pp-schedule zb
