#!/bin/sh
# Bad input: num_key_value_heads must divide num_attention_heads.
. "$HPT_SRC/tests/helpers/lib.sh"
printf '{"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 3, "vocab_size": 8192, "max_position_embeddings": 256}' > "$WORK/c.json"
expect_error 2 "num_key_value_heads = 3 must divide num_attention_heads = 4" "$TRAIN" --model "$WORK/c.json" --data "$WORK" --steps 1
