#!/bin/sh
# Bad input: an export OUT that is one of a run's own files — its latest
# pointer, log.tsv, metrics.h5, config.json, a file in its checkpoints
# directory or inside a committed checkpoint — was written over them
# (hpt-ckpt export and hpt-train --export). Now exit 2 naming it, and the
# run's files are unchanged.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
A="--model tiny --data $CORPUS --seq-len 32 --batch 2 --eval-batches 1 --quiet"
R="$WORK/R"
"$TRAIN" $A --steps 2 --save-every 2 --run-dir "$R" > "$WORK/train.out" 2>&1 ||
  { cat "$WORK/train.out"; fail "train"; }
sums() { find "$R" -type f ! -name '*.lock' | sort | xargs md5sum; }
before=$(sums)
CKPT="$HPT_BUILD/src/hpt-ckpt"
for f in log.tsv metrics.h5 config.json; do
  expect_error 2 "export: OUT $R/$f: is the run directory $R's own $f; give another name" \
    "$CKPT" export "$R" "$R/$f"
done
expect_error 2 "export: OUT $R/checkpoints/latest: in $R/checkpoints, a checkpoints directory" \
  "$CKPT" export "$R" "$R/checkpoints/latest"
expect_error 2 "export: OUT $R/checkpoints/x.h5: in $R/checkpoints, a checkpoints directory" \
  "$CKPT" export "$R" "$R/checkpoints/x.h5"
S="$R/checkpoints/step_00000002"
expect_error 2 "export: OUT $S/model.safetensors: in $S, a checkpoint of a run" \
  "$CKPT" export "$R" "$S/model.safetensors"
expect_error 2 "\-\-export $R/metrics.h5: is the run directory $R's own metrics.h5" \
  "$TRAIN" $A --steps 2 --run-dir "$R" --export "$R/metrics.h5"
expect_error 2 "\-\-export $R/checkpoints/latest: in $R/checkpoints, a checkpoints directory" \
  "$TRAIN" $A --steps 2 --run-dir "$R" --export "$R/checkpoints/latest"
# a run directory this run has not created yet: known by name
expect_error 2 "\-\-export $WORK/R2/log.tsv: is the run directory $WORK/R2's own log.tsv" \
  "$TRAIN" $A --steps 1 --run-dir "$WORK/R2" --export "$WORK/R2/log.tsv"
[ "$(sums)" = "$before" ] || fail "a run file changed"
[ ! -e "$S/model.safetensors" ] || fail "an export was written into $S"
pass "exports over a run's own files are refused"
