#!/usr/bin/env python3
"""Rewrite one of the CUDA backend's .cu files (lib/backend_cuda.cu,
attention_cuda.cu, kernels_cuda.cu) as C++ for the CPU emulation (emu_cuda.h):
kernel<<<grid, block[, smem]>>>(args) -> emu_cfg(grid, block[, smem]).run(kernel, args),
dynamic shared memory -> the emulator's block buffer, no <dlfcn.h> (the
emulator resolves the cuBLAS symbols). Usage: transform.py IN.cu OUT.cc"""
import re
import sys

src = open(sys.argv[1]).read()
src = src.replace("#include <dlfcn.h>\n", "")
src = src.replace("extern __shared__ float sm[];", "float *sm = emu_smem;")
src, n = re.subn(r"(\b\w+(?:<\w+>)?)<<<(.*?)>>>\(", r"emu_cfg(\2).run(\1, ", src, flags=re.S)
if n == 0 or "<<<" in src:
    sys.exit("transform.py: no kernel launches rewritten (or some left)")
open(sys.argv[2], "w").write('#include "emu_cuda.h"\n' + src)
