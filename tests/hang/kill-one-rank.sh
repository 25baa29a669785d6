#!/bin/sh
# One rank killed (SIGKILL) mid-run → the job ends non-zero within a bounded
# time; no rank is left waiting in a collective.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
"$MPIEXEC" -n 2 "$TRAIN" --model tiny --data "$CORPUS" --steps 100000 --batch 2 --seq-len 32 \
  --eval-interval 0 > "$WORK/out" 2>&1 &
job=$!
i=0
until grep -q "^step " "$WORK/out"; do   # wait until training is under way
  sleep 0.2; i=$((i + 1))
  [ $i -lt 300 ] || { kill $job; fail "training did not start"; }
done
victim=$(pgrep -f -n "hpt-train --model tiny --data $CORPUS --steps 100000") || fail "no rank found"
kill -9 "$victim"
start=$(date +%s)
while kill -0 $job 2>/dev/null && [ $(( $(date +%s) - start )) -lt 60 ]; do sleep 0.2; done
elapsed=$(( $(date +%s) - start ))
kill -9 $job 2>/dev/null
st=0
wait $job || st=$?
pkill -9 -f "hpt-train --model tiny --data $CORPUS --steps 100000" 2>/dev/null
[ "$st" -ne 0 ] || fail "job exited 0 after a rank was killed"
[ "$elapsed" -lt 60 ] || fail "job still running ${elapsed}s after a rank was killed (hang)"
pass "killed rank: job ended with status $st after ${elapsed}s"
