#!/bin/sh
# Bad input: a --checkpoint-dir where nothing can be created is refused
# (exit 5) before any step when checkpoints are due (--save-every N); it used
# to be found at the first save, after N steps of work (and an exit 5 is not
# requeued). /proc stands for a read-only place even root cannot write.
# With --save-every 0 only a stop signal's save would use it: a warning.
. "$HPT_SRC/tests/helpers/lib.sh"
write_shard "$WORK/s.bin" 20240520 1 400 $(seq 1 400)
T="$TRAIN --model tiny --data $WORK/s.bin --seq-len 16 --batch 2 --metrics none"
expect_error 5 "^hpt-train: \-\-checkpoint-dir /proc/hpt-ck: cannot create anything in /proc: .* \(checkpoints are saved there: \-\-save-every 5\)$" \
  $T --steps 10 --save-every 5 --checkpoint-dir /proc/hpt-ck
grep -q "^step" "$WORK/out.$$" && fail "training ran before the checkpoint directory was refused"
: > "$WORK/file"
expect_error 5 "^hpt-train: \-\-checkpoint-dir $WORK/file/ck: $WORK/file/ck: Not a directory \(checkpoints are saved there" \
  $T --steps 10 --save-every 5 --checkpoint-dir "$WORK/file/ck"
# --stop-at and --max-runtime save too
expect_error 5 "\-\-checkpoint-dir /proc/hpt-ck: cannot create anything in /proc: .* \(checkpoints are saved there: \-\-stop-at 3\)$" \
  $T --steps 10 --stop-at 3 --checkpoint-dir /proc/hpt-ck
expect_error 5 "\-\-checkpoint-dir /proc/hpt-ck: .* \(checkpoints are saved there: \-\-max-runtime 600\)$" \
  $T --steps 10 --max-runtime 600 --checkpoint-dir /proc/hpt-ck
ln -s "$WORK/nowhere" "$WORK/dangling"
expect_error 5 "\-\-checkpoint-dir $WORK/dangling: a symbolic link to nothing \(checkpoints are saved there: \-\-save-every 5\)$" \
  $T --steps 10 --save-every 5 --checkpoint-dir "$WORK/dangling"
# a new directory below a writable one is fine, and is not created early
# (a run refused for another reason leaves nothing there)
expect_error 2 "\-\-batch" $T --steps 2 --save-every 2 --batch 0 --checkpoint-dir "$WORK/early/ck"
[ ! -e "$WORK/early" ] || fail "the checkpoint directory was created by a refused run"
st=0
$T --steps 2 --save-every 2 --checkpoint-dir "$WORK/new/a/ck" > "$WORK/o" 2>&1 || st=$?
[ $st = 0 ] || { cat "$WORK/o"; fail "--checkpoint-dir in a new directory: exit $st"; }
[ -f "$WORK/new/a/ck/step_00000002/checkpoint.h5" ] || fail "no checkpoint in the new directory"
! ls -A "$WORK/new/a/ck" "$WORK/new/a" "$WORK" | grep -q "hpt-probe" || fail "a probe directory was left"
st=0
$T --steps 1 --checkpoint-dir /proc/hpt-ck > "$WORK/o" 2>&1 || st=$?
no_crash "$WORK/o" "$st"
[ $st = 0 ] || { cat "$WORK/o"; fail "--save-every 0 with an unwritable --checkpoint-dir: exit $st"; }
[ "$(grep -c "warning: \-\-checkpoint-dir /proc/hpt-ck: cannot create anything in /proc: .*: a stop signal's checkpoint would fail" "$WORK/o")" = 1 ] ||
  { cat "$WORK/o"; fail "no single warning for --save-every 0"; }
pass "an unwritable --checkpoint-dir is refused before training"
