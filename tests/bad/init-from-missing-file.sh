#!/bin/sh
# Bad input: --init-from a file that does not exist (exit 3, the path named).
. "$HPT_SRC/tests/lib.sh"
need_corpus
expect_error 3 "\-\-init-from $WORK/nowhere.safetensors: cannot open: No such file" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/nowhere.safetensors"
