#!/bin/sh
# Bad input: hpt-metrics goodput on a run directory that does not exist, or
# has no metrics.h5, or on a file that is not there names it (exit 3).
. "$HPT_SRC/tests/helpers/lib.sh"
HM="$HPT_BUILD/src/hpt-metrics"
expect_error 3 "nope: no such file" "$HM" goodput "$WORK/nope"
expect_error 3 "nope/metrics.h5: no such file" "$HM" goodput "$WORK/nope/metrics.h5"
mkdir "$WORK/run"
expect_error 3 "run: is a directory with no metrics.h5" "$HM" goodput "$WORK/run"
expect_error 2 "goodput needs a metrics FILE" "$HM" goodput
