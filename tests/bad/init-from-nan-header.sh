#!/bin/sh
# Bad input: a safetensors header holding NaN (not JSON: json-c took it
# even in strict mode): exit 3, naming the file and the word.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
ST="$PYTHON $HPT_SRC/tests/helpers/st_tool.py"
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
$ST write "$WORK/config.json" "$WORK/w.safetensors" --dtype F32 --expect "$WORK/exp.h5" || fail "write"
$ST reheader "$WORK/w.safetensors" meta-nan || fail "reheader"
expect_error 3 "$WORK/w.safetensors: the [0-9]*-byte header is not strict JSON: 'NaN' is not a JSON value" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/w.safetensors"
