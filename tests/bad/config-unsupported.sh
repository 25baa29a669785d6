#!/bin/sh
# Bad input: config.json fields that would make a different architecture are
# refused (hpt never silently trains another model), and so is trailing text.
. "$HPT_SRC/tests/helpers/lib.sh"
base='"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 8192, "max_position_embeddings": 256'
printf '{%s, "rope_scaling": {"rope_type": "llama3", "factor": 8}}' "$base" > "$WORK/a.json"
expect_error 2 "a.json: rope_scaling = .* is not supported" "$TRAIN" --model "$WORK/a.json" --print-config
printf '{%s, "hidden_act": "gelu"}' "$base" > "$WORK/b.json"
expect_error 2 "b.json: hidden_act = \"gelu\" is not supported" "$TRAIN" --model "$WORK/b.json" --print-config
printf '{%s, "attention_bias": true}' "$base" > "$WORK/c.json"
expect_error 2 "c.json: attention_bias = true is not supported" "$TRAIN" --model "$WORK/c.json" --print-config
printf '{%s, "head_dim": 32}' "$base" > "$WORK/d.json"
expect_error 2 "d.json: head_dim = 32 differs" "$TRAIN" --model "$WORK/d.json" --print-config
printf '{%s} garbage' "$base" > "$WORK/e.json"
expect_error 2 "e.json: malformed JSON: unexpected text after the object" "$TRAIN" --model "$WORK/e.json" --print-config
printf '{%s, "num_key_value_heads": -1}' "$base" > "$WORK/f.json"
expect_error 2 "f.json: num_key_value_heads = -1 must be > 0" "$TRAIN" --model "$WORK/f.json" --print-config
printf '{%s}' "$(echo "$base" | sed 's/"num_hidden_layers": 2/"num_hidden_layers": 2147483647/')" > "$WORK/g.json"
expect_error 2 "g.json: num_hidden_layers = 2147483647 is larger than hpt supports" "$TRAIN" --model "$WORK/g.json" --print-config
# A Hugging Face model directory is read through its config.json.
mkdir "$WORK/model" && "$TRAIN" --model tiny --print-config > "$WORK/model/config.json"
"$TRAIN" --model "$WORK/model" --print-config | cmp - "$WORK/model/config.json" || fail "--model DIR"
pass "unsupported architecture fields refused; --model DIR reads DIR/config.json"
