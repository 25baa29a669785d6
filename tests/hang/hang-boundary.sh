#!/bin/sh
# Hang watchdog at the step boundary: a rank frozen after its step
# (--fault-stall-at boundary: it stops itself with SIGSTOP, its watchdog
# thread with it, as a frozen process) while the others wait in the
# step-boundary stop agreement, a direct MPI all-reduce. That wait is
# recorded (lib/comm.h, watched collectives), so the job ends with status 6
# and the frozen rank is the one named on the summary's suspects: line (the
# launcher excludes its node), not a rank that only waits. TP2 x DP2 with
# rank 1 frozen, PP2 x DP2 with rank 0 frozen (issue 33: runs that never
# ended, and a waiting rank named).
. "$HPT_SRC/tests/helpers/lib.sh"
. "$HPT_SRC/tests/helpers/hang-lib.sh"
need_corpus
for layout in "1 --tp 2" "0 --pp 2"; do
  set -- $layout
  r=$1; shift
  rm -rf "$WORK/run"
  stall_job 4 "$r" 3 --fault-stall-at boundary "$@"
  name="$* rank $r frozen at the boundary"
  [ "$ST" -eq 6 ] || fail "$name: exit status $ST, expected 6 (hang)"
  grep -E "^hpt-train: hang: rank [0-9]+ .* in allreduce on group world .*; suspect: rank $r on $HOST " \
    "$WORK/out" || fail "$name: no hang line naming rank $r, from a rank waiting in the world agreement"
  [ "$(grep -c '^hpt-train: hang:' "$WORK/out")" -eq 1 ] || fail "$name: hang line printed more than once"
  cat "$WORK/run/hang/summary.txt"
  [ "$(sed -n 's/^suspects: *//p' "$WORK/run/hang/summary.txt")" = "$r@$HOST" ] ||
    fail "$name: summary.txt's suspects: line is not '$r@$HOST'"
  "$HM" hang "$WORK/run" > "$WORK/report" || { cat "$WORK/report"; fail "$name: hpt-metrics hang failed"; }
  cat "$WORK/report"
  grep -q "waiting .* in allreduce on group world" "$WORK/report" ||
    fail "$name: no rank reported waiting in the world all-reduce"
done
pass "frozen rank at the step boundary: exit 6, the frozen rank named, on TP2xDP2 and PP2xDP2"
