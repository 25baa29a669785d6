#!/bin/sh
# --async-save without --save-every: it only concerns the periodic saves
# (the final and stop saves are synchronous), so it does nothing — and says
# so once (rank 0 of 2), instead of being silently ignored; the run goes
# on (exit 0) and a stop still checkpoints synchronously.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
st=0
timeout 300 "$MPIEXEC" -n 2 "$TRAIN" --model tiny --data "$CORPUS" --steps 2 --batch 2 --seq-len 32 \
  --eval-interval 0 --quiet --async-save --stop-at 1 --run-dir "$WORK/r" > "$WORK/out" 2>&1 || st=$?
[ $st = 75 ] || { cat "$WORK/out"; fail "expected exit 75 (--stop-at 1), got $st"; }
msg="^hpt-train: warning: --async-save applies to the periodic saves of --save-every only; without --save-every it does nothing (the saves at a stop are synchronous)$"
n=$(grep -c "$msg" "$WORK/out")
[ "$n" = 1 ] || { cat "$WORK/out"; fail "the warning was printed $n times (expected once)"; }
grep -q "async: training stalled" "$WORK/out" && fail "a save was written in the background"
[ -f "$WORK/r/checkpoints/step_00000001/checkpoint.h5" ] || fail "no stop checkpoint"
pass "--async-save without --save-every warns once, and the stop save is synchronous"
