#!/bin/sh
# Bad input: each of --save-every, --keep and --max-runtime out of range gets
# its own message naming only that option (exit 2). (Was one message for all
# three: "--save-every 0 / --keep 3 / --max-runtime -1: must be >= 0 / >= 1 /
# >= 0".) --max-runtime without a directory to checkpoint to is refused as
# --stop-at is (was: silently ignored, the run went past the limit).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
T="$TRAIN --model tiny --data $CORPUS --steps 1 --batch 2 --seq-len 32"
expect_error 2 "^hpt-train: \-\-max-runtime -1: must be >= 0 seconds \(0 = none\)$" $T --max-runtime -1
expect_error 2 "^hpt-train: \-\-keep 0: must be >= 1$" $T --keep 0
expect_error 2 "^hpt-train: \-\-save-every -2: must be >= 0" $T --save-every -2
expect_error 2 "^hpt-train: \-\-max-runtime needs \-\-run-dir or \-\-checkpoint-dir" $T --max-runtime 0.001
grep -q "^step" "$WORK/out.$$" && fail "trained without a checkpoint directory for --max-runtime"
pass "checkpoint options out of range name themselves"
