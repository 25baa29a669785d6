#!/bin/sh
# Bad input: a --metrics path in a missing or read-only directory, or naming
# a directory → exit 5 before training, message naming the path.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
run() { "$TRAIN" --model tiny --data "$CORPUS" --steps 2 --batch 1 --seq-len 32 --eval-batches 1 --metrics "$1"; }
expect_error 5 "metrics file $WORK/nope/m.h5: directory $WORK/nope does not exist" run "$WORK/nope/m.h5"
mkdir "$WORK/dir.h5"
expect_error 5 "metrics file $WORK/dir.h5: not a regular file" run "$WORK/dir.h5"
mkdir "$WORK/ro"; chmod 555 "$WORK/ro"
if [ "$(id -u)" != 0 ]; then
  expect_error 5 "metrics file $WORK/ro/m.h5: directory $WORK/ro is not writable" run "$WORK/ro/m.h5"
fi
pass "unwritable metrics paths refused"
