#!/bin/sh
# Bad input: safetensors data_offsets past the end of the data region, and
# offsets whose size does not match shape x dtype (exit 3, tensor named).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
W="$PYTHON $HPT_SRC/tests/helpers/st_tool.py write $WORK/config.json"
$W "$WORK/w.safetensors" --dtype F32 --expect "$WORK/exp.h5" --offsets model.norm.weight=0,999999999 ||
  fail "write"
expect_error 3 "$WORK/w.safetensors: tensor model.norm.weight: data_offsets \[0, 999999999\] outside the data region of [0-9]+ bytes" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/w.safetensors"
$W "$WORK/s.safetensors" --dtype F32 --expect "$WORK/exp.h5" --offsets model.norm.weight=0,100 || fail "write"
expect_error 3 "$WORK/s.safetensors: tensor model.norm.weight: data_offsets \[0, 100\] hold 100 bytes, shape x F32 needs 256" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/s.safetensors"
