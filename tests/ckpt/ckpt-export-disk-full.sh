#!/bin/sh
# Disk full during `hpt-train --export FILE` (issue 17, finding 10): on an
# 8 MiB tmpfs, a previous export (tied embeddings, ~2.4 MiB) is there and
# the disk has 1 MiB left; the new export (untied, ~4.6 MiB) cannot be
# written. The export goes to FILE.tmp and is renamed over FILE only when
# complete, so: exit 5, one message naming the file and the cause (no space
# left), FILE byte-identical to the previous export, no FILE.tmp left.
# (Was: FILE truncated and rewritten in place — the old export destroyed,
# a well-formed file with a zero-filled lm_head.weight left, and only
# "cannot write dataset lm_head.weight" said.) The same for hpt-ckpt export
# (shared code, io/h5out.h). Then, with space again, the export succeeds
# and replaces FILE.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
[ "$(id -u)" = 0 ] || { echo "SKIP: mounting a tmpfs needs root"; exit 77; }
mkdir "$WORK/fs"
mount -t tmpfs -o size=8m tmpfs "$WORK/fs" 2>/dev/null || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
trap 'umount "$WORK/fs" 2>/dev/null; rm -rf "$WORK"' EXIT
W="$WORK/fs/w.h5"
B="--model tiny --data $CORPUS --seq-len 32 --batch 2 --eval-batches 1 --quiet --steps 1"
"$TRAIN" $B --tie-embeddings --export "$W" --save-every 1 --checkpoint-dir "$WORK/c" > "$WORK/o" 2>&1 ||
  { cat "$WORK/o"; fail "first export"; }
[ -s "$W" ] && [ ! -e "$W.tmp" ] || fail "first export: no $W, or $W.tmp left"
before=$(md5sum < "$W")
avail=$(df -Pk "$WORK/fs" | awk 'NR == 2 { print $4 }')
dd if=/dev/zero of="$WORK/fs/filler" bs=1k count=$((avail - 1024)) 2> /dev/null || fail "filler"

expect_error 5 "$W\.tmp: cannot (write|create) .*No space left on device" "$TRAIN" $B --export "$W"
grep -q "removed $W\.tmp; $W is unchanged" "$WORK/out.$$" || fail "message does not say $W is unchanged"
[ "$(md5sum < "$W")" = "$before" ] || fail "the previous export changed"
[ ! -e "$W.tmp" ] || fail "$W.tmp left behind"
# hpt-ckpt export shares the commit code
expect_error 5 "$W\.tmp: .*No space left on device.*$W is unchanged" "$HPT_BUILD/src/hpt-ckpt" export "$WORK/c" "$W"
[ "$(md5sum < "$W")" = "$before" ] && [ ! -e "$W.tmp" ] || fail "hpt-ckpt export: $W changed or $W.tmp left"

rm "$WORK/fs/filler"
"$TRAIN" $B --export "$W" > "$WORK/o" 2>&1 || { cat "$WORK/o"; fail "export with space again"; }
[ "$(md5sum < "$W")" != "$before" ] && [ ! -e "$W.tmp" ] || fail "export did not replace $W"
"$PYTHON" - "$W" <<'PY' || fail "the new export lacks an untied lm_head.weight"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    assert f["lm_head.weight"].shape == (8192, 64), f["lm_head.weight"].shape
    assert abs(f["lm_head.weight"][-1]).max() > 0  # the last rows were written
PY
pass "a full disk during --export keeps the previous export and leaves no temporary file"
