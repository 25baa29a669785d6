#!/bin/sh
# SIGUSR1 mid-run → checkpoint at the next step boundary, exit 75, and the
# resumed run continues bitwise. A damaged tensor in the newest checkpoint:
# --resume strict refuses naming it (exit 3), --resume auto warns and falls
# back to the previous checkpoint. A stale step_*.tmp is removed; a deleted
# `latest` is recovered by scanning.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
A="--model tiny --data $CORPUS --seq-len 32 --batch 2 --lr 1e-3 --warmup 2 --eval-batches 1 --eval-interval 0 --steps 60"
"$TRAIN" $A --quiet --run-dir "$WORK/ref" > /dev/null || fail "reference run"
"$TRAIN" $A --run-dir "$WORK/s" > "$WORK/s.out" 2>&1 &
pid=$!
i=0
until [ "$(grep -c '^step ' "$WORK/s.out")" -ge 5 ]; do sleep 0.1; i=$((i + 1)); [ $i -lt 600 ] || { kill $pid; fail "no progress"; }; done
kill -USR1 $pid
st=0; wait $pid || st=$?
[ $st = 75 ] || { cat "$WORK/s.out"; fail "SIGUSR1: exit $st, expected 75"; }
grep -q "after a stop signal; exiting with status 75" "$WORK/s.out" || fail "no requeue message"
saved=$(sed -n 's/^step \([0-9]*\): checkpoint .*/\1/p' "$WORK/s.out")
[ -n "$saved" ] && [ "$saved" -lt 60 ] || fail "no checkpoint before the end (saved: '$saved')"
"$TRAIN" $A --quiet --run-dir "$WORK/s" > "$WORK/s2.out" 2>&1 || { cat "$WORK/s2.out"; fail "resume after signal"; }
cmp "$WORK/ref/log.tsv" "$WORK/s/log.tsv" || fail "run resumed after SIGUSR1 differs from the uninterrupted run"
echo "signal at step $saved: resumed run is bitwise identical"

# Two checkpoints (steps 2 and 4); damage a tensor of the newest.
B="--model tiny --data $CORPUS --seq-len 32 --batch 2 --eval-batches 1 --quiet --steps 8"
st=0; "$TRAIN" $B --save-every 2 --stop-at 4 --run-dir "$WORK/c" > /dev/null 2>&1 || st=$?
[ $st = 75 ] || fail "stop-at: exit $st"
mkdir "$WORK/c/checkpoints/step_00000099.tmp"
"$PYTHON" - "$WORK/c/checkpoints/step_00000004/checkpoint.h5" <<'PY' || fail "could not damage the file"
import sys, h5py
p = sys.argv[1]
with h5py.File(p, "r") as f:
    ds = f["model/model.layers.1.mlp.up_proj.weight"]
    off = ds.id.get_offset()  # contiguous (format 2); chunked (format 1): chunk 0
    off = ds.id.get_chunk_info(0).byte_offset if off is None else off
with open(p, "r+b") as f:
    f.seek(off + 100)
    f.write(b"\xde\xad\xbe\xef" * 8)
PY
cp -r "$WORK/c" "$WORK/c2"
expect_error 3 "tensor /model/model.layers.1.mlp.up_proj.weight is damaged" \
  "$TRAIN" $B --resume strict --run-dir "$WORK/c"
"$TRAIN" $B --run-dir "$WORK/c2" > "$WORK/c2.out" 2>&1 || { cat "$WORK/c2.out"; fail "auto resume with fallback"; }
grep -q "warning: .*up_proj.weight is damaged.*falling back" "$WORK/c2.out" || fail "no fallback warning"
grep -q "resumed from .*step_00000002" "$WORK/c2.out" || fail "did not fall back to step 2"
[ ! -e "$WORK/c2/checkpoints/step_00000099.tmp" ] || fail "stale .tmp not removed"
# latest deleted → found by scanning
mkdir "$WORK/d" && "$TRAIN" $B --save-every 2 --stop-at 2 --run-dir "$WORK/d" > /dev/null 2>&1
rm "$WORK/d/checkpoints/latest"
"$TRAIN" $B --run-dir "$WORK/d" > "$WORK/d.out" 2>&1 || fail "resume without latest"
grep -q "resumed from .*step_00000002" "$WORK/d.out" || fail "latest not recovered by scanning"
pass "signal checkpoint + bitwise resume; damaged tensor detected, strict refuses, auto falls back"
