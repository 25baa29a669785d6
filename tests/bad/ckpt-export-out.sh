#!/bin/sh
# Bad input: hpt-ckpt export to an empty OUT name (exit 2; was a ".tmp" file
# written in the working directory, then "cannot rename .tmp to : ..." and
# exit 5) and into a directory that does not exist (exit 5, the directory
# named, before the checkpoint is read; was "OUT.tmp: cannot create"); an
# OUT that is a FIFO is left untouched (exit 5; was replaced by the export).
. "$HPT_SRC/tests/helpers/lib.sh"
CKPT="$HPT_BUILD/src/hpt-ckpt"
DIR="$WORK/run/checkpoints"
tiny_ckpts "$DIR" --steps 10
cd "$WORK" || fail "cd"
expect_error 2 "^hpt-ckpt: export: OUT.h5 is empty: give a file name$" "$CKPT" export "$DIR" ""
[ ! -e "$WORK/.tmp" ] || fail "a .tmp file was left in the working directory"
expect_error 5 "^hpt-ckpt: $WORK/nodir/w.h5: directory $WORK/nodir does not exist$" \
  "$CKPT" export "$DIR" "$WORK/nodir/w.h5"
mkfifo "$WORK/fifo" || { echo "SKIP: no mkfifo"; exit 77; }
expect_error 5 "^hpt-ckpt: $WORK/fifo: not a regular file \(left untouched\)$" "$CKPT" export "$DIR" "$WORK/fifo"
[ -p "$WORK/fifo" ] || fail "the FIFO was replaced"
pass "hpt-ckpt export refuses an empty OUT and a missing directory up front"
