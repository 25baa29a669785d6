#!/bin/sh
# hpt-plan's zero-bubble ZB-H1 schedule (--pp-schedule zb-h1; docs/PLAN.md
# "Pipeline schedules") against hand-computed values for Llama 3 8B
# (32 layers, h 4096, I 14336, 32/8 heads), sequence 4096, PP 4, m = 8:
#  - the bubble: ZB-H1's idle time (p-1)(t_F + t_B - t_W) against 1F1B's
#    (p-1)(t_F + t_B + t_W) (Qi et al. 2024, section 3.1), with per token
#    and layer G = 2 x (GEMM weights) FLOPs forward, A = 2 T h for the
#    attention core: t_F = G + A, t_B = G + 2A (+ the recomputed forward),
#    t_W = G; z = (t_F + t_B - t_W)/(t_F + t_B + t_W), bubble
#    3z/(8 + 3z) — checked without and with full recomputation;
#  - in flight: 4 micro-batches on every stage (1F1B: 4, 3, 2, 1);
#  - activations of stage s: 1F1B's + (4 - (4 - s)) slots (a slot's bytes
#    from GPipe against 1F1B) + min(s + 1, m) sets of W operands of 8
#    layers, each set 4 N (2h + 2I + h + 2 g h) bytes (fp32 output
#    gradients of q, k, v, o, gate, up, down; none on stage 0);
#  - --search ranks zb-h1 layouts ("zbh1" in the sched column) and skips
#    them under ZeRO-2/3;
#  - the text report's layout, pipeline and bubble lines.
. "$HPT_SRC/tests/helpers/lib.sh"
P="$HPT_BUILD/src/hpt-plan"
A="--model llama3-8b --cluster h100-80gb --seq-len 4096 --pp 4 --global-batch 8 --json"
"$P" $A > "$WORK/1f1b.json" && "$P" $A --pp-schedule gpipe > "$WORK/gpipe.json" &&
  "$P" $A --pp-schedule zb-h1 > "$WORK/zb.json" &&
  "$P" $A --pp-schedule zb-h1 --recompute full > "$WORK/zbrc.json" || fail "plans"
"$PYTHON" - "$WORK" <<'PY' || fail "zb-h1: bubble, in flight or activations differ from the hand-computed values"
import json, sys
w = sys.argv[1]
d = {k: json.load(open("%s/%s.json" % (w, k))) for k in ("1f1b", "gpipe", "zb", "zbrc")}
h, I, H, KV, hd, T, L = 4096, 14336, 32, 8, 128, 4096, 32
G = 2 * (h * H * hd + 2 * h * KV * hd + H * hd * h + 3 * h * I)
A = 2 * T * h
for k, R in (("zb", 0), ("zbrc", G + A)):
    tF, tB, tW = G + A, G + 2 * A + R, G
    z = (tF + tB - tW) / (tF + tB + tW)
    want = 3 * z / (8 + 3 * z)
    got = d[k]["bubble_fraction"]
    assert abs(got - want) < 1e-12, (k, got, want)
    assert d[k]["training"]["pp_schedule"] == "zb-h1" and d[k]["pipeline"]["schedule"] == "zb-h1"
    print("%s: z = %.4f, bubble %.4f (1F1B %.4f)" % (k, z, got, d["1f1b"]["bubble_fraction"]))
st = {k: d[k]["memory"]["stages"] for k in d}
assert [s["in_flight"] for s in st["zb"]] == [4, 4, 4, 4], [s["in_flight"] for s in st["zb"]]
act = lambda k, s: st[k][s]["memory"]["activations"]
N, g = 4096, KV / H
per_set = 8 * 4 * N * (2 * h + 2 * I + h + 2 * g * h)
for s in range(4):
    k1 = 4 - s
    slot = (act("gpipe", s) - act("1f1b", s)) / (8 - k1)
    want = act("1f1b", s) + (4 - k1) * slot + (min(s + 1, 8) if s else 0) * per_set
    assert abs(act("zb", s) - want) <= 1e-9 * want, (s, act("zb", s), want)
print("activations: W operand set %.3f GB per stage; stage 3 %.2f GB (1F1B %.2f GB)" %
      (per_set / 1e9, act("zb", 3) / 1e9, act("1f1b", 3) / 1e9))
assert d["zb"]["compute_s"] == d["1f1b"]["compute_s"] and d["zb"]["step_time_s"] < d["1f1b"]["step_time_s"]
PY
"$P" --model llama3-8b --cluster h100-80gb --seq-len 4096 --pp 4 --global-batch 8 --pp-schedule zb-h1 \
  > "$WORK/zb.txt" 2>&1 || { cat "$WORK/zb.txt"; fail "plan zb-h1 (text)"; }
grep -qx "pipeline, ZB-H1: in flight per stage 4, 4, 4, 4 micro-batches; 3 stage boundaries per micro-batch each way, 3.221 GB point-to-point per step and pipeline" "$WORK/zb.txt" &&
  grep -q "^ZB-H1 bubble: 0.125; " "$WORK/zb.txt" &&
  grep -q "^layout: TP 1 x PP 4 x DP 1; .*, ZB-H1$" "$WORK/zb.txt" ||
  { cat "$WORK/zb.txt"; fail "zb-h1: the text report's pipeline, bubble or layout line"; }
# the search tries zb-h1 (not with ZeRO-2/3)
"$P" --model llama3-8b --cluster h100-80gb --seq-len 4096 --global-batch 64 --gpus 16 --search \
  --top 200 > "$WORK/search.txt" 2>&1 || { cat "$WORK/search.txt"; fail "search"; }
grep -E " zbh1 *$" "$WORK/search.txt" | head -3
grep -qE " zbh1 *$" "$WORK/search.txt" || fail "search: no zb-h1 layout ranked"
# columns: TP PP DP mb recompute sp zero shard mem step tokens/s MFU bubble sched
awk '$14 == "zbh1" && ($7 == "2" || $7 == "3")' "$WORK/search.txt" | grep . &&
  fail "search: a zb-h1 layout with ZeRO-2/3"
awk '$14 == "zbh1" && $7 == "1"' "$WORK/search.txt" | grep -q . || fail "search: no zb-h1 layout with ZeRO-1"
pass "zb-h1: bubble (t_F + t_B - t_W)/(t_F + t_B + t_W) of 1F1B's idle time, p micro-batches in flight, W operand sets as computed by hand; ranked by --search"
