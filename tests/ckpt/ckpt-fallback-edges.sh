#!/bin/sh
# Falling back past a bad newest checkpoint, and its limits:
# - the newest is truncated (its metadata does not read): --resume auto
#   warns and resumes from the previous one, continuing like an
#   uninterrupted run; --resume strict refuses (exit 3); log.tsv then has
#   every step once — also after a fallback at load time (a damaged tensor);
#   hpt-ckpt info/export DIR and hpt-generate RUN_DIR take step 2 as well;
# - the newest is damaged and the previous one has another global batch:
#   exit 3 naming why, nothing trained (was: "resumed" with weights never
#   loaded);
# - a malformed crc_tile attribute counts as damage (was: SIGFPE) in
#   hpt-ckpt verify and in a resume, which falls back.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
CKPT="$HPT_BUILD/src/hpt-ckpt"
# damage FILE DATASET K: overwrite 4 bytes at 1/K of the dataset's data
damage() {
  "$PYTHON" - "$@" <<'PY' || fail "could not damage $1"
import sys, h5py
p, name, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
with h5py.File(p, "r") as f:
    d = f[name]
    off = d.id.get_offset() + d.id.get_storage_size() // k
with open(p, "r+b") as fh:
    fh.seek(off)
    fh.write(b"\xde\xad\xbe\xef")
PY
}
B="--model tiny --data $CORPUS --seq-len 16 --lr 1e-3 --warmup 2 --eval-interval 100 --metrics none --quiet"

# truncated newest
"$TRAIN" $B --batch 2 --steps 6 --run-dir "$WORK/ref" > /dev/null 2>&1 || fail "reference run"
st=0; "$TRAIN" $B --batch 2 --steps 6 --save-every 2 --stop-at 4 --run-dir "$WORK/t" > /dev/null 2>&1 || st=$?
[ $st = 75 ] || fail "stop-at 4: exit $st"
truncate -s -4 "$WORK/t/checkpoints/step_00000004/checkpoint.h5"
expect_error 3 "step_00000004/checkpoint.h5: cannot open \(truncated or not HDF5: truncated file: eof = [0-9]+.*\) \(--resume strict: not falling back\)" \
  "$TRAIN" $B --batch 2 --steps 6 --resume strict --run-dir "$WORK/t"
# the tools take a directory's checkpoint as a resume does: past the
# truncated newest, with a note naming it
for tool in "$CKPT info" "$CKPT export" "$HPT_BUILD/src/hpt-generate"; do
  case $tool in
    *export) set -- "$WORK/t" "$WORK/t-export.h5" ;;
    *generate) set -- "$WORK/t" --tokenizer "$CORPUS" --prompt "The" --max-new-tokens 2 --ids ;;
    *) set -- "$WORK/t" ;;
  esac
  st=0; $tool "$@" > "$WORK/tool.out" 2> "$WORK/tool.err" || st=$?
  [ $st = 0 ] ||
    { cat "$WORK/tool.out" "$WORK/tool.err"; fail "$tool on a directory whose newest checkpoint is truncated: exit $st"; }
  grep -q "note: skipped the newer step_00000004 (.*step_00000004/checkpoint.h5: .*truncated.*): using step_00000002, the checkpoint a resume starts from$" "$WORK/tool.err" ||
    { cat "$WORK/tool.err"; fail "$tool: no note naming the skipped step_00000004"; }
done
"$CKPT" info "$WORK/t" 2> /dev/null | grep -q "^step  *2$" || fail "hpt-ckpt info did not show step 2"
"$TRAIN" $B --batch 2 --steps 6 --run-dir "$WORK/t" > "$WORK/t.out" 2>&1 || { cat "$WORK/t.out"; fail "auto resume past a truncated checkpoint"; }
grep -q "warning: .*step_00000004/checkpoint.h5: cannot open (truncated or not HDF5: truncated file: .*); falling back" "$WORK/t.out" ||
  { cat "$WORK/t.out"; fail "no fallback warning"; }
grep -q "resumed from .*step_00000002" "$WORK/t.out" || fail "did not resume from step 2"
cmp "$WORK/ref/log.tsv" "$WORK/t/log.tsv" || fail "log.tsv after the fallback differs from the uninterrupted run's"
echo "truncated newest: fell back to step 2, log equal to the uninterrupted run"

# damaged newest (same global batch): falls back at load time; log.tsv is
# cut back to the step actually loaded
st=0; "$TRAIN" $B --batch 2 --steps 6 --save-every 2 --stop-at 4 --run-dir "$WORK/d" > /dev/null 2>&1 || st=$?
[ $st = 75 ] || fail "stop-at 4 (d): exit $st"
damage "$WORK/d/checkpoints/step_00000004/checkpoint.h5" optim/exp_avg_sq/model.layers.1.mlp.down_proj.weight 2
"$TRAIN" $B --batch 2 --steps 6 --run-dir "$WORK/d" > "$WORK/d.out" 2>&1 || { cat "$WORK/d.out"; fail "fallback at load"; }
grep -q "resumed from .*step_00000002" "$WORK/d.out" || { cat "$WORK/d.out"; fail "did not fall back to step 2"; }
cmp "$WORK/ref/log.tsv" "$WORK/d/log.tsv" || fail "log.tsv after a load-time fallback differs (steps 3-4 twice?)"
echo "damaged newest: fell back at load time, log equal to the uninterrupted run"

# damaged newest, previous with another global batch
"$TRAIN" $B --batch 2 --steps 2 --save-every 2 --run-dir "$WORK/g" > /dev/null 2>&1 || fail "batch-2 run"
"$TRAIN" $B --batch 4 --steps 4 --save-every 4 --resume none --run-dir "$WORK/g" > /dev/null 2>&1 || fail "batch-4 run"
damage "$WORK/g/checkpoints/step_00000004/checkpoint.h5" model/model.embed_tokens.weight 3
expect_error 3 "no loadable checkpoint \(the previous checkpoint, step 2, has a global batch of 2 sequences, not 4: not falling back to it\)" \
  "$TRAIN" $B --batch 4 --steps 6 --run-dir "$WORK/g"
[ "$(tail -n 1 "$WORK/g/log.tsv" | cut -f1)" = 4 ] || fail "a step was trained after the failed load"

# the same with another --seq-len: the message names it
"$TRAIN" $B --batch 2 --steps 2 --save-every 2 --run-dir "$WORK/s" > /dev/null 2>&1 || fail "seq 16 run"
"$TRAIN" $B --seq-len 8 --batch 2 --steps 4 --save-every 4 --resume none --run-dir "$WORK/s" > /dev/null 2>&1 ||
  fail "seq 8 run"
damage "$WORK/s/checkpoints/step_00000004/checkpoint.h5" model/model.layers.0.mlp.up_proj.weight 2
expect_error 3 "the previous checkpoint, step 2, has --seq-len 16, not 8: not falling back to it" \
  "$TRAIN" $B --seq-len 8 --batch 2 --steps 6 --run-dir "$WORK/s"

# unloadable checkpoints newer than the one loaded (truncated, a step
# directory without checkpoint.h5, a FIFO where the file should be — which
# must not block)
# are moved aside, so --keep never prunes the new saves in their favour;
# a resume that fails leaves log.tsv as it was
st=0; "$TRAIN" $B --batch 2 --steps 8 --save-every 2 --stop-at 6 --keep 2 --run-dir "$WORK/k" > /dev/null 2>&1 || st=$?
[ $st = 75 ] || fail "keep run: exit $st"
C="$WORK/k/checkpoints"
truncate -s -4 "$C/step_00000006/checkpoint.h5"
mkdir "$C/step_00000020" "$C/step_00000040" && mkfifo "$C/step_00000040/checkpoint.h5"
echo "not a checkpoint" > "$C/step_00000020/notes.txt" # (an empty one is a removal's leftover: ignored)
st=0; timeout -k 5 120 "$TRAIN" $B --batch 2 --steps 8 --keep 1 --stop-at 5 --run-dir "$WORK/k" > "$WORK/k.out" 2>&1 || st=$?
[ $st = 75 ] || { cat "$WORK/k.out"; fail "resume past unloadable newer checkpoints: exit $st"; }
grep -q "moved the unloadable .*step_00000040 aside" "$WORK/k.out" || { cat "$WORK/k.out"; fail "step 40 not moved aside"; }
[ "$(ls "$C" | tr '\n' ' ')" = "latest step_00000005 step_00000006.unloadable step_00000020.unloadable step_00000040.unloadable " ] ||
  { ls "$C"; fail "checkpoints after the resume and --keep 1"; }
"$TRAIN" $B --batch 2 --steps 8 --save-every 1 --keep 2 --run-dir "$WORK/k" > "$WORK/k.out" 2>&1 ||
  { cat "$WORK/k.out"; fail "next resume"; }
grep -q "resumed from .*step_00000005" "$WORK/k.out" || fail "next resume did not start from step 5"
damage "$C/step_00000008/checkpoint.h5" model/model.norm.weight 2
damage "$C/step_00000007/checkpoint.h5" model/model.norm.weight 2
cp "$WORK/k/log.tsv" "$WORK/k.log.before"
expect_error 3 "no loadable checkpoint" "$TRAIN" $B --batch 2 --steps 10 --run-dir "$WORK/k"
cmp "$WORK/k.log.before" "$WORK/k/log.tsv" || fail "a failed resume changed log.tsv"

# malformed crc_tile
"$TRAIN" $B --batch 2 --steps 4 --save-every 2 --run-dir "$WORK/m" > /dev/null 2>&1 || fail "run m"
"$PYTHON" - "$WORK/m/checkpoints/step_00000004/checkpoint.h5" <<'PY' || fail "could not edit the attribute"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    d = f["model/model.layers.0.mlp.up_proj.weight"]
    d.attrs["crc_tile"] = np.array([2**62, 64], dtype="<i8")
    d.attrs["crc32c"] = np.array([0], dtype="<u4")
PY
expect_error 3 "model.layers.0.mlp.up_proj.weight: .*(damaged|crc)" "$CKPT" verify "$WORK/m/checkpoints/step_00000004"
"$TRAIN" $B --batch 2 --steps 5 --run-dir "$WORK/m" > "$WORK/m.out" 2>&1 || { cat "$WORK/m.out"; fail "resume past a malformed crc_tile"; }
grep -q "resumed from .*step_00000002" "$WORK/m.out" || { cat "$WORK/m.out"; fail "no fallback past the malformed crc_tile"; }
pass "truncated newest falls back (strict refuses); no fallback across a global batch or seq-len change; unloadable newer checkpoints moved aside; a failed resume keeps the log; malformed crc_tile is damage"
