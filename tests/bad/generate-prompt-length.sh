#!/bin/sh
# Bad input: an hpt-generate prompt that encodes to no token, or to more
# tokens than the model's context (tiny: max_position_embeddings = 256),
# exits 2.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
GEN="$HPT_BUILD/src/hpt-generate"
"$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 1 --seq-len 16 --eval-interval 0 \
  --eval-batches 1 --export "$WORK/ex.h5" --quiet > "$WORK/train.log" 2>&1 ||
  { cat "$WORK/train.log"; fail "training"; }
expect_error 2 "\-\-prompt '' encodes to no token" \
  "$GEN" "$WORK/ex.h5" --model tiny --tokenizer "$CORPUS" --prompt ""
long=$(for i in $(seq 300); do printf 'horse '; done)
expect_error 2 "\-\-prompt: [0-9]+ tokens with the leading eos, more than the model's context \(max_position_embeddings = 256\)" \
  "$GEN" "$WORK/ex.h5" --model tiny --tokenizer "$CORPUS" --prompt "$long"
pass "empty and over-long prompts are refused"
