#!/bin/sh
# Bad input: resuming with another model config, --seq-len or --seed, or from a checkpoint of an
# unknown format version, is refused naming the mismatch; nothing is
# overwritten.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
B="--data $CORPUS --seq-len 32 --batch 2 --eval-batches 1 --quiet --steps 4"
"$TRAIN" --model tiny $B --save-every 2 --run-dir "$WORK/r" > /dev/null || fail "first run"
sum() { find "$WORK/r/checkpoints" -type f -exec md5sum {} + | sort; }
before=$(sum)
expect_error 2 "checkpoint of step 4 is of another model: tie_word_embeddings = 0 but 1" \
  "$TRAIN" --model tiny --tie-embeddings $B --steps 6 --run-dir "$WORK/r"
[ "$(sum)" = "$before" ] || fail "checkpoints changed after the refusal"
expect_error 2 "checkpoint was trained with --seq-len 32, not 16" \
  "$TRAIN" --model tiny $B --seq-len 16 --steps 6 --run-dir "$WORK/r"
[ "$(sum)" = "$before" ] || fail "checkpoints changed after the --seq-len refusal"
# the seed keys the data order: another one would not continue the run
expect_error 2 "checkpoint was trained with --seed 1234, not 7 \(the seed keys the data order: pass --seed 1234 to continue this run" \
  "$TRAIN" --model tiny $B --seed 7 --steps 6 --run-dir "$WORK/r"
[ "$(sum)" = "$before" ] || fail "checkpoints changed after the --seed refusal"
"$PYTHON" -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); f.attrs['format_version']=__import__('numpy').int32(99)" \
  "$WORK/r/checkpoints/step_00000004/checkpoint.h5" || fail "h5py"
expect_error 3 "unknown checkpoint format version 99 \(this hpt reads 1 to 2\)" \
  "$TRAIN" --model tiny $B --steps 6 --run-dir "$WORK/r"
# the tools never go past a newer format's checkpoint either, and say why
expect_error 3 "step_00000004/checkpoint.h5: unknown checkpoint format version 99 \(this hpt reads 1 to 2\)" \
  "$HPT_BUILD/src/hpt-ckpt" info "$WORK/r"
! grep -q "no complete checkpoint opens" "$WORK/out.$$" || fail "hpt-ckpt info: 'no complete checkpoint opens' for a newer format"
