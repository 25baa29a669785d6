#!/bin/sh
# A checkpoint records the run's optimizer options (attribute "optimizer");
# a resume with other values trains on, with a note naming each change and
# the next step's learning rate (it used to say nothing: another --lr or a
# longer --steps reshapes the schedule mid-run). The same options: no note.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
T="$TRAIN --model tiny --data $CORPUS --batch 2 --seq-len 16 --save-every 2 --warmup 2 --run-dir $WORK/r --quiet"
$T --steps 2 > "$WORK/o1" 2>&1 || { cat "$WORK/o1"; fail "first run"; }
"$HPT_BUILD/src/hpt-ckpt" info "$WORK/r" > "$WORK/info" 2>&1 || { cat "$WORK/info"; fail "hpt-ckpt info"; }
grep -q "^optimizer      AdamW, t = 2; --lr 0.0006 --min-lr 6e-05 --warmup 2 --steps 2 --weight-decay 0.1 --beta1 0.9 --beta2 0.95 --adam-eps 1e-08 --clip 1$" "$WORK/info" ||
  { cat "$WORK/info"; fail "hpt-ckpt info shows no optimizer options"; }
$T --steps 4 --lr 0.001 > "$WORK/o2" 2>&1 || { cat "$WORK/o2"; fail "resume with --lr 0.001 --steps 4"; }
grep -q "resumed from .*step_00000002" "$WORK/o2" || { cat "$WORK/o2"; fail "did not resume"; }
# lr of step 3 (0-based 2) after warm-up: cosine from 0.001 to min-lr 6e-05 over 2 steps: at its start, 0.001
grep -q "^hpt-train: note: resuming with other optimizer options than the checkpoint's run: --lr 0.001 (was 0.0006), --steps 4 (was 2); the schedule continues from step 2 with them (lr of the next step 0.001)$" "$WORK/o2" ||
  { cat "$WORK/o2"; fail "no note naming --lr and --steps"; }
$T --steps 6 --lr 0.001 > "$WORK/o3" 2>&1 || { cat "$WORK/o3"; fail "resume with --steps 6"; }
grep -q "note: resuming with other optimizer options than the checkpoint's run: --steps 6 (was 4);" "$WORK/o3" ||
  { cat "$WORK/o3"; fail "no note naming --steps only"; }
$T --steps 8 --lr 0.001 --stop-at 7 > "$WORK/o4" 2>&1; st=$?
[ $st = 75 ] || { cat "$WORK/o4"; fail "--stop-at 7: exit $st, expected 75"; }
$T --steps 8 --lr 0.001 > "$WORK/o5" 2>&1 || { cat "$WORK/o5"; fail "resume with the same options"; }
! grep -q "other optimizer options" "$WORK/o5" || { cat "$WORK/o5"; fail "a note although the options are the same"; }
pass "a resume with other optimizer options is noted; the same options are not"
