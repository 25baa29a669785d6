#!/bin/sh
# Bad input: --adam-eps 1e39 would become inf as a float (the weights went
# NaN and the run exited 0): refused.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "\-\-adam-eps '1e39': outside the range of a float" "$TRAIN" --model tiny --data "$CORPUS" --adam-eps 1e39
