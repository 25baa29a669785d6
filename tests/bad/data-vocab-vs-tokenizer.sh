#!/bin/sh
# Bad input: a model whose vocabulary is smaller than the data's tokenizer
# (vocab_size in the data directory's prep.json) is refused before any
# shard is read, naming both sizes and the fix (exit 3, bad data, as a
# token id >= vocab_size is). A model far larger than the tokenizer runs,
# with a note that the extra rows never occur.
. "$HPT_SRC/tests/helpers/lib.sh"
mkdir "$WORK/d"
write_shard "$WORK/d/train_000000.bin" 20240520 1 400 $(seq 1 400)
printf '{"format": "hpt-prep", "vocab_size": 8192}\n' > "$WORK/d/prep.json"
cfg='"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 256'
printf '{%s, "vocab_size": 4096}' "$cfg" > "$WORK/v4096.json"
expect_error 3 "d: its tokenizer has 8192 pieces \(prep.json\) but the model's vocabulary is 4096: give --model a config.json with \"vocab_size\": 8192 or more" \
  "$TRAIN" --model "$WORK/v4096.json" --data "$WORK/d" --seq-len 16 --batch 2 --steps 1
printf '{"format": "hpt-prep", "vocab_size": 300}\n' > "$WORK/d/prep.json"
st=0
"$TRAIN" --model tiny --data "$WORK/d" --seq-len 16 --batch 2 --steps 1 --run-dir "$WORK/r" > "$WORK/out" 2>&1 || st=$?
no_crash "$WORK/out" "$st"
[ "$st" -eq 0 ] || { cat "$WORK/out"; fail "tiny (vocab 8192) on a 300-piece tokenizer's data exited $st"; }
grep -q "note: the model's vocabulary (8192) is larger than .*d's tokenizer (300 pieces, prep.json): ids 300..8191 never occur .*\"vocab_size\": 384 would do" "$WORK/out" ||
  { cat "$WORK/out"; fail "no note for a model vocabulary far above the tokenizer's"; }
pass "model vocabulary checked against the data's tokenizer"
