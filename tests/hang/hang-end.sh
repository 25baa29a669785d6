#!/bin/sh
# Hang watchdog after the last step: a rank frozen once the loop is done
# (--fault-stall-at end: SIGSTOP after the last step and the metrics file's
# close, before the end-of-run replica check) while the others wait in that
# check's all-reduces (TP) or the agreement after it. The watchdog used to
# stop right after the loop, so these collectives were not covered and the
# job never ended (issue 33, part A 1); it now stops after them (and
# --comm-stats), so the job ends with status 6 and the frozen rank is the
# one named. TP2 x DP2, rank 1 frozen after step 3 of 3.
. "$HPT_SRC/tests/helpers/lib.sh"
. "$HPT_SRC/tests/helpers/hang-lib.sh"
need_corpus
stall_job 4 1 3 --steps 3 --tp 2 --fault-stall-at end
name="TP2xDP2, rank 1 frozen after the last step"
grep -qE "^step +3" "$WORK/out" || grep -q "^step 3" "$WORK/out" ||
  fail "$name: step 3 was not reached (the stall must come after the loop)"
[ "$ST" -eq 6 ] || fail "$name: exit status $ST, expected 6 (hang)"
grep -E "^hpt-train: hang: rank [0-9]+ .* in allreduce on group (tp|world) .*; suspect: rank 1 on $HOST " \
  "$WORK/out" || fail "$name: no hang line naming rank 1, from a rank waiting in the replica check or its agreement"
[ "$(grep -c '^hpt-train: hang:' "$WORK/out")" -eq 1 ] || fail "$name: hang line printed more than once"
cat "$WORK/run/hang/summary.txt"
sus=$(sed -n 's/^suspects: *//p' "$WORK/run/hang/summary.txt")
[ "$sus" = "1@$HOST" ] || fail "$name: summary.txt's suspects: line is '$sus', expected '1@$HOST'"
"$HM" hang "$WORK/run" > "$WORK/report" || { cat "$WORK/report"; fail "$name: hpt-metrics hang failed"; }
cat "$WORK/report"
pass "$name: exit 6 after ${ELAPSED}s, suspects: 1@$HOST"
