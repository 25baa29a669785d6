#!/bin/sh
# Bad input: a metrics file that does not exist is named by hpt-metrics and
# plot_metrics.py (exit 3).
. "$HPT_SRC/tests/helpers/lib.sh"
expect_error 3 "nope/metrics.h5: no such file" "$HPT_BUILD/src/hpt-metrics" summary "$WORK/nope/metrics.h5"
expect_error 3 "nope/metrics.h5: no such file" "$HPT_BUILD/src/hpt-metrics" csv "$WORK/nope/metrics.h5"
expect_error 3 "nope/metrics.h5: no such file" "$PYTHON" "$HPT_SRC/analysis/plot_metrics.py" "$WORK/nope/metrics.h5" -o "$WORK/out"
[ ! -e "$WORK/out" ] || fail "plot_metrics.py created its output directory for a missing input"
# a directory without metrics.h5 (a run directory stands for its metrics.h5)
mkdir -p "$WORK/run"
expect_error 3 "run: a directory with no metrics.h5 \(give a run directory or a metrics file\)" \
  "$PYTHON" "$HPT_SRC/analysis/plot_metrics.py" "$WORK/run" -o "$WORK/out"
[ ! -e "$WORK/out" ] || fail "plot_metrics.py created its output directory for a directory without metrics.h5"
