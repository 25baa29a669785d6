#!/bin/sh
# Bad input: --clip 1e-50 would become 0 as a float, silently turning
# clipping off: refused.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "\-\-clip '1e-50': outside the range of a float" "$TRAIN" --model tiny --data "$CORPUS" --clip 1e-50
