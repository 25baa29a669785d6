#!/bin/sh
# Bad input for safetensors exports (hpt-train --export FILE.safetensors,
# hpt-ckpt export PATH OUT.safetensors): an unknown --export-dtype and the
# safetensors-only options on an HDF5 export (exit 2); OUT in a directory
# that does not exist (exit 5, before training); OUT in the run directory,
# whose config.json the export would replace (exit 2); OUT that is a
# checkpoint (exit 2, the existing refusal, kept: the checkpoint is left as
# it was); a disk that fills during the export (exit 5: the earlier export
# is unchanged, no .tmp file is left).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
CKPT="$HPT_BUILD/src/hpt-ckpt"
A="--model tiny --data $CORPUS --steps 1 --batch 2 --seq-len 32 --quiet --metrics none"
expect_error 2 "\-\-export-dtype 'fp8': unknown export dtype \(f32 or bf16\)" \
  "$TRAIN" $A --export "$WORK/m.safetensors" --export-dtype fp8
expect_error 2 "\-\-export-dtype applies to safetensors exports: --export $WORK/w.h5 is HDF5" \
  "$TRAIN" $A --export "$WORK/w.h5" --export-dtype bf16
expect_error 2 "\-\-export-shard-size needs --export FILE.safetensors" "$TRAIN" $A --export-shard-size 1000
expect_error 2 "\-\-export-shard-size 0: must be >= 1" "$TRAIN" $A --export "$WORK/m.safetensors" --export-shard-size 0
expect_error 5 "\-\-export $WORK/nope/m.safetensors: directory $WORK/nope does not exist" \
  "$TRAIN" $A --export "$WORK/nope/m.safetensors"
grep -q "^done" "$WORK/out.$$" && fail "training ran before the export path was checked"
expect_error 2 "\-\-export $WORK/run/model.safetensors: its config.json would replace the run directory's $WORK/run/config.json" \
  "$TRAIN" $A --run-dir "$WORK/run" --export "$WORK/run/model.safetensors"
# hpt-ckpt export
"$TRAIN" $A --save-every 1 --run-dir "$WORK/r" > "$WORK/r.out" 2>&1 || { cat "$WORK/r.out"; fail "run"; }
expect_error 2 "^hpt-ckpt: --export-dtype 'fp8': unknown export dtype \(f32 or bf16\)$" \
  "$CKPT" export --export-dtype fp8 "$WORK/r" "$WORK/m.safetensors"
expect_error 2 "^hpt-ckpt: --export-dtype and --export-shard-size apply to an OUT ending in .safetensors" \
  "$CKPT" export --export-dtype bf16 "$WORK/r" "$WORK/w.h5"
expect_error 5 "^hpt-ckpt: $WORK/nope/m.safetensors: directory $WORK/nope does not exist$" \
  "$CKPT" export "$WORK/r" "$WORK/nope/m.safetensors"
expect_error 2 "^hpt-ckpt: export: OUT $WORK/r/model.safetensors is in the run directory $WORK/r: its config.json would replace the run's own" \
  "$CKPT" export "$WORK/r" "$WORK/r/model.safetensors"
mkdir "$WORK/o" && cp "$WORK/r/checkpoints/step_00000001/checkpoint.h5" "$WORK/o/c.safetensors"
before=$(md5sum < "$WORK/o/c.safetensors")
expect_error 2 "^hpt-ckpt: export: OUT $WORK/o/c.safetensors is an hpt checkpoint" \
  "$CKPT" export "$WORK/r" "$WORK/o/c.safetensors"
[ "$(md5sum < "$WORK/o/c.safetensors")" = "$before" ] || fail "the checkpoint named as OUT changed"
expect_error 2 "\-\-export $WORK/o/c.safetensors: is an hpt checkpoint" "$TRAIN" $A --export "$WORK/o/c.safetensors"
# disk full during a sharded export: the earlier export stays, no .tmp is left
[ "$(id -u)" = 0 ] || { echo "SKIP: mounting a tmpfs needs root"; exit 77; }
mkdir "$WORK/fs"
mount -t tmpfs -o size=8m tmpfs "$WORK/fs" 2>/dev/null || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
trap 'umount "$WORK/fs" 2>/dev/null; rm -rf "$WORK"' EXIT
"$CKPT" export --export-dtype bf16 "$WORK/r" "$WORK/fs/model.safetensors" > /dev/null || fail "first export"
before=$(cat "$WORK/fs/model.safetensors" "$WORK/fs/config.json" | md5sum)
avail=$(df -Pk "$WORK/fs" | awk 'NR == 2 { print $4 }')
dd if=/dev/zero of="$WORK/fs/filler" bs=1k count=$((avail - 1024)) 2> /dev/null || fail "filler"
expect_error 5 "$WORK/fs/model-0000[0-9]-of-00003.safetensors.tmp: write failed: No space left on device \(removed the .tmp files; $WORK/fs/model.safetensors is unchanged\)" \
  "$CKPT" export --export-shard-size 1000000 "$WORK/r" "$WORK/fs/model.safetensors"
[ "$(cat "$WORK/fs/model.safetensors" "$WORK/fs/config.json" | md5sum)" = "$before" ] || fail "the earlier export changed"
ls "$WORK/fs" | grep -q "tmp$" && { ls "$WORK/fs"; fail "a .tmp file was left"; }
ls "$WORK/fs" | grep -q "of-0000" && { ls "$WORK/fs"; fail "a shard was left under its final name"; }
pass "bad safetensors export options and paths are refused; a full disk leaves the earlier export"
