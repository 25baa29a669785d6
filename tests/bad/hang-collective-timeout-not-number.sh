#!/bin/sh
# Bad input: a non-numeric --collective-timeout is refused (exit 2).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "\-\-collective-timeout '5min': not a finite number" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --collective-timeout 5min
