#!/bin/sh
# Run the CUDA backend's kernels and host code (lib/backend_cuda.cu,
# attention_cuda.cu, attention_mma.cu, kernels_cuda.cu) on a CPU emulation of the
# CUDA runtime and cuBLAS (emu_cuda.h): tests/unit/test_backend_cuda (every op
# against the CPU backend, NaN-poisoned outputs; ~11 minutes on 2 busy
# cores) and, with HPT_CUDA_EMU_TEST_OPS=1, `test_ops cuda` (finite
# differences per op and of the whole model's gradient; the model part
# takes hours under emulation). It starts hundreds of threads per kernel,
# so not part of make check: `make check-cuda-emu` in a build configured
# with CUDA. Environment
# (set by that target): HPT_SRC, HPT_BUILD, CC (MPI C compiler), CXX,
# MPI_CPPFLAGS, LIBS (the programs' link libraries); optional
# HPT_CUDA_EMU_GROUPS: test_backend_cuda's groups to run (e.g. "bf16
# matmul"; default all).
set -eu
: "${HPT_SRC:?}" "${HPT_BUILD:?}" "${CC:?}" "${CXX:?}" "${LIBS:?}"
w=$(mktemp -d "${TMPDIR:-/tmp}/hpt-cuda-emu.XXXXXX")
trap 'rm -rf "$w"' EXIT
em="$HPT_SRC/tests/gpu/cuda-emu"
mkdir -p "$w/inc"
for h in cuda_runtime.h cublas_v2.h cuda.h; do echo '#include "emu_cuda.h"' > "$w/inc/$h"; done
# the backend's three files (lib/cuda_internal.h, included, has no launches)
objs=""
for f in backend_cuda attention_cuda attention_mma kernels_cuda; do
  ${PYTHON:-python3} "$em/transform.py" "$HPT_SRC/lib/$f.cu" "$w/${f}_emu.cc"
  $CXX -std=c++20 -O1 -g -Wall -Wno-unknown-pragmas -I"$em" -I"$w/inc" -I"$HPT_SRC/lib" \
    -I"$HPT_SRC/io" -I"$HPT_BUILD" ${MPI_CPPFLAGS:-} -c "$w/${f}_emu.cc" -o "$w/${f}_emu.o"
  objs="$objs $w/${f}_emu.o"
done
cp "$HPT_BUILD/libhpt.a" "$w/libhpt.a"
ar d "$w/libhpt.a" backend_cuda.o attention_cuda.o attention_mma.o kernels_cuda.o
for t in test_backend_cuda test_ops; do
  # shellcheck disable=SC2086
  $CC -o "$w/$t" "$HPT_BUILD/tests/unit/$t.o" $objs "$w/libhpt.a" $LIBS
done
st=0
echo "# test_backend_cuda on the emulated CUDA backend"
OMP_NUM_THREADS=1 "$w/test_backend_cuda" ${HPT_CUDA_EMU_GROUPS:-} || st=1
if [ "${HPT_CUDA_EMU_TEST_OPS:-0}" = 1 ]; then
  echo "# test_ops cuda on the emulated CUDA backend"
  OMP_NUM_THREADS=1 "$w/test_ops" cuda || st=1
fi
[ $st = 0 ] && echo "PASS: the CUDA backend on the CPU emulation" || echo "FAIL: see above"
exit $st
