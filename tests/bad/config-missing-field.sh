#!/bin/sh
# Bad input: a config without hidden_size names the field.
. "$HPT_SRC/tests/helpers/lib.sh"
printf '{"intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 8192, "max_position_embeddings": 256}' > "$WORK/c.json"
expect_error 2 "c.json: required field 'hidden_size' is missing" "$TRAIN" --model "$WORK/c.json" --data "$WORK" --steps 1
