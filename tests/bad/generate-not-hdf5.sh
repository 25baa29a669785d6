#!/bin/sh
# Bad input: hpt-generate given a file that is not HDF5 as the checkpoint
# (a text file, an empty file) exits 3 naming the file and HDF5's reason.
. "$HPT_SRC/tests/helpers/lib.sh"
GEN="$HPT_BUILD/src/hpt-generate"
echo '{"hidden_size": 64}' > "$WORK/config.json"
expect_error 3 "weights $WORK/config.json: not a readable HDF5 file, or truncated \(file signature not found\)" \
  "$GEN" --checkpoint "$WORK/config.json" --prompt "The horse"
: > "$WORK/empty.h5"
expect_error 3 "weights $WORK/empty.h5: not a readable HDF5 file" "$GEN" "$WORK/empty.h5" --prompt "The horse"
pass "a non-HDF5 checkpoint is refused"
