#!/bin/sh
# --zero N: stages 0 to 3 run. Other values and non-numbers are refused,
# and so are --zero1 (the old spelling of --zero 1) contradicting --zero N
# in either order and a negative --zero3-prefetch; each with exit 2 and
# one message, before any rank trains. hpt-plan refuses the same values.
. "$HPT_SRC/tests/helpers/lib.sh"
A="--model tiny --data $WORK/none.bin --steps 1"
expect_error 2 "^hpt-train: --zero 4: expected 0, 1, 2 or 3 \(the ZeRO stage\)$" "$TRAIN" $A --zero 4
expect_error 2 "^hpt-train: --zero -1: expected 0, 1, 2 or 3" "$TRAIN" $A --zero -1
expect_error 2 "^hpt-train: --zero 'abc': not an integer$" "$TRAIN" $A --zero abc
expect_error 2 "^hpt-train: --zero '': not an integer$" "$TRAIN" $A --zero ''
expect_error 2 "^hpt-train: --zero1 and --zero 2 contradict: --zero1 is --zero 1; give one of them$" \
  "$TRAIN" $A --zero 2 --zero1
expect_error 2 "^hpt-train: --zero1 and --zero 3 contradict" "$TRAIN" $A --zero1 --zero 3
expect_error 2 "^hpt-train: --zero1 and --zero 0 contradict" "$TRAIN" $A --zero1 --zero 0
expect_error 2 "^hpt-train: --zero3-prefetch -1: must be >= 0 \(layers gathered ahead; 0: each when used\)$" \
  "$TRAIN" $A --zero 3 --zero3-prefetch -1
expect_error 2 "^hpt-train: --zero3-prefetch 'x': not an integer$" "$TRAIN" $A --zero 3 --zero3-prefetch x
# --zero 1 --zero1 agree, and --zero 3 is taken: past the options, the
# missing data is what fails
expect_error 3 "none.bin: cannot open token shard" "$TRAIN" $A --zero 1 --zero1
expect_error 3 "none.bin: cannot open token shard" "$TRAIN" $A --zero 3
PLAN="$HPT_BUILD/src/hpt-plan"
P="--model small --cluster cpu-local --seq-len 256 --global-batch 8"
expect_error 2 "^hpt-plan: --zero 4: expected 0, 1, 2 or 3" "$PLAN" $P --dp 2 --zero 4
expect_error 2 "^hpt-plan: --zero1 and --zero 2 contradict" "$PLAN" $P --dp 2 --zero1 --zero 2
pass "--zero 4, -1, abc, '', --zero1 against --zero N and --zero3-prefetch -1/x refused (exit 2, one message each)"
