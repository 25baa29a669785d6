#!/bin/sh
# Bad input: a FIFO as hpt-generate --tokenizer (and as hpt-data
# --tokenizer): refused as not a regular file (exit 3), not read. (Was: a
# hang, SentencePiece waiting on the FIFO.)
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 1 --seq-len 16 --eval-interval 0 \
  --eval-batches 1 --run-dir "$WORK/run" --save-every 1 --quiet > "$WORK/train.log" 2>&1 ||
  { cat "$WORK/train.log"; fail "training"; }
mkfifo "$WORK/fifo" || { echo "SKIP: no mkfifo"; exit 77; }
expect_error 3 "^hpt-generate: tokenizer $WORK/fifo: not a regular file$" \
  timeout 60 "$HPT_BUILD/src/hpt-generate" "$WORK/run" --prompt "The horse" --tokenizer "$WORK/fifo"
for i in $(seq 400); do echo "The horse ran $i times."; done > "$WORK/in.txt"
expect_error 3 "^hpt-data: \-\-tokenizer $WORK/fifo: not a regular file$" \
  timeout 60 "$HPT_BUILD/src/hpt-data" --input "$WORK/in.txt" --out "$WORK/d" --tokenizer "$WORK/fifo"
pass "a FIFO tokenizer is refused, not read"
