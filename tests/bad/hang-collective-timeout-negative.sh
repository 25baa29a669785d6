#!/bin/sh
# Bad input: a negative --collective-timeout is refused (exit 2).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "\-\-collective-timeout -5: must be >= 0 seconds \(0 = off\)" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --collective-timeout -5
