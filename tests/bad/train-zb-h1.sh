#!/bin/sh
# --pp-schedule zb-h1 with ZeRO-2 or ZeRO-3 (their per-micro-batch
# reduce-scatters would start at a deferred weight-gradient pass, after
# later micro-batches' norm gradients were added): hpt-train and hpt-plan
# refuse it, exit 2, naming --zero 1 as the way; --pp-virtual with zb-h1
# (only the interleaved schedule has chunks).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
A="--model tiny --data $CORPUS --seq-len 32 --steps 1 --quiet --run-dir $WORK/r"
for z in 2 3; do
  expect_error 2 "\-\-pp-schedule zb-h1 with \-\-zero $z: not supported .*; use \-\-zero 1" \
    timeout 120 "$MPIEXEC" -n 4 "$TRAIN" $A --pp 2 --dp 2 --zero $z --grad-accum 2 --pp-schedule zb-h1
  expect_error 2 "\-\-pp-schedule zb-h1 with \-\-zero $z: not supported .*; use \-\-zero 1" \
    "$HPT_BUILD/src/hpt-plan" --model llama3-8b --cluster h100-80gb --seq-len 4096 --global-batch 16 \
    --pp 2 --dp 2 --zero $z --pp-schedule zb-h1
done
expect_error 2 "\-\-pp-virtual 2 needs \-\-pp-schedule interleaved" \
  timeout 120 "$MPIEXEC" -n 2 "$TRAIN" $A --pp 2 --grad-accum 2 --pp-schedule zb-h1 --pp-virtual 2
[ ! -e "$WORK/r/checkpoints" ] || fail "a refused run wrote checkpoints"
pass "zb-h1 with ZeRO-2/3 and with --pp-virtual: refused with the rule, exit 2"
