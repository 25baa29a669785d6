#!/bin/sh
# The metrics writer's noise scale, tokens/s, MFU and anomaly rules on
# synthetic records with hand-computed answers (tests/unit/test_metrics.c).
. "$HPT_SRC/tests/helpers/lib.sh"
timeout 120 "$MPIEXEC" -n 2 "$HPT_BUILD/tests/unit/test_metrics" "$WORK/m.h5" > "$WORK/o" 2>&1; st=$?
cat "$WORK/o"
no_crash "$WORK/o" $st
[ $st = 0 ] || fail "test_metrics exit $st"
# TP 1 x PP 2 x DP 2: a slow rank is judged within its pipeline stage
timeout 120 "$MPIEXEC" -n 4 "$HPT_BUILD/tests/unit/test_metrics" "$WORK/p.h5" pp > "$WORK/p" 2>&1; st=$?
cat "$WORK/p"
no_crash "$WORK/p" $st
[ $st = 0 ] || fail "test_metrics pp exit $st"
pass "metrics derived values and anomaly rules"
