#!/bin/sh
# Bad input (hpt-plan): an unknown precision, bf16 and tf32 on the fp32-only cpu-local (also
# with --search), an unknown option.
. "$HPT_SRC/tests/helpers/lib.sh"
expect_error 2 "\-\-precision 'fp16': expected fp32, tf32 or bf16" \
  "$HPT_BUILD/src/hpt-plan" --model small --cluster h100-80gb --seq-len 256 --global-batch 8 --precision fp16
expect_error 2 "\-\-precision bf16: cluster cpu-local trains in fp32 only" \
  "$HPT_BUILD/src/hpt-plan" --model small --cluster cpu-local --seq-len 256 --global-batch 8 --precision bf16
expect_error 2 "\-\-precision tf32: cluster cpu-local trains in fp32 only" \
  "$HPT_BUILD/src/hpt-plan" --model small --cluster cpu-local --seq-len 256 --global-batch 8 --precision tf32
# under --search too: the precision, not "no valid layout"
expect_error 2 "\-\-precision bf16: cluster cpu-local trains in fp32 only" \
  "$HPT_BUILD/src/hpt-plan" --model small --cluster cpu-local --seq-len 256 --global-batch 4 --search --gpus 2 --precision bf16
expect_error 2 "\-\-frobnicate: unknown option" "$HPT_BUILD/src/hpt-plan" --model small --cluster cpu-local --frobnicate
