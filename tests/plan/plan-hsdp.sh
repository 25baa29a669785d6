#!/bin/sh
# HSDP (--zero-shard-group N) in hpt-plan (docs/PLAN.md, "HSDP" and "Search"):
#  1. --search tries HSDP's shard groups for every ZeRO stage wherever a DP
#     group spans nodes — N = b, 2b, ... dividing DP and below it, b =
#     gcd(GPUs per node / TP, DP) (b = the DP ranks of one node) — and none
#     inside one node; the ranked table has a shard column, the JSON
#     zero_shard_group and hsdp, the options --zero-shard-group N; a
#     --zero-shard-group given is kept. For the 8B template's case (4 nodes x
#     8 H100, tf32) it ranks TP 2 x DP 16, sequence parallel, ZeRO-1, HSDP
#     4 x 4 first (sequence parallelism first since the step time counts
#     the memory-bound kernels: its norms and residual adds touch 1/TP of
#     the rows; without that term SP tied and the plain layout came first).
#  2. The DP bytes per step of HSDP, hand-computed from the table in
#     docs/PLAN.md for a small config (h 64, I 128, 2 layers, 4 heads, V 256,
#     untied: P = 115,008 parameters) on 2 nodes x 4 GPUs, DP 8, shard
#     groups of 4 (2 replicas), --comm mpi (ring factors):
#       ZeRO-2: 4 bucket reduce-scatters 4P = 460,032, the replica all-reduce
#         of the own shard 4 x 28,752 = 115,008, norm 8, all-gather (own)
#         115,008, loss 8: 8 calls, 690,064 bytes; wire 3/4 x 460,032 +
#         1 x 115,008 + 3/2 x 8 + 3/4 x 460,032 + 7/4 x 8 = 805,082
#       ZeRO-3 (one micro-batch): 4 reduce-scatters, all-reduce, norm, 4
#         gathers before forward (own: 115,008), 3 before backward (own
#         outside the embedding: 49,472 on shard 0, whose block holds the
#         16,384-element embedding; 115,008 on the others), loss: 14 calls,
#         739,536 bytes on shard 0, 805,072 on the others; wire 1,100,954
#     and their α–β seconds from the same table.
#  3. A shard group of 1 is plain replication: the bytes that cross links
#     (wire) are no sharding's exactly, 2 x 7/8 x 4P + the loss = 805,070, at
#     ZeRO 1, 2 and 3; the memory is no sharding's plus nothing but the 4P
#     reduced-gradient buffer hpt-train allocates (lib/train.c setup_zero).
. "$HPT_SRC/tests/helpers/lib.sh"
P="$HPT_BUILD/src/hpt-plan"
S8="--model llama3-8b --cluster h100-80gb --seq-len 4096 --global-batch 1024 --precision tf32 --search --nodes 4"

# 1. the search space: every layout fits in 10 TB, so ranked lists all
"$P" $S8 --mem-gb 10000 --top 100000 --json > "$WORK/all.json" || fail "search (all layouts)"
"$PYTHON" - "$WORK/all.json" <<'PY' || fail "--search does not try the HSDP shard groups"
import json, math, sys
d = json.load(open(sys.argv[1]))
r = d["ranked"]
assert len(r) == d["candidates"] == d["fitting"], (len(r), d["candidates"], d["fitting"])
want = lambda tp, dp: set() if tp * dp <= 8 else \
    {n for n in range(2, dp) if dp % n == 0 and n % math.gcd(8 // tp, dp) == 0}
seen = {}
for x in r:
    opts = x["train_options"].split()
    if x["zero"] == 0:
        assert x["zero_shard_group"] == 0 and not x["hsdp"], x
        assert "--zero-shard-group" not in opts, x
        continue
    n = x["zero_shard_group"]
    assert x["hsdp"] == (n < x["dp"]) and x["dp"] % n == 0, x
    assert ("--zero-shard-group" in opts) == x["hsdp"], x
    if x["hsdp"]:
        assert opts[opts.index("--zero-shard-group") + 1] == str(n), x
    seen.setdefault((x["tp"], x["pp"], x["dp"], x["zero"]), set()).add(n)
assert {z for (_, _, _, z) in seen} == {1, 2, 3}, seen.keys()
for (tp, pp, dp, z), groups in seen.items():
    assert groups == want(tp, dp) | {dp}, ((tp, pp, dp, z), groups, want(tp, dp))
# the cases spelled out: a node's DP ranks and its multiples
for tp, dp, g in [(1, 32, {8, 16, 32}), (2, 16, {4, 8, 16}), (4, 8, {2, 4, 8}), (8, 4, {2, 4}),
                  (1, 8, {8})]:   # (1, 8): TP 1 x PP 4, each DP group inside a node
    assert seen[(tp, 32 // tp // dp, dp, 2)] == g, (tp, dp, seen[(tp, 32 // tp // dp, dp, 2)])
print("search: %d layouts, %d HSDP" % (len(r), sum(x["hsdp"] for x in r)))
PY
# one node: no HSDP candidate at all
"$P" --model llama3-8b --cluster h100-80gb --seq-len 4096 --global-batch 64 --search --gpus 8 \
  --mem-gb 10000 --top 100000 --json > "$WORK/one.json" || fail "search on one node"
"$PYTHON" -c 'import json, sys; r = json.load(open(sys.argv[1]))["ranked"]; assert r and not any(x["hsdp"] for x in r)' \
  "$WORK/one.json" || fail "HSDP tried inside one node"
# the 8B template's search: HSDP 4 x 4 first, in the table and the explanation
"$P" $S8 --async-save --top 5 > "$WORK/8b.txt" || fail "8B search (text)"
cat "$WORK/8b.txt"
grep -q "^   TP   PP     DP  mb  recompute  sp  zero  shard    mem GiB" "$WORK/8b.txt" &&
  grep -Eq "^    2    1     16   1  none       yes 1         4 +64\.27 " "$WORK/8b.txt" &&
  grep -q "^why TP 2 x PP 1 x DP 16, micro-batch 1, sequence parallel, ZeRO-1, HSDP 4 shard groups of 4:$" "$WORK/8b.txt" &&
  grep -q "^  - DP 16 as HSDP, 4 shard groups of 4: .* inside each group (.*, nvlink); the .* gradient shard all-reduced across 4 replicas (.*, infiniband)$" "$WORK/8b.txt" &&
  grep -q "^hpt-train options: --tp 2 --pp 1 --dp 16 .* --zero1 --zero-shard-group 4 --async-save " "$WORK/8b.txt" ||
  fail "8B search: HSDP 4 x 4 not ranked first with its shard group"
# a --zero-shard-group given is kept: DP a multiple of 8, ZeRO on
"$P" $S8 --zero-shard-group 8 --mem-gb 10000 --top 100000 --json > "$WORK/k8.json" || fail "search --zero-shard-group 8"
"$PYTHON" - "$WORK/k8.json" <<'PY' || fail "--zero-shard-group 8 not kept"
import json, sys
r = json.load(open(sys.argv[1]))["ranked"]
assert r and all(x["zero"] > 0 and x["zero_shard_group"] == 8 and x["dp"] % 8 == 0 for x in r), r[:3]
assert {x["hsdp"] for x in r} == {True, False}, "want DP 8 (plain ZeRO) and DP 16, 32 (HSDP)"
PY
expect_error 2 "^hpt-plan: --zero-shard-group 8 needs --zero 1, 2 or 3$" "$P" $S8 --zero 0 --zero-shard-group 8

# 2. hand-computed HSDP bytes per step
printf '{"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 256, "max_position_embeddings": 64, "tie_word_embeddings": false}' > "$WORK/c.json"
L="--model $WORK/c.json --cluster h100-80gb --nodes 2 --gpus-per-node 4 --tp 1 --pp 1 --dp 8 --seq-len 16 --global-batch 8 --micro-batch 1 --comm mpi --precision fp32"
for z in 0 1 2 3; do
  for n in 1 4; do
    [ $z = 0 ] && [ $n = 4 ] && continue
    sg=$([ $z = 0 ] || echo "--zero-shard-group $n")
    "$P" $L --zero $z $sg --json --ranks-tsv "$WORK/z$z-$n.tsv" > "$WORK/z$z-$n.json" || fail "plan ZeRO-$z $sg"
  done
done
"$PYTHON" - "$WORK" <<'PY' || fail "HSDP bytes per step differ from the hand-computed ones"
import json, sys
w = sys.argv[1]
j = lambda name: json.load(open(f"{w}/{name}.json"))
def tsv(name):  # rank -> (calls, bytes) of group dp
    rows = [l.rstrip("\n").split("\t") for l in open(f"{w}/{name}.tsv")][1:]
    return {int(r[0]): (float(r[2]), float(r[3])) for r in rows if r[1] == "dp"}
P, own, Pe = 115008, 28752, 256 * 64
assert j("z0-1")["memory"]["stages"][0]["params"] == P
# docs/PLAN.md's table: N = 4 ranks on NVLink (450e9 B/s, 1 us), R = 2
# replicas over InfiniBand (50e9 B/s, 5 us), loss over DP 8 (InfiniBand)
ar = lambda n, b, bw, lat: 2 * (n - 1) / n * b / bw + 2 * (n - 1) * lat
rs = lambda n, b, bw, lat: (n - 1) / n * b / bw + (n - 1) * lat
nv, ib = (450e9, 1e-6), (50e9, 5e-6)
base = ar(2, 4 * own, *ib) + ar(4, 8, *nv) + ar(8, 8, *ib)  # replicas, norm, loss
want = {
    "z2-4": (8, {0: 690064}, 805082, 4 * rs(4, 4 * P / 4, *nv) + base + rs(4, 4 * P, *nv)),
    "z3-4": (14, {0: 739536, 1: 805072, 2: 805072, 3: 805072}, 1100954,
             4 * rs(4, 4 * P / 4, *nv) + base + 4 * rs(4, 4 * P / 4, *nv)
             + 3 * rs(4, 4 * (P - Pe) / 3, *nv)),
    "z1-4": (5, {0: 690064}, 805082, rs(4, 4 * P, *nv) + base + rs(4, 4 * P, *nv)),
}
assert 4 * P + 4 * own + 8 + 4 * own + 8 == 690064 and 460032 + 115008 + 8 + 115008 + 4 * (own - Pe) + 8 == 739536
for name, (calls, bytes_, wire, secs) in want.items():
    c = j(name)["comm"]["dp"]
    per_rank = tsv(name)
    for rank, (k, b) in per_rank.items():
        want_b = bytes_.get(rank % 4, bytes_[0]) if len(bytes_) > 1 else bytes_[0]
        assert (k, b) == (calls, want_b), (name, rank, k, b, calls, want_b)
    assert c["wire_bytes"] == wire, (name, c["wire_bytes"], wire)
    assert abs(c["seconds"] - secs) <= 1e-12 * secs, (name, c["seconds"], secs)
    print(f"{name}: {calls} calls, {sorted(set(b for _, b in per_rank.values()))} bytes, wire {wire}, {secs:.6g} s")
# 3. a shard group of 1: no sharding's wire bytes and memory, plus the buffer
z0 = j("z0-1")
assert z0["comm"]["dp"]["wire_bytes"] == 2 * 7 / 8 * 4 * P + 2 * 7 / 8 * 8 == 805070
m0 = z0["memory"]["worst"]
for z in (1, 2, 3):
    d = j(f"z{z}-1")
    assert d["training"]["zero_shard_group"] == 1 and d["training"]["hsdp"], d["training"]
    assert d["comm"]["dp"]["wire_bytes"] == 805070, (z, d["comm"]["dp"])
    m = d["memory"]["worst"]
    for k in ("weights", "grads", "optimizer", "activations", "logits", "baseline"):
        assert m[k] == m0[k], (z, k, m[k], m0[k])
    assert m["comm_buffers"] == m0["comm_buffers"] + 4 * P and m["total"] == m0["total"] + 4 * P, (z, m, m0)
print("shard group of 1: wire bytes 805070 as without sharding; memory + 4P")
PY
pass "hpt-plan --search tries HSDP shard groups (8B: HSDP 4 x 4 first); HSDP bytes per step as hand-computed; a shard group of 1 is replication"
