#!/bin/sh
# Bad input: a tensor whose shape is not the config's (exit 3, the message
# names the tensor and both shapes): in a safetensors file, on one rank and
# on the second of two pipeline stages (the message comes once, from rank
# 0); in an HDF5 export loaded into a model with another SwiGLU width; and
# a model with a layer more than the config.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
T="--data $CORPUS --steps 1 --batch 2 --seq-len 32"
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
"$PYTHON" "$HPT_SRC/tests/helpers/st_tool.py" write "$WORK/config.json" "$WORK/w.safetensors" --dtype F32 \
  --expect "$WORK/exp.h5" --shape model.layers.1.mlp.up_proj.weight=176,32 || fail "write"
msg="tensor model.layers.1.mlp.up_proj.weight has shape \[176, 32\], the config \(--model\) needs \[176, 64\]"
expect_error 3 "$WORK/w.safetensors: $msg" "$TRAIN" --model tiny $T --init-from "$WORK/w.safetensors"
expect_error 3 "$WORK/w.safetensors: $msg" timeout 300 "$MPIEXEC" -n 2 "$TRAIN" --model tiny $T --pp 2 \
  --init-from "$WORK/w.safetensors"
"$PYTHON" "$HPT_SRC/tests/helpers/st_tool.py" write "$WORK/config.json" "$WORK/ok.safetensors" --dtype F32 \
  --expect "$WORK/export.h5" || fail "write"     # export.h5: the --export layout
sed 's/"intermediate_size": 176/"intermediate_size": 128/' "$WORK/config.json" > "$WORK/narrow.json"
expect_error 3 "$WORK/export.h5: tensor model.layers.0.mlp.gate_proj.weight has shape \[176, 64\], the config \(--model\) needs \[128, 64\]" \
  "$TRAIN" --model "$WORK/narrow.json" $T --init-from "$WORK/export.h5"
# a model with more layers than the config: refused, not truncated
sed 's/"num_hidden_layers": 2/"num_hidden_layers": 3/' "$WORK/config.json" > "$WORK/deep.json"
"$PYTHON" "$HPT_SRC/tests/helpers/st_tool.py" write "$WORK/deep.json" "$WORK/deep.safetensors" --dtype F32 \
  --expect "$WORK/deep.h5" || fail "write"
expect_error 3 "$WORK/deep.safetensors: tensor model.layers.2.input_layernorm.weight is of a layer beyond the config's num_hidden_layers = 2" \
  "$TRAIN" --model tiny $T --init-from "$WORK/deep.safetensors"
