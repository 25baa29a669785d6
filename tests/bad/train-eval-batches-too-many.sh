#!/bin/sh
# Bad input: --eval-batches 2147483647 was accepted and the final
# validation never ended: more global batches than the validation shards
# hold are refused.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "\-\-eval-batches 2147483647: .* exceed the [0-9]+ validation samples .*use at most [0-9]+" \
  "$TRAIN" --model tiny --data "$CORPUS" --seq-len 32 --batch 2 --steps 1 --eval-batches 2147483647
# ... but the default (8) is not the user's choice: with global batches too
# large for 8 of them, it is lowered to what the validation set holds, with
# a note, and the run trains (was: refused with "--eval-batches 8")
"$TRAIN" --model tiny --data "$CORPUS" --seq-len 64 --batch 256 --steps 1 --eval-interval 0 \
  --run-dir "$WORK/r" > "$WORK/def.out" 2>&1 || { cat "$WORK/def.out"; fail "default --eval-batches refused"; }
grep -q "^hpt-train: note: validating on [1-7] global batch\(es\)\? of 256 sequences, not the default 8: the validation set holds [0-9]* samples of 64+1 tokens (--eval-batches N to choose)$" "$WORK/def.out" ||
  { cat "$WORK/def.out"; fail "no note lowering the default --eval-batches"; }
[ "$(grep -c "note: validating on" "$WORK/def.out")" = 1 ] || fail "the note printed more than once"
# a validation set smaller than one global batch: validated with a warning
# that it repeats (was: the note above, "validating on 1 global batch of 2
# sequences ... the validation set holds 1 samples", contradicting itself)
mkdir "$WORK/small"
write_shard "$WORK/small/train_000000.bin" 20240520 1 400 $(seq 1 400)
write_shard "$WORK/small/val_000000.bin" 20240520 1 20 $(seq 1 20)
"$TRAIN" --model tiny --data "$WORK/small" --seq-len 16 --batch 2 --steps 1 --metrics none \
  > "$WORK/small.out" 2>&1 || { cat "$WORK/small.out"; fail "a validation set of 1 sample refused"; }
grep -q "^hpt-train: warning: the validation set holds 1 sample of 16+1 tokens, fewer than one global batch of 2 sequences: every validation repeats it (more validation text avoids that)$" "$WORK/small.out" ||
  { cat "$WORK/small.out"; fail "no warning for a validation set smaller than one global batch"; }
! grep -q "note: validating on" "$WORK/small.out" || fail "the contradictory note is still printed"
grep -q "val loss" "$WORK/small.out" || { cat "$WORK/small.out"; fail "no validation ran"; }
pass "--eval-batches beyond the validation set refused; the default fitted; a set below one batch warned"
