#!/bin/sh
# hpt-plan --mtbf-hours (issue 32): the checkpoint interval and expected
# goodput against values computed by hand here (Python's math, formulas
# written out), for
# - a given save stall: delta 30 s, M 2 h: Young sqrt(2 x 30 x 7200) =
#   657.267069006199 s, Daly 637.419214161062 s; the restart time planned
#   as reading the checkpoint back (its bytes over the nodes' bandwidth);
# - the planned stall of Llama 2 7B (6,738,415,616 parameters, 12 bytes
#   each: 80,860,987,392 bytes) on one node at --ckpt-bw 2 GB/s: 40.43 s;
# - a stall of at least 2M: Daly's interval is M.
# The text names the same figures.
. "$HPT_SRC/tests/helpers/lib.sh"
P="$HPT_BUILD/src/hpt-plan"
M="--model llama2-7b --cluster h100-80gb --nodes 1 --seq-len 4096 --global-batch 64 --zero 1"
"$P" $M --mtbf-hours 2 --save-stall 30 --json > "$WORK/a.json" || fail "hpt-plan --save-stall"
"$P" $M --mtbf-hours 4 --ckpt-bw 2 --json > "$WORK/b.json" || fail "hpt-plan planned stall"
"$P" $M --mtbf-hours 1 --save-stall 10000 --json > "$WORK/c.json" || fail "hpt-plan delta >= 2M"
"$P" $M --mtbf-hours 2 --save-stall 30 > "$WORK/a.txt" || fail "hpt-plan text"
cat "$WORK/a.txt" | tail -5
"$PYTHON" - "$WORK/a.json" "$WORK/b.json" "$WORK/c.json" "$WORK/a.txt" <<'PY' || fail "checkpoint interval"
import json, math, sys
a, b, c = (json.load(open(p)) for p in sys.argv[1:4])
text = open(sys.argv[4]).read()
def close(got, want, what, rel=1e-12):
    assert abs(got - want) <= rel * abs(want), (what, got, want)
    print("ok: %s = %.15g" % (what, got))
def expected(tau, d, R, M):  # Daly 2006: T_s / T_w, T_w = M e^(R/M) (e^((tau+d)/M) - 1) T_s / tau
    return tau / (M * math.exp(R / M) * (math.exp((tau + d) / M) - 1))
bytes7b = 12 * 6738415616
# a: delta 30 s, M 7200 s
k = a["checkpoint_interval"]
close(k["mtbf_s"], 7200, "a: M")
close(k["save_stall_s"], 30, "a: delta")
close(k["checkpoint_bytes"], bytes7b, "a: checkpoint bytes")
close(k["restart_s"], bytes7b / 0.65e9, "a: restart = the checkpoint read back at 0.65 GB/s")
close(k["young_s"], 657.267069006199, "a: Young", 1e-13)
close(k["daly_s"], 637.419214161062, "a: Daly", 1e-13)
R, st = k["restart_s"], a["step_time_s"]
assert k["save_every"] == round(637.419214161062 / st), (k["save_every"], st)
close(k["goodput_young"], expected(657.267069006199, 30, R, 7200), "a: goodput at Young's", 1e-9)
close(k["goodput_daly"], expected(637.419214161062, 30, R, 7200), "a: goodput at Daly's", 1e-9)
close(k["goodput_save_every"], expected(k["save_every"] * st, 30, R, 7200), "a: goodput at --save-every", 1e-9)
assert k["save_stall_from"] == "--save-stall", k
# b: planned delta = 80.86 GB / (1 node x 2 GB/s) = 40.430493696 s, M 4 h
k = b["checkpoint_interval"]
d = bytes7b / 2e9
close(k["save_stall_s"], d, "b: planned delta")
close(k["restart_s"], d, "b: planned restart")
close(k["young_s"], math.sqrt(2 * d * 14400), "b: Young")
x = d / (2 * 14400)
close(k["daly_s"], math.sqrt(2 * d * 14400) * (1 + math.sqrt(x) / 3 + x / 9) - d, "b: Daly")
close(k["goodput_daly"], expected(k["daly_s"], d, d, 14400), "b: goodput at Daly's", 1e-9)
assert k["save_stall_from"].startswith("planned: 80.86 GB at 2 GB/s per node x 1 node"), k
# c: delta 10000 s >= 2M = 7200 s: Daly's interval is M
close(c["checkpoint_interval"]["daly_s"], 3600, "c: Daly, delta >= 2M")
# the text
for line in ("MTBF 2 h, save stall 30 s (--save-stall)", "Young 1974: every 657.3 s of training",
             "Daly 2006:  every 637.4 s of training", "hpt-train --save-every %d" % a["checkpoint_interval"]["save_every"]):
    assert line in text, (line, text)
print("text ok")
PY
pass "hpt-plan --mtbf-hours: Young, Daly and the expected goodput as computed by hand"
