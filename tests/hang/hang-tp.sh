#!/bin/sh
# Hang watchdog, TP: on TP2 x PP2, world rank 1 stalls before step 3; its
# tensor-parallel partner (rank 0) waits in a TP all-reduce, the next stage
# in pipeline receives. Every rank ends with status 6, rank 1 is named with
# its host, every rank dumps its flight recorder; the next run on the same
# directory records a `hang` event in metrics.h5 and archives the dumps.
. "$HPT_SRC/tests/helpers/lib.sh"
. "$HPT_SRC/tests/helpers/hang-lib.sh"
need_corpus
stall_job 4 1 3 --tp 2 --pp 2
check_hang 4 1
grep -q "waiting .* in allreduce on group tp .* group members: 0 1" "$WORK/report" ||
  fail "rank 0 is not reported waiting in the TP all-reduce"
# the next run (no fault) records the hang in /events and keeps the dumps
"$MPIEXEC" -n 4 "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 \
  --eval-interval 0 --run-dir "$WORK/run" --tp 2 --pp 2 --quiet > "$WORK/out2" 2>&1 ||
  { cat "$WORK/out2"; fail "the run after the hang failed"; }
[ -s "$WORK/run/hang.1/summary.txt" ] || fail "the previous hang's dumps were not kept in hang.1"
# the clean run leaves no empty hang/ of its own (the watchdog's, made to
# check it is writable, is removed when the run ends without a hang)
[ ! -e "$WORK/run/hang" ] || fail "the clean run left $(ls -la "$WORK/run/hang")"
"$HM" summary "$WORK/run/metrics.h5" > "$WORK/sum" 2>&1 || { cat "$WORK/sum"; fail "summary failed"; }
grep -E "hang.*previous run hung: hang: .*suspect: rank 1 on $HOST" "$WORK/sum" ||
  { cat "$WORK/sum"; fail "no hang event naming rank 1 in metrics.h5"; }
"$HM" hang "$WORK/run" > "$WORK/report2" || { cat "$WORK/report2"; fail "hpt-metrics hang after the clean run"; }
grep -q "hang dumps in $WORK/run/hang.1" "$WORK/report2" || fail "hpt-metrics hang did not find hang.1"
# ... and says the job ran (and finished) after that hang: it is not the job's state now
grep -q "note: this hang is from an earlier run: .* 1 run started after these dumps.*the last one finished" \
  "$WORK/report2" || { cat "$WORK/report2"; fail "hpt-metrics hang does not say a later run finished"; }
pass "TP stall: exit 6 after ${ELAPSED}s, rank 1 named, dumps, hang event"
