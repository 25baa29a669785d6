#!/bin/sh
# hpt-train under `mpiexec -n 1` trains like the plain process.
. "$HPT_SRC/tests/lib.sh"
need_corpus
args="--model tiny --data $CORPUS --steps 5 --batch 2 --seq-len 32 --eval-batches 1 --quiet"
"$TRAIN" $args --run-dir "$WORK/plain" > /dev/null || fail "plain run"
"$MPIEXEC" -n 1 "$TRAIN" $args --run-dir "$WORK/mpi" > "$WORK/out" 2>&1 || { cat "$WORK/out"; fail "mpiexec -n 1 run"; }
cmp "$WORK/plain/log.tsv" "$WORK/mpi/log.tsv" || fail "mpiexec -n 1 differs from the plain process"
pass "mpiexec -n 1 equals the plain process"
