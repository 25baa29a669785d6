#!/bin/sh
# Bad input: an unknown preset lists the presets.
. "$HPT_SRC/tests/helpers/lib.sh"
expect_error 2 "model 'llama9': unknown preset .*tiny, small" "$TRAIN" --model llama9 --data "$WORK" --steps 1
