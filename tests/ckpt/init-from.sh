#!/bin/sh
# hpt-train --init-from a Hugging Face safetensors model written by hand
# (tests/helpers/st_tool.py): F32, BF16 and F16 single files and a sharded index
# (three shards in BF16, F16, F32) → after one step whose update is skipped
# (--fault-nan-steps 1: the loss is computed, the weights are not changed)
# the exported weights equal the file's values converted to float32,
# bitwise; and the step-1 loss equals PyTorch's (tests/helpers/torch_ref.py's model)
# on the same samples within 1e-5 relative. The index again with TP = 2
# (each rank reads its row or column slice) and a vocabulary TP does not
# divide (a padding row), on 2 ranks.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$PYTHON" -c "import torch, h5py, numpy" || fail "python3-torch / python3-h5py / numpy missing"
export OMP_NUM_THREADS=1
ST="$PYTHON $HPT_SRC/tests/helpers/st_tool.py"
A="--data $CORPUS --seq-len 32 --batch 2 --steps 1 --fault-nan-steps 1 --eval-batches 1 --quiet --metrics none --log-samples"
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
init() { # NAME SOURCE RANKS ARGS...: run, then compare the export with NAME's expected values
  name=$1 src=$2 n=$3; shift 3
  timeout 300 "$MPIEXEC" -n "$n" "$TRAIN" $A --init-from "$src" --run-dir "$WORK/$name" \
    --export "$WORK/$name.out.h5" "$@" > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; fail "run $name"; }
  $ST compare "$WORK/$name.exp.h5" "$WORK/$name.out.h5" || fail "$name: loaded weights differ from the file's"
}
for dt in F32 BF16 F16; do
  $ST write "$WORK/config.json" "$WORK/$dt.safetensors" --dtype $dt --expect "$WORK/$dt.exp.h5" --seed 7 ||
    fail "write $dt"
  init $dt "$WORK/$dt.safetensors" 1 --model tiny
done
$ST write "$WORK/config.json" "$WORK/sharded" --shards 3 --dtype BF16,F16,F32 --expect "$WORK/sharded.exp.h5" ||
  fail "write the sharded model"
ls "$WORK/sharded/model-00003-of-00003.safetensors" "$WORK/sharded/model.safetensors.index.json" > /dev/null ||
  fail "no sharded layout"
init sharded "$WORK/sharded" 1 --model tiny          # a directory: its index
for name in F32 sharded; do
  $ST loss "$WORK/config.json" "$WORK/$name.exp.h5" "$WORK/$name" "$CORPUS/train_000000.bin" 32 ||
    fail "$name: step-1 loss differs from PyTorch's"
done
# TP = 2 with a vocabulary of 8193 rows (padded to 8194: the pad row stays zero)
sed 's/"vocab_size": 8192/"vocab_size": 8193/' "$WORK/config.json" > "$WORK/odd.json"
grep -q '"vocab_size": 8193' "$WORK/odd.json" || fail "no odd vocabulary config"
mkdir -p "$WORK/odd" && cp "$WORK/odd.json" "$WORK/odd/config.json"
$ST write "$WORK/odd.json" "$WORK/tp" --shards 2 --dtype BF16,F32 --expect "$WORK/tp.exp.h5" --seed 3 ||
  fail "write the TP model"
init tp "$WORK/tp/model.safetensors.index.json" 2 --model "$WORK/odd.json" --tp 2
pass "--init-from safetensors (F32, BF16, F16, sharded; 1 rank and TP=2) loads exactly"
