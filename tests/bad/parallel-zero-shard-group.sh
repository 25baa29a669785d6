#!/bin/sh
# --zero-shard-group N (HSDP): a group size that does not divide DP is
# refused naming the sizes that do, a shard group without a ZeRO stage is
# refused (nothing to shard), and 0, negative or non-numeric sizes are
# refused; each with exit 2 and one message, before any rank trains.
. "$HPT_SRC/tests/helpers/lib.sh"
export OMP_NUM_THREADS=1
A="--model tiny --data $WORK/none.bin --steps 1 --batch 1"
expect_error 2 "^hpt-train: --zero-shard-group 3 does not divide DP 4 \(the DP ranks split into shard groups of that size; one of 1, 2, 4\)$" \
  "$MPIEXEC" -n 4 "$TRAIN" $A --zero 3 --zero-shard-group 3
expect_error 2 "^hpt-train: --zero-shard-group 2 needs --zero 1, 2 or 3 \(it shards the ZeRO state within groups of 2 DP ranks\)$" \
  "$MPIEXEC" -n 2 "$TRAIN" $A --zero-shard-group 2
expect_error 2 "^hpt-train: --zero-shard-group 0: must be >= 1 \(DP ranks per shard group\)$" \
  "$TRAIN" $A --zero 3 --zero-shard-group 0
expect_error 2 "^hpt-train: --zero-shard-group 'two': not an integer$" "$TRAIN" $A --zero 3 --zero-shard-group two
# a valid group: past the options, the missing data is what fails; a
# group of 1 is allowed but warned about (it shards nothing)
expect_error 3 "none.bin: cannot open token shard" "$MPIEXEC" -n 2 "$TRAIN" $A --zero 3 --zero-shard-group 1
grep -q "^hpt-train: warning: --zero-shard-group 1 shards nothing: every rank keeps the whole ZeRO-3 state" \
  "$WORK/out.$$" || fail "--zero-shard-group 1: no warning that it shards nothing"
[ "$(grep -c "shards nothing" "$WORK/out.$$")" = 1 ] || fail "--zero-shard-group 1: the warning is not printed once"
pass "--zero-shard-group 3 on DP 4, without --zero, 0 and 'two' refused (exit 2, one message each)"
