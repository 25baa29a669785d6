#!/bin/sh
# Context parallelism's memory against hpt-plan (issue 31): a tiny-width
# model (hidden 64, 4 heads, 2 kv heads, vocabulary 8192, 2 layers) at
# T = 16384 on CP 4 (one step, about 30 s here; 4 ranks on 2 cores). Each
# rank holds T/4 tokens' activations and logits: the measured peak RSS of
# every rank (hpt-train --comm-stats) must be within 10 % of hpt-plan
# --cp 4, and its T-dependent part (peak minus hpt-plan's weights,
# gradients, AdamW state, communication buffers and baseline) about a
# quarter (0.2 .. 0.3) of one rank's at T = 16384 — which one rank is not
# run at: its figure is the peak measured at T = 4096 scaled by hpt-plan's
# ratio of the one-rank totals at 16384 and 4096. hpt-plan's --ranks-tsv
# predicts the ring's calls and bytes per step (group cp) exactly. On a GPU
# preset, bf16 halves the ring's K/V bytes (they travel in the activation
# dtype) but not the fp32 dK/dV accumulators': per layer, forward 1/2,
# backward 20/24, buffers 32/40 of fp32's.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
PLAN="$HPT_BUILD/src/hpt-plan"
DATA=$(cat "$CORPUS"/train_*.bin "$CORPUS"/val_*.bin | wc -c)
cat > "$WORK/config.json" <<'JSON'
{"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 8192,
 "max_position_embeddings": 16384, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
 "tie_word_embeddings": false}
JSON
A="--model $WORK/config.json --data $CORPUS --batch 1 --steps 1 --eval-batches 1 --quiet --comm-stats"
timeout 300 "$MPIEXEC" -n 4 "$TRAIN" $A --seq-len 16384 --cp 4 --run-dir "$WORK/cp4" \
  > "$WORK/cp4.out" 2>&1 || { cat "$WORK/cp4.out"; fail "hpt-train --cp 4 at T = 16384"; }
timeout 300 "$MPIEXEC" -n 1 "$TRAIN" $A --seq-len 4096 --run-dir "$WORK/one" \
  > "$WORK/one.out" 2>&1 || { cat "$WORK/one.out"; fail "hpt-train on one rank at T = 4096"; }
P="--model $WORK/config.json --cluster cpu-local --data-bytes $DATA --global-batch 1 --micro-batch 1"
"$PLAN" $P --seq-len 16384 --cp 4 --ranks-tsv "$WORK/cp4.pred" --json > "$WORK/cp4.json" &&
  "$PLAN" $P --seq-len 16384 --json > "$WORK/one16k.json" &&
  "$PLAN" $P --seq-len 4096 --json > "$WORK/one4k.json" || fail "hpt-plan"
"$PLAN" $P --seq-len 16384 --cp 4 | grep "^context parallel: CP 4, chunks of 2048 tokens" ||
  fail "hpt-plan's text report has no context-parallel line"
G="--model small --cluster h100-80gb --gpus 8 --seq-len 1024 --global-batch 8 --cp 2 --json"
"$PLAN" $G --precision fp32 > "$WORK/g32.json" && "$PLAN" $G --precision bf16 > "$WORK/g16.json" ||
  fail "hpt-plan --cp 2 on h100-80gb"
"$PYTHON" - "$WORK" <<'PY' || fail "hpt-plan's bf16 ring bytes"
import json, sys
cp = lambda n: json.load(open(f"{sys.argv[1]}/{n}.json"))["context_parallel"]
a, b = cp("g32"), cp("g16")
for k, want in (("ring_forward_bytes_per_layer", 12 / 24), ("ring_backward_bytes_per_layer", 20 / 24),
                ("ring_buffer_bytes", 32 / 40)):
    assert abs(b[k] / a[k] - want) < 1e-12, f"{k}: bf16 {b[k]} / fp32 {a[k]}, want {want}"
print("bf16 ring bytes: forward 1/2, backward 20/24, buffers 32/40 of fp32's")
PY
"$PYTHON" - "$WORK" <<'PY' || fail "peak memory under CP 4"
import json, sys
w = sys.argv[1]
rows = lambda p: [l.rstrip("\n").split("\t") for l in open(p)][1:]
meas = {}
for r in rows(f"{w}/cp4/comm.tsv"):
    meas[r[0]] = float(r[5])
pred = {r[0]: float(r[5]) for r in rows(f"{w}/cp4.pred")}
for rank, m in sorted(meas.items()):
    err = (pred[rank] - m) / m
    print(f"CP 4 rank {rank}: peak RSS measured {m:.1f} MiB, hpt-plan {pred[rank]:.1f} MiB ({100 * err:+.1f} %)")
    assert abs(err) <= 0.10, "hpt-plan is not within 10 % of the measured peak RSS"
ring = {(r[0], r[1]): (float(r[2]), float(r[3])) for r in rows(f"{w}/cp4/comm.tsv") if r[1] == "cp"}
pring = {(r[0], r[1]): (float(r[2]), float(r[3])) for r in rows(f"{w}/cp4.pred") if r[1] == "cp"}
assert ring == pring, f"ring calls/bytes per step: measured {ring}, hpt-plan {pring}"
MiB = 2**20
def plan(name):
    m = json.load(open(f"{w}/{name}.json"))["memory"]["worst"]
    return m["total"] / MiB, (m["total"] - m["activations"] - m["logits"]) / MiB
cp4, fixed4 = plan("cp4")
one16, fixed1 = plan("one16k")
one4, _ = plan("one4k")
m1 = float([r for r in rows(f"{w}/one/comm.tsv")][0][5])
est = m1 * one16 / one4  # one rank at T = 16384, from its peak at 4096
ratio = (max(meas.values()) - fixed4) / (est - fixed1)
print(f"one rank: {m1:.1f} MiB measured at T = 4096 -> {est:.1f} MiB at 16384 (hpt-plan's ratio "
      f"{one16:.1f}/{one4:.1f}); T-dependent part per CP 4 rank / one rank's = {ratio:.3f}")
assert 0.2 <= ratio <= 0.3, "CP 4's T-dependent memory per rank is not about a quarter of one rank's"
PY
pass "CP 4 at T = 16384: peak RSS per rank within 10 % of hpt-plan, about 1/4 of one rank's; ring traffic as planned"
