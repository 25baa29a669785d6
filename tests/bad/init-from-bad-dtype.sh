#!/bin/sh
# Bad input: a model tensor stored as I32 in a safetensors file (exit 3,
# tensor and dtype named, the supported ones listed).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
"$PYTHON" "$HPT_SRC/tests/helpers/st_tool.py" write "$WORK/config.json" "$WORK/w.safetensors" --dtype F32 \
  --expect "$WORK/exp.h5" --as-dtype model.norm.weight=I32 || fail "write"
expect_error 3 "$WORK/w.safetensors: tensor model.norm.weight: dtype I32 is not supported \(F32, BF16 and F16 are\)" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/w.safetensors"
