#!/bin/sh
# Bad input: an unknown option is refused.
. "$HPT_SRC/tests/helpers/lib.sh"
expect_error 2 "\-\-bogus: unknown option" "$TRAIN" --bogus 3
