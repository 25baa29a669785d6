#!/bin/sh
# A safetensors export over an earlier one in the same directory:
#   - interrupted (HPT_ST_TEST_ABORT_AFTER_RENAME=k aborts the writer right
#     after its k-th shard rename, as a kill -9 would) over an earlier
#     sharded export, hpt-train --init-from refuses the directory (exit 3)
#     instead of loading old and new shards mixed: the old index went first;
#   - the same with the old index put back (as if its removal had not
#     reached the disk, or another tool had copied it): refused, the shards'
#     export ids differ from the index's;
#   - 2 shards over 3 leave no -of-00003 file; one file over shards leaves
#     no shard; a file the old index did not name stays;
#   - an OUT whose name holds '"' and '\\' gives a valid JSON index (the
#     shard names are escaped) that --init-from loads.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
CKPT="$HPT_BUILD/src/hpt-ckpt"
A="--model tiny --data $CORPUS --seq-len 32 --batch 2 --eval-batches 1 --quiet --metrics none"
timeout 300 "$TRAIN" $A --steps 2 --save-every 1 --run-dir "$WORK/r" > "$WORK/train.out" 2>&1 ||
  { cat "$WORK/train.out"; fail "train"; }
D="$WORK/d"
mkdir "$D"
export_to() { # CHECKPOINT SHARD_BYTES
  "$CKPT" export --export-shard-size "$2" "$WORK/r/checkpoints/$1" "$D/model.safetensors" \
    > "$WORK/export.out" 2>&1 || { cat "$WORK/export.out"; fail "export $1 shards of $2 bytes"; }
}
init() { # NAME: --init-from D, one step, log in WORK/NAME.out
  timeout 300 "$TRAIN" $A --steps 1 --init-from "$D" > "$WORK/$1.out" 2>&1
}
for k in 1 2 3; do
  rm -rf "$D" && mkdir "$D"
  export_to step_00000001 1000000
  n=$(ls "$D" | grep -c -- '-of-00003\.safetensors$')
  [ "$n" = 3 ] || fail "export step_1: $n shards, want 3 (tiny model, 1 MB shards)"
  cp "$D/model.safetensors.index.json" "$WORK/old-index.json"
  HPT_ST_TEST_ABORT_AFTER_RENAME=$k "$CKPT" export --export-shard-size 1000000 \
    "$WORK/r/checkpoints/step_00000002" "$D/model.safetensors" > "$WORK/abort.out" 2>&1 &&
    fail "the export with HPT_ST_TEST_ABORT_AFTER_RENAME=$k did not abort"
  grep -q "HPT_ST_TEST_ABORT_AFTER_RENAME=$k: aborting" "$WORK/abort.out" ||
    { cat "$WORK/abort.out"; fail "abort after rename $k: no word from the hook"; }
  init "k$k"
  rc=$?
  [ $rc = 3 ] || { cat "$WORK/k$k.out"; fail "interrupted after rename $k: --init-from exit $rc, want 3 (refused)"; }
  grep -q "neither model.safetensors.index.json nor model.safetensors" "$WORK/k$k.out" ||
    { cat "$WORK/k$k.out"; fail "interrupted after rename $k: not the no-index message"; }
  cp "$WORK/old-index.json" "$D/model.safetensors.index.json"
  init "k${k}idx"
  rc=$?
  [ $rc = 3 ] || { cat "$WORK/k${k}idx.out"; fail "old index over $k new shards: --init-from exit $rc, want 3"; }
  grep -q "is from another export" "$WORK/k${k}idx.out" ||
    { cat "$WORK/k${k}idx.out"; fail "old index over $k new shards: not the export-id message"; }
done
# Stale shards: 2 over 3, then one file over 2; an unrelated file stays.
rm -rf "$D" && mkdir "$D"
export_to step_00000001 1000000
echo keep > "$D/other-00009-of-00009.safetensors"
export_to step_00000002 3000000
n=$(ls "$D" | grep -c -- '-of-00002\.safetensors$')
[ "$n" = 2 ] || fail "export step_2 with 3 MB shards: $n shards of 2, want 2"
left=$(ls "$D" | grep -- '-of-00003\.safetensors$')
[ -z "$left" ] || fail "2 shards over 3 left the old shards: $left"
init over2 || { cat "$WORK/over2.out"; fail "--init-from the 2-shard export"; }
export_to step_00000002 100000000
left=$(ls "$D" | grep -- '^model-.*-of-.*\.safetensors$')
[ -z "$left" ] || fail "one file over 2 shards left: $left"
[ ! -e "$D/model.safetensors.index.json" ] || fail "one file over 2 shards left the index"
[ -e "$D/other-00009-of-00009.safetensors" ] || fail "a file no index named was removed"
init single || { cat "$WORK/single.out"; fail "--init-from the single file"; }
# Names needing JSON escapes.
Q="$WORK/q"
mkdir "$Q"
OUT="$Q/we\"ird\\name.safetensors"
"$CKPT" export --export-shard-size 1000000 "$WORK/r/checkpoints/step_00000002" "$OUT" \
  > "$WORK/q.out" 2>&1 || { cat "$WORK/q.out"; fail "export to $OUT"; }
"$PYTHON" -c 'import json, sys; m = json.load(open(sys.argv[1]))["weight_map"]; \
assert all(v.startswith(sys.argv[2]) for v in m.values()), m' "$OUT.index.json" 'we"ird\name-0000' ||
  fail "$OUT.index.json: not JSON, or the shard names are not the escaped OUT stem"
timeout 300 "$TRAIN" $A --steps 1 --init-from "$OUT.index.json" > "$WORK/q-init.out" 2>&1 ||
  { cat "$WORK/q-init.out"; fail "--init-from $OUT.index.json"; }
exit 0
