#!/bin/sh
# Bad input: ranks given different options (an MPMD command line, a
# launcher that builds them per node). Before, another --lr on one DP rank
# trained the two replicas apart and exited 0; another --steps under TP 2
# hung; another --seq-len under PP 2 crashed in MPI_Recv ("Message
# truncated"). Now refused before any collective of the run (exit 2), rank 0
# naming the first rank and option that differ, in hpt-train's own words.
. "$HPT_SRC/tests/helpers/lib.sh"
write_shard "$WORK/s.bin" 20240520 1 400 $(seq 1 400)
A="$TRAIN --model tiny --data $WORK/s.bin --steps 2 --batch 2 --seq-len 16 --metrics none"
expect_error 2 "^hpt-train: rank 1 was given other options than rank 0 \(every rank must run the same hpt-train command\): \-\-lr 0.0006 on rank 0, \-\-lr 0.001 on rank 1$" \
  timeout 120 "$MPIEXEC" -n 1 $A --dp 2 : -n 1 $A --dp 2 --lr 0.001
expect_error 2 "rank 1 was given other options than rank 0 .*: \-\-steps 2 on rank 0, \-\-steps 3 on rank 1$" \
  timeout 120 "$MPIEXEC" -n 1 $A --tp 2 : -n 1 $A --tp 2 --steps 3
expect_error 2 "rank 2 was given other options than rank 0 .*: \-\-seq-len 16 on rank 0, \-\-seq-len 32 on rank 2$" \
  timeout 120 "$MPIEXEC" -n 2 $A --pp 2 --dp 2 : -n 2 $A --pp 2 --dp 2 --seq-len 32
# the message uses hpt-train's own option names
expect_error 2 "rank 1 was given other options than rank 0 .*: \-\-clip 1 on rank 0, \-\-clip 0.5 on rank 1$" \
  timeout 120 "$MPIEXEC" -n 1 $A --dp 2 : -n 1 $A --dp 2 --clip 0.5
expect_error 2 ": \-\-zero 0 on rank 0, \-\-zero 1 on rank 1$" \
  timeout 120 "$MPIEXEC" -n 1 $A --dp 2 : -n 1 $A --dp 2 --zero1
# a rank whose own options do not parse, or that alone has --help, used to
# leave the others waiting in the first collective: agreed, exit 2
expect_error 2 "^hpt-train: \-\-lr 'abc': not a finite number$" \
  timeout 120 "$MPIEXEC" -n 1 $A --dp 2 : -n 1 $A --dp 2 --lr abc
expect_error 2 "^hpt-train: the ranks were given other options \(\-\-help, \-\-version or \-\-print-config on some ranks only\)" \
  timeout 120 "$MPIEXEC" -n 1 $A --dp 2 : -n 1 $A --dp 2 --help
# the same options in another order are the same options
st=0
timeout 120 "$MPIEXEC" -n 1 $A --dp 2 --lr 0.001 --seed 7 : -n 1 $A --seed 7 --lr 0.001 --dp 2 > "$WORK/o" 2>&1 || st=$?
[ $st = 0 ] || { cat "$WORK/o"; fail "the same options in another order: exit $st"; }
pass "ranks with different options are refused, naming the rank and the option"
