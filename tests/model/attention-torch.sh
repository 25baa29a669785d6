#!/bin/sh
# The CPU backend's attention op (lib/attention_cpu.c: tiled, online
# softmax, causal tiles skipped) against an independent PyTorch
# implementation, forward and all three gradients, at T = 1, 7, 64 (one
# whole tile), 257 (not a multiple of the 64-row tile) and GQA ratios 1, 3,
# 4. Tolerances are in tests/helpers/attention_torch.py.
. "$HPT_SRC/tests/helpers/lib.sh"
"$PYTHON" -c "import torch, numpy" || fail "python3-torch / python3-numpy missing (setup.sh installs them)"
for shape in "2 1 4 4 8" "2 7 3 1 16" "1 64 4 1 16" "1 257 6 2 16" "2 257 4 1 8" "1 200 4 4 32"; do
  rm -f "$WORK"/*.f32
  "$HPT_BUILD/tests/helpers/attn_dump" $shape "$WORK" || fail "attn_dump $shape"
  "$PYTHON" "$HPT_SRC/tests/helpers/attention_torch.py" "$WORK" $shape || fail "PyTorch comparison ($shape)"
done
pass "attention (cpu) equals the PyTorch reference at T = 1, 7, 64, 200, 257 and GQA ratios 1, 3, 4"
