#!/bin/sh
# Bad input (hpt-plan): zero or negative sizes, and cluster figures out of
# their range (which would make the JSON's numbers NaN or infinite), name
# the option and the range.
. "$HPT_SRC/tests/helpers/lib.sh"
M="--model llama3-8b --cluster h100-80gb"
expect_error 2 "\-\-seq-len 0: must be > 0" "$HPT_BUILD/src/hpt-plan" $M --seq-len 0 --global-batch 8
expect_error 2 "\-\-global-batch -8: must be > 0" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch -8
expect_error 2 "\-\-micro-batch 0: must be > 0" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --micro-batch 0
expect_error 2 "\-\-tp 0: must be > 0" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --tp 0
expect_error 2 "\-\-dp -2: must be > 0" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --dp -2
expect_error 2 "\-\-nodes -1: must be > 0" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --nodes -1
expect_error 2 "\-\-mem-gb -80: must be in \[0.001, 1e\+09\]" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --mem-gb -80
expect_error 2 "\-\-intra-lat -1: must be in \[0, 1e\+09\]" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --intra-lat -1
expect_error 2 "\-\-seq-len is required" "$HPT_BUILD/src/hpt-plan" $M --global-batch 8
expect_error 2 "\-\-peak-flops 1e-300: must be in \[1e\+06, 1e\+21\]" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --peak-flops 1e-300 --json
expect_error 2 "\-\-mem-gb 1e\+308: must be in \[0.001, 1e\+09\]" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --mem-gb 1e308 --json
expect_error 2 "\-\-inter-bw 1e-09: must be in \[1e-06, 1e\+06\]" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --inter-bw 1e-9 --json
expect_error 2 "\-\-efficiency 2: must be in \[1e-06, 1\]" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --efficiency 2
expect_error 2 "\-\-data-bytes -1: must be in \[0, 1e\+18\]" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --data-bytes -1
expect_error 2 "\-\-peak-flops 'inf': not a finite number" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --peak-flops inf
expect_error 2 "\-\-hbm-bw 0: must be in \[0.001, 1e\+06\]" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --hbm-bw 0
expect_error 2 "\-\-gpus 0: must be > 0" "$HPT_BUILD/src/hpt-plan" $M --seq-len 4096 --global-batch 8 --gpus 0
