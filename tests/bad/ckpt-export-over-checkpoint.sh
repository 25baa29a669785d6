#!/bin/sh
# Bad input: an export (weights only) aimed at a checkpoint file. hpt-ckpt
# export given the checkpoint it reads as OUT used to replace it and exit 0:
# the newest checkpoint lost its AdamW moments and data cursor, and the next
# resume fell back past it. Now refused (exit 2) before anything is read or
# written, the checkpoint byte for byte as it was; so is an OUT that is
# another checkpoint, and hpt-train --export naming a checkpoint (before
# training). An ordinary OUT still works.
. "$HPT_SRC/tests/helpers/lib.sh"
CKPT="$HPT_BUILD/src/hpt-ckpt"
DIR="$WORK/run/checkpoints"
tiny_ckpts "$DIR" --steps 10
C="$DIR/step_00000010/checkpoint.h5"
[ -f "$C" ] || fail "make_ckpt.py wrote no $C"
md5=$(md5sum < "$C")
expect_error 2 "^hpt-ckpt: export: OUT $C is an hpt checkpoint: the export \(weights only\) would replace it; give another file name$" \
  "$CKPT" export "$WORK/run" "$C"
expect_error 2 "export: OUT $C is an hpt checkpoint" "$CKPT" export "$C" "$C"
cp "$C" "$WORK/other.h5"
expect_error 2 "export: OUT $WORK/other.h5 is an hpt checkpoint" "$CKPT" export "$C" "$WORK/other.h5"
# a checkpoint damaged past reading is still known by its place
mkdir -p "$WORK/d/step_00000030" && head -c 3000 "$C" > "$WORK/d/step_00000030/checkpoint.h5"
expect_error 2 "export: OUT $WORK/d/step_00000030/checkpoint.h5 is an hpt checkpoint" \
  "$CKPT" export "$C" "$WORK/d/step_00000030/checkpoint.h5"
[ "$(wc -c < "$WORK/d/step_00000030/checkpoint.h5")" = 3000 ] || fail "the damaged checkpoint was replaced"
[ "$(md5sum < "$C")" = "$md5" ] || fail "the checkpoint changed"
[ ! -e "$C.tmp" ] || fail "a $C.tmp was left"
"$CKPT" verify "$C" > /dev/null 2>&1 || fail "the checkpoint no longer verifies"
"$CKPT" export "$WORK/run" "$WORK/w.h5" > "$WORK/o" 2>&1 || { cat "$WORK/o"; fail "export to an ordinary OUT"; }
"$CKPT" export "$WORK/run" "$WORK/w.h5" > "$WORK/o" 2>&1 || { cat "$WORK/o"; fail "export over an earlier export"; }
write_shard "$WORK/s.bin" 20240520 1 200 $(seq 1 200)
expect_error 2 "\-\-export $C: is an hpt checkpoint: the export \(weights only\) would replace it" \
  "$TRAIN" --model tiny --data "$WORK/s.bin" --seq-len 16 --batch 2 --steps 1 --export "$C"
grep -q "^step" "$WORK/out.$$" && fail "training ran before --export CHECKPOINT was refused"
[ "$(md5sum < "$C")" = "$md5" ] || fail "hpt-train --export changed the checkpoint"
pass "exports never replace a checkpoint"
