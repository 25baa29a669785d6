#!/bin/sh
# hpt-train under `mpiexec -n 1` trains like the plain process; under
# `mpiexec -n 2`, --help and --print-config print once and no rank trains.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
args="--model tiny --data $CORPUS --steps 5 --batch 2 --seq-len 32 --eval-batches 1 --quiet"
"$TRAIN" $args --run-dir "$WORK/plain" > /dev/null || fail "plain run"
"$MPIEXEC" -n 1 "$TRAIN" $args --run-dir "$WORK/mpi" > "$WORK/out" 2>&1 || { cat "$WORK/out"; fail "mpiexec -n 1 run"; }
cmp "$WORK/plain/log.tsv" "$WORK/mpi/log.tsv" || fail "mpiexec -n 1 differs from the plain process"
export OMP_NUM_THREADS=1
timeout 60 "$MPIEXEC" -n 2 "$TRAIN" --help > "$WORK/help" 2>&1 || fail "mpiexec -n 2 hpt-train --help failed or hung"
[ "$(grep -c '^Usage: hpt-train' "$WORK/help")" -eq 1 ] || fail "--help not printed exactly once"
timeout 60 "$MPIEXEC" -n 2 "$TRAIN" --model tiny --print-config > "$WORK/cfg" 2>&1 || fail "--print-config under mpiexec -n 2"
[ "$(grep -c '"hidden_size"' "$WORK/cfg")" -eq 1 ] || fail "--print-config not printed exactly once"
pass "mpiexec -n 1 equals the plain process; --help and --print-config under mpiexec -n 2 print once"
