#!/bin/sh
# Bad input (hpt-plan): TP must divide the heads, kv heads and SwiGLU width; PP at most the layers.
. "$HPT_SRC/tests/helpers/lib.sh"
expect_error 2 "\-\-tp 3 must divide num_attention_heads = 32" \
  "$HPT_BUILD/src/hpt-plan" --model llama3-8b --cluster h100-80gb --seq-len 4096 --global-batch 8 --tp 3 --gpus-per-node 3
expect_error 2 "\-\-tp 16 must divide num_key_value_heads = 8" \
  "$HPT_BUILD/src/hpt-plan" --model llama3-8b --cluster h100-80gb --seq-len 4096 --global-batch 8 --tp 16
expect_error 2 "\-\-pp 40: more pipeline stages than the model's 32 layers" \
  "$HPT_BUILD/src/hpt-plan" --model llama3-8b --cluster h100-80gb --seq-len 4096 --global-batch 8 --pp 40
