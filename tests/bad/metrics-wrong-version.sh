#!/bin/sh
# Bad input: an hpt metrics file of an unknown format_version is refused,
# naming the version (exit 3).
. "$HPT_SRC/tests/helpers/lib.sh"
"$PYTHON" - "$WORK/v99.h5" <<'PY' || fail "h5py"
import sys, h5py
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["format"] = "hpt-metrics"
    f.attrs["format_version"] = 99
PY
expect_error 3 "v99.h5: format_version 99, this hpt-metrics reads version 1" "$HPT_BUILD/src/hpt-metrics" summary "$WORK/v99.h5"
expect_error 3 "v99.h5: format_version 99, this reader knows version 1" "$PYTHON" "$HPT_SRC/analysis/plot_metrics.py" "$WORK/v99.h5" -o "$WORK/o"
