#!/bin/sh
# Bad input: --async-save without a directory to checkpoint to is refused
# (exit 2), as --stop-at and --max-runtime are (before: silently ignored).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
T="$TRAIN --model tiny --data $CORPUS --steps 1 --batch 2 --seq-len 32"
expect_error 2 "^hpt-train: \-\-async-save needs \-\-run-dir or \-\-checkpoint-dir \(it writes checkpoints\)$" $T --async-save
grep -q "^step" "$WORK/out.$$" && fail "trained without a checkpoint directory for --async-save"
pass "--async-save without a checkpoint directory is refused"
