#!/bin/sh
# Bad input: hpt-generate's weights path is missing (exit 3), a directory
# with no checkpoint in it (exit 3; the message says how to get one, or names
# the run's model.h5 export when there is one), or not readable (exit 5; only checked
# when not root, since root reads any file).
. "$HPT_SRC/tests/helpers/lib.sh"
GEN="$HPT_BUILD/src/hpt-generate"
expect_error 3 "weights $WORK/nope: no such file or directory" \
  "$GEN" "$WORK/nope" --prompt "The horse" --tokenizer "$WORK"
expect_error 3 "weights $WORK/nope/checkpoint.h5: no such file or directory" \
  "$GEN" --checkpoint "$WORK/nope/checkpoint.h5" --prompt "The horse"
mkdir "$WORK/run"
expect_error 3 "weights $WORK/run: a directory without checkpoint.h5 and without a complete step_NNNNNNNN checkpoint in $WORK/run \(hpt-train checkpoints with --save-every N" \
  "$GEN" "$WORK/run" --prompt "The horse"
# a run directory with only its export (hpt-train --run-dir R --export R/model.h5,
# no --save-every): the message names the export
: > "$WORK/run/model.h5"
expect_error 3 "weights $WORK/run: a directory without checkpoint.h5 .*: to use its export, give $WORK/run/model.h5$" \
  "$GEN" "$WORK/run" --prompt "The horse"
if [ "$(id -u)" != 0 ]; then
  : > "$WORK/locked.h5"
  chmod 000 "$WORK/locked.h5"
  expect_error 5 "weights $WORK/locked.h5: Permission denied" "$GEN" "$WORK/locked.h5" --prompt "The horse"
else
  echo "root: the unreadable-file case is not checked (root reads mode 000 files)"
fi
pass "missing or unreadable weights refused"
