#!/bin/sh
# Bad input: --signals naming no signal ('' or ',') would leave a run with
# no stop signal at all: refused (exit 2), the message naming --signals.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
for list in '' ','; do
  expect_error 2 "\-\-signals '$list': names no signal" \
    "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --signals "$list"
done
