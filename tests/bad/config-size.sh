#!/bin/sh
# Bad input: config.json over 64 KiB is refused; one of exactly 65,536 bytes
# (and of 65,535, which used to be refused as "larger than 64 KiB") loads.
. "$HPT_SRC/tests/helpers/lib.sh"
pad() { # FILE BYTES: a tiny config padded with spaces to BYTES bytes
  "$PYTHON" - "$@" <<'PY'
import sys
t = ('{"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2, '
     '"num_attention_heads": 4, "vocab_size": 8192, "max_position_embeddings": 256}')
open(sys.argv[1], "w").write(t + " " * (int(sys.argv[2]) - len(t)))
PY
}
for n in 65535 65536; do
  pad "$WORK/c$n.json" $n
  "$TRAIN" --model "$WORK/c$n.json" --print-config > "$WORK/out" 2>&1 ||
    { cat "$WORK/out"; fail "a config of $n bytes is refused"; }
done
pad "$WORK/big.json" 65537
expect_error 2 "big.json: config larger than 64 KiB \(65536 bytes\)" "$TRAIN" --model "$WORK/big.json" --print-config
