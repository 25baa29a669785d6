#!/bin/sh
# Bad input: --init-from a file that does not exist, and a sharded index
# whose second shard is missing (an incomplete download): exit 3, the
# missing path named; an empty --init-from is a usage error (exit 2).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 3 "\-\-init-from $WORK/nowhere.safetensors: cannot open: No such file" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/nowhere.safetensors"
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
"$PYTHON" "$HPT_SRC/tests/helpers/st_tool.py" write "$WORK/config.json" "$WORK/m" --shards 2 --dtype BF16 \
  --expect "$WORK/exp.h5" || fail "write"
rm "$WORK/m/model-00002-of-00002.safetensors"
expect_error 3 "$WORK/m/model-00002-of-00002.safetensors: cannot open: No such file" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/m"
expect_error 2 "\-\-init-from '': expected a weights file or directory" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from ""
