#!/bin/sh
# Bad input: --batch 0, --batch -2 and --grad-accum 0 are refused.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "\-\-batch 0: must be > 0" "$TRAIN" --model tiny --data "$CORPUS" --batch 0
expect_error 2 "\-\-batch -2: must be > 0" "$TRAIN" --model tiny --data "$CORPUS" --batch -2
expect_error 2 "\-\-grad-accum 0: must be > 0" "$TRAIN" --model tiny --data "$CORPUS" --grad-accum 0
