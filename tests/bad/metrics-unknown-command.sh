#!/bin/sh
# Bad input: hpt-metrics with an unknown command, an unknown option, no
# FILE, or csv's options on summary: a usage error naming it (exit 2).
. "$HPT_SRC/tests/helpers/lib.sh"
HM="$HPT_BUILD/src/hpt-metrics"
expect_error 2 "unknown command 'plot' \(summary, csv" "$HM" plot "$WORK/m.h5"
expect_error 2 "unknown option '--frob'" "$HM" csv "$WORK/m.h5" --frob
expect_error 2 "csv needs a metrics FILE" "$HM" csv
expect_error 2 "a command is required" "$HM"
expect_error 2 "hpt-metrics: --ranks: only csv takes it" "$HM" summary "$WORK/m.h5" --ranks busy
