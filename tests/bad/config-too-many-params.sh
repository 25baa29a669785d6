#!/bin/sh
# Bad input: a config whose every size is within the 2^24 limit but whose
# parameter count (about 2^75) overflowed int64 in hpt_config_num_params is
# refused by hpt-train and hpt-plan with the count and the limit.
. "$HPT_SRC/tests/helpers/lib.sh"
cat > "$WORK/huge.json" <<'JSON'
{"hidden_size": 16777216, "intermediate_size": 16777216, "num_hidden_layers": 16777216,
 "num_attention_heads": 8388608, "num_key_value_heads": 8388608, "vocab_size": 16777216,
 "max_position_embeddings": 16777216}
JSON
pat="huge.json: [0-9.]+e\+22 parameters \(16777216 layers, hidden_size 16777216, intermediate_size 16777216, vocab_size 16777216\) is more than hpt supports \(2\^50\)"
expect_error 2 "$pat" "$TRAIN" --model "$WORK/huge.json" --print-config
expect_error 2 "$pat" "$HPT_BUILD/src/hpt-plan" --model "$WORK/huge.json" --cluster h100-80gb \
  --seq-len 16 --global-batch 8
