#!/bin/sh
# kill -9 during ZeRO-3 saves (the whole parameter block gathered for the
# writers, then dropped): a 2-rank ZeRO-3 run checkpointing every step is
# killed at random moments (0-300 ms after a save was reported), one rank
# or both, alternately with synchronous and --async-save saves. After each
# kill every committed checkpoint verifies (hpt-ckpt verify) and the next
# run resumes from the newest one, never a partial one; the run finished
# through all the restarts has log.tsv bitwise that of an uninterrupted
# ZeRO-3 run (the losses, lr and grad norms of every step).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
POINTS=${HPT_ZERO3_CRASH_POINTS:-6}
D="$WORK/r/checkpoints"
A="--model tiny --data $CORPUS --seq-len 32 --batch 1 --grad-accum 2 --eval-batches 1 --eval-interval 0 --quiet --steps 40 --zero 3 --keep 2"
rnd() { od -An -N2 -tu2 /dev/urandom | tr -d ' '; }
newest() { ls "$D" 2>/dev/null | grep -E '^step_[0-9]{8}$' | sort | tail -1; }
timeout 300 "$MPIEXEC" -n 2 "$TRAIN" $A --run-dir "$WORK/s" > "$WORK/s.out" 2>&1 ||
  { cat "$WORK/s.out"; fail "the uninterrupted run"; }
i=0
while [ $i -lt "$POINTS" ]; do
  before=$(newest)
  async=""; [ $(( i % 2 )) = 1 ] && async=--async-save
  timeout 120 "$MPIEXEC" -n 2 "$TRAIN" $A --save-every 1 $async --run-dir "$WORK/r" > "$WORK/o$i" 2>&1 &
  job=$!
  j=0
  until grep -q "^step [0-9]*: checkpoint" "$WORK/o$i"; do
    sleep 0.02; j=$((j + 1))
    [ $j -lt 5000 ] || { cat "$WORK/o$i"; fail "point $i: no checkpoint reported"; }
  done
  sleep "0.$(printf %03d $(( $(rnd) % 300 )))"
  if [ $(( i % 3 )) = 2 ]; then
    pkill -9 -f "hpt-train $A" || true                            # both ranks
  else
    kill -9 "$(pgrep -n -f "hpt-train $A")" 2>/dev/null || true  # one rank
  fi
  st=0; wait $job || st=$?
  [ $st != 124 ] || fail "point $i: the job hung after the kill"
  grep -q "^done: 40 steps" "$WORK/o$i" && fail "point $i: the run ended before the kill (raise --steps)"
  if [ -n "$before" ]; then
    grep -q "resumed from $D/$before " "$WORK/o$i" ||
      { cat "$WORK/o$i"; ls -la "$D"; fail "point $i: did not resume from the newest committed $before"; }
  fi
  if grep -q "damaged\|no loadable" "$WORK/o$i"; then cat "$WORK/o$i"; fail "point $i: a partial checkpoint was loaded"; fi
  "$HPT_BUILD/src/hpt-ckpt" verify "$D" > "$WORK/v" 2>&1 ||
    { cat "$WORK/v"; ls -la "$D"; fail "point $i: a committed checkpoint is damaged"; }
  i=$((i + 1))
done
before=$(newest)
timeout 300 "$MPIEXEC" -n 2 "$TRAIN" $A --run-dir "$WORK/r" > "$WORK/final" 2>&1 ||
  { cat "$WORK/final"; fail "the final run"; }
grep -q "resumed from $D/$before " "$WORK/final" || { cat "$WORK/final"; fail "final resume not from $before"; }
cmp "$WORK/s/log.tsv" "$WORK/r/log.tsv" ||
  { diff "$WORK/s/log.tsv" "$WORK/r/log.tsv" | head; fail "the run through $POINTS kills differs from the uninterrupted one"; }
ls "$D" | grep -q '\.tmp$' && fail "a .tmp directory was left behind"
pass "$POINTS kill -9 points during ZeRO-3 saves (sync and async): every restart resumed from the newest committed checkpoint; the result is bitwise the uninterrupted run's"
