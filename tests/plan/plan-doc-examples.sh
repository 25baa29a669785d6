#!/bin/sh
# The hpt-plan commands of docs/PLAN.md's opening example block run as
# written (optional [parts] left out, --ranks-tsv into $WORK), exit 0:
# its context-parallel example asked the small preset (1024 positions) for
# --seq-len 16384 and was refused, exit 2.
. "$HPT_SRC/tests/helpers/lib.sh"
"$PYTHON" - "$HPT_SRC/docs/PLAN.md" "$HPT_BUILD/src/hpt-plan" "$WORK" <<'PY' || fail "a docs/PLAN.md example fails"
import re, shlex, subprocess, sys
doc, plan, work = sys.argv[1:]
block = open(doc).read().split("```sh\n", 1)[1].split("```", 1)[0]
cmds, cur = [], ""
for line in block.splitlines():
    if line.lstrip().startswith("#") or not line.strip():
        continue
    cur += line.rstrip("\\").strip() + " "
    if not line.endswith("\\"):
        cmds.append(cur.strip())
        cur = ""
assert len(cmds) >= 7, cmds
bad = 0
for c in cmds:
    c = re.sub(r"\[[^]]*\]", "", c)  # optional parts
    argv = [a.replace("pred.tsv", work + "/pred.tsv") for a in shlex.split(c)]
    assert argv[0] == "hpt-plan", argv
    r = subprocess.run([plan] + argv[1:], capture_output=True, text=True)
    print("exit %d: %s%s" % (r.returncode, c, ("\n  " + r.stderr.strip()) if r.returncode else ""))
    bad += r.returncode != 0
sys.exit(1 if bad else 0)
PY
pass "docs/PLAN.md's example hpt-plan commands run"
