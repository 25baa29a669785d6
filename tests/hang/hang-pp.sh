#!/bin/sh
# Hang watchdog, PP: on PP2 x DP2, world rank 0 (first stage) stalls before
# step 2; rank 2 (next stage) waits in a pipeline receive from rank 0, rank 1
# in the data-parallel reduction. Every rank ends with status 6, rank 0 is
# named with its host, every rank dumps its flight recorder.
. "$HPT_SRC/tests/helpers/lib.sh"
. "$HPT_SRC/tests/helpers/hang-lib.sh"
need_corpus
stall_job 4 0 2 --pp 2
check_hang 4 0
grep -q "^rank 2 .*waiting .* in recv on group pp (seq [0-9]*, peer rank 0)" "$WORK/report" ||
  fail "rank 2 is not reported waiting in a pipeline receive from rank 0"
pass "PP stall: exit 6 after ${ELAPSED}s, rank 0 named, dumps"
