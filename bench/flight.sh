#!/usr/bin/env bash
# bench/flight.sh BUILD_DIR [CORPUS_DIR] — overhead of the collective flight
# recorder and the hang watchdog (lib/flight.c, lib/watchdog.c): the same
# 2-rank run (TP 2: every layer's all-reduces are recorded, the most
# operations per step of any 2-rank layout) with HPT_FLIGHT_RECORDER=0
# (recorder and watchdog off) and with the default (256-slot recorder,
# watchdog thread, heartbeats in RUN_DIR/hang), alternated in one session,
# ROUNDS (default 3) rounds of STEPS (default 30) steps. Reports the median
# step time of each (first 3 steps of a run excluded), the overhead ratio
# and the recorded operations per step. MODEL (default tiny) and
# MPIEXEC (default mpiexec) can be set.
set -euo pipefail
B=${1:?usage: bench/flight.sh BUILD_DIR [CORPUS_DIR]}
CORPUS=${2:-data/gcide}
ROUNDS=${ROUNDS:-3} STEPS=${STEPS:-30} MODEL=${MODEL:-tiny} MPIEXEC=${MPIEXEC:-mpiexec}
W=$(mktemp -d /tmp/hpt-flight-bench.XXXXXX); trap 'rm -rf "$W"' EXIT
SRC=$(cd "$(dirname "$0")/.." && pwd)
cc -O2 -pthread -I"$SRC/lib" "$SRC/bench/flight_ops.c" "$SRC/lib/flight.c" -o "$W/flight_ops"
"$W/flight_ops" | tee "$W/ops"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
T="$MPIEXEC -n 2 $B/src/hpt-train --model $MODEL --data $CORPUS --tp 2 --batch 4 --seq-len 64 --steps $STEPS --eval-interval 0 --metrics none --comm-stats"
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
steps() { sed -n 's/.*| \([0-9.]*\) ms\/step.*/\1/p' "$1" | tail -n +4; }
: > "$W/off"; : > "$W/on"
for i in $(seq "$ROUNDS"); do
  rm -rf "$W/r"; HPT_FLIGHT_RECORDER=0 $T --run-dir "$W/r" > "$W/o.out" 2>&1; steps "$W/o.out" >> "$W/off"
  rm -rf "$W/r"; $T --run-dir "$W/r" > "$W/m.out" 2>&1; steps "$W/m.out" >> "$W/on"
done
off=$(median < "$W/off"); on=$(median < "$W/on")
calls=$(awk '$3 == "calls" {split($2, a, "\\.\\."); n += a[1]} END {print n + 0}' "$W/m.out")
ns=$(sed -n 's/^flight recorder: \([0-9.]*\) ns.*/\1/p' "$W/ops")
echo "$MODEL, 2 ranks TP 2, $ROUNDS rounds x $STEPS steps: flight recorder off $off ms/step," \
  "on $on ms/step, overhead $(echo "scale=2; 100 * ($on - $off) / $off" | bc) % (median step" \
  "times, $(date -u +%F))"
echo "recorded operations per step: $calls; at $ns ns each: $(echo "scale=4; $calls * $ns / 1000" | bc) us" \
  "per step = $(echo "scale=6; 100 * $calls * $ns / 1000000 / $on" | bc) % of the $on ms step"
