#!/bin/sh
# --pp-schedule zb-h1 with ZeRO-2 or ZeRO-3 (their per-micro-batch
# reduce-scatters would start at a deferred weight-gradient pass, after
# later micro-batches' norm gradients were added): hpt-train and hpt-plan
# refuse it, exit 2, naming --zero 1 as the way; --pp-virtual with zb-h1
# (only the interleaved schedule has chunks). On DP 1 ZeRO-2/3 run as
# ZeRO-0 with a note, with zb-h1 too, as hpt-plan plans them.
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
# ... but on DP 1 ZeRO-2/3 shard nothing and run as ZeRO-0 with a note, as
# hpt-plan plans them ("planned as --zero 0, as hpt-train runs it"): no
# refusal there (hpt-train refused it while hpt-plan planned it)
for z in 2 3; do
  timeout 120 "$MPIEXEC" -n 2 "$TRAIN" --model tiny --data "$CORPUS" --seq-len 32 --steps 1 --quiet \
    --eval-interval 0 --eval-batches 1 --pp 2 --zero $z --grad-accum 2 --pp-schedule zb-h1 > "$WORK/dp1.out" 2>&1 ||
    { cat "$WORK/dp1.out"; fail "zb-h1 with --zero $z on DP 1 did not run"; }
  grep -q "note: --zero $z with DP 1 shards nothing: running as --zero 0" "$WORK/dp1.out" ||
    { cat "$WORK/dp1.out"; fail "zb-h1 --zero $z on DP 1: no note"; }
  "$HPT_BUILD/src/hpt-plan" --model tiny --cluster cpu-local --seq-len 32 --global-batch 2 --pp 2 \
    --zero $z --pp-schedule zb-h1 > "$WORK/plan1.out" 2>&1 || { cat "$WORK/plan1.out"; fail "hpt-plan zb-h1 --zero $z DP 1"; }
  grep -q "planned as --zero 0, as hpt-train runs it" "$WORK/plan1.out" || fail "hpt-plan: no DP 1 note"
done
pass "zb-h1 with ZeRO-2/3 (DP > 1) and with --pp-virtual: refused with the rule, exit 2; on DP 1 run as ZeRO-0"
