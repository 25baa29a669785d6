#!/bin/sh
# Config floats at the ends of float's range. rope_theta = 1e30 is a valid
# float: --print-config writes it back exactly (float_str used to cast it
# to long long first — undefined behaviour that the sanitizer build's
# -fsanitize=float-cast-overflow reports). 1e39 does not fit a float
# (converting it would be undefined too): refused, naming the field.
. "$HPT_SRC/tests/helpers/lib.sh"
ok='"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 8192, "max_position_embeddings": 256'
printf '{%s, "rope_theta": 1e30, "rms_norm_eps": 1e19}' "$ok" > "$WORK/big.json"
st=0
"$TRAIN" --model "$WORK/big.json" --print-config > "$WORK/out.json" 2> "$WORK/err" || st=$?
cat "$WORK/err"
no_crash "$WORK/err" "$st"
[ "$st" -eq 0 ] || fail "--print-config of rope_theta 1e30 exited $st"
grep -q '"rope_theta": 1e+30,' "$WORK/out.json" || { cat "$WORK/out.json"; fail "rope_theta not written as 1e+30"; }
grep -q '"rms_norm_eps": 1e+19,' "$WORK/out.json" || { cat "$WORK/out.json"; fail "rms_norm_eps not written as 1e+19"; }
printf '{%s, "rope_theta": 1e39}' "$ok" > "$WORK/over.json"
expect_error 2 "over.json: field 'rope_theta' = 1e39 is out of range for a float" \
  "$TRAIN" --model "$WORK/over.json" --print-config
