#!/bin/sh
# Bad input: a data path that does not exist is named.
. "$HPT_SRC/tests/helpers/lib.sh"
expect_error 3 "$WORK/nope" "$TRAIN" --model tiny --data "$WORK/nope" --steps 1
