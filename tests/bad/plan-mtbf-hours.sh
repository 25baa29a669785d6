#!/bin/sh
# Bad input (hpt-plan --mtbf-hours and its options): zero, negative,
# garbage and too large values name the option and the rule (exit 2); the
# options that need --mtbf-hours, or conflict, are refused; --measured on
# a run directory that is missing or has no metrics.h5 names it (exit 3).
. "$HPT_SRC/tests/helpers/lib.sh"
P="$HPT_BUILD/src/hpt-plan"
M="--model llama3-8b --cluster h100-80gb --seq-len 4096 --global-batch 8"
expect_error 2 "\-\-mtbf-hours 0: must be > 0 and at most 1e6" "$P" $M --mtbf-hours 0
expect_error 2 "\-\-mtbf-hours -3: must be > 0 and at most 1e6" "$P" $M --mtbf-hours -3
expect_error 2 "\-\-mtbf-hours 2e\+06: must be > 0 and at most 1e6" "$P" $M --mtbf-hours 2e6
expect_error 2 "\-\-mtbf-hours 'abc': not a finite number" "$P" $M --mtbf-hours abc
expect_error 2 "\-\-mtbf-hours 'nan': not a finite number" "$P" $M --mtbf-hours nan
expect_error 2 "\-\-mtbf-hours '4h': not a finite number" "$P" $M --mtbf-hours 4h
expect_error 2 "\-\-save-stall 0: must be > 0" "$P" $M --mtbf-hours 4 --save-stall 0
expect_error 2 "\-\-save-stall is only used with \-\-mtbf-hours H" "$P" $M --save-stall 30
expect_error 2 "\-\-measured is only used with \-\-mtbf-hours H" "$P" $M --measured "$WORK"
expect_error 2 "\-\-ckpt-bw 0: must be in \[1e-06, 1e\+06\]" "$P" $M --mtbf-hours 4 --ckpt-bw 0
expect_error 2 "\-\-save-stall and \-\-measured both give the save stall" "$P" $M --mtbf-hours 4 --save-stall 3 --measured "$WORK"
expect_error 2 "\-\-mtbf-hours is not used with \-\-search" "$P" $M --mtbf-hours 4 --search --gpus 8
expect_error 3 "\-\-measured $WORK/nope: $WORK/nope: no such file" "$P" $M --mtbf-hours 4 --measured "$WORK/nope"
mkdir "$WORK/run"
expect_error 3 "\-\-measured $WORK/run: $WORK/run: is a directory with no metrics.h5" "$P" $M --mtbf-hours 4 --measured "$WORK/run"
