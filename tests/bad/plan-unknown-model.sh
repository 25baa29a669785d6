#!/bin/sh
# Bad input (hpt-plan): an unknown model preset lists the presets; a missing config.json is named.
. "$HPT_SRC/tests/helpers/lib.sh"
expect_error 2 "model 'llama9': unknown preset .*llama3-405b" "$HPT_BUILD/src/hpt-plan" --model llama9 --cluster h100-80gb \
  --seq-len 4096 --global-batch 8
expect_error 2 "$WORK/none.json" "$HPT_BUILD/src/hpt-plan" --model "$WORK/none.json" --cluster h100-80gb --seq-len 4096 \
  --global-batch 8
