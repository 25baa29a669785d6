#!/bin/sh
# hpt-plan --mtbf-hours --measured RUN_DIR --ckpt-bw X: --ckpt-bw only plans
# the save stall and restart time that --measured gives, so it is not used:
# a note on stderr says so (it was silently ignored), and the plan equals
# the one without --ckpt-bw. Measured on a 2-step tiny run saving twice.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
P="$HPT_BUILD/src/hpt-plan"
A="--model tiny --data $CORPUS --steps 2 --seq-len 32 --batch 2 --eval-interval 0 --eval-batches 1 --quiet --save-every 1"
run_train r 1
M="--model tiny --cluster cpu-local --seq-len 32 --global-batch 2 --mtbf-hours 4 --measured $WORK/r"
"$P" $M --ckpt-bw 5 > "$WORK/bw.out" 2> "$WORK/bw.err" || { cat "$WORK/bw.out" "$WORK/bw.err"; fail "plan with --ckpt-bw"; }
"$P" $M > "$WORK/no.out" 2> "$WORK/no.err" || { cat "$WORK/no.out" "$WORK/no.err"; fail "plan without --ckpt-bw"; }
cat "$WORK/bw.err"
grep -q "^hpt-plan: note: --ckpt-bw 5 is not used: --measured gives the save stall and the restart time, which --ckpt-bw would plan$" \
  "$WORK/bw.err" || fail "no note that --measured wins over --ckpt-bw"
[ ! -s "$WORK/no.err" ] || { cat "$WORK/no.err"; fail "a note without --ckpt-bw"; }
grep -q "measured: mean of 2 saves" "$WORK/bw.out" || { cat "$WORK/bw.out"; fail "the save stall is not the measured one"; }
cmp "$WORK/bw.out" "$WORK/no.out" || fail "--ckpt-bw changed the plan although --measured gives what it plans"
pass "--ckpt-bw with --measured: a note says the measurement wins; the plan is the measured one"
