#!/bin/sh
# Bad input: a safetensors header giving two tensors twice, the second
# entries with their data_offsets swapped (the format forbids duplicate
# keys; json-c keeps the last, so both layernorms loaded swapped, exit 0):
# exit 3, the key named.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
ST="$PYTHON $HPT_SRC/tests/helpers/st_tool.py"
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
$ST write "$WORK/config.json" "$WORK/w.safetensors" --dtype F32 --expect "$WORK/exp.h5" || fail "write"
$ST reheader "$WORK/w.safetensors" dup-swap \
  model.layers.0.input_layernorm.weight,model.layers.0.post_attention_layernorm.weight || fail "reheader"
expect_error 3 "$WORK/w.safetensors: the [0-9]*-byte header gives the key \"model.layers.0.input_layernorm.weight\" twice in one object" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/w.safetensors"
