#!/bin/sh
# Bad input: the cpu backend computes in fp32 only; tf32 and bf16 are
# refused with a pointer to the cuda backend.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
for p in bf16 tf32; do
  expect_error 2 "\-\-precision $p: the cpu backend computes in fp32 only; use \-\-backend cuda" \
    "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --backend cpu --precision $p
done
# fp32 (the default) is accepted
"$TRAIN" --model tiny --data "$CORPUS" --steps 1 --seq-len 32 --batch 1 --eval-batches 1 --quiet \
  --backend cpu --precision fp32 > "$WORK/fp32.out" 2>&1 || { cat "$WORK/fp32.out"; fail "--precision fp32 refused"; }
echo "PASS: --precision fp32 accepted"
