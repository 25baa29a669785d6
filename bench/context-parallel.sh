#!/usr/bin/env bash
# context-parallel.sh — context parallelism (hpt-train --cp, issue 31) against
# the sequence length T: tokens/s and peak memory per rank for CP 1, 2 and 4
# (CPU ranks on this machine), with hpt-plan's predicted peak and the ring's
# traffic (docs/PERFORMANCE.md, "Context parallelism").
#
#   bench/context-parallel.sh [BUILD_DIR]
#
# Model: a tiny-width Llama (hidden 64, 4 heads, 2 kv heads, SwiGLU 176,
# vocabulary 8192, 2 layers) with max_position_embeddings = the largest T;
# micro-batch 1 x T; CP ranks under mpiexec, OMP_NUM_THREADS=1 each. Per
# (T, CP): STEPS steps; ms/step is the last step's (the first warms up);
# tokens/s = T / that; peak RSS per rank the largest of comm.tsv's
# (--comm-stats: getrusage ru_maxrss); plan: hpt-plan --cluster cpu-local
# --cp CP (the same run's peak); ring: the cp group's bytes per step and the
# share of the step spent in its calls (a rank's comm_cp seconds / step).
# A (T, CP) whose plan exceeds MEM_CAP_MIB per rank is skipped.
#
# Environment: TS ["2048 4096 8192 16384"], CPS ["1 2 4"], STEPS [2],
# MEM_CAP_MIB [4096], CORPUS [$HPT_BUILD/tests/corpus], MPIEXEC [mpiexec].
# On 2 cores CP 4 oversubscribes (4 busy-polling ranks): compare memory
# across CP here; tokens/s across CP needs one core per rank.
set -euo pipefail
HPT_BUILD=${1:-${HPT_BUILD:-$(cd "$(dirname "$0")/.." && pwd)}}
TRAIN=$HPT_BUILD/src/hpt-train PLAN=$HPT_BUILD/src/hpt-plan
[ -x "$TRAIN" ] && [ -x "$PLAN" ] || { echo "no hpt-train/hpt-plan in $HPT_BUILD/src" >&2; exit 2; }
CORPUS=${CORPUS:-$HPT_BUILD/tests/corpus}
TS=${TS:-"2048 4096 8192 16384"} CPS=${CPS:-"1 2 4"} STEPS=${STEPS:-2}
MEM_CAP_MIB=${MEM_CAP_MIB:-4096} MPIEXEC=${MPIEXEC:-mpiexec}
export OMP_NUM_THREADS=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hpt-cp-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
maxT=0
for T in $TS; do (( T > maxT )) && maxT=$T; done
cat > "$WORK/model.json" <<JSON
{"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 8192,
 "max_position_embeddings": $maxT, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
 "tie_word_embeddings": false}
JSON
DATA=$(cat "$CORPUS"/train_*.bin "$CORPUS"/val_*.bin | wc -c)
printf '%6s %3s %10s %10s %14s %12s %14s %10s\n' T CP ms/step tokens/s "peak MiB/rank" "plan MiB" "ring MB/step" "ring share"
for T in $TS; do
  for CP in $CPS; do
    plan=$("$PLAN" --model "$WORK/model.json" --cluster cpu-local --data-bytes "$DATA" \
             --seq-len "$T" --cp "$CP" --global-batch 1 --micro-batch 1 --json |
           /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["memory"]["worst"]["total"] / 2**20)')
    if /usr/bin/python3 -c "import sys; sys.exit(0 if $plan > $MEM_CAP_MIB else 1)"; then
      printf '%6s %3s  skipped: plan %.0f MiB per rank > MEM_CAP_MIB %s\n' "$T" "$CP" "$plan" "$MEM_CAP_MIB"
      continue
    fi
    d=$WORK/r$T.$CP
    "$MPIEXEC" -n "$CP" "$TRAIN" --model "$WORK/model.json" --data "$CORPUS" --seq-len "$T" \
      --cp "$CP" --batch 1 --steps "$STEPS" --eval-batches 1 --comm-stats --collective-timeout 0 \
      --run-dir "$d" > "$d.out" 2>&1 || { tail -3 "$d.out"; continue; }
    /usr/bin/python3 - "$d.out" "$d/comm.tsv" "$T" "$CP" "$plan" <<'PY'
import re, sys
out, tsv, T, CP, plan = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
ms = [float(m) for m in re.findall(r"\| ([0-9.]+) ms/step", open(out).read())][-1]
rows = [l.rstrip("\n").split("\t") for l in open(tsv)][1:]
peak = max(float(r[5]) for r in rows)
ring = [r for r in rows if r[1] == "cp"]
mb = max(float(r[3]) for r in ring) / 1e6 if ring else 0
share = max(float(r[4]) for r in ring) / (ms / 1e3) if ring else 0
print(f"{T:6d} {CP:3d} {ms:10.1f} {T / (ms / 1e3):10.0f} {peak:14.1f} {plan:12.1f} {mb:14.2f} {share:10.2f}")
PY
  done
done
