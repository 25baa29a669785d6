#!/bin/sh
# hpt-plan's pipeline schedules (docs/PLAN.md "Pipeline schedules") against
# hand-computed values: Llama 3 8B (32 layers), sequence 4096, PP 4, m = 8
# micro-batches, 1F1B, GPipe and interleaved with V = 2 and 4.
#  - bubble (p-1)/(V m + p-1): 3/11 (1F1B, GPipe), 3/19 (V 2), 3/35 (V 4);
#  - in flight on stage s: 1F1B min(p - s, m) = 4, 3, 2, 1; GPipe m = 8;
#    interleaved min((p-s-1) x 2 + (V-1) x p + 1, m V) chunk forwards:
#    V 2: 11, 9, 7, 5 = 5.5, 4.5, 3.5, 2.5 micro-batches (stage 0: 4 x (1 +
#    3/8), Korthikanti's factor); V 4: 19, 17, 15, 13; m = 4 = p: every
#    forward before the first backward (Megatron's all-warm-up case, and
#    hpt-train's, whose measured peak RSS showed it), m V = 8 on every
#    stage, the last stage's head in 4 of them;
#  - chunks: virtual stage v = c p + s holds layers [4v, 4v + 4) (V 2);
#  - activation bytes: C + slots x (layers per slot x l + e) (+ the head's
#    part in 1 slot on the last stage when interleaved, a slot of its own:
#    in flight + 1 slots there, as hpt-train allocates them): C, l and e solved
#    from three plans of stage 0, every other plan of stages 0-2 and the
#    last stage's head slots predicted from them exactly; the same on
#    cpu-local's exact model (small, PP 2, m 4);
#  - point-to-point: messages of N h 4 = 4096 x 4096 x 4 = 67,108,864 bytes,
#    m x (2V - first - last) sends per stage, pipeline bytes 2 m (p V - 1)
#    messages (boundaries 3, 7, 15).
. "$HPT_SRC/tests/helpers/lib.sh"
P="$HPT_BUILD/src/hpt-plan"
A="--model llama3-8b --cluster h100-80gb --seq-len 4096 --pp 4 --json"
"$P" $A --global-batch 8 > "$WORK/1f1b.json" || fail "plan 1f1b"
"$P" $A --global-batch 8 --pp-schedule gpipe > "$WORK/gpipe.json" || fail "plan gpipe"
"$P" $A --global-batch 8 --pp-schedule interleaved --pp-virtual 2 > "$WORK/int2.json" || fail "plan int2"
"$P" $A --global-batch 8 --pp-schedule interleaved --pp-virtual 4 > "$WORK/int4.json" || fail "plan int4"
"$P" $A --global-batch 4 --pp-schedule interleaved --pp-virtual 2 > "$WORK/cap.json" || fail "plan int2, m 4"
"$PYTHON" - "$WORK" <<'PY' || fail "schedules: bubble, in flight, memory or p2p differ from the hand-computed values"
import json, sys
from fractions import Fraction as F
w = sys.argv[1]
d = {k: json.load(open("%s/%s.json" % (w, k))) for k in ("1f1b", "gpipe", "int2", "int4", "cap")}
want = {  # schedule, V, bubble, in flight, in flight in micro-batches
    "1f1b": ("1f1b", 1, F(3, 11), [4, 3, 2, 1], [4, 3, 2, 1]),
    "gpipe": ("gpipe", 1, F(3, 11), [8] * 4, [8] * 4),
    "int2": ("interleaved", 2, F(3, 19), [11, 9, 7, 5], [5.5, 4.5, 3.5, 2.5]),
    "int4": ("interleaved", 4, F(3, 35), [19, 17, 15, 13], [4.75, 4.25, 3.75, 3.25]),
    "cap": ("interleaved", 2, F(3, 11), [8, 8, 8, 8], [4, 4, 4, 4]),
}
for k, (name, V, bubble, fl, mb) in want.items():
    x = d[k]
    assert (x["training"]["pp_schedule"], x["training"]["pp_virtual"]) == (name, V), (k, x["training"])
    assert x["pipeline"]["schedule"] == name and x["pipeline"]["virtual"] == V, (k, x["pipeline"])
    assert abs(x["bubble_fraction"] - float(bubble)) < 1e-15, (k, x["bubble_fraction"], bubble)
    assert x["pipeline"]["bubble_fraction"] == x["bubble_fraction"]
    st = x["memory"]["stages"]
    assert [s["in_flight"] for s in st] == fl, (k, [s["in_flight"] for s in st])
    assert [s["in_flight_micro_batches"] for s in st] == mb, (k, [s["in_flight_micro_batches"] for s in st])
    assert all(s["num_layers"] == 8 for s in st), k
# Korthikanti et al. 2022 / Narayanan et al. 2021: stage 0 holds (1 + (p-1)/(p V)) x 1F1B's
for k, V in (("int2", 2), ("int4", 4)):
    assert F(d[k]["memory"]["stages"][0]["in_flight_micro_batches"]) / 4 == 1 + F(3, 4 * V), k
# the layers of each chunk: virtual stage v = c p + s, 32 / (p V) layers each
assert [s["layers"] for s in d["1f1b"]["memory"]["stages"]] == [[0, 8], [8, 16], [16, 24], [24, 32]]
assert [s["chunks"] for s in d["int2"]["memory"]["stages"]] == \
    [[[0, 4], [16, 20]], [[4, 8], [20, 24]], [[8, 12], [24, 28]], [[12, 16], [28, 32]]]
assert d["int4"]["memory"]["stages"][1]["chunks"] == [[2, 4], [10, 12], [18, 20], [26, 28]]
assert "layers" not in d["int2"]["memory"]["stages"][0]

# activations: a = C + K (c l + e), c = layers per chunk slot (8, 8, 4, 2);
# solve C, l, e from stage 0 of 1F1B, GPipe and V 2
act = lambda k, s: F(d[k]["memory"]["stages"][s]["memory"]["activations"])
K = {k: [F(s["in_flight"]) for s in d[k]["memory"]["stages"]] for k in d}
c = {"1f1b": 8, "gpipe": 8, "int2": 4, "int4": 2, "cap": 4}
# a1 - a0 = dK_layers * l + dK * e for two schedules against 1F1B
def row(k, s):
    return (K[k][s] * c[k] - K["1f1b"][s] * 8, K[k][s] - K["1f1b"][s], act(k, s) - act("1f1b", s))
(p1, q1, r1), (p2, q2, r2) = row("gpipe", 0), row("int2", 0)
det = p1 * q2 - p2 * q1
l, e = (r1 * q2 - r2 * q1) / det, (p1 * r2 - p2 * r1) / det
C = act("1f1b", 0) - K["1f1b"][0] * (8 * l + e)
assert l > 0 and e > 0 and C > 0, (l, e, C)
for k in c:
    for s in range(3):
        pred = C + K[k][s] * (c[k] * l + e)
        assert act(k, s) == pred, (k, s, act(k, s), pred)
# the last stage: + h H, h = the slots holding the head (lnf): K under
# 1F1B and GPipe, 1 interleaved (Megatron's order runs each last-chunk
# forward right before that micro-batch's backward; with m = p all 4 of
# them run before the first backward)
h = {"1f1b": 1, "gpipe": 8, "int2": 1, "int4": 1, "cap": 4}
# ... and interleaved keeps the head chunk's slot apart from the others
# (lib/train_pipeline.c pipeline_slots): the warm-up forwards, all of
# earlier chunks, fill K of them, so K + 1 slots — but K when every
# forward runs first (cap: m = p)
x = {"1f1b": 0, "gpipe": 0, "int2": 1, "int4": 1, "cap": 0}
H = (act("gpipe", 3) - act("1f1b", 3) - 7 * (8 * l + e)) / 7
C3 = act("1f1b", 3) - (8 * l + e) - H
assert H > 0, H
for k in c:
    assert act(k, 3) == C3 + (K[k][3] + x[k]) * (c[k] * l + e) + h[k] * H, (k, act(k, 3))
print("activations: per layer %.0f B, per slot end %.0f B, shared %.0f B: every schedule and stage as predicted" % (l, e, C))

# point-to-point
msg = 4096 * 4096 * 4
for k, V, ends in (("1f1b", 1, [1, 2, 2, 1]), ("int2", 2, [3, 4, 4, 3]), ("int4", 4, [7, 8, 8, 7])):
    st = d[k]["memory"]["stages"]
    x = d[k]
    assert x["pipeline"]["boundaries"] == 4 * V - 1 and x["pipeline"]["virtual_stages"] == 4 * V, x["pipeline"]
    assert x["pipeline"]["p2p_bytes_per_step"] == 2 * 8 * (4 * V - 1) * msg, (k, x["pipeline"])
    assert x["comm"]["pp"]["bytes"] == 8 * max(ends) * msg + 8, (k, x["comm"]["pp"])   # + the f64 loss
    assert x["comm"]["pp"]["calls"] == 2 * 8 * max(ends) + 1, (k, x["comm"]["pp"])
assert d["int2"]["pipeline"]["p2p_bytes_per_step"] * 3 == d["1f1b"]["pipeline"]["p2p_bytes_per_step"] * 7
assert d["gpipe"]["pipeline"]["p2p_bytes_per_step"] == d["1f1b"]["pipeline"]["p2p_bytes_per_step"]
# the same compute, less bubble: faster
assert d["int2"]["compute_s"] == d["1f1b"]["compute_s"]
assert d["int2"]["step_time_s"] < d["1f1b"]["step_time_s"]
PY
# the exact model (cpu-local, hpt's own slots): the same linear structure
B="--model small --cluster cpu-local --seq-len 256 --global-batch 4 --pp 2 --json"
"$P" $B > "$WORK/x1f1b.json" && "$P" $B --pp-schedule gpipe > "$WORK/xgpipe.json" &&
  "$P" $B --pp-schedule interleaved --pp-virtual 2 > "$WORK/xint2.json" &&
  "$P" $B --pp-schedule interleaved --pp-virtual 4 > "$WORK/xint4.json" || fail "cpu-local plans"
"$PYTHON" - "$WORK" <<'PY' || fail "cpu-local: interleaved activations not as predicted"
import json, sys
from fractions import Fraction as F
w = sys.argv[1]
d = {k: json.load(open("%s/x%s.json" % (w, k))) for k in ("1f1b", "gpipe", "int2", "int4")}
L = d["1f1b"]["model"]["num_hidden_layers"]
K = {k: int(x["memory"]["stages"][0]["in_flight"]) for k, x in d.items()}
# p 2, m 4: 1F1B 2, GPipe 4, V 2: 2 + 2 + 1 = 5, V 4: 2 + 6 + 1 = 9 (cap m V: 8, 16)
assert K == {"1f1b": 2, "gpipe": 4, "int2": 5, "int4": 9}, K
c = {"1f1b": L // 2, "gpipe": L // 2, "int2": L // 4, "int4": L // 8}
a = {k: F(x["memory"]["stages"][0]["memory"]["activations"]) for k, x in d.items()}
(p1, q1, r1), (p2, q2, r2) = [(K[k] * c[k] - 2 * c["1f1b"], K[k] - 2, a[k] - a["1f1b"]) for k in ("gpipe", "int2")]
det = p1 * q2 - p2 * q1
l, e = (r1 * q2 - r2 * q1) / det, (p1 * r2 - p2 * r1) / det
assert l > 0 and e > 0, (l, e)
assert a["int4"] == a["1f1b"] + (K["int4"] * c["int4"] - 2 * c["1f1b"]) * l + (K["int4"] - 2) * e, a
print("cpu-local stage 0: per layer %d B, per slot end %d B; V 4 as predicted" % (l, e))
PY
# the text report
"$P" --model llama3-8b --cluster h100-80gb --seq-len 4096 --pp 4 --global-batch 8 \
  --pp-schedule interleaved --pp-virtual 2 > "$WORK/int2.txt" || fail "plan int2 (text)"
cat "$WORK/int2.txt"
grep -qx "pipeline, interleaved 1F1B, V = 2: in flight per stage 11, 9, 7, 5 chunk forwards (1/2 of the stage's layers each) = 5.5, 4.5, 3.5, 2.5 micro-batches; 7 chunk boundaries per micro-batch each way, 7.516 GB point-to-point per step and pipeline" "$WORK/int2.txt" &&
  grep -q "^interleaved 1F1B, V = 2 bubble: 0.158; " "$WORK/int2.txt" &&
  grep -q "^layout: TP 1 x PP 4 x DP 1; .*, interleaved 1F1B, V = 2$" "$WORK/int2.txt" ||
  fail "int2: the text report's pipeline, bubble or layout line"
pass "pipeline schedules: bubble, in-flight activations and point-to-point bytes as computed by hand"
