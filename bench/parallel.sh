#!/usr/bin/env bash
# bench/parallel.sh BUILD_DIR [CORPUS_DIR] — parallel-runtime measurements on
# the `small` preset (issue: hybrid parallelism, performance section):
#  1. pipeline bubble: PP=2 (one rank per core here) with m = 2, 4, 8
#     micro-batches; measured idle fraction = time a stage spends waiting in
#     pipeline receives / step time (max over the stages), against the 1F1B
#     theory (p-1)/(m+p-1);
#  2. peak memory per rank (RSS) for TP=2 and PP=2 against one rank;
#  3. communication bytes per step and group (the analytic check is the
#     test tests/parallel/comm-volume.sh);
#  4. schedules (SCHEDULES=1, the default): 1F1B against interleaved 1F1B
#     (V = 2: the 8 layers in 4 chunks) at PP=2, m = 4 and 8, split 4,4:
#     the median step time and the measured bubble — per step the most
#     idle stage's /ranks/pipeline_bubble over the step time, the median
#     over the steps (hpt-metrics summary) — beside each schedule's theory,
#     (p-1)/(m+p-1) and (p-1)/(V*m+p-1) (Narayanan et al. 2021, 2.2).
# Prints a Markdown table for docs/PERFORMANCE.md. Medians of STEPS steps
# after the first.
set -euo pipefail
B=${1:?usage: bench/parallel.sh BUILD_DIR [CORPUS_DIR]}
CORPUS=${2:-data/gcide}
STEPS=${STEPS:-6}
MPIEXEC=${MPIEXEC:-mpiexec}
TRAIN="$B/src/hpt-train"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
export OMP_NUM_THREADS=1

run() { # NAME RANKS ARGS... → W/NAME.out, W/NAME/comm.tsv
  local name=$1 n=$2; shift 2
  "$MPIEXEC" -n "$n" "$TRAIN" --model small --data "$CORPUS" --seq-len 256 --steps "$STEPS" \
    --eval-batches 1 --eval-interval 0 --comm-stats --run-dir "$W/$name" "$@" > "$W/$name.out" 2>&1
}
median_ms() { # median ms/step of steps 2..N
  sed -n 's/.*| \([0-9.]*\) ms\/step.*/\1/p' "$1" | tail -n +2 | sort -n |
    awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'
}
echo "| measurement | layout | value | reference |"
echo "|---|---|---|---|"
# The last stage also runs the LM head (8192 x 384), so the balanced split
# 4,4 leaves stage 0 idle ~30 % of the time; 5,3 balances the FLOPs.
for split in 4,4 5,3; do
  for m in 2 4 8; do
    run "pp2m$m" 2 --pp 2 --pp-split "$split" --batch 1 --grad-accum "$m"
    ms=$(median_ms "$W/pp2m$m.out")
    # pipeline wait per step: the PP seconds of the most idle stage (receives dominate)
    wait_s=$(awk -F'\t' '$2 == "pp" && $5 > w {w = $5} END {print w}' "$W/pp2m$m/comm.tsv")
    awk -v w="$wait_s" -v ms="$ms" -v m="$m" -v sp="$split" 'BEGIN {
      printf "| pipeline bubble | PP=2 (layers %s), m=%d, small, 1x256 per micro-batch | %.3f (%.0f ms of %.0f ms/step) | 1F1B theory %.3f |\n",
        sp, m, w * 1000 / ms, w * 1000, ms, 1 / (m + 1) }'
  done
done
run one 1 --batch 2
run tp2 2 --tp 2 --batch 2
run pp2 2 --pp 2 --batch 1 --grad-accum 2
for name in one tp2 pp2; do
  rss=$(sed -n 's/peak RSS per rank: \(.*\) MiB/\1/p' "$W/$name.out")
  echo "| peak RSS per rank | $name, small, micro-batch 2x256 (global) | $rss MiB | |"
done
for name in tp2 pp2; do
  awk -F'\t' -v n="$name" 'NR > 1 && $4 > 0 {b[$2] = b[$2] > $4 ? b[$2] : $4}
    END {for (g in b) printf "| bytes per step | %s, group %s (max over ranks) | %d | analytic (tests/parallel/comm-volume.sh) |\n", n, g, b[g]}' "$W/$name/comm.tsv"
done
if [ "${SCHEDULES:-1}" = 1 ]; then
  for m in 4 8; do
    for sched in 1f1b interleaved; do
      extra=$([ "$sched" = interleaved ] && echo "--pp-schedule interleaved --pp-virtual 2" || true)
      # shellcheck disable=SC2086  # extra is a word list
      run "s$sched$m" 2 --pp 2 --batch 1 --grad-accum "$m" $extra
      ms=$(median_ms "$W/s$sched$m.out")
      bub=$("$B/src/hpt-metrics" summary "$W/s$sched$m" | sed -n 's/^pipeline bubble: \([^ ]*\) of the step.*/\1/p')
      awk -v b="$bub" -v ms="$ms" -v m="$m" -v s="$sched" 'BEGIN {
        V = s == "interleaved" ? 2 : 1
        printf "| schedule | PP=2, %s%s, m=%d, small, 1x256 per micro-batch | %.0f ms/step, bubble %.3f | theory %.3f |\n",
          s, (V > 1 ? " V=2" : ""), m, ms, b, 1 / (V * m + 1) }'
    done
  done
fi
