#!/bin/sh
# Bad input: a safetensors model without one of the model's tensors (exit 3,
# tensor named); an untied model from a file without lm_head.weight is told
# about --tie-embeddings.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
"$PYTHON" "$HPT_SRC/tests/helpers/st_tool.py" write "$WORK/config.json" "$WORK/w.safetensors" --dtype BF16 \
  --expect "$WORK/exp.h5" --drop model.layers.1.self_attn.v_proj.weight || fail "write"
expect_error 3 "$WORK/w.safetensors: tensor model.layers.1.self_attn.v_proj.weight is missing" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/w.safetensors"
"$PYTHON" "$HPT_SRC/tests/helpers/st_tool.py" write "$WORK/config.json" "$WORK/h.safetensors" --dtype BF16 \
  --expect "$WORK/exp.h5" --drop lm_head.weight || fail "write"
expect_error 3 "tensor lm_head.weight is missing \(the model is untied: --tie-embeddings" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/h.safetensors"
# a file of another naming scheme: the message shows a name the file has
"$PYTHON" - "$WORK/gpt2.safetensors" <<'PY' || fail "write gpt2-style file"
import json, struct, sys
hdr = json.dumps({"transformer.wte.weight": {"dtype": "F32", "shape": [2, 2],
                                             "data_offsets": [0, 16]}}).encode()
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(hdr)) + hdr + struct.pack("<4f", 1, 2, 3, 4))
PY
expect_error 3 "tensor model.embed_tokens.weight is missing \(the file has e.g. 'transformer.wte.weight'" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/gpt2.safetensors"
pass "missing tensors are named, with a name the file does have"
