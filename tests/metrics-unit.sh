#!/bin/sh
# The metrics writer's noise scale, tokens/s, MFU and anomaly rules on
# synthetic records with hand-computed answers (tests/test_metrics.c).
. "$HPT_SRC/tests/lib.sh"
timeout 120 "$MPIEXEC" -n 2 "$HPT_BUILD/tests/test_metrics" "$WORK/m.h5" > "$WORK/o" 2>&1; st=$?
cat "$WORK/o"
no_crash "$WORK/o" $st
[ $st = 0 ] || fail "test_metrics exit $st"
pass "metrics derived values and anomaly rules"
