#!/usr/bin/env bash
# bench/zero.sh BUILD_DIR [CORPUS_DIR] — ZeRO stages side by side on CPU
# ranks (issue: sharded data parallelism, benchmark): the `small` preset
# (20.1 M parameters), seq 256, micro-batch 1, DP = RANKS (default 2, one
# rank per core of the reference machine: with more ranks than cores MPICH's
# busy-polling ranks take turns on the cores and every blocking collective
# costs scheduler time slices — at DP 4 on 2 cores ZeRO-1 measured 12x the
# step time of ZeRO-0's overlapped all-reduces, which says nothing about a
# cluster; medians, and the ratio to ZeRO-1 of the same run), for ZeRO 0, 1,
# 2, 3, ZeRO-3 without prefetch and, at RANKS >= 4, HSDP (ZeRO-3, shard
# groups of RANKS/2):
#  - median ms/step of steps 2..STEPS;
#  - peak RSS per rank (--comm-stats; min..max over the ranks) beside
#    hpt-plan's prediction for the same layout;
#  - DP bytes per step (rank 0);
#  - ZeRO-3: seconds per step rank 0 waited for parameter gathers, and the
#    share of the gather time hidden by prefetching, 1 - wait(prefetch 1) /
#    wait(prefetch 0) (with prefetch 0 every gather is waited for whole).
# Then hpt-plan's figures for the 8B template's cluster (4 nodes x 8 H100
# 80 GB): one GPU cannot show sharding, so the GPU side is the planner's —
# and on a GPU hpt's ZeRO-3 keeps the parameter block allocated, so the
# plan gives it ZeRO-2's memory there.
# Prints Markdown tables for docs/PERFORMANCE.md.
set -euo pipefail
B=${1:?usage: bench/zero.sh BUILD_DIR [CORPUS_DIR]}
CORPUS=${2:-data/gcide}
STEPS=${STEPS:-6}
RANKS=${RANKS:-2}
MPIEXEC=${MPIEXEC:-mpiexec}
TRAIN="$B/src/hpt-train" PLAN="$B/src/hpt-plan"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
export OMP_NUM_THREADS=1
DATA=$(cat "$CORPUS"/train_*.bin "$CORPUS"/val_*.bin | wc -c)

run() { # NAME ZERO-ARGS...
  local name=$1; shift
  "$MPIEXEC" -n "$RANKS" "$TRAIN" --model small --data "$CORPUS" --seq-len 256 --batch 1 --steps "$STEPS" \
    --eval-batches 1 --eval-interval 0 --comm-stats --run-dir "$W/$name" "$@" > "$W/$name.out" 2>&1
}
median_ms() {
  sed -n 's/.*| \([0-9.]*\) ms\/step.*/\1/p' "$1" | tail -n +2 | sort -n |
    awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'
}
rss() { awk -F'\t' '$2 == "dp" {if (min == "" || $6 < min) min = $6; if ($6 > max) max = $6}
                    END {printf "%.0f..%.0f", min, max}' "$1"; }
planned() { # ZERO → predicted peak of rank 0 (MiB)
  "$PLAN" --cluster cpu-local --data-bytes "$DATA" --model small --seq-len 256 --dp "$RANKS" \
    --global-batch "$RANKS" --micro-batch 1 "$@" --ranks-tsv "$W/p.tsv" > /dev/null
  awk -F'\t' '$1 == 0 && $2 == "dp" {print $6}' "$W/p.tsv"
}
waited() { sed -n 's/^ZeRO-3 (rank 0): .*, \([0-9.]*\) s per step waited.*/\1/p' "$1"; }
H=$((RANKS / 2))
for z in 0 1 2 3; do run "z$z" --zero "$z"; done
run z3p0 --zero 3 --zero3-prefetch 0
cases="0 1 2 3 3p0"
if [ "$RANKS" -ge 4 ]; then run z3h --zero 3 --zero-shard-group "$H"; cases="$cases 3h"; fi
ref=$(median_ms "$W/z1.out")
echo "| ZeRO (DP $RANKS, small, CPU) | ms/step (median) | vs ZeRO-1 | peak RSS per rank, MiB | hpt-plan, MiB | DP bytes/step (rank 0) |"
echo "|---|---|---|---|---|---|"
for z in $cases; do
  ms=$(median_ms "$W/z$z.out")
  case $z in
    3p0) label="3, prefetch 0" popts="--zero 3" ;;
    3h) label="3, HSDP $((RANKS / H)) x $H" popts="--zero 3 --zero-shard-group $H" ;;
    *) label=$z popts="--zero $z" ;;
  esac
  # shellcheck disable=SC2086  # popts: options by design
  printf "| %s | %s | %.2f | %s | %s | %s |\n" "$label" "$ms" "$(echo "$ms / $ref" | bc -l)" \
    "$(rss "$W/z$z/comm.tsv")" "$(planned $popts)" \
    "$(awk -F'\t' '$1 == 0 && $2 == "dp" {print $4}' "$W/z$z/comm.tsv")"
done
w1=$(waited "$W/z3.out") w0=$(waited "$W/z3p0.out")
echo
echo "ZeRO-3 gathers waited for (rank 0, s/step): prefetch 0 $w0, prefetch 1 $w1; hidden by prefetch: $(echo "100 * (1 - $w1 / $w0)" | bc -l | xargs printf '%.0f') %"
echo
echo "| hpt-plan: llama3-8b, 4 nodes x 8 H100 80 GB, seq 8192, global batch 256, bf16 | memory per GPU, GiB | tokens/s | MFU |"
echo "|---|---|---|---|"
for z in "1" "2" "3" "2 --zero-shard-group 8" "3 --zero-shard-group 8"; do
  for tp in 1 2; do
    # shellcheck disable=SC2086  # z: options by design
    "$PLAN" --model llama3-8b --cluster h100-80gb --nodes 4 --gpus-per-node 8 --seq-len 8192 \
      --global-batch 256 --micro-batch 1 --tp $tp --pp 1 --dp $((32 / tp)) --recompute=selective \
      --zero $z --json > "$W/g.json"
    python3 -c "import json,sys; d=json.load(open('$W/g.json')); print('| TP $tp x DP $((32 / tp)), ZeRO-$z | %.1f (%s) | %.0f | %.1f %% |' % (d['memory']['worst']['total'] / 2**30, 'fits' if d['fits'] else 'does not fit', d['tokens_per_s'], 100 * d['mfu']))"
  done
done
