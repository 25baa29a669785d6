#!/bin/sh
# Hang watchdog, 8 ranks TP2 x PP2 x DP2: world rank 5 (tp 1, dp 0, stage 1)
# stalls before step 2. Its TP partner waits in a TP all-reduce, the first
# stage in pipeline receives, the other replica in DP reductions; every rank
# ends with status 6, dumps, and each rank's own analysis follows its wait
# chain to rank 5.
. "$HPT_SRC/tests/helpers/lib.sh"
. "$HPT_SRC/tests/helpers/hang-lib.sh"
need_corpus
stall_job 8 5 2 --tp 2 --pp 2
check_hang 8 5
[ "$(grep -c "^  suspects: rank 5 on $HOST (not in a communication call" "$WORK/report")" -eq 8 ] ||
  fail "not every rank's dump names rank 5 as the suspect"
for g in tp pp dp; do
  grep -q "^rank [0-9] .*waiting .* on group $g " "$WORK/report" || fail "no rank waiting on group $g"
done
pass "8 ranks: exit 6 after ${ELAPSED}s, every rank's dump names rank 5"
