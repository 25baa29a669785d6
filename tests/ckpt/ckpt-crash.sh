#!/bin/sh
# Crash safety: kill -9 at randomised moments while a run checkpoints every
# step (HPT_CRASH_POINTS points, default 10: alternately the single rank, one
# of two ranks, and all ranks of a 2-rank job) → every next run resumes from
# a complete checkpoint (its checksums verify on load), never hangs, and
# removes the leftover .tmp.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
POINTS=${HPT_CRASH_POINTS:-10}
A="--model tiny --data $CORPUS --seq-len 32 --eval-batches 1 --eval-interval 0 --quiet --steps 100000 --save-every 1 --keep 2"
rnd() { od -An -N2 -tu2 /dev/urandom | tr -d ' '; }
i=0
while [ $i -lt "$POINTS" ]; do
  n=$(( i % 2 + 1 ))
  # the global batch stays 2: 1 rank x batch 2, or 2 ranks x batch 1
  timeout 120 "$MPIEXEC" -n $n "$TRAIN" $A --batch $(( 3 - n )) --resume strict --run-dir "$WORK/r" > "$WORK/o$i" 2>&1 &
  job=$!
  # wait until this run has saved at least once, then a random 0-400 ms more
  j=0
  until grep -q "^step [0-9]*: checkpoint" "$WORK/o$i"; do sleep 0.05; j=$((j + 1)); [ $j -lt 1200 ] || { cat "$WORK/o$i"; ls -la "$WORK/r/checkpoints"; fail "point $i: no checkpoint written"; }; done
  sleep "0.$(printf %03d $(( $(rnd) % 400 )))"
  if [ $n = 2 ] && [ $(( i % 4 )) = 1 ]; then
    pkill -9 -f "hpt-train $A" || true          # every rank
  else
    kill -9 "$(pgrep -n -f "hpt-train $A")" 2>/dev/null || true   # one rank
  fi
  st=0; wait $job || st=$?
  [ $st != 124 ] || fail "point $i: the job hung after the kill"
  grep -q "resumed from\|step 1: checkpoint" "$WORK/o$i" || { cat "$WORK/o$i"; fail "point $i: did not resume or start"; }
  if grep -q "damaged\|no loadable" "$WORK/o$i"; then cat "$WORK/o$i"; fail "point $i: resumed from a partial checkpoint"; fi
  i=$((i + 1))
done
st=0
"$TRAIN" --model tiny --data "$CORPUS" --seq-len 32 --batch 2 --eval-batches 1 --steps 1 --resume strict \
  --run-dir "$WORK/r" > "$WORK/final" 2>&1 || st=$?
grep -q "resumed from" "$WORK/final" || { cat "$WORK/final"; fail "final resume (exit $st)"; }
ls "$WORK/r/checkpoints" | grep -q '\.tmp$' && fail "a .tmp directory was left behind"
pass "$POINTS kill -9 points: every restart resumed from a complete checkpoint"
