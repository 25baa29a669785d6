#!/bin/sh
# Bad input: --metrics naming a file that is not an hpt metrics file (plain
# text; an HDF5 file of something else; a future format version) is
# refused with exit 5 before training and left byte-for-byte untouched.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
run() { "$TRAIN" --model tiny --data "$CORPUS" --steps 2 --batch 1 --seq-len 32 --eval-batches 1 --metrics "$1"; }
echo "my notes" > "$WORK/notes.txt"
cp "$WORK/notes.txt" "$WORK/notes.orig"
expect_error 5 "metrics file $WORK/notes.txt: exists but is not a readable HDF5 file" run "$WORK/notes.txt"
cmp -s "$WORK/notes.txt" "$WORK/notes.orig" || fail "the text file was modified"
grep -q "^step" "$WORK/out.$$" && fail "training ran"
"$PYTHON" -c "
import h5py, sys
with h5py.File(sys.argv[1], 'w') as f: f['x'] = [1, 2, 3]
with h5py.File(sys.argv[2], 'w', libver='latest') as f:
    f.attrs['format'] = 'hpt-metrics'; f.attrs['format_version'] = 99
" "$WORK/other.h5" "$WORK/future.h5"
cp "$WORK/other.h5" "$WORK/other.orig"; cp "$WORK/future.h5" "$WORK/future.orig"
expect_error 5 "metrics file $WORK/other.h5: exists but is not an hpt metrics file" run "$WORK/other.h5"
cmp -s "$WORK/other.h5" "$WORK/other.orig" || fail "the HDF5 file was modified"
expect_error 5 "metrics file $WORK/future.h5: format_version 99, this hpt writes version 1" run "$WORK/future.h5"
cmp -s "$WORK/future.h5" "$WORK/future.orig" || fail "the future-version file was modified"
# another model's metrics: refused, the file unchanged
"$TRAIN" --model tiny --data "$CORPUS" --steps 2 --batch 1 --seq-len 32 --eval-batches 1 --metrics "$WORK/tiny.h5" > /dev/null 2>&1 \
  || fail "tiny run"
cp "$WORK/tiny.h5" "$WORK/tiny.orig"
expect_error 5 "metrics file $WORK/tiny.h5: holds the metrics of another model" \
  "$TRAIN" --model tiny --untie-embeddings --tie-embeddings --data "$CORPUS" --steps 2 --batch 1 --seq-len 32 --eval-batches 1 --metrics "$WORK/tiny.h5"
cmp -s "$WORK/tiny.h5" "$WORK/tiny.orig" || fail "the other model's file was modified"
pass "foreign metrics files refused and untouched"
