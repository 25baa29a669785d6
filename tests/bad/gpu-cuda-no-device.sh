#!/bin/sh
# Bad input: --backend cuda where no GPU is visible (CUDA_VISIBLE_DEVICES
# empty hides every device, also on a GPU machine) stops at start-up with
# the CUDA runtime's reason, exit 2; a build without CUDA says so and how
# to rebuild; a backend hpt does not have names the ones compiled in.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
if grep -q "^#define HAVE_CUDA 1" "$HPT_BUILD/hpt_config.h"; then
  expect_error 2 "\-\-backend cuda: no CUDA device visible \(cudaGetDeviceCount: .+\)" \
    env CUDA_VISIBLE_DEVICES= "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --backend cuda
  expect_error 2 "\-\-backend cuda: no CUDA device visible" \
    env CUDA_VISIBLE_DEVICES= "$MPIEXEC" -n 2 "$TRAIN" --model tiny --data "$CORPUS" --steps 1 \
    --backend cuda --dp 2
else # (CI's sanitizer build is configured --with-cuda=no)
  expect_error 2 "\-\-backend cuda: this hpt was built without the CUDA backend \(compiled in: cpu\): configure found no CUDA toolkit or was given \-\-with-cuda=no; rebuild with ./configure \-\-with-cuda=yes" \
    "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --backend cuda
  expect_error 2 "\-\-precision bf16: the cpu backend computes in fp32 only; use \-\-backend cuda \(this hpt was built without it: ./configure \-\-with-cuda=yes\)" \
    "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --precision bf16
fi
# a backend hpt does not have, in any build
expect_error 2 "\-\-backend rocm: unknown compute backend \(compiled in: cpu(, cuda)?\)$" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --backend rocm
