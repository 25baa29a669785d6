#!/bin/sh
# Bad input: --lr 0 and --lr -1 are refused.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "\-\-lr 0: must be > 0" "$TRAIN" --model tiny --data "$CORPUS" --lr 0
expect_error 2 "\-\-lr -1: must be > 0" "$TRAIN" --model tiny --data "$CORPUS" --lr -1
