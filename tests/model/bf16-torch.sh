#!/usr/bin/env bash
# bf16-torch.sh — lib/bf16.h's float32 -> bfloat16 rounding equals PyTorch's
# (.to(torch.bfloat16): round to nearest even) on 2^20 bit patterns: specials,
# exact ties, subnormals and random values (tests/unit/test_bf16 writes them).
set -euo pipefail
. "$HPT_SRC/tests/helpers/lib.sh"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
n=1048576
"$HPT_BUILD/tests/unit/test_bf16" "$work/bf16.bin" $n
"$PYTHON" - "$work/bf16.bin" $n <<'PY'
import sys
import numpy as np
import torch
path, n = sys.argv[1], int(sys.argv[2])
raw = open(path, "rb").read()
u = np.frombuffer(raw, dtype="<u4", count=n)
ours = np.frombuffer(raw, dtype="<u2", count=n, offset=4 * n)
f = torch.from_numpy(u.view(np.float32).copy())
ref = f.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
bad = np.nonzero(ref != ours)[0]
if bad.size:
    i = bad[0]
    sys.exit(f"bf16-torch: {bad.size} of {n} conversions differ from PyTorch; first: "
             f"float32 0x{u[i]:08x} -> hpt 0x{ours[i]:04x}, torch 0x{ref[i]:04x}")
print(f"bf16-torch: {n} conversions equal PyTorch's")
PY
