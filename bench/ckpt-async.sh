#!/usr/bin/env bash
# bench/ckpt-async.sh BUILD_DIR [CORPUS_DIR] [DIR] — asynchronous against
# synchronous checkpoints of the `small` preset (MODEL=... for another, e.g.
# bench/ckpt-1g.json), side by side in every round (ROUNDS, default 3), on
# RANKS ranks (default 1; DP = RANKS), checkpoints in DIR (default /tmp):
#   none:  STEPS steps (default 30) without saves;
#   sync:  the same, saving every EVERY steps (default 10);
#   async: the same with --async-save.
# Reported (medians over the rounds of each round's median):
#   stall/save: sync, the whole save ("MiB in X s"); async, the training
#     stall at the snapshot ("training stalled X s") — and their ratio;
#   the wait of a save for the previous one (async; 0 when saves are
#     further apart than their background write);
#   the parts of the async stall (HPT_CKPT_PROFILE=1 on the async run):
#     the snapshot (limits, reservation, collective file creation) and the
#     wait of the optimizer step for the writer's copy of the state, and
#     the writer's copy time (overlapped with the next step's forward and
#     backward; before 2026-12-01 it was part of the snapshot);
#   overhead: from the runs' metrics (hpt-metrics csv): (mean step time
#     over steps 2..STEPS + the summed per-step "checkpoint" stall, which
#     leaves out the final save, synchronous in both) / the mean step time
#     of the run without saves - 1. The mean, not the median, so that the
#     steps a background write slows down count. Across runs, so another
#     load on the machine moves it; "stall / step time, same run" is the
#     summed stall over the run's own step time (without the slowdown of
#     the steps during a background write).
set -euo pipefail
B=${1:?usage: bench/ckpt-async.sh BUILD_DIR [CORPUS_DIR] [DIR]}
CORPUS=${2:-data/gcide}
W=$(mktemp -d "${3:-/tmp}/hpt-ckpt-async.XXXXXX"); trap 'rm -rf "$W"' EXIT
ROUNDS=${ROUNDS:-3} RANKS=${RANKS:-1} STEPS=${STEPS:-30} EVERY=${EVERY:-10}
MODEL=${MODEL:-small}
MPIEXEC=${MPIEXEC:-mpiexec}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
A="--model $MODEL --data $CORPUS --seq-len 256 --batch 1 --eval-batches 1 --eval-interval 0 --quiet --steps $STEPS --keep 2 --metrics-interval 1000"
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
run() { # NAME ARGS...: the run's output in $W/NAME.out
  local name=$1; shift
  rm -rf "$W/$name"; sync
  $MPIEXEC -n "$RANKS" "$B/src/hpt-train" $A --run-dir "$W/$name" "$@" > "$W/$name.out" 2>&1 ||
    { cat "$W/$name.out"; exit 1; }
  "$B/src/hpt-metrics" csv "$W/$name/metrics.h5" -o "$W/$name.steps.csv"
  "$B/src/hpt-metrics" csv "$W/$name/metrics.h5" --ranks checkpoint -o "$W/$name.ckpt.csv"
}
# per-step seconds of a run: the mean step time (steps 2..) and the summed stall
step_mean() { awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "step_time") c = i; next}
                       $1 > 1 {s += $c; n++} END {print s / n}' "$W/$1.steps.csv"; }
stall_sum() { awk -F, 'NR > 1 && $2 == $2 + 0 {s += $2} END {print s + 0}' "$W/$1.ckpt.csv"; }
share() { # RUN: its summed stall / its own steps' time (one run: immune to other load)
  awk -v m="$(step_mean "$1")" -v s="$(stall_sum "$1")" -v k="$STEPS" 'BEGIN {printf "%.4f", s / (m * k)}'
}
overhead() { # RUN: (mean step x STEPS + stalls) / (none's mean step x STEPS) - 1
  awk -v m="$(step_mean "$1")" -v s="$(stall_sum "$1")" -v n="$(step_mean none)" -v k="$STEPS" \
    'BEGIN {printf "%.4f", (m * k + s) / (n * k) - 1}'
}
async_snap=() async_cwait=() async_copy=() share_sync=() share_async=() sync_save=() async_stall=() async_write=() async_wait=() over_sync=() over_async=() mib=()
for i in $(seq "$ROUNDS"); do
  run none --save-every 0
  run sync --save-every "$EVERY"
  HPT_CKPT_PROFILE=1 run async --save-every "$EVERY" --async-save
  n=$(step_mean none)
  sync_save+=("$(grep -v "^step $STEPS: " "$W/sync.out" | sed -n 's/^step [0-9]*: checkpoint .*MiB in \([0-9.]*\) s.*/\1/p' | median)")
  async_stall+=("$(sed -n 's/.*async: training stalled \([0-9.]*\) s.*/\1/p' "$W/async.out" | median)")
  async_snap+=("$(sed -n 's/.*async stall: snapshot \([0-9.]*\) s + .*/\1/p' "$W/async.out" | median)")
  async_cwait+=("$(sed -n 's/.*waiting for the copy \([0-9.]*\) s;.*/\1/p' "$W/async.out" | median)")
  async_copy+=("$(sed -n 's/.*the writer copied in \([0-9.]*\) s.*/\1/p' "$W/async.out" | median)")
  async_write+=("$(sed -n 's/.*written in \([0-9.]*\) s in the background.*/\1/p' "$W/async.out" | median)")
  mib+=("$(sed -n 's/^step [0-9]*: checkpoint [^ ]* (\([0-9.]*\) MiB.*/\1/p' "$W/sync.out" | head -1)")
  over_sync+=("$(overhead sync)") over_async+=("$(overhead async)")
  share_sync+=("$(share sync)") share_async+=("$(share async)")
  echo "round $i: no saves ${n} s/step; sync: save ${sync_save[-1]} s, overhead ${over_sync[-1]}; async: stall ${async_stall[-1]} s, background ${async_write[-1]} s, overhead ${over_async[-1]}" >&2
done
col() { printf '%s\n' "$@" | median; }
S=$(col "${sync_save[@]}") A_=$(col "${async_stall[@]}")
echo "model $MODEL, $(col "${mib[@]}") MiB per checkpoint, $RANKS rank(s), $STEPS steps, a save every $EVERY; medians of $ROUNDS rounds"
printf '%-34s %10s %10s\n' "" sync async
printf '%-34s %10.4f %10.4f\n' "training stall per save (s)" "$S" "$A_"
printf '%-34s %10s %10.4f\n' "  of which the snapshot (s)" "-" "$(col "${async_snap[@]}")"
printf '%-34s %10s %10.4f\n' "  of which waiting for the copy (s)" "-" "$(col "${async_cwait[@]}")"
printf '%-34s %10s %10.4f\n' "writer's copy, overlapped (s)" "-" "$(col "${async_copy[@]}")"
printf '%-34s %10s %10.4f\n' "background write per save (s)" "-" "$(col "${async_write[@]}")"
printf '%-34s %10s %10.3f\n' "stall ratio (async / sync)" "-" "$(awk -v a="$A_" -v s="$S" 'BEGIN {print a / s}')"
printf '%-34s %9.1f%% %9.1f%%\n' "step-time overhead of the saves" "$(awk -v x="$(col "${over_sync[@]}")" 'BEGIN {print 100 * x}')" \
  "$(awk -v x="$(col "${over_async[@]}")" 'BEGIN {print 100 * x}')"
printf '%-34s %9.1f%% %9.1f%%\n' "stall / step time, same run" "$(awk -v x="$(col "${share_sync[@]}")" 'BEGIN {print 100 * x}')" \
  "$(awk -v x="$(col "${share_async[@]}")" 'BEGIN {print 100 * x}')"
