#!/bin/sh
# Bad input: config.json must be strict JSON (RFC 8259), as Hugging Face
# writes it; json-c's extensions are refused with what is wrong and where.
. "$HPT_SRC/tests/helpers/lib.sh"
ok='"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 8192, "max_position_embeddings": 256'
bad() { # NAME PATTERN JSON-TEXT
  printf '%s' "$3" > "$WORK/$1.json"
  expect_error 2 "$1.json: malformed JSON near byte [0-9]+: $2" "$TRAIN" --model "$WORK/$1.json" --print-config
}
# the good text loads (the refusals below are about the extension alone)
printf '{%s}' "$ok" > "$WORK/good.json"
"$TRAIN" --model "$WORK/good.json" --print-config > /dev/null || fail "a strict config is refused"
bad block-comment "comments are not JSON" "{$ok /* tiny */}"
bad line-comment "comments are not JSON" "// tiny
{$ok}"
bad single-key "single quotes are not JSON" "{$ok, 'rope_theta': 10000}"
bad single-value "single quotes are not JSON" "{$ok, \"model_type\": 'llama'}"
bad trailing-object "trailing comma" "{$ok,}"
bad trailing-array "trailing comma" "{$ok, \"architectures\": [\"LlamaForCausalLM\",]}"
bad nan "only true, false and null are JSON words \(no NaN or Infinity\)" "{$ok, \"rope_theta\": NaN}"
bad infinity "only true, false and null are JSON words \(no NaN or Infinity\)" "{$ok, \"rope_theta\": Infinity}"
