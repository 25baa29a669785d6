#!/usr/bin/env bash
# bench/ckpt.sh BUILD_DIR [CORPUS_DIR] [DIR] — checkpoint save and load
# bandwidth of the `small` preset (MODEL=...) against dd on the same disk (DIR, default
# a temp dir under /tmp), side by side in every round:
#   save: a 2-rank (DP=2) run saving after each of SAVES steps (--save-every
#         1, nothing pruned), each save timed whole (space reservation, HDF5
#         write, CRC32C, fsync, renames, latest), vs dd writing the same
#         number of bytes with conv=fsync, SAVES times right after;
#   load: hpt's load of the last checkpoint (open, metadata, every tensor
#         read and its CRC32C checked; a run of --steps SAVES, which loads
#         and stops without training or writing anything) on 1 rank, which reads the file once
#         like dd, and on 2 ranks (DP=2), where both ranks read all of it,
#         vs dd reading the file — with a cold page cache (sync, then
#         /proc/sys/vm/drop_caches before each of dd and the two loads;
#         needs root, else skipped: COLD=0 skips it too) and with the file
#         in the page cache (each read right after another read of it);
#         dd reads twice before hpt's loads and the second one counts;
#   resume with a re-shard: saved at DP=2, loaded at TP=2 (warm cache).
# Ratio = dd time / hpt time (1.0 = as fast as dd), per round from the
# round's medians; the table gives the medians over ROUNDS (default 3), and
# the median save phases (HPT_CKPT_PROFILE=1; absent for builds without it).
# MODEL=PRESET|config.json picks another model (bench/ckpt-1g.json: a
# 1.1 GiB checkpoint, where fixed costs weigh less).
# Asynchronous saves (--async-save) against synchronous ones: bench/ckpt-async.sh.
# BASELINE=OTHER_BUILD_DIR also times another build (e.g. the previous
# format) in every round, interleaved, against the same round's dd.
set -euo pipefail
B=${1:?usage: bench/ckpt.sh BUILD_DIR [CORPUS_DIR] [DIR]}
CORPUS=${2:-data/gcide}
W=$(mktemp -d "${3:-/tmp}/hpt-ckpt-bench.XXXXXX"); trap 'rm -rf "$W"' EXIT
ROUNDS=${ROUNDS:-3}
MPIEXEC=${MPIEXEC:-mpiexec}
export OMP_NUM_THREADS=1 HPT_CKPT_PROFILE=1
MODEL=${MODEL:-small}
A="--model $MODEL --data $CORPUS --seq-len 256 --batch 1 --eval-batches 1 --quiet"
T="$B/src/hpt-train $A"
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
now() { date +%s.%N; }
col() { printf '%s\n' "$@" | median; }
SAVES=${SAVES:-4}
save=() reshard=() ddw=() rsave=() phases=() bsave=() bload=()
ddfirst_cold=() ddfirst_warm=() dd_cold=() l1_cold=() l2_cold=() q1_cold=() q2_cold=() dd_warm=() l1_warm=() l2_warm=() q1_warm=() q2_warm=()
# Before every cold-cache measurement: touch WARM_GIB (default 4) GiB of
# memory and free it, then drop the page cache. On a VM that hands free
# memory back to its host (free page reporting, as on the development
# machine: touching 1 GiB of such memory took 0.48 s), a read must
# otherwise wait for the host to supply every page-cache page, and the
# time measures the host's memory, not the disk (seen: the same 2-rank
# load of bench/ckpt-1g.json took 1.2-2.5 s without, 0.44-0.72 s with).
warm() { python3 -c "import sys; b = bytearray($1 << 30); b[::4096] = b'x' * len(b[::4096])"; }
drop() { [ "${WARM_GIB:-4}" = 0 ] || warm "${WARM_GIB:-4}"; sync; echo 3 > /proc/sys/vm/drop_caches; }
MODES=warm
if [ "${COLD:-1}" != 0 ] && (sync; echo 3 > /proc/sys/vm/drop_caches) 2> /dev/null; then
  MODES="cold warm"
else
  echo "bench/ckpt.sh: cannot drop the page cache here (needs root): page-cache loads only" >&2
fi
# baseline BUILD: median save and the load time of that build in "$W/b"
baseline() {
  rm -rf "$W/b"; sync
  $MPIEXEC -n 2 "$1/src/hpt-train" $A --steps "$SAVES" --save-every 1 --keep 1000 --run-dir "$W/b" \
    > "$W/b.out" 2>&1 || { cat "$W/b.out"; exit 1; }
  sed -n 's/.*MiB in \([0-9.]*\) s.*/\1/p' "$W/b.out" | median; sync
  $MPIEXEC -n 2 "$1/src/hpt-train" $A --steps "$SAVES" --run-dir "$W/b" \
    > "$W/b.out" 2>&1 || { cat "$W/b.out"; exit 1; }
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
  # load: dd, then hpt on 1 and 2 ranks, each from a dropped cache (cold)
  # and each right after another read of the file (warm)
  for mode in $MODES; do
    # dd twice: right after the round's writes, and once more ("settled",
    # the one compared: on the development VM the first cold read after a
    # write often ran at a third of the disk's speed; hpt's loads did not)
    for k in 1 2; do
      [ "$mode" = warm ] || drop
      sync
      t0=$(now); dd if="$f" of=/dev/null bs=1M status=none; t1=$(now)
      eval "d$k=$(echo "$t1 - $t0" | bc)"
    done
    eval "dd_$mode+=($d2) ddfirst_$mode+=($d1)"
    for np in 1 2; do
      [ "$mode" = warm ] || drop
      [ "$mode" = cold ] || dd if="$f" of=/dev/null bs=1M status=none
      $MPIEXEC -n $np $T --batch $((2 / np)) --steps "$SAVES" --run-dir "$W/r" > "$W/load.out" 2>&1 ||
        { cat "$W/load.out"; exit 1; }
      eval "l${np}_$mode+=(\"$(sed -n 's/.*resumed from .* in \([0-9.]*\) s/\1/p' "$W/load.out")\")"
    done
  done
  $MPIEXEC -n 2 $T --steps "$SAVES" --tp 2 --batch 2 --run-dir "$W/r" > "$W/rs.out" 2>&1 ||
    { cat "$W/rs.out"; exit 1; }
  reshard+=("$(sed -n 's/.*resumed from .* in \([0-9.]*\) s/\1/p' "$W/rs.out")")
  save+=("$s") ddw+=("$dw")
  rsave+=("$(echo "scale=4; $dw / $s" | bc)")
  msg=""
  for mode in $MODES; do
    eval "d=\${dd_$mode[-1]} a=\${l1_$mode[-1]} b=\${l2_$mode[-1]}"
    eval "q1_$mode+=(\"$(echo "scale=4; $d / $a" | bc)\") q2_$mode+=(\"$(echo "scale=4; $d / $b" | bc)\")"
    msg="$msg, $mode load 1 rank $a s / 2 ranks $b s (dd $d s)"
  done
  echo "round $i: save median $s s (dd $dw s)$msg, re-shard ${reshard[-1]} s${BASELINE:+, baseline save ${bsave[-1]} s load ${bload[-1]} s}" >&2
done
s=$(col "${save[@]}"); rs=$(col "${reshard[@]}")
dw=$(col "${ddw[@]}"); qs=$(col "${rsave[@]}")
mibf=$(echo "scale=1; $bytes / 1048576" | bc)
echo "checkpoint of $MODEL: $mibf MiB (weights + AdamW moments), $ROUNDS rounds x $SAVES saves, medians; ratio = dd time / hpt time, per round"
printf "| operation | hpt | dd (same bytes, same disk) | ratio |\n|---|---|---|---|\n"
awk -v m="$mibf" -v s="$s" -v dw="$dw" -v q="$qs" 'BEGIN { printf "| save (2 ranks, DP=2) | %.3f s = %.0f MiB/s | write+fsync %.3f s = %.0f MiB/s | %.2f |\n", s, m/s, dw, m/dw, q }'
for mode in $MODES; do
  [ $mode = cold ] && what="cold cache" || what="page cache"
  eval "dr=\$(col \"\${dd_$mode[@]}\")"
  for np in 1 2; do
    eval "l=\$(col \"\${l${np}_$mode[@]}\") q=\$(col \"\${q${np}_$mode[@]}\")"
    [ $np = 1 ] && who="1 rank" || who="2 ranks, DP=2, both read all"
    awk -v m="$mibf" -v l="$l" -v dr="$dr" -v q="$q" -v w="$what" -v r="$who" 'BEGIN { printf "| load, %s (%s) | %.3f s = %.0f MiB/s | read of the file %.3f s = %.0f MiB/s | %.2f |\n", w, r, l, m/l, dr, m/dr, q }'
  done
done
[[ " $MODES " != *" cold "* ]] ||
  echo "(cold cache: dd's first read, right after the round's writes: $(col "${ddfirst_cold[@]}") s, median)"
if [ -n "${BASELINE:-}" ]; then
  bs=$(col "${bsave[@]}"); bl=$(col "${bload[@]}")
  awk -v m="$mibf" -v s="$bs" -v dw="$dw" 'BEGIN { printf "| save, BASELINE build | %.3f s = %.0f MiB/s | write+fsync %.3f s | %.2f |\n", s, m/s, dw, dw/s }'
  dr=$(col "${dd_warm[@]}")
  awk -v m="$mibf" -v l="$bl" -v dr="$dr" 'BEGIN { printf "| load, BASELINE build (2 ranks, page cache) | %.3f s = %.0f MiB/s | read of the file %.3f s | %.2f |\n", l, m/l, dr, dr/l }'
fi
awk -v rs="$rs" 'BEGIN { printf "| resume with re-shard (DP=2 -> TP=2) | %.3f s | | |\n", rs }'
# median of each save phase
[ ${#phases[@]} = 0 ] || printf '%s\n' "${phases[@]}" | awk '{for (i = 1; i < NF; i += 2) print $i, $(i+1)}' |
  sort -k1,1 -k2,2g | awk '{v[$1] = v[$1] " " $2; n[$1]++} END {for (k in v) {split(substr(v[k], 2), a, " "); m = n[k]; printf "%s %s\n", k, (m % 2) ? a[(m+1)/2] : (a[m/2] + a[m/2+1]) / 2}}' |
  sort | tr '\n' ' ' | sed 's/^/save phases, median s: /; s/ $/\n/'
