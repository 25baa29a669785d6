#!/bin/sh
# Hang watchdog under ZeRO-3: DP 2, world rank 1 stops itself (SIGSTOP) in
# step 2's backward just after posting its first gradient bucket's
# reduce-scatter (--fault-stall-at bucket reaches the reduce-scatter buckets
# of ZeRO-2/3, not only ZeRO-0's all-reduce buckets); rank 0 goes on to the
# next buckets and parameter gathers and waits. The job ends with exit 6
# and the suspects: line names rank 1 alone.
. "$HPT_SRC/tests/helpers/lib.sh"
. "$HPT_SRC/tests/helpers/hang-lib.sh"
need_corpus
stall_job 2 1 2 --zero 3 --fault-stall-at bucket
name="ZeRO-3 DP 2, rank 1 frozen after its first bucket of step 2"
[ "$ST" -eq 6 ] || fail "$name: exit status $ST, expected 6 (hang)"
grep -E "^hpt-train: hang: rank 0 .*; suspect: rank 1 on $HOST " "$WORK/out" ||
  fail "$name: no hang line from rank 0 naming rank 1"
sus=$(sed -n 's/^suspects: *//p' "$WORK/run/hang/summary.txt")
[ "$sus" = "1@$HOST" ] || fail "$name: summary.txt's suspects: line is '$sus', expected '1@$HOST'"
pass "$name: exit 6, suspects: 1@$HOST only"
