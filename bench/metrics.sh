#!/usr/bin/env bash
# bench/metrics.sh BUILD_DIR [CORPUS_DIR] — overhead of the metrics file on
# the `small` preset (1 rank, 4 x 256 tokens per step): the same run with
# --metrics none and with the default metrics (gathered and flushed every
# --metrics-interval steps, default 10), alternated in one session, ROUNDS
# (default 3) rounds of STEPS (default 30) steps. Reports the median step
# time of each (first 3 steps of a run excluded) and the overhead ratio.
set -euo pipefail
B=${1:?usage: bench/metrics.sh BUILD_DIR [CORPUS_DIR]}
CORPUS=${2:-data/gcide}
ROUNDS=${ROUNDS:-3} STEPS=${STEPS:-30}
W=$(mktemp -d /tmp/hpt-metrics-bench.XXXXXX); trap 'rm -rf "$W"' EXIT
T="$B/src/hpt-train --model small --data $CORPUS --batch 4 --seq-len 256 --steps $STEPS --eval-interval 0 --eval-batches 1"
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
steps() { sed -n 's/.*| \([0-9.]*\) ms\/step.*/\1/p' "$1" | tail -n +4; }
: > "$W/off"; : > "$W/on"
for i in $(seq "$ROUNDS"); do
  $T --metrics none > "$W/o.out" 2>&1; steps "$W/o.out" >> "$W/off"
  rm -rf "$W/r"; $T --run-dir "$W/r" > "$W/m.out" 2>&1; steps "$W/m.out" >> "$W/on"
done
off=$(median < "$W/off"); on=$(median < "$W/on")
echo "small, 1 rank, $ROUNDS rounds x $STEPS steps: metrics off $off ms/step, on $on ms/step," \
  "overhead $(echo "scale=2; 100 * ($on - $off) / $off" | bc) % (median step times, $(date -u +%F))"
