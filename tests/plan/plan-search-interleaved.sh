#!/bin/sh
# hpt-plan --search tries the interleaved schedule (V = 2 and 4) beside 1F1B
# where PP > 1 (docs/PLAN.md "Search"):
#  - Llama 3 70B on 64 H100 with 64 sequences of 4096 per step (few
#    micro-batches: m = 32 at DP 2): an interleaved layout ranks first, its
#    bubble (p-1)/(V m + p-1) below 1F1B's, faster than the best 1F1B layout
#    (the same search with --pp-schedule 1f1b kept), with `sched` int2/int4
#    in the table, pp_schedule/pp_virtual in the JSON and
#    --pp-schedule interleaved --pp-virtual V in its hpt-train options;
#  - every interleaved candidate is one the schedule can run (PP > 1,
#    PP x V <= 80 layers, m a multiple of PP);
#  - where memory forbids it: TP 4 x PP 8, no recomputation, kept: V = 2 is
#    faster but needs 85 GiB (zb-h1 faster still, 112 GiB), so 1F1B (70.6
#    GiB) ranks first and zb-h1 is named as the faster layout that does not
#    fit; with --mem-gb 100 V = 2 ranks first;
#  - --pp-schedule interleaved --pp-virtual 4 kept: every PP > 1 layout is V 4.
. "$HPT_SRC/tests/helpers/lib.sh"
P="$HPT_BUILD/src/hpt-plan"
S="--model llama3-70b --cluster h100-80gb --seq-len 4096 --global-batch 64 --search --gpus 64"
"$P" $S --top 100000 --json > "$WORK/all.json" || fail "search (JSON)"
"$P" $S --top 100000 --json --pp-schedule 1f1b > "$WORK/1f1b.json" || fail "search, 1F1B kept"
"$P" $S --top 8 > "$WORK/all.txt" || fail "search (text)"
cat "$WORK/all.txt"
"$PYTHON" - "$WORK/all.json" "$WORK/1f1b.json" <<'PY' || fail "search: interleaved not ranked as it should"
import json, sys
d, f = (json.load(open(p)) for p in sys.argv[1:])
r, r1 = d["ranked"], f["ranked"]
best = r[0]
assert best["pp_schedule"] == "interleaved" and best["pp_virtual"] in (2, 4), best
p, V = best["pp"], best["pp_virtual"]
m = 64 // (best["micro_batch"] * best["dp"])
assert abs(best["bubble_fraction"] - (p - 1) / (V * m + p - 1)) < 1e-15, best
assert "--pp-schedule interleaved --pp-virtual %d " % V in best["train_options"] + " ", best["train_options"]
assert d["best"]["training"]["pp_schedule"] == "interleaved" and d["best"]["training"]["pp_virtual"] == V
# faster than any 1F1B layout: the search with 1F1B kept
assert all(x["pp_schedule"] == "1f1b" and x["pp_virtual"] == 1 for x in r1), r1[:2]
assert best["tokens_per_s"] > r1[0]["tokens_per_s"], (best["tokens_per_s"], r1[0])
# more candidates than 1F1B alone, and every interleaved one runnable
assert d["candidates"] > f["candidates"], (d["candidates"], f["candidates"])
for x in r:
    if x["pp_schedule"] == "interleaved":
        m = 64 // (x["micro_batch"] * x["dp"])
        assert x["pp"] > 1 and x["pp"] * x["pp_virtual"] <= 80 and m % x["pp"] == 0, x
    elif x["pp_schedule"] == "zb-h1":  # tests/plan/plan-zb-h1.sh
        assert x["pp"] > 1 and x["pp_virtual"] == 1 and x["zero"] < 2, x
    else:
        assert x["pp_schedule"] == "1f1b" and x["pp_virtual"] == 1, x
assert {x["pp_virtual"] for x in r if x["pp_schedule"] == "interleaved"} == {2, 4}
print("first: TP %d x PP %d x DP %d, V %d, %.5g tokens/s (1F1B's best %.5g), bubble %.3f" %
      (best["tp"], p, best["dp"], V, best["tokens_per_s"], r1[0]["tokens_per_s"], best["bubble_fraction"]))
PY
grep -q "^   TP   PP     DP  mb  recompute  sp  zero  shard    mem GiB   step s     tokens/s   MFU %  bubble  sched$" "$WORK/all.txt" &&
  grep -A1 "^   TP   PP" "$WORK/all.txt" | tail -1 | grep -Eq "  int[24]$" &&
  grep -q "^why TP .*, interleaved 1F1B, V = [24]:$" "$WORK/all.txt" &&
  grep -q "^  - PP [0-9]*, interleaved 1F1B, V = [24]: .* chunks of .* layers per stage, bubble .* (1F1B: .*); stage 0 holds .* micro-batches' activations (1F1B: [0-9]*); .* chunk boundaries per micro-batch instead of .*: .* x the point-to-point bytes$" "$WORK/all.txt" &&
  grep -q "^hpt-train options: .* --pp-schedule interleaved --pp-virtual [24] " "$WORK/all.txt" ||
  fail "search (text): no sched column, interleaved first row, explanation or hpt-train options"
# memory forbids it: the layout kept, no recomputation
K="$S --tp 4 --pp 8 --micro-batch 1 --recompute none --sequence-parallel --zero 1"
"$P" $K --json > "$WORK/k.json" && "$P" $K > "$WORK/k.txt" &&
  "$P" $K --mem-gb 100 --json > "$WORK/k100.json" || fail "search, layout kept"
cat "$WORK/k.txt"
"$PYTHON" - "$WORK/k.json" "$WORK/k100.json" <<'PY' || fail "search: interleaved ranked where memory forbids it"
import json, sys
k, big = (json.load(open(p)) for p in sys.argv[1:])
assert k["candidates"] == 4 and k["fitting"] == 1, (k["candidates"], k["fitting"])  # 1F1B, V 2, V 4, zb-h1
assert [x["pp_schedule"] for x in k["ranked"]] == ["1f1b"], k["ranked"]
assert k["ranked"][0]["mem_bytes"] <= k["best"]["mem_capacity"]
b = big["ranked"][0]
assert (b["pp_schedule"], b["pp_virtual"]) == ("interleaved", 2), b
assert b["mem_bytes"] > k["best"]["mem_capacity"], b     # needs more than the 80 GB card has
assert b["tokens_per_s"] > k["ranked"][0]["tokens_per_s"]
PY
grep -q "^  - faster but does not fit: TP 4 x PP 8 x DP 2, micro-batch 1, sequence parallel, ZeRO-1, ZB-H1 (.* tokens/s, needs 1[0-9][0-9.]* GiB)$" "$WORK/k.txt" &&
  grep -q "^hpt-train options: --tp 4 --pp 8 --dp 2 .*--zero1 --backend cuda" "$WORK/k.txt" &&
  ! grep -q "^hpt-train options: .*--pp-schedule" "$WORK/k.txt" ||
  fail "search (text): the interleaved misfit not named, or the 1F1B layout's options wrong"
# a schedule given is kept wherever PP > 1
"$P" $S --pp-schedule interleaved --pp-virtual 4 --top 100000 --json > "$WORK/v4.json" || fail "search, V 4 kept"
"$PYTHON" - "$WORK/v4.json" <<'PY' || fail "search: --pp-schedule interleaved --pp-virtual 4 not kept"
import json, sys
r = json.load(open(sys.argv[1]))["ranked"]
assert r and any(x["pp"] > 1 for x in r)
for x in r:
    want = ("interleaved", 4) if x["pp"] > 1 else ("1f1b", 1)
    assert (x["pp_schedule"], x["pp_virtual"]) == want, x
PY
pass "hpt-plan --search: interleaved ranked first where it pays, not where memory forbids it"
