#!/usr/bin/env bash
# bench/ckpt.sh BUILD_DIR [CORPUS_DIR] [DIR] — checkpoint save and load
# bandwidth of the `small` preset against a plain sequential write+fsync and
# read of the same number of bytes with dd on the same disk (DIR, default a
# temp dir under /tmp), and the time to resume with a re-shard (saved at
# DP=2, loaded at TP=2). Medians of ROUNDS (default 3).
set -euo pipefail
B=${1:?usage: bench/ckpt.sh BUILD_DIR [CORPUS_DIR] [DIR]}
CORPUS=${2:-data/gcide}
W=$(mktemp -d "${3:-/tmp}/hpt-ckpt-bench.XXXXXX"); trap 'rm -rf "$W"' EXIT
ROUNDS=${ROUNDS:-3}
MPIEXEC=${MPIEXEC:-mpiexec}
export OMP_NUM_THREADS=1
T="$B/src/hpt-train --model small --data $CORPUS --seq-len 256 --batch 1 --eval-batches 1 --quiet --steps 3"
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
save=() load=() reshard=() ddw=() ddr=()
for i in $(seq "$ROUNDS"); do
  rm -rf "$W/r"
  $MPIEXEC -n 2 $T --stop-at 1 --run-dir "$W/r" > "$W/save.out" 2>&1 || [ $? = 75 ]
  save+=("$(sed -n 's/.*MiB in \([0-9.]*\) s.*/\1/p' "$W/save.out")")
  bytes=$(stat -c %s "$W/r/checkpoints/step_00000001/checkpoint.h5")
  $MPIEXEC -n 2 $T --stop-at 2 --run-dir "$W/r" > "$W/load.out" 2>&1 || [ $? = 75 ]
  load+=("$(sed -n 's/.*resumed from .* in \([0-9.]*\) s/\1/p' "$W/load.out")")
  rm -rf "$W/r/checkpoints/step_00000002"
  $MPIEXEC -n 2 $T --tp 2 --batch 2 --stop-at 2 --run-dir "$W/r" > "$W/rs.out" 2>&1 || [ $? = 75 ]
  reshard+=("$(sed -n 's/.*resumed from .* in \([0-9.]*\) s/\1/p' "$W/rs.out")")
  mib=$(( (bytes + 1048575) / 1048576 ))
  t0=$(date +%s.%N); dd if=/dev/zero of="$W/dd" bs=1M count=$mib conv=fsync status=none; t1=$(date +%s.%N)
  ddw+=("$(echo "$t1 - $t0" | bc)")
  t0=$(date +%s.%N); dd if="$W/dd" of=/dev/null bs=1M status=none; t1=$(date +%s.%N)
  ddr+=("$(echo "$t1 - $t0" | bc)")
  rm -f "$W/dd"
done
s=$(printf '%s\n' "${save[@]}" | median); l=$(printf '%s\n' "${load[@]}" | median)
rs=$(printf '%s\n' "${reshard[@]}" | median)
dw=$(printf '%s\n' "${ddw[@]}" | median); dr=$(printf '%s\n' "${ddr[@]}" | median)
mibf=$(echo "scale=1; $bytes / 1048576" | bc)
echo "checkpoint of small: $mibf MiB (weights + AdamW moments), $ROUNDS rounds, medians"
printf "| operation | hpt | dd (same bytes, same disk) | ratio |\n|---|---|---|---|\n"
awk -v m="$mibf" -v s="$s" -v dw="$dw" 'BEGIN { printf "| save (2 ranks, DP=2) | %.2f s = %.0f MiB/s | write+fsync %.2f s = %.0f MiB/s | %.2f |\n", s, m/s, dw, m/dw, dw/s }'
awk -v m="$mibf" -v l="$l" -v dr="$dr" 'BEGIN { printf "| load (same layout) | %.2f s = %.0f MiB/s | read %.2f s = %.0f MiB/s | %.2f |\n", l, m/l, dr, m/dr, dr/l }'
awk -v rs="$rs" 'BEGIN { printf "| resume with re-shard (DP=2 -> TP=2) | %.2f s | | |\n", rs }'
