#!/bin/sh
# Bad input: an HDF5 file without format="hpt-metrics", and a file that is
# not HDF5 at all, are refused by name (exit 3), by hpt-metrics and by
# plot_metrics.py.
. "$HPT_SRC/tests/helpers/lib.sh"
"$PYTHON" - "$WORK/other.h5" "$WORK/fmt.h5" <<'PY' || fail "h5py"
import sys, h5py
with h5py.File(sys.argv[1], "w") as f:
    f["steps/step"] = [1, 2]
with h5py.File(sys.argv[2], "w") as f:
    f.attrs["format"] = "hpt-checkpoint"
PY
echo "step,loss" > "$WORK/log.h5"
HM="$HPT_BUILD/src/hpt-metrics" PLOT="$HPT_SRC/analysis/plot_metrics.py"
expect_error 3 "other.h5: not an hpt metrics file \(root attribute format = missing" "$HM" summary "$WORK/other.h5"
expect_error 3 "other.h5: not an hpt metrics file \(root attribute format = missing" "$PYTHON" "$PLOT" "$WORK/other.h5" -o "$WORK/o"
expect_error 3 "fmt.h5: not an hpt metrics file \(root attribute format = \"hpt-checkpoint\"" "$HM" csv "$WORK/fmt.h5"
expect_error 3 "fmt.h5: not an hpt metrics file \(root attribute format = \"hpt-checkpoint\"" "$PYTHON" "$PLOT" "$WORK/fmt.h5" -o "$WORK/o"
expect_error 3 "log.h5: not a readable HDF5 file" "$HM" summary "$WORK/log.h5"
expect_error 3 "log.h5: not a readable HDF5 file" "$PYTHON" "$PLOT" "$WORK/log.h5" -o "$WORK/o"
