#!/bin/sh
# Bad input: hpt-ckpt list given a file (a checkpoint.h5) instead of a
# directory: exit 3 saying it is a file and what list takes. (Was:
# "FILE: no such file or directory" for a file that exists.) hpt-ckpt info on
# an export says it is one (exit 3; was only "not an hpt checkpoint").
. "$HPT_SRC/tests/helpers/lib.sh"
CKPT="$HPT_BUILD/src/hpt-ckpt"
DIR="$WORK/run/checkpoints"
tiny_ckpts "$DIR" --steps 10
F="$DIR/step_00000010/checkpoint.h5"
expect_error 3 "^hpt-ckpt: $F: a file, not a directory: list takes a run directory or its checkpoints directory" \
  "$CKPT" list "$F"
expect_error 3 "^hpt-ckpt: $WORK/nowhere: no such file or directory$" "$CKPT" list "$WORK/nowhere"
"$CKPT" export "$DIR" "$WORK/w.h5" > /dev/null || fail "export"
expect_error 3 "^hpt-ckpt: $WORK/w.h5: not an hpt checkpoint .*: an export \(weights only" "$CKPT" info "$WORK/w.h5"
pass "hpt-ckpt list on a file and info on an export say what they got"
