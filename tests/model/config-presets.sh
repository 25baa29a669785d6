#!/bin/sh
# Every preset resolves to its published shape (Llama 2 paper table 1 and
# the released config.json files of Llama 2 and Llama 3).
. "$HPT_SRC/tests/helpers/lib.sh"
check() { # PRESET C I L H KV V MAXPOS THETA
  "$TRAIN" --model "$1" --print-config > "$WORK/$1.json" || fail "preset $1"
  "$PYTHON" - "$WORK/$1.json" "$@" <<'PY' || fail "preset $1 has the wrong shape"
import json, sys
c = json.load(open(sys.argv[1]))
name, C, I, L, H, KV, V, P, th = sys.argv[2], *map(float, sys.argv[3:])
got = [c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["num_attention_heads"],
       c["num_key_value_heads"], c["vocab_size"], c["max_position_embeddings"], c["rope_theta"]]
assert got == [C, I, L, H, KV, V, P, th], (name, got)
PY
}
check llama2-7b 4096 11008 32 32 32 32000 4096 10000
check llama2-13b 5120 13824 40 40 40 32000 4096 10000
check llama2-70b 8192 28672 80 64 8 32000 4096 10000
check llama3-8b 4096 14336 32 32 8 128256 8192 500000
check llama3-70b 8192 28672 80 64 8 128256 8192 500000
check llama3-405b 16384 53248 126 128 8 128256 131072 500000
check tiny 64 176 2 4 2 8192 256 10000
check small 384 1152 8 6 2 8192 1024 10000
# A config.json written by --print-config loads back unchanged.
"$TRAIN" --model "$WORK/llama3-8b.json" --print-config > "$WORK/again.json" || fail "reload"
cmp "$WORK/llama3-8b.json" "$WORK/again.json" || fail "config.json round trip changed it"
pass "presets have their published shapes"
