#!/bin/sh
# Bad input (hpt-plan): a global batch that micro-batch x DP does not divide.
. "$HPT_SRC/tests/helpers/lib.sh"
expect_error 2 "\-\-global-batch 10 must be a multiple of \-\-micro-batch 4 x \-\-dp 1 = 4" \
  "$HPT_BUILD/src/hpt-plan" --model llama3-8b --cluster h100-80gb --seq-len 4096 --global-batch 10 --micro-batch 4
expect_error 2 "\-\-global-batch 2048 must be a multiple of \-\-micro-batch 1 x \-\-dp 8192 = 8192" \
  "$HPT_BUILD/src/hpt-plan" --model llama3-405b --cluster h100-80gb --seq-len 8192 --global-batch 2048 --dp 8192
