#!/bin/sh
# Bad input: an --export path that cannot be written is refused before any
# training step (exit 5), not after the run.
. "$HPT_SRC/tests/lib.sh"
need_corpus
expect_error 5 "\-\-export $WORK/nope/w.h5: directory $WORK/nope does not exist" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 3 --batch 2 --seq-len 32 --export "$WORK/nope/w.h5"
grep -q "^step" "$WORK/out.$$" && fail "training ran before the export path was checked"
mkdir "$WORK/dir.h5"
expect_error 5 "\-\-export $WORK/dir.h5: not a regular file" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 3 --batch 2 --seq-len 32 --export "$WORK/dir.h5"
