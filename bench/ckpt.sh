#!/usr/bin/env bash
# bench/ckpt.sh BUILD_DIR [CORPUS_DIR] [DIR] — checkpoint save and load
# bandwidth of the `small` preset (2 ranks, DP=2) against dd on the same disk
# (DIR, default a temp dir under /tmp), side by side in every round:
#   save: a run saving after each of SAVES steps (--save-every 1, nothing
#         pruned), each save timed whole (space reservation, HDF5 write,
#         CRC32C, fsync, renames, latest), vs dd writing the same number of
#         bytes with conv=fsync, SAVES times right after;
#   load: hpt's load of the last checkpoint (every rank reads what its
#         layout needs — with DP=2 both ranks read all of it — and checks the
#         CRC32C) vs dd reading that checkpoint file just before, so both read
#         the same bytes in the same cache state (the file was just written
#         and is in the page cache; caches cannot be dropped here);
#   resume with a re-shard: saved at DP=2, loaded at TP=2.
# Ratio = dd time / hpt time (1.0 = as fast as dd), per round from the
# round's medians; the table gives the medians over ROUNDS (default 3), and
# the median save phases (HPT_CKPT_PROFILE=1; absent for builds without it).
# BASELINE=OTHER_BUILD_DIR also times another build (e.g. the previous
# format) in every round, interleaved, against the same round's dd.
set -euo pipefail
B=${1:?usage: bench/ckpt.sh BUILD_DIR [CORPUS_DIR] [DIR]}
CORPUS=${2:-data/gcide}
W=$(mktemp -d "${3:-/tmp}/hpt-ckpt-bench.XXXXXX"); trap 'rm -rf "$W"' EXIT
ROUNDS=${ROUNDS:-3}
MPIEXEC=${MPIEXEC:-mpiexec}
export OMP_NUM_THREADS=1 HPT_CKPT_PROFILE=1
A="--model small --data $CORPUS --seq-len 256 --batch 1 --eval-batches 1 --quiet"
T="$B/src/hpt-train $A"
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
now() { date +%s.%N; }
col() { printf '%s\n' "$@" | median; }
SAVES=${SAVES:-4}
save=() load=() reshard=() ddw=() ddr=() rsave=() rload=() phases=() bsave=() bload=()
# baseline BUILD: median save and the load time of that build in "$W/b"
baseline() {
  rm -rf "$W/b"; sync
  $MPIEXEC -n 2 "$1/src/hpt-train" $A --steps "$SAVES" --save-every 1 --keep 1000 --run-dir "$W/b" \
    > "$W/b.out" 2>&1 || { cat "$W/b.out"; exit 1; }
  sed -n 's/.*MiB in \([0-9.]*\) s.*/\1/p' "$W/b.out" | median; sync
  $MPIEXEC -n 2 "$1/src/hpt-train" $A --steps $((SAVES + 2)) --stop-at $((SAVES + 1)) --run-dir "$W/b" \
    > "$W/b.out" 2>&1 || [ $? = 75 ] || { cat "$W/b.out"; exit 1; }
  sed -n 's/.*resumed from .* in \([0-9.]*\) s/\1/p' "$W/b.out"
  rm -rf "$W/b"
}
for i in $(seq "$ROUNDS"); do
  if [ -n "${BASELINE:-}" ]; then
    bl=($(baseline "$BASELINE")); bsave+=("${bl[0]}") bload+=("${bl[1]}")
  fi
  rm -rf "$W/r"
  sync # every measurement starts without another's writeback pending
  $MPIEXEC -n 2 $T --steps "$SAVES" --save-every 1 --keep 1000 --run-dir "$W/r" > "$W/save.out" 2>&1 ||
    { cat "$W/save.out"; exit 1; }
  s=$(sed -n 's/.*MiB in \([0-9.]*\) s.*/\1/p' "$W/save.out" | median)
  while read -r line; do phases+=("$line"); done < <(grep 'save phases' "$W/save.out" | sed 's/.*(s): //' || true)
  f=$(printf '%s/r/checkpoints/step_%08d/checkpoint.h5' "$W" "$SAVES")
  bytes=$(stat -c %s "$f")
  mib=$(( (bytes + 1048575) / 1048576 ))
  d=()
  for k in $(seq "$SAVES"); do
    sync
    t0=$(now); dd if=/dev/zero of="$W/dd" bs=1M count=$mib conv=fsync status=none; t1=$(now)
    rm -f "$W/dd"
    d+=("$(echo "$t1 - $t0" | bc)")
  done
  dw=$(col "${d[@]}")
  sync
  t0=$(now); dd if="$f" of=/dev/null bs=1M status=none; t1=$(now)
  dr=$(echo "$t1 - $t0" | bc)
  $MPIEXEC -n 2 $T --steps $((SAVES + 2)) --stop-at $((SAVES + 1)) --run-dir "$W/r" > "$W/load.out" 2>&1 ||
    [ $? = 75 ] || { cat "$W/load.out"; exit 1; }
  l=$(sed -n 's/.*resumed from .* in \([0-9.]*\) s/\1/p' "$W/load.out")
  rm -rf "$W/r/checkpoints/step_$(printf %08d $((SAVES + 1)))"
  $MPIEXEC -n 2 $T --steps $((SAVES + 2)) --tp 2 --batch 2 --stop-at $((SAVES + 1)) --run-dir "$W/r" > "$W/rs.out" 2>&1 ||
    [ $? = 75 ] || { cat "$W/rs.out"; exit 1; }
  reshard+=("$(sed -n 's/.*resumed from .* in \([0-9.]*\) s/\1/p' "$W/rs.out")")
  save+=("$s") load+=("$l") ddw+=("$dw") ddr+=("$dr")
  rsave+=("$(echo "scale=4; $dw / $s" | bc)") rload+=("$(echo "scale=4; $dr / $l" | bc)")
  echo "round $i: save median $s s (dd $dw s), load $l s (dd $dr s), re-shard ${reshard[-1]} s${BASELINE:+, baseline save ${bsave[-1]} s load ${bload[-1]} s}" >&2
done
s=$(col "${save[@]}"); l=$(col "${load[@]}"); rs=$(col "${reshard[@]}")
dw=$(col "${ddw[@]}"); dr=$(col "${ddr[@]}"); qs=$(col "${rsave[@]}"); ql=$(col "${rload[@]}")
mibf=$(echo "scale=1; $bytes / 1048576" | bc)
echo "checkpoint of small: $mibf MiB (weights + AdamW moments), $ROUNDS rounds x $SAVES saves, medians; ratio = dd time / hpt time, per round"
printf "| operation | hpt | dd (same bytes, same disk) | ratio |\n|---|---|---|---|\n"
awk -v m="$mibf" -v s="$s" -v dw="$dw" -v q="$qs" 'BEGIN { printf "| save (2 ranks, DP=2) | %.3f s = %.0f MiB/s | write+fsync %.3f s = %.0f MiB/s | %.2f |\n", s, m/s, dw, m/dw, q }'
awk -v m="$mibf" -v l="$l" -v dr="$dr" -v q="$ql" 'BEGIN { printf "| load (same layout, both ranks read all) | %.3f s = %.0f MiB/s | read of the file %.3f s = %.0f MiB/s | %.2f |\n", l, m/l, dr, m/dr, q }'
if [ -n "${BASELINE:-}" ]; then
  bs=$(col "${bsave[@]}"); bl=$(col "${bload[@]}")
  awk -v m="$mibf" -v s="$bs" -v dw="$dw" 'BEGIN { printf "| save, BASELINE build | %.3f s = %.0f MiB/s | write+fsync %.3f s | %.2f |\n", s, m/s, dw, dw/s }'
  awk -v m="$mibf" -v l="$bl" -v dr="$dr" 'BEGIN { printf "| load, BASELINE build | %.3f s = %.0f MiB/s | read of the file %.3f s | %.2f |\n", l, m/l, dr, dr/l }'
fi
awk -v rs="$rs" 'BEGIN { printf "| resume with re-shard (DP=2 -> TP=2) | %.3f s | | |\n", rs }'
# median of each save phase
[ ${#phases[@]} = 0 ] || printf '%s\n' "${phases[@]}" | awk '{for (i = 1; i < NF; i += 2) print $i, $(i+1)}' |
  sort -k1,1 -k2,2g | awk '{v[$1] = v[$1] " " $2; n[$1]++} END {for (k in v) {split(substr(v[k], 2), a, " "); m = n[k]; printf "%s %s\n", k, (m % 2) ? a[(m+1)/2] : (a[m/2] + a[m/2+1]) / 2}}' |
  sort | tr '\n' ' ' | sed 's/^/save phases, median s: /; s/ $/\n/'
