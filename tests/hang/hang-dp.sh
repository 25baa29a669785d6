#!/bin/sh
# Hang watchdog, DP: on DP4, world rank 2 stalls before step 2; the other
# replicas wait in the data-parallel gradient all-reduce. Every rank ends
# with status 6, rank 2 is named with its host, every rank dumps.
. "$HPT_SRC/tests/helpers/lib.sh"
. "$HPT_SRC/tests/helpers/hang-lib.sh"
need_corpus
stall_job 4 2 2
check_hang 4 2
grep -q "^rank 0 .*waiting .* on group dp " "$WORK/report" ||
  fail "rank 0 is not reported waiting in a data-parallel reduction"
pass "DP stall: exit 6 after ${ELAPSED}s, rank 2 named, dumps"
