#!/bin/sh
# Bad input (hpt-plan): HPT_CUDA_ATTENTION, which picks the CUDA
# attention path hpt-plan models (lib/plan_cli.c setup_attention), with a
# value the backend does not know, and mma (the bf16 tensor-core kernels)
# with an fp32 or tf32 run: refused as hpt-train's CUDA backend refuses them
# (tests/unit/test_backend_cuda.c group mma), exit 2; the valid ones plan.
. "$HPT_SRC/tests/helpers/lib.sh"
P="$HPT_BUILD/src/hpt-plan --model small --cluster h100-80gb --seq-len 256 --global-batch 8"
expect_error 2 "HPT_CUDA_ATTENTION=cudnn: expected mma \(bf16: the tensor-core kernels\), blas \(cuBLAS chunks\) or flash \(fp32 kernels\)" \
  env HPT_CUDA_ATTENTION=cudnn $P
expect_error 2 "HPT_CUDA_ATTENTION=mma: the tensor-core attention takes bf16 operands; use it with \-\-precision bf16 \(this run: tf32\)" \
  env HPT_CUDA_ATTENTION=mma $P --precision tf32
expect_error 2 "HPT_CUDA_ATTENTION=mma: the tensor-core attention takes bf16 operands; use it with \-\-precision bf16 \(this run: fp32\)" \
  env HPT_CUDA_ATTENTION=mma $P --precision fp32
for a in mma blas flash ""; do
  HPT_CUDA_ATTENTION=$a $P > "$WORK/out" 2>&1 || { cat "$WORK/out"; fail "HPT_CUDA_ATTENTION='$a' hpt-plan: refused"; }
done
