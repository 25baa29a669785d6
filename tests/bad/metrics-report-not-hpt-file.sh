#!/bin/sh
# Bad input: `hpt-metrics report` of an HDF5 file that is not an hpt metrics
# file, and of a file that is not HDF5 at all, is refused by name (exit 3)
# and leaves no report.
. "$HPT_SRC/tests/helpers/lib.sh"
"$PYTHON" - "$WORK/other.h5" <<'PY' || fail "h5py"
import sys, h5py
with h5py.File(sys.argv[1], "w") as f:
    f["steps/step"] = [1, 2]
PY
echo "step,loss" > "$WORK/log.h5"
HM="$HPT_BUILD/src/hpt-metrics"
expect_error 3 "other.h5: not an hpt metrics file \(root attribute format = missing" "$HM" report "$WORK/other.h5" -o "$WORK/out.html"
expect_error 3 "log.h5: not a readable HDF5 file" "$HM" report "$WORK/log.h5" -o "$WORK/out.html"
[ ! -e "$WORK/out.html" ] && [ ! -e "$WORK/out.html.tmp" ] || fail "a report was written for a foreign file"
pass "files that are not hpt metrics files are refused"
