#!/bin/sh
# Bad input: a safetensors model without one of the model's tensors (exit 3,
# tensor named); an untied model from a file without lm_head.weight is told
# about --tie-embeddings.
. "$HPT_SRC/tests/lib.sh"
need_corpus
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
"$PYTHON" "$HPT_SRC/tests/st_tool.py" write "$WORK/config.json" "$WORK/w.safetensors" --dtype BF16 \
  --expect "$WORK/exp.h5" --drop model.layers.1.self_attn.v_proj.weight || fail "write"
expect_error 3 "$WORK/w.safetensors: tensor model.layers.1.self_attn.v_proj.weight is missing" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/w.safetensors"
"$PYTHON" "$HPT_SRC/tests/st_tool.py" write "$WORK/config.json" "$WORK/h.safetensors" --dtype BF16 \
  --expect "$WORK/exp.h5" --drop lm_head.weight || fail "write"
expect_error 3 "tensor lm_head.weight is missing \(the model is untied: --tie-embeddings" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/h.safetensors"
