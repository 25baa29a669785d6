#!/usr/bin/env bash
# bench/seqpar.sh BUILD_DIR [CORPUS_DIR] — sequence parallelism and
# selective recomputation on the `small` preset (issue 18):
#  1. ms/step of TP=2 with and without --sequence-parallel (one rank per
#     core on a 2-core machine), ROUNDS alternating rounds; median of the
#     steps after the first of every run, then the median over rounds and
#     the SP/TP ratio; the activation block and peak RSS per rank;
#  2. activation MiB per rank (the trainer's banner) with --recompute none,
#     selective and full at T = SEQS, one rank.
# Prints Markdown tables for docs/PERFORMANCE.md. On a shared machine quote
# medians and ratios only.
set -euo pipefail
B=${1:?usage: bench/seqpar.sh BUILD_DIR [CORPUS_DIR]}
CORPUS=${2:-data/gcide}
STEPS=${STEPS:-6} ROUNDS=${ROUNDS:-3} SEQS=${SEQS:-"256 1024"}
MPIEXEC=${MPIEXEC:-mpiexec}
TRAIN="$B/src/hpt-train"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
export OMP_NUM_THREADS=1

run() { # NAME RANKS ARGS... → W/NAME.out
  local name=$1 n=$2; shift 2
  "$MPIEXEC" -n "$n" "$TRAIN" --model small --data "$CORPUS" --eval-batches 1 --eval-interval 0 \
    --run-dir "$W/$name" "$@" > "$W/$name.out" 2>&1
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
median_ms() { sed -n 's/.*| \([0-9.]*\) ms\/step.*/\1/p' "$1" | tail -n +2 | median; }
acts() { sed -n 's/.*; \([0-9.]*\) MiB of activations per rank/\1/p' "$1"; }
rss() { sed -n 's/peak RSS per rank: \(.*\) MiB/\1/p' "$1"; }

A="--seq-len 256 --batch 4 --steps $STEPS"
for r in $(seq "$ROUNDS"); do
  run "tp$r" 2 $A --tp 2; median_ms "$W/tp$r.out" >> "$W/tp.ms"
  run "sp$r" 2 $A --tp 2 --sequence-parallel; median_ms "$W/sp$r.out" >> "$W/sp.ms"
done
tp=$(median < "$W/tp.ms") sp=$(median < "$W/sp.ms")
echo "| layout (small, 4x256 per micro-batch, 2 ranks) | ms/step (median of $ROUNDS rounds) | activations MiB/rank | peak RSS |"
echo "|---|---|---|---|"
echo "| TP 2 | $tp ($(tr '\n' ' ' < "$W/tp.ms")) | $(acts "$W/tp1.out") | $(rss "$W/tp1.out") |"
echo "| TP 2 + --sequence-parallel | $sp ($(tr '\n' ' ' < "$W/sp.ms")) | $(acts "$W/sp1.out") | $(rss "$W/sp1.out") |"
awk -v a="$sp" -v b="$tp" 'BEGIN { printf "\nSP / TP time ratio: %.3f\n\n", a / b }'
echo "| T (small, batch 1, one rank) | none MiB | selective MiB | full MiB |"
echo "|---|---|---|---|"
for T in $SEQS; do
  for rc in none selective full; do run "r$rc$T" 1 --seq-len "$T" --batch 1 --steps 1 --recompute "$rc"; done
  echo "| $T | $(acts "$W/rnone$T.out") | $(acts "$W/rselective$T.out") | $(acts "$W/rfull$T.out") |"
done
