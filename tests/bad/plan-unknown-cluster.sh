#!/bin/sh
# Bad input (hpt-plan): an unknown cluster preset lists the presets; --cluster is required.
. "$HPT_SRC/tests/helpers/lib.sh"
expect_error 2 "\-\-cluster 'tpu-v5': unknown preset \(presets: a100-80gb, h100-80gb, h200-141gb, cpu-local\)" \
  "$HPT_BUILD/src/hpt-plan" --model llama3-8b --cluster tpu-v5 --seq-len 4096 --global-batch 8
expect_error 2 "\-\-cluster is required" "$HPT_BUILD/src/hpt-plan" --model llama3-8b --seq-len 4096 --global-batch 8
