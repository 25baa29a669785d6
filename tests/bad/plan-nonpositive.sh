#!/bin/sh
# Bad input (hpt-plan): zero or negative sizes name the option.
. "$HPT_SRC/tests/lib.sh"
M="--model llama3-8b --cluster h100-80gb"
expect_error 2 "\-\-seq-len 0: must be > 0" "$HPT_BUILD/src/hpt-plan" $M --seq-len 0 --global-batch 8
expect_error 2 "\-\-global-batch -8: must be > 0" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch -8
expect_error 2 "\-\-micro-batch 0: must be > 0" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --micro-batch 0
expect_error 2 "\-\-tp 0: must be > 0" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --tp 0
expect_error 2 "\-\-dp -2: must be > 0" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --dp -2
expect_error 2 "\-\-nodes -1: must be > 0" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --nodes -1
expect_error 2 "\-\-mem-gb -80: must be > 0" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --mem-gb -80
expect_error 2 "\-\-intra-lat -1: must be >= 0" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --intra-lat -1
expect_error 2 "\-\-seq-len is required" "$HPT_BUILD/src/hpt-plan" $M --global-batch 8
