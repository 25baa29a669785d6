#!/bin/sh
# Bad input: plot_metrics.py options out of range are usage errors (exit 2)
# naming the option, checked before any file is read.
. "$HPT_SRC/tests/helpers/lib.sh"
PLOT="$HPT_SRC/analysis/plot_metrics.py"
expect_error 2 "plot_metrics.py: error: --smooth 1.5: must be in \[0, 1\)" "$PYTHON" "$PLOT" "$WORK/m.h5" -o "$WORK/o" --smooth 1.5
expect_error 2 "plot_metrics.py: error: --format png,gif: unknown format 'gif'" "$PYTHON" "$PLOT" "$WORK/m.h5" -o "$WORK/o" --format png,gif
expect_error 2 "plot_metrics.py: error: --labels: 1 names for 2 files" "$PYTHON" "$PLOT" "$WORK/a.h5" "$WORK/b.h5" -o "$WORK/o" --labels a
expect_error 2 "the following arguments are required: -o" "$PYTHON" "$PLOT" "$WORK/m.h5"
expect_error 2 "plot_metrics.py: error: --dpi 100000: must be in \[10, 600\]" "$PYTHON" "$PLOT" "$WORK/m.h5" -o "$WORK/o" --dpi 100000
expect_error 2 "plot_metrics.py: error: --dpi 5: must be in \[10, 600\]" "$PYTHON" "$PLOT" "$WORK/m.h5" -o "$WORK/o" --dpi 5
