#!/bin/sh
# Bad input: `hpt-metrics hang RUN_DIR` on hpt-hang dumps whose fields have
# the wrong JSON type (ops null or a string, suspects a number, members not
# an array) → exit 3 naming the file and the field, no crash; a RUN_DIR that
# does not exist → exit 5 "no such directory" (as a directory without dumps).
. "$HPT_SRC/tests/helpers/lib.sh"
HM="$HPT_BUILD/src/hpt-metrics"
R="$WORK/run"
mkdir -p "$R/hang"
D="$R/hang/rank-00000.json"
dump() { printf '{"format":"hpt-hang","rank":0,"node":"n0","pid":1,"step":3,%s}\n' "$1" > "$D"; }
dump '"ops": null'
expect_error 3 "^hpt-metrics: $D: damaged dump \(ops is not an array\)$" "$HM" hang "$R"
dump '"ops": "x"'
expect_error 3 "^hpt-metrics: $D: damaged dump \(ops is not an array\)$" "$HM" hang "$R"
dump '"suspects": 5, "ops": []'
expect_error 3 "^hpt-metrics: $D: damaged dump \(suspects is not an array\)$" "$HM" hang "$R"
dump '"waiting": {"op": "allreduce", "seconds": 2, "members": 5}'
expect_error 3 "^hpt-metrics: $D: damaged dump \(waiting.members is not an array\)$" "$HM" hang "$R"
dump '"ops": [5, "x", null]'
expect_error 3 "^hpt-metrics: $D: damaged dump \(ops\[0\] is not an object\)$" "$HM" hang "$R"
# a good dump still reads
dump '"ops": [], "suspects": []'
"$HM" hang "$R" > "$WORK/good.txt" || { cat "$WORK/good.txt"; fail "a good dump"; }
grep -q "rank 0 (n0, pid 1)" "$WORK/good.txt" || fail "the good dump's report"
expect_error 5 "^hpt-metrics: $WORK/nonexistent: no such directory$" "$HM" hang "$WORK/nonexistent"
pass "damaged hang dumps refused"
