#!/bin/sh
# Bad input: two tensors of a safetensors file sharing bytes (exit 3, both
# named).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
"$PYTHON" "$HPT_SRC/tests/helpers/st_tool.py" write "$WORK/config.json" "$WORK/w.safetensors" --dtype F32 \
  --expect "$WORK/exp.h5" --offsets model.norm.weight=256,512 || fail "write"
expect_error 3 "$WORK/w.safetensors: tensors model.embed_tokens.weight \[0, 2097152\) and model.norm.weight \[256, 512\) overlap" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/w.safetensors"
