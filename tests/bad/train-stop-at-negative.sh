#!/bin/sh
# Bad input: --stop-at -1 was accepted and ignored: refused.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "\-\-stop-at -1: must be >= 1" "$TRAIN" --model tiny --data "$CORPUS" --run-dir "$WORK/r" --stop-at -1
