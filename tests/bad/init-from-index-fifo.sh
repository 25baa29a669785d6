#!/bin/sh
# Bad input: a FIFO named as a shard in model.safetensors.index.json. The
# shard's open() blocked for ever (the file type was checked after the
# open); now refused at once (exit 3, the shard and the tensor named).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
"$PYTHON" "$HPT_SRC/tests/helpers/st_tool.py" write "$WORK/config.json" "$WORK/m" --shards 2 --dtype F32 \
  --expect "$WORK/exp.h5" || fail "write"
S="$WORK/m/model-00001-of-00002.safetensors"
rm "$S" && mkfifo "$S" || { echo "SKIP: no mkfifo"; exit 77; }
expect_error 3 "$S: cannot open: not a regular file \(the shard of tensor model.embed_tokens.weight in $WORK/m/model.safetensors.index.json\)" \
  timeout 120 "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/m"
[ -p "$S" ] || fail "the FIFO was replaced"
pass "a FIFO as a shard is refused, not opened"
