#!/bin/sh
# Bad input: a NUL byte in config.json (bytes after it used to be ignored,
# so a config with garbage after a NUL loaded).
. "$HPT_SRC/tests/helpers/lib.sh"
ok='"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 8192, "max_position_embeddings": 256'
printf '{%s}\n\000garbage' "$ok" > "$WORK/c.json"
n=$(printf '{%s}\n' "$ok" | wc -c)
expect_error 2 "c.json: malformed JSON: NUL byte at byte $n " "$TRAIN" --model "$WORK/c.json" --print-config
