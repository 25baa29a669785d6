#!/bin/sh
# Bad input: a run directory that cannot be created is refused (exit 5) before training.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
: > "$WORK/file"
expect_error 5 "\-\-run-dir $WORK/file/run: cannot create" "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --run-dir "$WORK/file/run"
