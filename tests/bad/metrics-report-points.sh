#!/bin/sh
# Bad input: `hpt-metrics report --points` not an integer or < 2 → exit 2,
# naming the option once ("--points", not "----points"); hpt-live likewise.
. "$HPT_SRC/tests/helpers/lib.sh"
HM="$HPT_BUILD/src/hpt-metrics"
expect_error 2 "^hpt-metrics: --points 'abc': not an integer" "$HM" report x.h5 --points abc -o x.html
expect_error 2 "^hpt-metrics: --points '99999999999': out of range" "$HM" report x.h5 --points 99999999999 -o x.html
expect_error 2 "^hpt-metrics: --points 1: must be >= 2" "$HM" report x.h5 --points 1 -o x.html
expect_error 2 "^hpt-metrics: --points needs a value" "$HM" report x.h5 -o x.html --points
HL="$HPT_BUILD/src/hpt-live"
expect_error 2 "^hpt-live: --points 'abc': not an integer" "$HL" --points abc x.h5
expect_error 2 "^hpt-live: --port 'abc': not an integer" "$HL" --port abc x.h5
pass "--points and --port values named once"
