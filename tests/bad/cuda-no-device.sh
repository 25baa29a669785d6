#!/bin/sh
# Bad input: --backend cuda where no GPU is visible (CUDA_VISIBLE_DEVICES
# empty hides every device, also on a GPU machine) stops at start-up with
# the CUDA runtime's reason, exit 2; a build without CUDA names the
# backends compiled in instead.
. "$HPT_SRC/tests/lib.sh"
need_corpus
if grep -q "^#define HAVE_CUDA 1" "$HPT_BUILD/hpt_config.h"; then
  expect_error 2 "\-\-backend cuda: no CUDA device visible \(cudaGetDeviceCount: .+\)" \
    env CUDA_VISIBLE_DEVICES= "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --backend cuda
  expect_error 2 "\-\-backend cuda: no CUDA device visible" \
    env CUDA_VISIBLE_DEVICES= "$MPIEXEC" -n 2 "$TRAIN" --model tiny --data "$CORPUS" --steps 1 \
    --backend cuda --dp 2
else
  expect_error 2 "\-\-backend cuda: unknown compute backend \(compiled in: cpu\)" \
    "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --backend cuda
fi
