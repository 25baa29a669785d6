#!/bin/sh
# Bad input: --weight-decay 1e39 would become inf as a float: refused.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "\-\-weight-decay '1e39': outside the range of a float" "$TRAIN" --model tiny --data "$CORPUS" --weight-decay 1e39
