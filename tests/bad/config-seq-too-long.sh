#!/bin/sh
# Bad input: a sequence longer than max_position_embeddings is refused.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "\-\-seq-len 512 exceeds max_position_embeddings = 256" "$TRAIN" --model tiny --data "$CORPUS" --seq-len 512
