#!/bin/sh
# Bad input: --eval-batches 2147483647 was accepted and the final
# validation never ended: more global batches than the validation shards
# hold are refused.
. "$HPT_SRC/tests/lib.sh"
need_corpus
expect_error 2 "\-\-eval-batches 2147483647: .* exceed the [0-9]+ validation samples .*use at most [0-9]+" \
  "$TRAIN" --model tiny --data "$CORPUS" --seq-len 32 --batch 2 --steps 1 --eval-batches 2147483647
