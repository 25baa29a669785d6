#!/bin/sh
# Bad input: hpt-generate without a usable tokenizer: --tokenizer naming a
# missing file or a directory without tokenizer.model (exit 3), a file that
# is not a SentencePiece model (exit 3), or none given and none next to the
# weights (exit 2, saying to give --tokenizer).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
GEN="$HPT_BUILD/src/hpt-generate"
"$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 1 --seq-len 16 --eval-interval 0 \
  --eval-batches 1 --run-dir "$WORK/run" --save-every 1 --quiet > "$WORK/train.log" 2>&1 ||
  { cat "$WORK/train.log"; fail "training"; }
expect_error 3 "tokenizer $WORK/nope.model: cannot load SentencePiece model" \
  "$GEN" "$WORK/run" --prompt "The horse" --tokenizer "$WORK/nope.model"
expect_error 3 "tokenizer $WORK/run/tokenizer.model: cannot load SentencePiece model" \
  "$GEN" "$WORK/run" --prompt "The horse" --tokenizer "$WORK/run"
expect_error 3 "tokenizer $WORK/run/config.json: not a SentencePiece model" \
  "$GEN" "$WORK/run" --prompt "The horse" --tokenizer "$WORK/run/config.json"
expect_error 2 "no tokenizer.model next to .*checkpoint.h5 or in its run directory .*give --tokenizer" \
  "$GEN" "$WORK/run" --prompt "The horse"
pass "a missing tokenizer is refused"
