#!/bin/sh
# Bad input: a string where an integer belongs names the field and the value.
. "$HPT_SRC/tests/helpers/lib.sh"
printf '{"hidden_size": "64", "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 8192, "max_position_embeddings": 256}' > "$WORK/c.json"
expect_error 2 "field 'hidden_size' must be an integer, got \"64\"" "$TRAIN" --model "$WORK/c.json" --data "$WORK" --steps 1
