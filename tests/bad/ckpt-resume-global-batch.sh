#!/bin/sh
# Bad input: a resume whose layout cannot keep the checkpoint's global
# batch is refused, exit 2, on every rank (no hang), naming the layout's
# arithmetic: a global batch of 3 sequences (one rank, --grad-accum 3)
# resumed on 4 ranks as CP 2 x DP 2 gives DP 2 = 4 ranks / TP 1 / CP 2 /
# PP 1 (the message said "4 ranks / TP 1 / PP 1", which is 4, not 2), and
# without CP as DP 4 = 4 ranks / TP 1 / PP 1.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
A="--model tiny --data $CORPUS --steps 2 --seq-len 32 --batch 1 --eval-interval 0 --eval-batches 1 --quiet"
run_train r 1 --grad-accum 3 --stop-at 1
T="timeout 120 $MPIEXEC"
expect_error 2 "checkpoint global batch 3 cannot be kept with \-\-batch 1 x DP 2 \(4 ranks / TP 1 / CP 2 / PP 1\): micro-batch x DP must divide it; with this layout use \-\-batch in \{none\}" \
  $T -n 4 "$TRAIN" $A --run-dir "$WORK/r" --cp 2
expect_error 2 "checkpoint global batch 3 cannot be kept with \-\-batch 1 x DP 4 \(4 ranks / TP 1 / PP 1\)" \
  $T -n 4 "$TRAIN" $A --run-dir "$WORK/r"
pass "a resume that cannot keep the global batch is refused naming TP, CP, PP and DP"
