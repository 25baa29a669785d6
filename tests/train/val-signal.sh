#!/bin/sh
# A stop signal during a long validation is honoured between validation
# batches (not only after the whole validation): the validation is cut
# short, the step is checkpointed and the run exits 75. On one rank and on
# two data-parallel ranks (the signal reaches one of them only).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
# 2 steps, a 60-batch validation after step 1 (one pass over the
# validation shard at --seq-len 1024: long enough to signal during it)
A="--model small --data $CORPUS --seq-len 1024 --batch 1 --steps 2 --eval-interval 1 --metrics none"
run() { # NAME RANKS EVAL_BATCHES
  "$MPIEXEC" -n "$2" "$TRAIN" $A --eval-batches "$3" --run-dir "$WORK/$1" > "$WORK/$1.out" 2>&1 &
  pid=$!
  i=0
  until grep -q '^step 1/2' "$WORK/$1.out"; do
    sleep 0.2; i=$((i + 1)); [ $i -lt 1500 ] || { kill $pid; fail "$1: no progress"; }
  done
  # signal one rank: the highest-numbered hpt-train child of this mpiexec
  victim=$(pgrep -P "$(pgrep -P $pid -n)" -n hpt-train 2>/dev/null || pgrep -P $pid -n hpt-train)
  [ -n "$victim" ] || victim=$pid
  kill -TERM "$victim"
  st=0; wait $pid || st=$?
  cat "$WORK/$1.out"
  [ $st = 75 ] || fail "$1: exit $st, expected 75"
  grep -q "^step 1: validation stopped by a stop signal" "$WORK/$1.out" || fail "$1: validation not cut short"
  grep -q "checkpointed step 1 after a stop signal" "$WORK/$1.out" || fail "$1: no checkpoint of step 1"
  grep -q '^step 2/2' "$WORK/$1.out" && fail "$1: step 2 ran after the signal"
  return 0
}
run one 1 60
run two 2 30
pass "a stop signal during validation: cut short, checkpointed, exit 75 (1 and 2 ranks)"
