#!/bin/sh
# Hang watchdog inside a checkpoint save: world rank 1 of 2 stops itself
# (SIGSTOP, its watchdog thread too) in the save after step 2, between
# HDF5's collective calls (CRC attributes written, before the file's
# collective close: --fault-stall-at save). Rank 0 then waits inside
# HDF5's MPI-IO close, which is not a recorded call: the job hung for
# ever (hang2 report, 5 of 5 trials). The watchdog now fires when a rank
# has been in a save longer than the timeout and a member's heartbeat is
# older than the stale limit: exit 6, rank 1 named on the suspects: line.
. "$HPT_SRC/tests/helpers/lib.sh"
. "$HPT_SRC/tests/helpers/hang-lib.sh"
need_corpus
stall_job 2 1 2 --save-every 1 --fault-stall-at save
name="2 ranks, rank 1 frozen inside the save after step 2"
[ "$ST" -eq 6 ] || fail "$name: exit status $ST, expected 6 (hang)"
grep -E "^hpt-train: hang: rank 0 .* inside a checkpoint save .*; suspect: rank 1 on $HOST " \
  "$WORK/out" || fail "$name: no hang line from rank 0 in the save naming rank 1"
[ "$(grep -c '^hpt-train: hang:' "$WORK/out")" -eq 1 ] || fail "$name: hang line printed more than once"
cat "$WORK/run/hang/summary.txt"
sus=$(sed -n 's/^suspects: *//p' "$WORK/run/hang/summary.txt")
[ "$sus" = "1@$HOST" ] || fail "$name: summary.txt's suspects: line is '$sus', expected '1@$HOST'"
[ -e "$WORK/run/checkpoints/step_00000002" ] && fail "$name: step 2 was committed although rank 1 never closed it"
[ -e "$WORK/run/checkpoints/step_00000001/checkpoint.h5" ] || fail "$name: the step 1 checkpoint is gone"
"$HM" hang "$WORK/run" > "$WORK/report" || { cat "$WORK/report"; fail "$name: hpt-metrics hang failed"; }
cat "$WORK/report"
pass "$name: exit 6 after ${ELAPSED}s, suspects: 1@$HOST"
