#!/bin/sh
# Bad input: --steps 0 and a non-numeric --steps are refused.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "\-\-steps 0: must be > 0" "$TRAIN" --model tiny --data "$CORPUS" --steps 0
expect_error 2 "\-\-steps 'ten': not an integer" "$TRAIN" --model tiny --data "$CORPUS" --steps ten
