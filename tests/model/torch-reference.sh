#!/bin/sh
# hpt against an independent PyTorch implementation (python3-torch): tiny
# config with GQA (4 heads, 2 kv heads), untied and tied embeddings, real
# tokens. Tolerances are in tests/helpers/torch_ref.py.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$PYTHON" -c "import torch, h5py" || fail "python3-torch / python3-h5py missing (setup.sh installs them)"
for tie in 0 1; do
  "$TRAIN" --model tiny $( [ $tie = 1 ] && echo --tie-embeddings ) --print-config > "$WORK/config.json" ||
    fail "print-config"
  grep -q '"num_key_value_heads": 2' "$WORK/config.json" || fail "tiny must use GQA"
  "$HPT_BUILD/tests/helpers/ref_dump" tiny $tie "$CORPUS/val_000000.bin" "$WORK/ref.h5" 2 32 3 1e-3 2 0.05 42 ||
    fail "ref_dump (tie=$tie)"
  "$PYTHON" "$HPT_SRC/tests/helpers/torch_ref.py" "$WORK/config.json" "$WORK/ref.h5" \
    --lr 1e-3 --warmup 2 --clip 0.05 || fail "PyTorch comparison (tie=$tie)"
done
pass "hpt equals the PyTorch reference (untied and tied)"
