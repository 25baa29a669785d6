#!/bin/sh
# Bad input: a safetensors file cut inside its 8-byte header length (exit 3).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
"$PYTHON" "$HPT_SRC/tests/helpers/st_tool.py" write "$WORK/config.json" "$WORK/w.safetensors" --dtype F32 \
  --expect "$WORK/exp.h5" --truncate 5 || fail "write"
expect_error 3 "$WORK/w.safetensors: truncated: 5 bytes, shorter than the 8-byte header length" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/w.safetensors"
