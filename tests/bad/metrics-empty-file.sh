#!/bin/sh
# Bad input (issue 17, finding 2b): an empty (0-byte) or truncated metrics
# file. The readers name the cause ("empty file (0 bytes)", HDF5's innermost
# message) with exit 3; hpt-train moves such a file aside with a warning
# naming the cause and starts a new one (exit 0) — an empty file is what a
# writer killed while creating it leaves. A create that fails after the
# file exists (its writes fail with ENOSPC: an LD_PRELOAD library built here,
# tests/helpers/metrics-nospace-shim.c) names HDF5's cause and leaves no empty file
# behind (before: a 0-byte new.h5 that the next run refused).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
HM="$HPT_BUILD/src/hpt-metrics"
: > "$WORK/empty.h5"
expect_error 3 "empty.h5: not a readable HDF5 file: empty file \(0 bytes\)" "$HM" summary "$WORK/empty.h5"
expect_error 3 "empty.h5: not a readable HDF5 file: empty file \(0 bytes\)" "$PYTHON" "$HPT_SRC/analysis/plot_metrics.py" "$WORK/empty.h5" -o "$WORK/o"
# hpt-metrics close writes nothing into what is not HDF5 (it wrote a
# 195-byte superblock into the empty file, which hpt-train then refused)
expect_error 3 "empty.h5: not an HDF5 file \(empty, 0 bytes\): nothing to clear, left untouched" "$HM" close "$WORK/empty.h5"
[ ! -s "$WORK/empty.h5" ] || fail "hpt-metrics close wrote $(stat -c %s "$WORK/empty.h5") bytes into the empty file"
printf 'not hdf5 at all\n' > "$WORK/text.h5"
expect_error 3 "text.h5: not an HDF5 file \(no HDF5 signature\): nothing to clear, left untouched" "$HM" close "$WORK/text.h5"
[ "$(cat "$WORK/text.h5")" = "not hdf5 at all" ] || fail "hpt-metrics close changed the text file"
B="--model tiny --data $CORPUS --steps 2 --batch 1 --seq-len 32 --eval-batches 1 --quiet"
"$TRAIN" $B --metrics "$WORK/good.h5" > /dev/null 2>&1 || fail "first run"
head -c 3000 "$WORK/good.h5" > "$WORK/trunc.h5"
expect_error 3 "trunc.h5: not a readable HDF5 file, or truncated \(HDF5: truncated file: eof = 3000" "$HM" summary "$WORK/trunc.h5"
expect_error 0 "metrics file $WORK/empty.h5: empty file \(0 bytes\); moved to $WORK/empty.h5.unreadable-" \
  "$TRAIN" $B --metrics "$WORK/empty.h5"
"$HM" summary "$WORK/empty.h5" | grep -q "^steps: 2 (1-2)" || fail "no new file after the move"
CC=${CC:-cc}
if command -v "$CC" > /dev/null; then
  "$CC" -shared -fPIC -o "$WORK/nospace.so" "$HPT_SRC/tests/helpers/metrics-nospace-shim.c" -ldl || fail "shim build"
  expect_error 5 "metrics file $WORK/new.h5: cannot create it \(HDF5: file write failed.*No space left on device" \
    env ASAN_OPTIONS="$ASAN_OPTIONS:verify_asan_link_order=0" LD_PRELOAD="$WORK/nospace.so" HPT_TEST_NOSPACE=/new.h5 "$TRAIN" $B --metrics "$WORK/new.h5"
  [ -e "$WORK/new.h5" ] && fail "the failed create left $(stat -c %s "$WORK/new.h5") bytes at new.h5"
else
  echo "SKIP: no C compiler for the ENOSPC shim"
fi
pass "empty and truncated metrics files: causes named, moved aside; a failed create leaves nothing"
