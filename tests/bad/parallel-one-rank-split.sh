#!/bin/sh
# Bad input: one rank cannot hold --tp 2 (or --tp 1 --cp 2): the message
# says "1 rank cannot be split" (it said "1 ranks"), exit 2.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
A="--model tiny --data $CORPUS --seq-len 32 --steps 1 --quiet"
expect_error 2 "^hpt-train: 1 rank cannot be split into \-\-tp 2 x \-\-pp 1 x DP: the world size must be a multiple of tp\*pp = 2" \
  timeout 120 "$MPIEXEC" -n 1 "$TRAIN" $A --tp 2
expect_error 2 "1 rank cannot be split into \-\-tp 1 x \-\-cp 2 x \-\-pp 1 x DP" \
  timeout 120 "$MPIEXEC" -n 1 "$TRAIN" $A --cp 2
expect_error 2 "\-\-tp 1 x \-\-pp 1 x \-\-dp 2 = 2 ranks, but the job has 1 rank \(omit \-\-dp to infer it\)" \
  timeout 120 "$MPIEXEC" -n 1 "$TRAIN" $A --dp 2
pass "one rank that cannot be split is named in the singular"
