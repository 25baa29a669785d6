#!/bin/sh
# Bad input: a resume whose layout cannot keep the checkpoint's global
# batch is refused, exit 2, on every rank (no hang), naming the layout's
# arithmetic: a global batch of 3 sequences (one rank, --grad-accum 3)
# resumed on 4 ranks as CP 2 x DP 2 gives DP 2 = 4 ranks / TP 1 / CP 2 /
# PP 1 (the message said "4 ranks / TP 1 / PP 1", which is 4, not 2), and
# without CP as DP 4 = 4 ranks / TP 1 / PP 1. Where DP divides the global
# batch, the micro-batches that keep it are listed.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
A="--model tiny --data $CORPUS --steps 2 --seq-len 32 --batch 1 --eval-interval 0 --eval-batches 1 --quiet"
run_train r 1 --grad-accum 3 --stop-at 1
T="timeout 120 $MPIEXEC"
# DP 2 does not divide 3, so no --batch can: the message says so and names
# the DPs that divide 3 and the 4 ranks (it said "use --batch in {none}")
expect_error 2 "checkpoint global batch 3 cannot be kept with \-\-batch 1 x DP 2 \(4 ranks / TP 1 / CP 2 / PP 1\): micro-batch x DP must divide it, and DP 2 does not divide 3, so no \-\-batch can; on 4 ranks use a layout with a DP that divides 3: DP 1 \(TP x CP x PP = 4\), or a number of ranks that allows one" \
  $T -n 4 "$TRAIN" $A --run-dir "$WORK/r" --cp 2
expect_error 2 "checkpoint global batch 3 cannot be kept with \-\-batch 1 x DP 4 \(4 ranks / TP 1 / PP 1\)" \
  $T -n 4 "$TRAIN" $A --run-dir "$WORK/r"
run_train r6 1 --grad-accum 6 --stop-at 1
expect_error 2 "checkpoint global batch 6 cannot be kept with \-\-batch 4 x DP 2 \(2 ranks / TP 1 / PP 1\): micro-batch x DP must divide it; with this layout use \-\-batch in \{1, 3\}, or a DP that divides 6" \
  $T -n 2 "$TRAIN" $A --run-dir "$WORK/r6" --batch 4
pass "a resume that cannot keep the global batch is refused naming TP, CP, PP and DP"
