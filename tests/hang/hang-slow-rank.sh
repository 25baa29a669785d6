#!/bin/sh
# Hang watchdog: a rank that is slow but progressing (--fault-slow-rank)
# never triggers it, at the default timeout nor at a timeout longer than
# its delay; the run ends normally and leaves no dump (and no heartbeat:
# the watchdog's RUN_DIR/hang, there during the run, is removed at the end).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
for t in default 4; do
  opt=""; [ "$t" = default ] || opt="--collective-timeout $t"
  st=0 seen=0
  "$MPIEXEC" -n 2 "$TRAIN" --model tiny --data "$CORPUS" --steps 4 --batch 2 --seq-len 32 \
    --eval-interval 0 --run-dir "$WORK/run-$t" --fault-slow-rank 1 --fault-slow-ms 700 $opt \
    > "$WORK/out" 2>&1 &
  pid=$!
  # the watchdog's RUN_DIR/hang exists from start-up (prepare) to the end of
  # the run (removed then when empty): seen while the run lasts (>= 2.8 s)
  while kill -0 $pid 2>/dev/null; do
    [ -d "$WORK/run-$t/hang" ] && seen=1
    sleep 0.1
  done
  wait $pid || st=$?
  cat "$WORK/out"
  [ "$st" -eq 0 ] || fail "timeout $t: exit status $st with a slow rank"
  grep -q "^done: 4 steps" "$WORK/out" || fail "timeout $t: the run did not finish"
  ! grep -q "hang" "$WORK/out" || fail "timeout $t: hang reported for a slow rank"
  [ $seen = 1 ] || fail "timeout $t: no RUN_DIR/hang during the run (watchdog not started?)"
  [ ! -e "$WORK/run-$t/hang" ] || fail "timeout $t: RUN_DIR/hang left after the run: $(ls -A "$WORK/run-$t/hang")"
done
pass "slow rank: no hang at the default timeout nor at 4 s"
