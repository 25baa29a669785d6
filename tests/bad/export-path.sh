#!/bin/sh
# --export paths: an empty name is a usage error before any step (exit 2; was
# a full run, then "cannot rename .tmp to : ..." and exit 5), and an export
# into the --run-dir that this run creates is accepted (was refused: "directory
# RUN does not exist", exit 5) while a directory below it that nobody creates
# is still refused before training.
. "$HPT_SRC/tests/lib.sh"
need_corpus
T="$TRAIN --model tiny --data $CORPUS --steps 1 --batch 2 --seq-len 32 --metrics none"
expect_error 2 "\-\-export '': expected a file name" $T --export ""
grep -q "^step" "$WORK/out.$$" && fail "training ran before --export '' was refused"
$T --quiet --run-dir "$WORK/new/" --export "$WORK/new/model.h5" > "$WORK/o" 2>&1 ||
  { cat "$WORK/o"; fail "--export into the run directory being created: refused"; }
[ -s "$WORK/new/model.h5" ] && [ -s "$WORK/new/config.json" ] || fail "no export or config.json"
expect_error 5 "\-\-export $WORK/new2/sub/model.h5: directory $WORK/new2/sub does not exist" \
  $T --run-dir "$WORK/new2" --export "$WORK/new2/sub/model.h5"
[ ! -e "$WORK/new2" ] || fail "the run directory was created for a refused run"
pass "--export '' refused; --export into a new --run-dir works"
