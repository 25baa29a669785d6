#!/bin/sh
# hpt-plan at the ends of its integer options: --global-batch 2^31-1 with a
# pipeline used to overflow M + P - 1 (int) and print negative step times.
. "$HPT_SRC/tests/helpers/lib.sh"
PLAN="$HPT_BUILD/src/hpt-plan"
check() { # what the JSON must satisfy, then the hpt-plan options
  "$PLAN" --json "$@" > "$WORK/p.json" 2> "$WORK/err" || { cat "$WORK/err"; fail "hpt-plan $*"; }
  no_crash "$WORK/err" 0
  "$PYTHON" - "$WORK/p.json" <<'PY' || fail "hpt-plan $*: implausible numbers"
import json, sys
d = json.load(open(sys.argv[1]))
def walk(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items(): yield from walk(v, path + "." + k)
    elif isinstance(x, list):
        for i, v in enumerate(x): yield from walk(v, "%s[%d]" % (path, i))
    else:
        yield path, x
bad = [(p, v) for p, v in walk(d) if isinstance(v, (int, float)) and not isinstance(v, bool) and (v != v or v < 0)]
assert not bad, bad[:5]
text = json.dumps(d)
assert "null" not in text, "non-finite numbers written as null"
PY
}
check --model tiny --cluster cpu-local --pp 2 --seq-len 16 --global-batch 2147483647
check --model tiny --cluster h100-80gb --pp 2 --seq-len 16 --global-batch 2147483647
check --model llama3-405b --cluster h100-80gb --tp 8 --pp 126 --seq-len 8192 --global-batch 2147483646
pass "hpt-plan's numbers stay finite and non-negative at the ends of the ranges"
