#!/bin/sh
# Bad input: a safetensors file (or an HDF5 export) with a tensor hpt's
# Llama does not have — an attention bias — was loaded without a word and
# another model trained (exit 0); now refused, naming it (exit 3). RoPE's
# inv_freq buffer, which older Hugging Face files hold, is skipped with a
# note.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
ST="$PYTHON $HPT_SRC/tests/helpers/st_tool.py"
A="--model tiny --data $CORPUS --steps 1 --batch 2 --seq-len 32 --quiet --metrics none"
$ST write "$WORK/config.json" "$WORK/b.safetensors" --dtype F32 --expect "$WORK/b.h5" \
  --extra model.layers.0.self_attn.q_proj.bias=64 || fail "write"
expect_error 3 "$WORK/b.safetensors: tensor model.layers.0.self_attn.q_proj.bias is not one of the model's \(1 such tensor; hpt's Llama has no biases" \
  "$TRAIN" $A --init-from "$WORK/b.safetensors"
expect_error 3 "$WORK/b.h5: tensor model.layers.0.self_attn.q_proj.bias is not one of the model's" \
  "$TRAIN" $A --init-from "$WORK/b.h5"
$ST write "$WORK/config.json" "$WORK/r.safetensors" --dtype F32 --expect "$WORK/r.h5" \
  --extra model.rotary_emb.inv_freq=8 || fail "write"
"$TRAIN" $A --init-from "$WORK/r.safetensors" > "$WORK/r.out" 2>&1 || { cat "$WORK/r.out"; fail "inv_freq refused"; }
grep -q "note: --init-from $WORK/r.safetensors: 1 buffer such as model.rotary_emb.inv_freq not read" "$WORK/r.out" ||
  { cat "$WORK/r.out"; fail "no note about the skipped inv_freq"; }
pass "unknown tensors are refused by name; inv_freq is skipped with a note"
