#!/bin/sh
# Crash consistency of asynchronous saves: kill -9 at random moments (0-2 s
# after the resume; the first run: after its first commit) of a run that
# saves every 2 steps in the background, its writer slowed by a
# random 50-350 ms (test-only) so that most kills land while a background
# write is in flight. After every kill: each complete checkpoint verifies
# (hpt-ckpt verify), and the next run resumes from the newest committed
# checkpoint (the newest step_NNNNNNNN directory), never a partial one.
# HPT_ASYNC_CRASH_POINTS kills (default 30), stopping early after
# HPT_ASYNC_CRASH_SECONDS (default 150) once 10 are done;
# bench/ckpt-async-crash.sh runs more. One rank (2-rank kills: tests/ckpt/ckpt-crash.sh).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
POINTS=${HPT_ASYNC_CRASH_POINTS:-30}
BUDGET=${HPT_ASYNC_CRASH_SECONDS:-150}
D="$WORK/r/checkpoints"
A="--model tiny --data $CORPUS --seq-len 32 --batch 2 --eval-batches 1 --eval-interval 0 --quiet --steps 100000 --save-every 2 --keep 3 --async-save"
rnd() { od -An -N2 -tu2 /dev/urandom | tr -d ' '; }
newest() { ls "$D" 2>/dev/null | grep -E '^step_[0-9]{8}$' | sort | tail -1; }
t0=$(date +%s) i=0 inflight=0
while [ $i -lt "$POINTS" ]; do
  [ $i -ge 10 ] && [ $(( $(date +%s) - t0 )) -ge "$BUDGET" ] && break
  before=$(newest) stale=$(ls "$D" 2>/dev/null | grep '\.tmp$')
  HPT_TEST_SLOW_WRITE_MS=$(( $(rnd) % 300 + 50 )) "$TRAIN" $A --run-dir "$WORK/r" > "$WORK/o$i" 2>&1 &
  pid=$!
  # the first run: wait for its first commit; later ones: for the resume
  if [ -z "$before" ]; then want="^step [0-9]*: checkpoint"; else want="resumed from"; fi
  j=0
  until grep -q "$want" "$WORK/o$i" 2>/dev/null; do
    sleep 0.02; j=$((j + 1))
    [ $j -lt 6000 ] || { kill -9 $pid; cat "$WORK/o$i"; fail "point $i: no '$want'"; }
    kill -0 $pid 2>/dev/null || { cat "$WORK/o$i"; fail "point $i: the run ended"; }
  done
  sleep "0.$(printf %03d $(( $(rnd) % 1000 )))" # then a random 0-1 s
  cur=$(ls "$D" 2>/dev/null | grep '\.tmp$') # a save of this run in flight at the kill?
  [ -n "$cur" ] && [ "$cur" != "$stale" ] && inflight=$((inflight + 1))
  kill -9 $pid
  wait $pid 2>/dev/null || true
  if [ -n "$before" ]; then
    grep -q "resumed from $D/$before " "$WORK/o$i" ||
      { cat "$WORK/o$i"; ls -la "$D"; fail "point $i: did not resume from the newest committed $before"; }
  fi
  if grep -q "damaged\|no loadable" "$WORK/o$i"; then cat "$WORK/o$i"; fail "point $i: a partial checkpoint was loaded"; fi
  "$HPT_BUILD/src/hpt-ckpt" verify "$D" > "$WORK/v" 2>&1 || { cat "$WORK/v"; ls -la "$D"; fail "point $i: a committed checkpoint is damaged"; }
  i=$((i + 1))
done
echo "$i kills, $inflight with a .tmp directory present just before the kill"
[ "$inflight" -gt 0 ] || fail "no kill landed while a background write was in flight"
before=$(newest)
timeout 120 "$TRAIN" --model tiny --data "$CORPUS" --seq-len 32 --batch 2 --eval-batches 1 --steps 1 \
  --resume strict --run-dir "$WORK/r" > "$WORK/final" 2>&1 || true
grep -q "resumed from $D/$before " "$WORK/final" || { cat "$WORK/final"; fail "final resume not from $before"; }
ls "$D" | grep -q '\.tmp$' && fail "a .tmp directory was left behind"
pass "$i kill -9 points during background saves: every restart resumed from the newest committed checkpoint"
