#!/bin/sh
# Bad input: --alert expressions hpt-live and hpt-train refuse (exit 2, the
# message names the expression): an unknown or non-comparable column, no
# or an unknown operator, a threshold that is not a finite number.
. "$HPT_SRC/tests/helpers/lib.sh"
LIVE="$HPT_BUILD/src/hpt-live"
[ -x "$LIVE" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
bad() { # EXPR PATTERN
  expect_error 2 "hpt-live: $2" timeout 60 "$LIVE" --port 0 --alert "$1" "$WORK/run"
}
bad 'gradnorm>10' "--alert 'gradnorm>10': unknown column 'gradnorm'.*grad_norm"
bad 'step>10' "--alert 'step>10': unknown column 'step'"
bad '>10' "--alert '>10': no column name before"
bad 'loss' "--alert 'loss': no comparison operator after 'loss'"
bad 'loss=8' "--alert 'loss=8': no comparison operator after 'loss'"
bad 'loss>>8' "--alert 'loss>>8': threshold '>8' is not a finite number"
bad 'loss>' "--alert 'loss>': threshold '' is not a finite number"
bad 'loss>abc' "--alert 'loss>abc': threshold 'abc' is not a finite number"
bad 'loss>nan' "--alert 'loss>nan': threshold 'nan' is not a finite number"
bad 'loss>inf' "--alert 'loss>inf': threshold 'inf' is not a finite number"
bad 'loss>1e999' "--alert 'loss>1e999': threshold '1e999' is not a finite number"
bad 'loss>0x10' "--alert 'loss>0x10': threshold '0x10' is not a finite number"
bad 'loss>8 or 9' "--alert 'loss>8 or 9': threshold '8 or 9' is not a finite number"
bad 'nonfinite>1' "--alert 'nonfinite>1': unknown column 'nonfinite'"
pass "bad --alert expressions are refused by name"
