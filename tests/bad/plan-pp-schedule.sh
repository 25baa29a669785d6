#!/bin/sh
# Bad input (hpt-plan): pipeline schedules. An unknown schedule, --pp-virtual
# without --pp-schedule interleaved (also under --search), V < 1,
# interleaved without V or without a pipeline, more model chunks (PP x V)
# than layers, and micro-batches per step not a multiple of PP (the message
# names the nearest valid counts and global batches) — each exit 2 with its
# message.
. "$HPT_SRC/tests/helpers/lib.sh"
P="$HPT_BUILD/src/hpt-plan"
A="--model llama3-8b --cluster h100-80gb --seq-len 4096"
expect_error 2 "\-\-pp-schedule 'zb-h2': expected 1f1b, gpipe, interleaved or zb-h1" \
  "$P" $A --global-batch 8 --pp 4 --pp-schedule zb-h2
expect_error 2 "\-\-pp-virtual 2 is only used with \-\-pp-schedule interleaved \(the schedule is 1f1b\)" \
  "$P" $A --global-batch 8 --pp 4 --pp-virtual 2
expect_error 2 "\-\-pp-virtual 2 is only used with \-\-pp-schedule interleaved \(the schedule is gpipe\)" \
  "$P" $A --global-batch 8 --pp 4 --pp-schedule gpipe --pp-virtual 2
expect_error 2 "\-\-pp-virtual 4 is only used with \-\-pp-schedule interleaved \(the schedule is 1f1b\)" \
  "$P" $A --global-batch 8 --search --gpus 8 --pp-virtual 4
expect_error 2 "\-\-pp-virtual 0: must be >= 1 \(model chunks per pipeline rank\)" \
  "$P" $A --global-batch 8 --pp 4 --pp-schedule interleaved --pp-virtual 0
expect_error 2 "\-\-pp-virtual -2: must be >= 1" \
  "$P" $A --global-batch 8 --pp 4 --pp-schedule interleaved --pp-virtual -2
expect_error 2 "\-\-pp-schedule interleaved needs \-\-pp-virtual V \(model chunks per pipeline rank, e.g. 2\)" \
  "$P" $A --global-batch 8 --pp 4 --pp-schedule interleaved
expect_error 2 "\-\-pp-schedule interleaved needs \-\-pp > 1 \(it interleaves model chunks across pipeline stages; \-\-pp 1\)" \
  "$P" $A --global-batch 8 --pp-schedule interleaved --pp-virtual 2
expect_error 2 "\-\-pp 4 x \-\-pp-virtual 9 = 36 model chunks: more than the model's 32 layers \(each chunk needs one\)" \
  "$P" $A --global-batch 8 --pp 4 --pp-schedule interleaved --pp-virtual 9
expect_error 2 "\-\-pp-schedule interleaved: 6 micro-batches per step \(\-\-global-batch 6 / \(\-\-micro-batch 1 x \-\-dp 1\)\) is not a multiple of \-\-pp 4; nearest valid: 4 or 8 micro-batches \(\-\-global-batch 4 or 8\)" \
  "$P" $A --global-batch 6 --pp 4 --pp-schedule interleaved --pp-virtual 2
expect_error 2 "\-\-pp-schedule interleaved: 3 micro-batches per step \(\-\-global-batch 12 / \(\-\-micro-batch 2 x \-\-dp 2\)\) is not a multiple of \-\-pp 4; nearest valid: 4 micro-batches \(\-\-global-batch 16\)" \
  "$P" $A --global-batch 12 --micro-batch 2 --dp 2 --pp 4 --pp-schedule interleaved --pp-virtual 2
pass "hpt-plan refuses bad pipeline schedules with their rule"
