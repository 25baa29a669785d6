#!/bin/sh
# Bad input: a safetensors header length larger than the file (exit 3).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
"$PYTHON" "$HPT_SRC/tests/helpers/st_tool.py" write "$WORK/config.json" "$WORK/w.safetensors" --dtype F32 \
  --expect "$WORK/exp.h5" --header-len 99999999 || fail "write"
expect_error 3 "$WORK/w.safetensors: header length 99999999 exceeds the [0-9]+ bytes after the length field" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/w.safetensors"
