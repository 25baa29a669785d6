#!/bin/sh
# Bad input: an unknown --precision is refused, naming the allowed values.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "\-\-precision 'fp16': expected fp32, tf32 or bf16" \
  "$TRAIN" --model tiny --data "$CORPUS" --precision fp16
expect_error 2 "\-\-precision '': expected fp32, tf32 or bf16" \
  "$TRAIN" --model tiny --data "$CORPUS" --precision ''
