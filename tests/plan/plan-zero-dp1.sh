#!/bin/sh
# --zero 2 or 3 with DP 1 shards nothing: hpt-train runs it as --zero 0 with a
# note (lib/train.c), and hpt-plan says the same — no ZeRO in the layout line,
# a note, JSON zero 0 with zero_requested, and exactly the memory and
# communication of --zero 0 (it used to print "ZeRO-3" and count the 4 B per
# parameter reduced-gradient shard that hpt-train does not allocate then).
# ZeRO-1 on DP 1 stays ZeRO-1, as in hpt-train. On both models (cpu-local's
# exact one and a GPU preset's). --search --zero 3 still keeps ZeRO-3 on its
# layouts with DP > 1.
. "$HPT_SRC/tests/helpers/lib.sh"
P="$HPT_BUILD/src/hpt-plan"
for c in "cpu-local --model small --seq-len 256" "h100-80gb --model llama3-8b --seq-len 4096 --tp 8"; do
  tag=${c%% *}
  A="--cluster $c --global-batch 2 --dp 1"
  "$P" $A --zero 0 --json > "$WORK/$tag-z0.json" || fail "$tag: --zero 0"
  for z in 2 3; do
    "$P" $A --zero $z > "$WORK/$tag-z$z.txt" || fail "$tag: --zero $z (text)"
    "$P" $A --zero $z --json > "$WORK/$tag-z$z.json" || fail "$tag: --zero $z (JSON)"
    sed -n 3,4p "$WORK/$tag-z$z.txt"
    grep -q "^layout: TP [0-9]* x PP 1 x DP 1; .*; \(fp32\|bf16 mixed precision\)$" "$WORK/$tag-z$z.txt" &&
      grep -qx "note: --zero $z with DP 1 shards nothing: planned as --zero 0, as hpt-train runs it" "$WORK/$tag-z$z.txt" &&
      ! grep -q "ZeRO" "$WORK/$tag-z$z.txt" || fail "$tag --dp 1 --zero $z: labelled as ZeRO, or no note"
    "$PYTHON" - "$WORK/$tag-z$z.json" "$WORK/$tag-z0.json" $z <<'PY' || fail "$tag --dp 1 --zero $z: not planned as --zero 0"
import json, sys
d, z0, z = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
t = d["training"]
assert (t["zero"], t["zero1"], t["zero_requested"], t["zero_shard_group"]) == (0, False, z, 0), t
assert z0["training"]["zero_requested"] == 0, z0["training"]
for k in ("memory", "comm", "step_time_s", "fits"):
    assert d[k] == z0[k], (k, d[k], z0[k])
print("--zero %d on DP 1: %.0f bytes per rank, as --zero 0" % (z, d["memory"]["worst"]["total"]))
PY
  done
  "$P" $A --zero 1 > "$WORK/$tag-z1.txt" || fail "$tag: --zero 1"
  grep -q "^layout: .*, ZeRO-1$" "$WORK/$tag-z1.txt" && ! grep -q "^note:" "$WORK/$tag-z1.txt" ||
    fail "$tag --dp 1 --zero 1: not ZeRO-1 (hpt-train runs ZeRO-1 on one rank)"
done
# --search --zero 3: the stage is kept wherever DP > 1 (the search plans on
# one GPU first: the DP 1 rule must not turn the kept stage into 0)
"$P" --model llama3-8b --cluster h100-80gb --seq-len 4096 --global-batch 1024 --precision tf32 \
  --search --nodes 4 --zero 3 --top 100000 --json > "$WORK/s3.json" || fail "search --zero 3"
"$PYTHON" - "$WORK/s3.json" <<'PY' || fail "--search --zero 3 did not keep ZeRO-3 where DP > 1"
import json, sys
r = json.load(open(sys.argv[1]))["ranked"]
assert r and all(x["zero"] == (3 if x["dp"] > 1 else 0) for x in r), [x for x in r if x["zero"] != 3][:3]
PY
pass "hpt-plan --dp 1 --zero 2/3: planned and labelled as --zero 0 with hpt-train's note; --zero 1 stays"
