#!/bin/sh
# What a kill during --keep pruning can leave must not look like a broken
# checkpoint (issue 17, finding 13). Pruning renames a checkpoint aside
# (step_N -> .step_N.pruning), syncs the directory, then deletes it; earlier
# versions unlinked checkpoint.h5 in place, so a kill before the rmdir left
# an empty step_N/. Both states are simulated here:
# - hpt-ckpt verify DIR and list (also --verify) ignore them (exit 0; was:
#   verify exit 3, list "unreadable");
# - a resume ignores them (an empty newest step_N is neither tried nor moved
#   aside as unloadable) and clears them at start.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
CKPT="$HPT_BUILD/src/hpt-ckpt"
B="--model tiny --data $CORPUS --seq-len 32 --batch 2 --eval-batches 1 --quiet --save-every 1 --keep 4"
C="$WORK/r/checkpoints"
"$TRAIN" $B --steps 4 --run-dir "$WORK/r" > "$WORK/o" 2>&1 || { cat "$WORK/o"; fail "first run"; }
[ "$(ls "$C" | tr '\n' ' ')" = "latest step_00000001 step_00000002 step_00000003 step_00000004 " ] ||
  { ls "$C"; fail "four checkpoints expected"; }

# the post-kill states
rm "$C/step_00000001/checkpoint.h5"                  # earlier versions: unlinked, not rmdir'd
mv "$C/step_00000002" "$C/.step_00000002.pruning"     # renamed aside, deletion not finished
truncate -s 4096 "$C/.step_00000002.pruning/checkpoint.h5"
mkdir "$C/step_00000009"                              # an empty step directory newer than all

st=0; "$CKPT" verify "$C" > "$WORK/v" 2>&1 || st=$?
cat "$WORK/v"
no_crash "$WORK/v" $st
[ $st = 0 ] || fail "verify DIR with removal leftovers: exit $st, expected 0"
grep -q "step_00000001\|step_00000002\|step_00000009" "$WORK/v" && fail "verify looked at a leftover"
[ "$(grep -c ': ok$' "$WORK/v")" = 2 ] || fail "verify: steps 3 and 4 not both ok"

for v in "" --verify; do
  st=0; "$CKPT" list $v "$C" > "$WORK/l" 2>&1 || st=$?
  cat "$WORK/l"
  no_crash "$WORK/l" $st
  [ $st = 0 ] || fail "list $v: exit $st"
  grep -q "unreadable\|damaged" "$WORK/l" && fail "list $v shows a leftover as unreadable"
  [ "$(grep -E '^ +[0-9]+ ' "$WORK/l" | awk '{print $1}' | tr '\n' ' ')" = "4 3 " ] ||
    fail "list $v: expected steps 4 and 3 only"
done
"$CKPT" info "$C" | grep -qE '^step +4$' || fail "info DIR does not pick step 4"

# resume: from step 4, nothing moved aside, the leftovers cleared
"$TRAIN" $B --steps 5 --run-dir "$WORK/r" > "$WORK/o" 2>&1 || { cat "$WORK/o"; fail "resume"; }
cat "$WORK/o"
grep -q "resumed from .*step_00000004" "$WORK/o" || fail "did not resume from step 4"
grep -q "unloadable\|falling back" "$WORK/o" && fail "a leftover was tried as a checkpoint"
[ "$(ls -A "$C" | tr '\n' ' ')" = "latest step_00000003 step_00000004 step_00000005 " ] ||
  { ls -A "$C"; fail "leftovers not cleared (or a checkpoint lost)"; }

# pruning itself leaves nothing behind
"$TRAIN" $B --steps 7 --keep 2 --run-dir "$WORK/r" > "$WORK/o" 2>&1 || { cat "$WORK/o"; fail "run 3"; }
[ "$(ls -A "$C" | tr '\n' ' ')" = "latest step_00000006 step_00000007 " ] ||
  { ls -A "$C"; fail "after pruning to 2"; }
pass "removal leftovers (empty step_N, .step_N.pruning) are ignored by verify/list/info and resume, and cleared"
