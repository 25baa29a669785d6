#!/bin/sh
# Bad input: a global batch larger than the training data (or one whose
# arithmetic would overflow) is refused with the sizes, before training.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "global batch of 4294967294 sequences .* exceeds the [0-9]+ samples" \
  "$TRAIN" --model tiny --data "$CORPUS" --batch 2 --seq-len 32 --grad-accum 2147483647
expect_error 2 "\-\-dp 0: must be >= 1 \(omit \-\-dp to infer it\)" "$TRAIN" --model tiny --data "$CORPUS" --dp 0
expect_error 2 "\-\-fault-nan-steps 'abc'" "$TRAIN" --model tiny --data "$CORPUS" --fault-nan-steps abc
