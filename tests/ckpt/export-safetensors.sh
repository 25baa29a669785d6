#!/bin/sh
# Safetensors export, the other end of a model's life (issue 33, part C):
# hpt-train --export FILE.safetensors and hpt-ckpt export PATH OUT.safetensors
# write what transformers loads — Hugging Face Llama names and layouts,
# config.json beside them, F32 or BF16, sharded with an index above
# --export-shard-size. Checked here:
#   - every export's header field by field against the format, the index,
#     and config.json (tests/helpers/st_check.py: json/struct only);
#   - the values: hpt-train's export equals the checkpoint of the same step
#     (hpt-ckpt export to HDF5), bitwise; hpt-ckpt's single, sharded and
#     BF16 (round to nearest even, computed independently in NumPy) too;
#   - hpt's own --init-from reads the export back bitwise (one step whose
#     update is skipped, then exported again), and PyTorch's loss
#     (tests/helpers/torch_ref.py) on the exported weights equals hpt's step-1 loss;
#   - an export from TP = 2 (sharded, BF16) equals the 1-rank weights;
#   - a tied model's export has no lm_head.weight and says tie_word_embeddings;
#   - exporting one file over an earlier sharded export removes the stale
#     index (and vice versa), so a loader finds the new weights;
#   - OUT ending in .SAFETENSORS (any case) is safetensors, not HDF5.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$PYTHON" -c "import torch, h5py, numpy" || fail "python3-torch / python3-h5py / numpy missing"
export OMP_NUM_THREADS=1
ST="$PYTHON $HPT_SRC/tests/helpers/st_tool.py"
CHECK="$PYTHON $HPT_SRC/tests/helpers/st_check.py"
CKPT="$HPT_BUILD/src/hpt-ckpt"
A="--model tiny --data $CORPUS --seq-len 32 --batch 2 --eval-batches 1 --quiet --metrics none"
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
run() { # NAME RANKS ARGS...
  name=$1 n=$2; shift 2
  timeout 300 "$MPIEXEC" -n "$n" "$TRAIN" $A "$@" > "$WORK/$name.out" 2>&1 ||
    { cat "$WORK/$name.out"; fail "run $name"; }
}
mkdir "$WORK/st1" "$WORK/sh" "$WORK/bf" "$WORK/tp"
# 1. hpt-train --export .safetensors (F32, one file) == the checkpoint of the same step
run a 1 --steps 2 --save-every 2 --run-dir "$WORK/r" --export "$WORK/st1/model.safetensors"
$CHECK "$WORK/st1/model.safetensors" "$WORK/config.json" F32 || fail "hpt-train export: format"
[ ! -e "$WORK/st1/model.safetensors.tmp" ] || fail "a .tmp left beside the export"
"$CKPT" export "$WORK/r" "$WORK/ck.h5" > /dev/null || fail "hpt-ckpt export to HDF5"
$ST compare "$WORK/ck.h5" "$WORK/st1/model.safetensors" || fail "hpt-train export differs from the checkpoint"
# 2. hpt-ckpt export: sharded (1 MB shards: 3 files for the tiny model), and BF16
"$CKPT" export --export-shard-size 1000000 "$WORK/r" "$WORK/sh/model.safetensors" > "$WORK/sh.out" ||
  fail "hpt-ckpt export, sharded"
grep -q "to 3 shards and $WORK/sh/model.safetensors.index.json" "$WORK/sh.out" || { cat "$WORK/sh.out"; fail "not 3 shards"; }
$CHECK "$WORK/sh/model.safetensors" "$WORK/config.json" F32 --shards 3 || fail "sharded export: format"
$ST compare "$WORK/ck.h5" "$WORK/sh" || fail "sharded export differs from the checkpoint"
"$CKPT" export --export-dtype bf16 "$WORK/r/checkpoints" "$WORK/bf/model.safetensors" > /dev/null ||
  fail "hpt-ckpt export, bf16"
$CHECK "$WORK/bf/model.safetensors" "$WORK/config.json" BF16 || fail "bf16 export: format"
$ST compare "$WORK/ck.h5" "$WORK/bf/model.safetensors" --bf16 || fail "bf16 export is not the round-to-nearest-even of the checkpoint"
# the extension decides case-insensitively: X.SAFETENSORS is safetensors, not HDF5
mkdir "$WORK/up"
"$CKPT" export "$WORK/r" "$WORK/up/X.SAFETENSORS" > /dev/null || fail "hpt-ckpt export to X.SAFETENSORS"
$CHECK "$WORK/up/X.SAFETENSORS" "$WORK/config.json" F32 || fail "X.SAFETENSORS: not a safetensors export"
$ST compare "$WORK/ck.h5" "$WORK/up/X.SAFETENSORS" || fail "X.SAFETENSORS differs from the checkpoint"
# 3. --init-from the export reads it back bitwise; PyTorch's loss on it equals hpt's
run b 1 --steps 1 --fault-nan-steps 1 --log-samples --run-dir "$WORK/rb" --init-from "$WORK/st1" --export "$WORK/b.h5"
$ST compare "$WORK/st1/model.safetensors" "$WORK/b.h5" || fail "--init-from the export → export differs"
$ST loss "$WORK/config.json" "$WORK/st1/model.safetensors" "$WORK/rb" "$CORPUS/train_000000.bin" 32 ||
  fail "PyTorch's loss on the exported weights differs from hpt's"
run bs 1 --steps 1 --fault-nan-steps 1 --init-from "$WORK/sh" --export "$WORK/bs.h5"
$ST compare "$WORK/ck.h5" "$WORK/bs.h5" || fail "--init-from the sharded export → export differs"
# 4. TP = 2 export, sharded BF16 from hpt-train's own options
run tp 2 --tp 2 --steps 1 --fault-nan-steps 1 --init-from "$WORK/ck.h5" --export "$WORK/tp/model.safetensors" \
  --export-dtype bf16 --export-shard-size 1000000
$CHECK "$WORK/tp/model.safetensors" "$WORK/config.json" BF16 --shards 3 || fail "TP=2 export: format"
$ST compare "$WORK/ck.h5" "$WORK/tp" --bf16 || fail "TP=2 bf16 export differs"
# 4b. tied embeddings: no lm_head.weight, tie_word_embeddings true in config.json; loads back
sed 's/"tie_word_embeddings": false/"tie_word_embeddings": true/' "$WORK/config.json" > "$WORK/tied.json"
grep -q '"tie_word_embeddings": true' "$WORK/tied.json" || fail "no tied config"
mkdir "$WORK/tied"
run t 1 --steps 1 --tie-embeddings --export "$WORK/tied/model.safetensors"
$CHECK "$WORK/tied/model.safetensors" "$WORK/tied.json" F32 || fail "tied export: format"
run t2 1 --steps 1 --fault-nan-steps 1 --tie-embeddings --init-from "$WORK/tied" --export "$WORK/t2.h5"
$ST compare "$WORK/tied/model.safetensors" "$WORK/t2.h5" || fail "tied: --init-from the export → export differs"
# 5. one file over an earlier sharded export: the stale index goes (and back)
"$CKPT" export "$WORK/r" "$WORK/sh/model.safetensors" > /dev/null || fail "single over sharded"
[ ! -e "$WORK/sh/model.safetensors.index.json" ] || fail "the stale index of the sharded export is still there"
$CHECK "$WORK/sh/model.safetensors" "$WORK/config.json" F32 || fail "single over sharded: format"
"$CKPT" export --export-shard-size 1000000 "$WORK/r" "$WORK/sh/model.safetensors" > /dev/null || fail "sharded over single"
[ ! -e "$WORK/sh/model.safetensors" ] || fail "the stale single file is still there (transformers would load it)"
$CHECK "$WORK/sh/model.safetensors" "$WORK/config.json" F32 --shards 3 || fail "sharded over single: format"
# the checker can fail: a file whose length field is 4 bytes short (untiled data)
mkdir "$WORK/badst" && cp "$WORK/config.json" "$WORK/badst/config.json"
$ST write "$WORK/config.json" "$WORK/badst/model.safetensors" --dtype F32 --expect "$WORK/x.h5" --header-delta -4 ||
  fail "write the damaged file"
$CHECK "$WORK/badst/model.safetensors" "$WORK/config.json" F32 > "$WORK/badst.out" &&
  { cat "$WORK/badst.out"; fail "st_check passed a file whose data_offsets do not tile the data"; }
grep -q "tensors end at byte" "$WORK/badst.out" || { cat "$WORK/badst.out"; fail "st_check: no tiling finding"; }
pass "safetensors exports: format, values (F32, BF16, sharded, TP=2), read back by --init-from and PyTorch"
