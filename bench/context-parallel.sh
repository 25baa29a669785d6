#!/usr/bin/env bash
# context-parallel.sh — context parallelism (hpt-train --cp, issue 31) against
# the sequence length T: tokens/s and peak memory per rank for CP 1, 2 and 4
# (CPU ranks on this machine), with hpt-plan's predicted peak, the ring's
# traffic and the share of it hidden behind the block compute
# (docs/PERFORMANCE.md, "Context parallelism"). bench/long-context.sh runs it
# as its CP part (CP_TS there).
#
#   bench/context-parallel.sh [BUILD_DIR]
#
# Model: a tiny-width Llama (hidden 64, 4 heads, 2 kv heads, SwiGLU 176,
# vocabulary 8192, 2 layers) with max_position_embeddings = the largest T;
# micro-batch 1 x T; CP ranks under mpiexec, OMP_NUM_THREADS=1 each. Per
# (T, CP): STEPS steps; ms/step is the last step's (the first warms up);
# tokens/s = T / that; peak RSS per rank the largest of comm.tsv's
# (--comm-stats: getrusage ru_maxrss); plan: hpt-plan --cluster cpu-local
# --cp CP (the same run's peak); ring: the cp group's bytes per step, the
# share of the step spent in its calls (the largest rank's comm_cp seconds /
# step) and the share of its transfers' time in flight not spent waiting
# (metrics.h5 /ranks/cp_ring_hidden of the last step, mean over the ranks:
# 1 - waited / in flight; an upper bound of the traffic hidden, see
# docs/METRICS.md).
# A (T, CP) whose plan exceeds MEM_CAP_MIB per rank is skipped, and one whose
# time, extrapolated from the same CP at the previous T (quadratic in T:
# attention dominates), would exceed MAX_RUN_S for its STEPS steps.
#
# Environment: TS ["2048 4096 8192 16384"], CPS ["1 2 4"], STEPS [2],
# MEM_CAP_MIB [4096], MAX_RUN_S [900], CORPUS [$HPT_BUILD/tests/corpus],
# MPIEXEC [mpiexec], TSV (also write the rows there, tab-separated: T, cp,
# status (ok, skipped-memory, skipped-time, failed), ms_per_step, tokens_s,
# peak_mib, plan_mib, ring_mb, ring_share, ring_hidden), PLOT (also draw
# tokens/s, peak memory and the hidden share against T to this PNG:
# bench/context_parallel_plot.py), PYTHON [/usr/bin/python3].
# On 2 cores CP 4 oversubscribes (4 busy-polling ranks): compare memory
# across CP here; tokens/s across CP needs one core per rank.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
HPT_BUILD=${1:-${HPT_BUILD:-$(cd "$here/.." && pwd)}}
TRAIN=$HPT_BUILD/src/hpt-train PLAN=$HPT_BUILD/src/hpt-plan
[ -x "$TRAIN" ] && [ -x "$PLAN" ] || { echo "no hpt-train/hpt-plan in $HPT_BUILD/src" >&2; exit 2; }
CORPUS=${CORPUS:-$HPT_BUILD/tests/corpus}
TS=${TS:-"2048 4096 8192 16384"} CPS=${CPS:-"1 2 4"} STEPS=${STEPS:-2}
MEM_CAP_MIB=${MEM_CAP_MIB:-4096} MAX_RUN_S=${MAX_RUN_S:-900} MPIEXEC=${MPIEXEC:-mpiexec}
PYTHON=${PYTHON:-/usr/bin/python3}
for v in STEPS MEM_CAP_MIB MAX_RUN_S; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "context-parallel.sh: $v must be a positive integer (got '${!v}')" >&2; exit 2; }
done
export OMP_NUM_THREADS=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hpt-cp-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mapfile -t ts_sorted < <(printf '%s\n' $TS | sort -n -u)
maxT=${ts_sorted[-1]}
cat > "$WORK/model.json" <<JSON
{"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 8192,
 "max_position_embeddings": $maxT, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
 "tie_word_embeddings": false}
JSON
# hpt-train opens the validation shards too (a validation at the end): when
# they hold fewer than maxT + 1 tokens (llm.c shards: a 1024-byte header,
# 2 bytes a token), validate on the first training shard instead
val_tokens=$(( ($(cat "$CORPUS"/val_*.bin 2>/dev/null | wc -c) - 1024) / 2 ))
if [ "$val_tokens" -le "$maxT" ]; then
  mkdir "$WORK/corpus"
  for f in "$CORPUS"/train_*.bin; do ln -s "$f" "$WORK/corpus/"; done
  first=$(ls "$CORPUS"/train_*.bin | head -1)
  ln -s "$first" "$WORK/corpus/val_000000.bin"
  echo "   (the validation shards hold $val_tokens tokens < T = $maxT: validating on $first)"
  CORPUS=$WORK/corpus
fi
DATA=$(cat "$CORPUS"/train_*.bin "$CORPUS"/val_*.bin | wc -c)
rows=$WORK/rows.tsv
printf 'T\tcp\tstatus\tms_per_step\ttokens_s\tpeak_mib\tplan_mib\tring_mb\tring_share\tring_hidden\n' > "$rows"
echo "== context parallelism: tiny width (hidden 64, 2 layers), micro-batch 1 x T, $STEPS steps per run"
echo "   $(date -u '+%Y-%m-%d %H:%M UTC'), $(getconf _NPROCESSORS_ONLN) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
  "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; caps: $MEM_CAP_MIB MiB per rank, $MAX_RUN_S s per run"
printf '%6s %3s %10s %10s %14s %10s %12s %10s %11s\n' T CP ms/step tokens/s "peak MiB/rank" "plan MiB" \
  "ring MB/step" "ring share" "ring hidden"
declare -A last_ms last_t
for T in "${ts_sorted[@]}"; do
  for CP in $CPS; do
    plan=$("$PLAN" --model "$WORK/model.json" --cluster cpu-local --data-bytes "$DATA" \
             --seq-len "$T" --cp "$CP" --global-batch 1 --micro-batch 1 --json |
           "$PYTHON" -c 'import json,sys; print("%.1f" % (json.load(sys.stdin)["memory"]["worst"]["total"] / 2**20))')
    if "$PYTHON" -c "import sys; sys.exit(0 if $plan > $MEM_CAP_MIB else 1)"; then
      printf '%6s %3s  skipped: plan %.0f MiB per rank > MEM_CAP_MIB %s\n' "$T" "$CP" "$plan" "$MEM_CAP_MIB"
      printf '%s\t%s\tskipped-memory\t\t\t\t%s\t\t\t\n' "$T" "$CP" "$plan" >> "$rows"
      continue
    fi
    if [ -n "${last_ms[$CP]:-}" ]; then
      est=$("$PYTHON" -c "print('%.0f' % ($STEPS * ${last_ms[$CP]} / 1e3 * ($T / ${last_t[$CP]}) ** 2))")
      if [ "$est" -gt "$MAX_RUN_S" ]; then
        printf '%6s %3s  skipped: about %s s for %s steps (from T = %s) > MAX_RUN_S %s\n' "$T" "$CP" "$est" \
          "$STEPS" "${last_t[$CP]}" "$MAX_RUN_S"
        printf '%s\t%s\tskipped-time\t\t\t\t%s\t\t\t\n' "$T" "$CP" "$plan" >> "$rows"
        continue
      fi
    fi
    d=$WORK/r$T.$CP
    if ! "$MPIEXEC" -n "$CP" "$TRAIN" --model "$WORK/model.json" --data "$CORPUS" --seq-len "$T" \
      --cp "$CP" --batch 1 --steps "$STEPS" --eval-batches 1 --comm-stats --collective-timeout 0 \
      --run-dir "$d" > "$d.out" 2>&1; then
      tail -3 "$d.out"
      printf '%s\t%s\tfailed\t\t\t\t%s\t\t\t\n' "$T" "$CP" "$plan" >> "$rows"
      continue
    fi
    "$PYTHON" - "$d.out" "$d/comm.tsv" "$d/metrics.h5" "$T" "$CP" "$plan" "$rows" <<'PY'
import math, re, sys
import h5py, numpy as np
out, tsv, h5, T, CP, plan, rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
ms = [float(m) for m in re.findall(r"\| ([0-9.]+) ms/step", open(out).read())][-1]
comm = [l.rstrip("\n").split("\t") for l in open(tsv)][1:]
peak = max(float(r[5]) for r in comm)
ring = [r for r in comm if r[1] == "cp"]
mb = max(float(r[3]) for r in ring) / 1e6 if ring else 0
share = max(float(r[4]) for r in ring) / (ms / 1e3) if ring else 0
with h5py.File(h5, "r", libver="latest", swmr=True) as f:
    h = f["ranks/cp_ring_hidden"][-1]
hidden = float(np.mean(h)) if CP > 1 else math.nan
print(f"{T:6d} {CP:3d} {ms:10.1f} {T / (ms / 1e3):10.0f} {peak:14.1f} {plan:10.1f} {mb:12.2f} {share:10.2f} "
      + ("%11.2f" % hidden if CP > 1 else "%11s" % "-"))
with open(rows, "a") as f:
    f.write(f"{T}\t{CP}\tok\t{ms}\t{T / (ms / 1e3):.1f}\t{peak}\t{plan}\t{mb:.4f}\t{share:.4f}\t"
            + ("%.4f" % hidden if CP > 1 else "") + "\n")
PY
    last_ms[$CP]=$(awk -F'\t' -v T="$T" -v C="$CP" '$1 == T && $2 == C && $3 == "ok" { print $4 }' "$rows")
    last_t[$CP]=$T
  done
done
[ -z "${TSV:-}" ] || cp "$rows" "$TSV"
[ -z "${PLOT:-}" ] || "$PYTHON" "$here/context_parallel_plot.py" "$rows" "$PLOT"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
