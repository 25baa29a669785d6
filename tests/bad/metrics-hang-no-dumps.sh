#!/bin/sh
# Bad input: `hpt-metrics hang` on a directory without hang dumps (exit 5,
# naming where it looked), and on a dump that is not one (exit 3).
. "$HPT_SRC/tests/helpers/lib.sh"
HM="$HPT_BUILD/src/hpt-metrics"
mkdir -p "$WORK/run"
expect_error 5 "$WORK/run: no hang dumps \(looked for rank-\*\.json in $WORK/run/hang" "$HM" hang "$WORK/run"
mkdir -p "$WORK/run/hang"
echo '{"format":"something-else"}' > "$WORK/run/hang/rank-00000.json"
expect_error 3 "rank-00000.json: not an hpt hang dump" "$HM" hang "$WORK/run"
