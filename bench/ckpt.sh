#!/usr/bin/env bash
# bench/ckpt.sh BUILD_DIR [CORPUS_DIR] [DIR] — checkpoint save and load
# bandwidth of the `small` preset (2 ranks, DP=2) against dd on the same disk
# (DIR, default a temp dir under /tmp), side by side in every round:
#   save: hpt's whole save (reservation, HDF5 write, CRC32C, fsync, rename,
#         latest) vs dd writing the same number of bytes with conv=fsync;
#   load: hpt's load of that checkpoint (every rank reads what its layout
#         needs — with DP=2 both ranks read all of it — and checks the
#         CRC32C) vs dd reading the checkpoint file itself just before, so
#         both read the same bytes in the same cache state (the file was just
#         written and is in the page cache; caches cannot be dropped here);
#   resume with a re-shard: saved at DP=2, loaded at TP=2.
# Ratios are dd time / hpt time per round (1.0 = as fast as dd); the table
# gives the medians over ROUNDS (default 5), and the median save phases
# (HPT_CKPT_PROFILE=1).
set -euo pipefail
B=${1:?usage: bench/ckpt.sh BUILD_DIR [CORPUS_DIR] [DIR]}
CORPUS=${2:-data/gcide}
W=$(mktemp -d "${3:-/tmp}/hpt-ckpt-bench.XXXXXX"); trap 'rm -rf "$W"' EXIT
ROUNDS=${ROUNDS:-5}
MPIEXEC=${MPIEXEC:-mpiexec}
export OMP_NUM_THREADS=1 HPT_CKPT_PROFILE=1
T="$B/src/hpt-train --model small --data $CORPUS --seq-len 256 --batch 1 --eval-batches 1 --quiet --steps 3"
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
now() { date +%s.%N; }
col() { printf '%s\n' "$@" | median; }
save=() load=() reshard=() ddw=() ddr=() rsave=() rload=() phases=()
for i in $(seq "$ROUNDS"); do
  rm -rf "$W/r"
  $MPIEXEC -n 2 $T --stop-at 1 --run-dir "$W/r" > "$W/save.out" 2>&1 || [ $? = 75 ] || { cat "$W/save.out"; exit 1; }
  s=$(sed -n 's/.*MiB in \([0-9.]*\) s.*/\1/p' "$W/save.out")
  phases+=("$(grep 'save phases' "$W/save.out" | sed 's/.*(s): //')")
  f="$W/r/checkpoints/step_00000001/checkpoint.h5"
  bytes=$(stat -c %s "$f")
  mib=$(( (bytes + 1048575) / 1048576 ))
  t0=$(now); dd if=/dev/zero of="$W/dd" bs=1M count=$mib conv=fsync status=none; t1=$(now)
  rm -f "$W/dd"
  dw=$(echo "$t1 - $t0" | bc)
  t0=$(now); dd if="$f" of=/dev/null bs=1M status=none; t1=$(now)
  dr=$(echo "$t1 - $t0" | bc)
  $MPIEXEC -n 2 $T --stop-at 2 --run-dir "$W/r" > "$W/load.out" 2>&1 || [ $? = 75 ] || { cat "$W/load.out"; exit 1; }
  l=$(sed -n 's/.*resumed from .* in \([0-9.]*\) s/\1/p' "$W/load.out")
  rm -rf "$W/r/checkpoints/step_00000002"
  $MPIEXEC -n 2 $T --tp 2 --batch 2 --stop-at 2 --run-dir "$W/r" > "$W/rs.out" 2>&1 || [ $? = 75 ] || { cat "$W/rs.out"; exit 1; }
  reshard+=("$(sed -n 's/.*resumed from .* in \([0-9.]*\) s/\1/p' "$W/rs.out")")
  save+=("$s") load+=("$l") ddw+=("$dw") ddr+=("$dr")
  rsave+=("$(echo "scale=4; $dw / $s" | bc)") rload+=("$(echo "scale=4; $dr / $l" | bc)")
  echo "round $i: save $s s (dd $dw s), load $l s (dd $dr s), re-shard ${reshard[-1]} s" >&2
done
s=$(col "${save[@]}"); l=$(col "${load[@]}"); rs=$(col "${reshard[@]}")
dw=$(col "${ddw[@]}"); dr=$(col "${ddr[@]}"); qs=$(col "${rsave[@]}"); ql=$(col "${rload[@]}")
mibf=$(echo "scale=1; $bytes / 1048576" | bc)
echo "checkpoint of small: $mibf MiB (weights + AdamW moments), $ROUNDS rounds, medians; ratio = dd time / hpt time, per round"
printf "| operation | hpt | dd (same bytes, same disk) | ratio |\n|---|---|---|---|\n"
awk -v m="$mibf" -v s="$s" -v dw="$dw" -v q="$qs" 'BEGIN { printf "| save (2 ranks, DP=2) | %.3f s = %.0f MiB/s | write+fsync %.3f s = %.0f MiB/s | %.2f |\n", s, m/s, dw, m/dw, q }'
awk -v m="$mibf" -v l="$l" -v dr="$dr" -v q="$ql" 'BEGIN { printf "| load (same layout, both ranks read all) | %.3f s = %.0f MiB/s | read of the file %.3f s = %.0f MiB/s | %.2f |\n", l, m/l, dr, m/dr, q }'
awk -v rs="$rs" 'BEGIN { printf "| resume with re-shard (DP=2 -> TP=2) | %.3f s | | |\n", rs }'
# median of each save phase
printf '%s\n' "${phases[@]}" | awk '{for (i = 1; i < NF; i += 2) print $i, $(i+1)}' |
  sort -k1,1 -k2,2g | awk '{v[$1] = v[$1] " " $2; n[$1]++} END {for (k in v) {split(substr(v[k], 2), a, " "); m = n[k]; printf "%s %s\n", k, (m % 2) ? a[(m+1)/2] : (a[m/2] + a[m/2+1]) / 2}}' |
  sort | tr '\n' ' ' | sed 's/^/save phases, median s: /; s/ $/\n/'
