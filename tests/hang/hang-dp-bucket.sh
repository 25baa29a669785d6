#!/bin/sh
# Hang watchdog, DP4 with gradient buckets in flight: world rank 2 stops
# itself (SIGSTOP, its watchdog thread too) in step 2's backward just after
# posting its first DP bucket all-reduce (--fault-stall-at bucket); the
# other replicas post every bucket and wait in the first. Each healthy rank
# has then posted several DP seqs past the one it waits in: the old
# "overtaken" rule read that as the analysing rank's own heartbeat being
# stale and named it (a healthy node excluded, the frozen one kept; hang2
# report, 5 of 10 trials). The summary's suspects: line must be exactly
# the frozen rank.
. "$HPT_SRC/tests/helpers/lib.sh"
. "$HPT_SRC/tests/helpers/hang-lib.sh"
need_corpus
stall_job 4 2 2 --fault-stall-at bucket
name="DP4, rank 2 frozen after its first bucket of step 2"
[ "$ST" -eq 6 ] || fail "$name: exit status $ST, expected 6 (hang)"
grep -E "^hpt-train: hang: rank [013] .* in iallreduce on group dp .*; suspect: rank 2 on $HOST " \
  "$WORK/out" || fail "$name: no hang line from a rank waiting in a DP bucket naming rank 2 alone"
[ "$(grep -c '^hpt-train: hang:' "$WORK/out")" -eq 1 ] || fail "$name: hang line printed more than once"
cat "$WORK/run/hang/summary.txt"
sus=$(sed -n 's/^suspects: *//p' "$WORK/run/hang/summary.txt")
[ "$sus" = "2@$HOST" ] || fail "$name: summary.txt's suspects: line is '$sus', expected '2@$HOST'"
"$HM" hang "$WORK/run" > "$WORK/report" || { cat "$WORK/report"; fail "$name: hpt-metrics hang failed"; }
cat "$WORK/report"
pass "$name: exit 6, suspects: 2@$HOST only"
