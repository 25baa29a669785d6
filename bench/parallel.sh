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
#  4. schedules (SCHEDULES=1, the default; SCHEDULES=only: this part alone):
#     each schedule of SCHEDULE_LIST [1f1b interleaved zb-h1] (interleaved with
#     V = 2: the 8 layers in 2 p chunks) at PP = 2 and 4 (2 and 4 ranks),
#     m = 4 and 8, even layer split: the median step time and its ratio to
#     1F1B's, the measured bubble — per step the most idle stage's
#     /ranks/pipeline_bubble over the step time, the median over the steps
#     (hpt-metrics summary) — and each stage's peak RSS (hpt-train
#     --comm-stats, comm.tsv; rank = stage here), beside hpt-plan's figures
#     for the same run (cluster cpu-local, --data-bytes of the corpus): its
#     bubble, (p-1)/(m+p-1) for 1F1B, (p-1)/V / (m + (p-1)/V) interleaved
#     (Narayanan et al. 2021, 2.2) and (p-1)z / (m + (p-1)z) for zb-h1 (Qi
#     et al. 2024; docs/PLAN.md), and its predicted peak RSS per rank
#     (--ranks-tsv). A further schedule is one more word in SCHEDULE_LIST;
#     sched_opts gives its options.
#     ROUNDS=N [1] repeats each (PP, m) N times, the schedules in turn:
#     medians over the rounds of the step time, of its ratio to the first
#     schedule's in the same round, and of the bubble.
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
  rm -rf "${W:?}/$name" # a fresh run directory (ROUNDS repeat a name)
  "$MPIEXEC" -n "$n" "$TRAIN" --model small --data "$CORPUS" --seq-len 256 --steps "$STEPS" \
    --eval-batches 1 --eval-interval 0 --comm-stats --run-dir "$W/$name" "$@" > "$W/$name.out" 2>&1
}
median_ms() { # median ms/step of steps 2..N
  sed -n 's/.*| \([0-9.]*\) ms\/step.*/\1/p' "$1" | tail -n +2 | sort -n |
    awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'
}
echo "| measurement | layout | value | reference |"
echo "|---|---|---|---|"
if [ "${SCHEDULES:-1}" != only ]; then
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
fi
# sched_opts SCHEDULE: its hpt-train and hpt-plan options
sched_opts() {
  case $1 in
    interleaved) echo --pp-schedule interleaved --pp-virtual 2 ;;
    *) echo --pp-schedule "$1" ;;
  esac
}
# per_rank FILE: the peak_rss_mib column of a comm.tsv (measured or
# predicted) per rank, "r0/r1/..." (MiB, rounded)
per_rank() {
  awk -F'\t' 'NR > 1 && !($1 in r) {r[$1] = $6; n = $1 + 1 > n ? $1 + 1 : n}
    END {for (i = 0; i < n; i++) printf "%s%.0f", i ? "/" : "", r[i]}' "$1"
}
# median: the median of the numbers on stdin
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
if [ "${SCHEDULES:-1}" != 0 ]; then
  SCHEDULE_LIST=${SCHEDULE_LIST:-1f1b interleaved zb-h1}
  ROUNDS=${ROUNDS:-1}
  DATA_BYTES=$(cat "$CORPUS"/train_*.bin "$CORPUS"/val_*.bin | wc -c)
  for p in 2 4; do
    for m in 4 8; do
      # ROUNDS rounds, each running every schedule in turn (a load that
      # comes and goes hits them alike); per round the step time's ratio to
      # the first schedule's, then medians over the rounds
      for ((r = 1; r <= ROUNDS; r++)); do
        base=
        for sched in $SCHEDULE_LIST; do
          n=s$p$sched$m
          # shellcheck disable=SC2046  # sched_opts is a word list
          run "$n" "$p" --pp "$p" --batch 1 --grad-accum "$m" $(sched_opts "$sched")
          ms=$(median_ms "$W/$n.out")
          base=${base:-$ms}
          echo "$ms" >> "$W/$n.ms"
          awk -v a="$ms" -v b="$base" 'BEGIN {print a / b}' >> "$W/$n.ratio"
          "$B/src/hpt-metrics" summary "$W/$n" |
            sed -n 's/^pipeline bubble: \([^ ]*\) of the step.*/\1/p' >> "$W/$n.bubble"
        done
      done
      for sched in $SCHEDULE_LIST; do
        n=s$p$sched$m
        # shellcheck disable=SC2046
        "$B/src/hpt-plan" --model small --cluster cpu-local --seq-len 256 --pp "$p" \
          --global-batch "$m" --micro-batch 1 --data-bytes "$DATA_BYTES" $(sched_opts "$sched") \
          --json --ranks-tsv "$W/$n.pred" > "$W/$n.json"
        theory=$(sed -n 's/^ *"bubble_fraction": \([^,}]*\).*/\1/p' "$W/$n.json" | tail -1)
        # (peak RSS: the last round's; it does not depend on the load)
        awk -v ms="$(median < "$W/$n.ms")" -v q="$(median < "$W/$n.ratio")" \
            -v lo="$(sort -g "$W/$n.ms" | head -1)" -v hi="$(sort -g "$W/$n.ms" | tail -1)" \
            -v b="$(median < "$W/$n.bubble")" -v m="$m" -v p="$p" -v s="$sched" -v t="$theory" \
            -v rm="$(per_rank "$W/$n/comm.tsv")" -v rp="$(per_rank "$W/$n.pred")" 'BEGIN {
          printf "| schedule | PP=%d, %s, m=%d, small, 1x256 per micro-batch | %.0f ms/step (rounds %.0f-%.0f; %.2fx), bubble %.3f; peak RSS per stage %s MiB | hpt-plan: bubble %.3f; %s MiB |\n",
            p, (s == "interleaved" ? "interleaved V=2" : s), m, ms, lo, hi, q, b, rm, t, rp }'
      done
    done
  done
fi
