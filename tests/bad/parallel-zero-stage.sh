#!/bin/sh
# --zero N: only stages 0, 1 and 2 run. --zero 3 is refused as not
# implemented yet (naming what to use), other values and non-numbers as
# such, and --zero1 (the old spelling of --zero 1) contradicting --zero N
# in either order; each with exit 2 and one message, before any rank
# trains. hpt-plan refuses the same values.
. "$HPT_SRC/tests/helpers/lib.sh"
A="--model tiny --data $WORK/none.bin --steps 1"
expect_error 2 "^hpt-train: --zero 3: ZeRO-3 \(parameters sharded over DP\) is not implemented yet; use --zero 2 \(gradients and AdamW state sharded\) or --zero 1$" \
  "$TRAIN" $A --zero 3
expect_error 2 "^hpt-train: --zero 4: expected 0, 1 or 2 \(the ZeRO stage; 3 is not implemented yet\)$" \
  "$TRAIN" $A --zero 4
expect_error 2 "^hpt-train: --zero -1: expected 0, 1 or 2" "$TRAIN" $A --zero -1
expect_error 2 "^hpt-train: --zero 'abc': not an integer$" "$TRAIN" $A --zero abc
expect_error 2 "^hpt-train: --zero '': not an integer$" "$TRAIN" $A --zero ''
expect_error 2 "^hpt-train: --zero1 and --zero 2 contradict: --zero1 is --zero 1; give one of them$" \
  "$TRAIN" $A --zero 2 --zero1
expect_error 2 "^hpt-train: --zero1 and --zero 0 contradict" "$TRAIN" $A --zero1 --zero 0
# --zero 1 --zero1 agree: past the options, the missing data is what fails
expect_error 3 "none.bin: cannot open token shard" "$TRAIN" $A --zero 1 --zero1
PLAN="$HPT_BUILD/src/hpt-plan"
P="--model small --cluster cpu-local --seq-len 256 --global-batch 8"
expect_error 2 "^hpt-plan: --zero 3: ZeRO-3 \(parameters sharded over DP\) is not implemented yet" \
  "$PLAN" $P --dp 2 --zero 3
expect_error 2 "^hpt-plan: --zero 4: expected 0, 1 or 2" "$PLAN" $P --dp 2 --zero 4
expect_error 2 "^hpt-plan: --zero1 and --zero 2 contradict" "$PLAN" $P --dp 2 --zero1 --zero 2
pass "--zero 3, 4, -1, abc, '' and --zero1 against --zero N refused (exit 2, one message each)"
