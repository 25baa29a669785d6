#!/bin/sh
# Bad input: --recompute takes full, selective or none; anything else
# (given as the next word or after '=') is refused with exit 2, in
# hpt-train and hpt-plan.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
PAT="\-\-recompute 'bogus': expected full \(keep only layer inputs\), selective \(keep GEMM outputs\) or none"
expect_error 2 "$PAT" "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --recompute bogus
expect_error 2 "$PAT" "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --recompute=bogus
expect_error 2 "$PAT" "$HPT_BUILD/src/hpt-plan" --model tiny --seq-len 64 --global-batch 4 \
  --recompute bogus
pass "--recompute bogus refused"
