#!/bin/sh
# A fresh start in a run directory that holds an earlier run's log.tsv and
# no checkpoint to resume from (the default --save-every 0) keeps that log
# as log.tsv.1, .2, ... with a note (it used to be truncated without a
# word). A run that resumes appends as before, with no such note.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
T="$TRAIN --model tiny --data $CORPUS --batch 2 --seq-len 16 --run-dir $WORK/r"
$T --steps 3 > "$WORK/o1" 2>&1 || { cat "$WORK/o1"; fail "first run"; }
cp "$WORK/r/log.tsv" "$WORK/first.tsv"
$T --steps 2 > "$WORK/o2" 2>&1 || { cat "$WORK/o2"; fail "second run"; }
grep -q "^hpt-train: note: $WORK/r/log.tsv held an earlier run's 3 steps and this run starts at step 0 (no checkpoint to resume from): the earlier log is kept as $WORK/r/log.tsv.1$" "$WORK/o2" ||
  { cat "$WORK/o2"; fail "no note keeping the earlier log"; }
cmp "$WORK/first.tsv" "$WORK/r/log.tsv.1" || fail "log.tsv.1 is not the first run's log"
[ "$(wc -l < "$WORK/r/log.tsv")" = 3 ] || fail "log.tsv of the second run: $(wc -l < "$WORK/r/log.tsv") lines, expected 3"
$T --steps 1 > "$WORK/o3" 2>&1 || { cat "$WORK/o3"; fail "third run"; }
[ -f "$WORK/r/log.tsv.2" ] && cmp -s "$WORK/r/log.tsv.1" "$WORK/first.tsv" || fail "the third run did not keep the second's log as log.tsv.2"
# --resume none over checkpoints: the note says so
$T --steps 2 --save-every 1 --run-dir "$WORK/n" > "$WORK/n1" 2>&1 || { cat "$WORK/n1"; fail "run with checkpoints"; }
$T --steps 2 --resume none --run-dir "$WORK/n" > "$WORK/n2" 2>&1 || { cat "$WORK/n2"; fail "--resume none"; }
grep -q "note: $WORK/n/log.tsv held an earlier run's 2 steps and this run starts at step 0 (--resume none): the earlier log is kept as $WORK/n/log.tsv.1$" "$WORK/n2" ||
  { cat "$WORK/n2"; fail "no note naming --resume none"; }
# a resumed run continues its log: no note, no copy
$T --steps 4 --save-every 2 --run-dir "$WORK/c" > "$WORK/o4" 2>&1 || { cat "$WORK/o4"; fail "run with checkpoints"; }
$T --steps 6 --save-every 2 --run-dir "$WORK/c" > "$WORK/o5" 2>&1 || { cat "$WORK/o5"; fail "resumed run"; }
! grep -q "earlier log is kept" "$WORK/o5" || fail "a resumed run kept its log aside"
[ ! -e "$WORK/c/log.tsv.1" ] || fail "a resumed run left log.tsv.1"
[ "$(wc -l < "$WORK/c/log.tsv")" = 7 ] || fail "the resumed log.tsv has $(wc -l < "$WORK/c/log.tsv") lines, expected 7"
pass "a fresh rerun keeps the earlier log.tsv; a resume appends"
