#!/usr/bin/env bash
# long-context.sh — tokens/s and peak memory against the sequence length T,
# hpt against the PyTorch reference, side by side in one run on the same
# machine (docs/PERFORMANCE.md, "Long context").
#
#   bench/long-context.sh [BUILD_DIR]
#
# The model is the `small` preset (hidden 384, 8 layers, 6 heads, 2 kv heads,
# SwiGLU 1152, vocabulary 8192) with max_position_embeddings raised to the
# largest T; micro-batch BATCH x T, one process, THREADS threads. For every T
# each of ROUNDS rounds runs, one after the other (hpt first in odd rounds,
# PyTorch first in even ones, so that load from other processes hits both
# alike):
#   hpt-train             --seq-len T --batch BATCH, hpt's defaults otherwise
#                         (tiled attention that keeps B·H·T floats per layer,
#                         --recompute full), --collective-timeout 0 (a long
#                         step on a loaded machine is no hang)
#   bench/torch_train.py  the same model, shapes, optimizer and data in
#                         PyTorch (tests/helpers/torch_ref.py: stores the full
#                         (B,H,T,T) softmax of every layer for backward), with
#                         TORCH_ENV ("PyTorch+" of bench/bench_small.sh)
# Each run's peak resident memory is measured the same way for both programs:
# /usr/bin/time's %M (the largest RSS, getrusage ru_maxrss). hpt-plan's
# predicted peak for hpt (src/hpt-plan --cluster cpu-local, as
# tests/plan/plan-long-context.sh) is printed next to the measured one.
#
# Memory safety: no run may take the shared machine's memory. Before each
# run the script predicts its peak — hpt: hpt-plan; PyTorch: an estimate,
#   k·T² + base + a·T,   k = ((L + 2)·B·H·4 + 4) bytes
# (every layer's saved softmax, the two (B,H,T,T) gradients of the layer
# being differentiated, the (T,T) mask; base and a fitted through the peaks
# measured at the two largest T run so far, after subtracting k·T²; 512 MiB
# and a = 0 before any run) — and reports "over the cap" instead of
# running when that exceeds MEM_CAP_GIB or the memory available now (free's
# "available" minus 1 GiB). During every run a guard sums the program's RSS
# every 0.5 s and kills it above MEM_CAP_GIB ("over the cap (stopped
# there)"), and the program runs under `prlimit --as` = MEM_CAP_GIB + 4 GiB
# (address space >= RSS; the margin because both programs map ~0.5-1 GiB
# more than they touch, and a limit that tight makes PyTorch's thread pools
# crawl instead of failing), so a wrong estimate never reaches the
# machine's OOM killer.
#
# During every run the script measures how many cores *other* processes used
# (CPU time from /proc/stat minus the run's own); a run where others used more
# than BUSY_CORES is marked busy (*). ms/step is the median over the timed
# steps of the quiet rounds (all rounds when none was quiet); tokens/s =
# BATCH·T / that median. The memory figures do not depend on load; on a
# shared machine quote the hpt/PyTorch ratios, measured side by side.
#
# Environment:
#   HPT_BUILD   build directory holding src/hpt-train and src/hpt-plan
#               [BUILD_DIR argument, else the directory above this script when
#               it holds src/hpt-train]
#   CORPUS      directory with train_*.bin (llm.c shards, vocab 8192)
#               [$HPT_BUILD/tests/corpus, else data/gcide]
#   TS          sequence lengths ["256 512 1024 2048 4096 8192"]; "none"
#               skips the hpt-vs-PyTorch part (only CP_TS's runs)
#   STEPS       steps per run [6]; the first SKIP are warm-up, not timed
#   SKIP        warm-up steps [1]
#   LONG_T      from this T on, runs use LONG_STEPS and LONG_SKIP instead
#               (long runs are slow: hpt at T = 8192 takes tens of seconds per
#               step on 2 cores) [4096]
#   LONG_STEPS  [STEPS]
#   LONG_SKIP   [SKIP]
#   ROUNDS      rounds per T [1]
#   THREADS     threads for both programs [2]
#   BATCH       sequences per micro-batch [1]
#   MEM_CAP_GIB cap per run, GiB (see above) [10]
#   RUN_LIMIT_S stop a run after this many seconds; its peak RSS so far
#               (VmHWM) is reported as a lower bound, without a time [0 = none]
#   HPT_ENV     extra environment for hpt-train, e.g. "OMP_WAIT_POLICY=passive"
#   TORCH_ENV   environment of the PyTorch runs [OMP_WAIT_POLICY=passive]
#   BUSY_CORES  a run is "busy" when other processes used more cores than
#               this on average meanwhile [0.3]
#   PYTHON      interpreter with Debian's torch, numpy and matplotlib
#               [/usr/bin/python3]
#   BENCH_OUT   keep the logs, results.tsv and long-context.png there [a
#               temporary directory, removed at the end]
#   PLOT        also write the plot to this path, e.g. docs/long-context.png
#               [none]
#   CP_TS       context parallelism (issue 31): also run bench/context-parallel.sh
#               at these T (e.g. "4096 8192 16384 32768 65536": tokens/s,
#               peak memory per rank and the ring's hidden share for every
#               CP of CPS, the tiny-width model there, CPU ranks), its table
#               after this one, its rows in BENCH_OUT/context-parallel.tsv
#               and its plot in BENCH_OUT/context-parallel.png [none]
#   CPS         CP degrees of that part ["1 2 4"]
#   CP_STEPS    steps per CP run [2]; CP_MAX_RUN_S: skip a CP run whose time,
#               extrapolated from the previous T, exceeds it [900]
#   CP_PLOT     also write that plot to this path, e.g.
#               docs/context-parallel.png [none]
# The caller's environment applies to every run alike (e.g.
# OPENBLAS_CORETYPE; the header prints the OMP/OPENBLAS variables set).
# Exit status: 0 done (runs over the cap or stopped by RUN_LIMIT_S are
# reported, not failures); 1 a run failed for another reason; 2 bad setup.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
die() { echo "long-context.sh: $*" >&2; exit 2; }

HPT_BUILD=${HPT_BUILD:-${1:-}}
if [ -z "$HPT_BUILD" ] && [ -x "$src/src/hpt-train" ]; then HPT_BUILD=$src; fi
[ -n "$HPT_BUILD" ] || die "usage: bench/long-context.sh BUILD_DIR (or HPT_BUILD=BUILD_DIR)"
TRAIN=$HPT_BUILD/src/hpt-train
PLAN=$HPT_BUILD/src/hpt-plan
for prog in "$TRAIN" "$PLAN"; do
  [ -x "$prog" ] || die "$prog not found: build hpt first (configure && make)"
done
if [ -z "${CORPUS:-}" ]; then
  if [ -d "$HPT_BUILD/tests/corpus" ]; then CORPUS=$HPT_BUILD/tests/corpus; else CORPUS=data/gcide; fi
fi
SHARD=""
for f in "$CORPUS"/train_*.bin; do [ -f "$f" ] && { SHARD=$f; break; }; done
[ -n "$SHARD" ] || die "no $CORPUS/train_*.bin: set CORPUS, or prepare one with
  $HPT_BUILD/src/hpt-data --input /usr/share/dictd/gcide.dict.dz --out DIR"
TS=${TS:-256 512 1024 2048 4096 8192}
STEPS=${STEPS:-6}
SKIP=${SKIP:-1}
LONG_T=${LONG_T:-4096}
LONG_STEPS=${LONG_STEPS:-$STEPS}
LONG_SKIP=${LONG_SKIP:-$SKIP}
ROUNDS=${ROUNDS:-1}
THREADS=${THREADS:-2}
BATCH=${BATCH:-1}
MEM_CAP_GIB=${MEM_CAP_GIB:-10}
RUN_LIMIT_S=${RUN_LIMIT_S:-0}
HPT_ENV=${HPT_ENV:-}
TORCH_ENV=${TORCH_ENV-OMP_WAIT_POLICY=passive}
BUSY_CORES=${BUSY_CORES:-0.3}
PYTHON=${PYTHON:-/usr/bin/python3}
PLOT=${PLOT:-}
for v in SKIP LONG_SKIP RUN_LIMIT_S; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be an integer >= 0 (got '${!v}')"
done
for v in STEPS LONG_T LONG_STEPS ROUNDS THREADS BATCH MEM_CAP_GIB; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer (got '${!v}')"
done
[ "$STEPS" -gt "$SKIP" ] || die "STEPS ($STEPS) must exceed SKIP ($SKIP)"
[ "$LONG_STEPS" -gt "$LONG_SKIP" ] || die "LONG_STEPS ($LONG_STEPS) must exceed LONG_SKIP ($LONG_SKIP)"
CP_TS=${CP_TS:-}
if [ "$TS" = none ]; then
  [ -n "$CP_TS" ] || die "TS=none needs CP_TS (nothing to run)"
  TS=""
fi
read -r -a ts_list <<<"$TS"
[ ${#ts_list[@]} -gt 0 ] || [ -n "$CP_TS" ] || die "TS is empty"
for T in "${ts_list[@]}"; do
  [[ $T =~ ^[1-9][0-9]*$ ]] || die "TS: '$T' is not a positive integer"
done
[ ${#ts_list[@]} = 0 ] || mapfile -t ts_list < <(printf '%s\n' "${ts_list[@]}" | sort -n -u)
[ -x /usr/bin/time ] || die "/usr/bin/time not found (Debian: time)"
command -v prlimit >/dev/null || die "prlimit not found (Debian: util-linux)"
"$PYTHON" -c 'import torch, numpy, matplotlib' 2>/dev/null ||
  die "$PYTHON cannot import torch, numpy and matplotlib (Debian: python3-torch python3-numpy python3-matplotlib)"
HZ=$(getconf CLK_TCK)
AS_BYTES=$(((MEM_CAP_GIB + 4) * 1024 * 1024 * 1024))

if [ -n "${BENCH_OUT:-}" ]; then
  out=$BENCH_OUT; mkdir -p "$out"
else
  out=$(mktemp -d "${TMPDIR:-/tmp}/hpt-long-context.XXXXXX")
  trap 'rm -rf "$out"' EXIT
fi

TMAX=256; [ ${#ts_list[@]} = 0 ] || TMAX=${ts_list[-1]}
"$TRAIN" --model small --print-config >"$out/small.json"
"$PYTHON" - "$out/small.json" "$TMAX" "$out/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["max_position_embeddings"] = max(c["max_position_embeddings"], int(sys.argv[2]))
json.dump(c, open(sys.argv[3], "w"), indent=1)
PY
CFG=$out/config.json
read -r LAYERS HEADS < <("$PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1]))
print(c["num_hidden_layers"], c["num_attention_heads"])' "$CFG")
# hpt-train maps and validates every shard, so they count in its RSS (as in hpt-plan's --data-bytes)
DATA_BYTES=$(cat "$CORPUS"/train_*.bin "$CORPUS"/val_*.bin 2>/dev/null | wc -c)

# CPU time of the whole machine (jiffies, idle and iowait excluded) and of
# this shell's finished children (seconds, from the `times` builtin).
cpu_busy() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat; }
# (`times` must run in this shell, not in a $(...) subshell.)
child_cpu() {
  awk 'NR == 2 { s = 0; for (i = 1; i <= NF; i++) { split($i, a, "m"); s += a[1] * 60 + a[2] } print s }' \
    "$1"
}
avail_mib() { awk '/^MemAvailable:/{print int($2 / 1024); exit}' /proc/meminfo; }

# rss_guard PID TAG: while PID (/usr/bin/time) runs, every 0.5 s sum the RSS of
# its children; above the cap, mark $out/TAG.capped and kill them. After
# RUN_LIMIT_S seconds, write their peak RSS so far (VmHWM, KiB) to
# $out/TAG.partial and kill them.
rss_guard() {
  local pid=$1 tag=$2 kids rss t0=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    mapfile -t kids < <(ps -o pid= --ppid "$pid" | tr -d ' ')
    if [ ${#kids[@]} -gt 0 ]; then
      rss=$(ps -o rss= -p "$(IFS=,; echo "${kids[*]}")" | awk '{s += $1} END {print s + 0}')
      if [ "$rss" -gt $((MEM_CAP_GIB * 1024 * 1024)) ]; then
        echo "$rss" >"$out/$tag.capped"
        kill -KILL "${kids[@]}" 2>/dev/null || true
        return
      fi
      if [ "$RUN_LIMIT_S" -gt 0 ] && [ $((SECONDS - t0)) -gt "$RUN_LIMIT_S" ]; then
        for k in "${kids[@]}"; do cat "/proc/$k/status"; done 2>/dev/null |
          awk '/^VmHWM:/ {s += $2} END {print s + 0}' >"$out/$tag.partial"
        kill -KILL "${kids[@]}" 2>/dev/null || true
        return
      fi
    fi
    sleep 0.5
  done
}

# measured TAG CMD...: runs CMD under /usr/bin/time, the RSS guard and an
# address-space limit of the cap + 4 GiB; output to $out/TAG, peak RSS (KiB)
# to $out/TAG.rss, the mean number of cores other processes used meanwhile to
# $out/TAG.others. Returns CMD's status.
measured() {
  local tag=$1 b0 c0 w0 b1 c1 w1 pid rc=0
  shift
  rm -f "$out/$tag.capped" "$out/$tag.partial"
  times >"$out/times"; c0=$(child_cpu "$out/times"); b0=$(cpu_busy); w0=$(date +%s.%N)
  /usr/bin/time -f '%M' -o "$out/$tag.rss" prlimit --as="$AS_BYTES" "$@" >"$out/$tag" 2>&1 &
  pid=$!
  rss_guard "$pid" "$tag"
  wait "$pid" || rc=$?
  w1=$(date +%s.%N); b1=$(cpu_busy); times >"$out/times"; c1=$(child_cpu "$out/times")
  awk -v b="$((b1 - b0))" -v hz="$HZ" -v c="$c1" -v c0="$c0" -v w="$w1" -v w0="$w0" \
    'BEGIN { o = (b / hz - (c - c0)) / (w - w0); printf "%.2f\n", o < 0 ? 0 : o }' >"$out/$tag.others"
  return $rc
}

# plan_mib T: hpt-plan's predicted peak RSS of hpt at T (MiB)
plan_mib() {
  "$PLAN" --model "$CFG" --cluster cpu-local --data-bytes "$DATA_BYTES" --seq-len "$1" \
    --global-batch "$BATCH" --micro-batch "$BATCH" --ranks-tsv "$out/plan.$1.tsv" >"$out/plan.$1.out" ||
    { cat "$out/plan.$1.out" >&2; die "hpt-plan failed at T = $1"; }
  awk -F'\t' 'NR > 1 && $1 == 0 { if ($6 > m) m = $6 } END { printf "%.1f\n", m }' "$out/plan.$1.tsv"
}
# torch_est_mib T: PyTorch's peak RSS at T (MiB), estimated as k·T² + base +
# a·T: k from the reference's code, base and a fitted to the runs so far
torch_est_mib() {
  touch "$out/torch.peaks"
  awk -v L="$LAYERS" -v B="$BATCH" -v H="$HEADS" -v T="$1" '
    function k(t) { return ((L + 2) * B * H * 4 + 4) * t * t / 2^20 }
    { r[$1] = $2 - k($1); if ($1 > t1) { t0 = t1; t1 = $1 } else if ($1 > t0 && $1 < t1) t0 = $1 }
    END {
      if (!t1) base = 512
      else if (!t0) base = r[t1]
      else { a = (r[t1] - r[t0]) / (t1 - t0); base = r[t1] + (a > 0 ? a : 0) * (T - t1) }
      printf "%.1f\n", base + k(T)
    }' "$out/torch.peaks"
}
# over_cap PRED_MIB: why a run predicted to need PRED_MIB must not start, or nothing
over_cap() {
  local avail
  avail=$(avail_mib)
  awk -v p="$1" -v cap="$MEM_CAP_GIB" -v a="$avail" 'BEGIN {
    if (p > cap * 1024) printf "over the %d GiB cap", cap
    else if (p > a - 1024) printf "over the memory available now (%d MiB)", a }'
}
# capped TAG: the run was stopped by the cap (RSS guard, or an allocation
# failure under the address-space limit)
capped() {
  [ -f "$out/$1.capped" ] ||
    grep -qiE 'out of memory|cannot allocate|bad_alloc|MemoryError|DefaultCPUAllocator' "$out/$1"
}

# stopped_mib TAG: the RSS (MiB) at which the cap stopped the run
stopped_mib() {
  if [ -f "$out/$1.capped" ]; then awk '{printf "%.1f", $1 / 1024}' "$out/$1.capped"
  else awk '{printf "%.1f", $1 / 1024}' "$out/$1.rss"; fi
}

# results.tsv: one row per run
printf 'T\tprogram\tround\tstatus\tpeak_mib\tpredicted_mib\tothers\tms_per_step\n' >"$out/results.tsv"
# record T PROG ROUND STATUS PEAK PRED OTHERS MS...
record() { local IFS=$'\t'; echo "$*" >>"$out/results.tsv"; }

if [ ${#ts_list[@]} -gt 0 ]; then
  echo "== hpt vs PyTorch+ against T, model small (max_position_embeddings $TMAX), micro-batch $BATCH x T," \
    "$THREADS threads, one process"
  echo "   host $(hostname -s), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')," \
    "$(awk '/^MemTotal:/{printf "%.1f GiB", $2 / 2^20}' /proc/meminfo), available $(avail_mib) MiB"
  echo "   $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "   hpt: $TRAIN${HPT_ENV:+ (env $HPT_ENV)}, corpus $CORPUS"
  echo "   PyTorch+: $PYTHON bench/torch_train.py${TORCH_ENV:+ (env $TORCH_ENV)}"
  echo "   environment: $(env | grep -E '^(OMP|GOMP|OPENBLAS|GOTO|MKL)_' | sort | tr '\n' ' ')"
  echo "   T = $TS; $ROUNDS round(s) of $STEPS steps ($SKIP untimed), from T = $LONG_T $LONG_STEPS steps" \
    "($LONG_SKIP untimed); memory cap $MEM_CAP_GIB GiB per run; (o) = cores used by other processes"
else
  echo "== hpt vs PyTorch+: skipped (TS=none)"
fi

failed=0
run_hpt() { # T ROUND STEPS SKIP
  local T=$1 r=$2 steps=$3 skip=$4 tag=hpt.$1.$2 pred why ms
  pred=$(plan_mib "$T")
  why=$(over_cap "$pred")
  if [ -n "$why" ]; then
    echo "   hpt:      $why (hpt-plan predicts $pred MiB): not run"
    record "$T" hpt "$r" over-cap "" "$pred" "" ""; return
  fi
  # shellcheck disable=SC2086
  if ! measured "$tag" env OMP_NUM_THREADS="$THREADS" $HPT_ENV "$TRAIN" --model "$CFG" \
    --data "$CORPUS" --batch "$BATCH" --seq-len "$T" --steps "$steps" --warmup 100 \
    --eval-interval 0 --eval-batches 1 --metrics none --collective-timeout 0 --seed "$r"; then
    if [ -f "$out/$tag.partial" ]; then
      echo "   hpt:      stopped after RUN_LIMIT_S = $RUN_LIMIT_S s; peak RSS so far $(awk '{printf "%.0f", $1 / 1024}' "$out/$tag.partial") MiB"
      record "$T" hpt "$r" partial "$(awk '{printf "%.1f", $1 / 1024}' "$out/$tag.partial")" "$pred" "" ""; return
    fi
    if capped "$tag"; then
      echo "   hpt:      over the $MEM_CAP_GIB GiB cap (stopped there; hpt-plan predicts $pred MiB)"
      record "$T" hpt "$r" stopped "$(stopped_mib "$tag")" "$pred" "" ""; return
    fi
    tail -n 20 "$out/$tag" >&2; echo "long-context.sh: hpt failed at T = $T, round $r" >&2
    failed=1; record "$T" hpt "$r" failed "" "$pred" "" ""; return
  fi
  ms=$(sed -n 's/^step .*| \([0-9.]*\) ms\/step.*/\1/p' "$out/$tag" | tail -n +"$((skip + 1))" | paste -sd, -)
  record "$T" hpt "$r" ok "$(awk '{printf "%.1f", $1 / 1024}' "$out/$tag.rss")" "$pred" \
    "$(cat "$out/$tag.others")" "$ms"
  echo "   hpt:      ms/step $ms; peak RSS $(awk '{printf "%.0f", $1 / 1024}' "$out/$tag.rss") MiB" \
    "(hpt-plan $pred MiB) ($(cat "$out/$tag.others"))"
}
run_torch() { # T ROUND STEPS SKIP
  local T=$1 r=$2 steps=$3 skip=$4 tag=torch.$1.$2 est why ms
  est=$(torch_est_mib "$T")
  why=$(over_cap "$est")
  if [ -n "$why" ]; then
    echo "   PyTorch+: $why (needs ≈ $est MiB, estimated): not run"
    record "$T" torch "$r" over-cap "" "$est" "" ""; return
  fi
  # shellcheck disable=SC2086
  if ! measured "$tag" env OPENBLAS_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" $TORCH_ENV \
    "$PYTHON" "$here/torch_train.py" "$CFG" "$SHARD" --batch "$BATCH" --seq-len "$T" \
    --threads "$THREADS" --warmup-steps "$skip" --steps "$((steps - skip))" --seed "$r"; then
    if [ -f "$out/$tag.partial" ]; then
      echo "   PyTorch+: stopped after RUN_LIMIT_S = $RUN_LIMIT_S s; peak RSS so far $(awk '{printf "%.0f", $1 / 1024}' "$out/$tag.partial") MiB"
      record "$T" torch "$r" partial "$(awk '{printf "%.1f", $1 / 1024}' "$out/$tag.partial")" "$est" "" ""; return
    fi
    if capped "$tag"; then
      echo "   PyTorch+: over the $MEM_CAP_GIB GiB cap (stopped there; estimated ≈ $est MiB)"
      record "$T" torch "$r" stopped "$(stopped_mib "$tag")" "$est" "" ""; return
    fi
    tail -n 20 "$out/$tag" >&2; echo "long-context.sh: PyTorch failed at T = $T, round $r" >&2
    failed=1; record "$T" torch "$r" failed "" "$est" "" ""; return
  fi
  ms=$(sed -n 's/^torch step .*| \([0-9.]*\) ms\/step.*/\1/p' "$out/$tag" | paste -sd, -)
  record "$T" torch "$r" ok "$(awk '{printf "%.1f", $1 / 1024}' "$out/$tag.rss")" "$est" \
    "$(cat "$out/$tag.others")" "$ms"
  echo "   PyTorch+: ms/step $ms; peak RSS $(awk '{printf "%.0f", $1 / 1024}' "$out/$tag.rss") MiB" \
    "(estimated $est MiB) ($(cat "$out/$tag.others"))"
  echo "$T $(awk '{printf "%.1f", $1 / 1024}' "$out/$tag.rss")" >>"$out/torch.peaks"
}

for T in "${ts_list[@]}"; do
  steps=$STEPS skip=$SKIP
  if [ "$T" -ge "$LONG_T" ]; then steps=$LONG_STEPS skip=$LONG_SKIP; fi
  for r in $(seq 1 "$ROUNDS"); do
    echo "-- T = $T, round $r/$ROUNDS ($steps steps, $skip untimed; load $(cut -d' ' -f1 /proc/loadavg)," \
      "$(avail_mib) MiB available)"
    if [ $((r % 2)) = 1 ]; then
      run_hpt "$T" "$r" "$steps" "$skip"; run_torch "$T" "$r" "$steps" "$skip"
    else
      run_torch "$T" "$r" "$steps" "$skip"; run_hpt "$T" "$r" "$steps" "$skip"
    fi
  done
done

echo
if [ ${#ts_list[@]} -gt 0 ]; then
  "$PYTHON" "$here/long_context_plot.py" "$out/results.tsv" "$out/long-context.png" \
    --batch "$BATCH" --busy-cores "$BUSY_CORES" --cap-gib "$MEM_CAP_GIB" ${PLOT:+--copy "$PLOT"}
fi
if [ -n "$CP_TS" ]; then
  echo
  TS="$CP_TS" CPS="${CPS:-1 2 4}" STEPS="${CP_STEPS:-2}" MAX_RUN_S="${CP_MAX_RUN_S:-900}" \
    MEM_CAP_MIB=$((MEM_CAP_GIB * 1024)) CORPUS="$CORPUS" PYTHON="$PYTHON" \
    TSV="$out/context-parallel.tsv" PLOT="$out/context-parallel.png" \
    bash "$here/context-parallel.sh" "$HPT_BUILD" || failed=1
  [ -z "${CP_PLOT:-}" ] || cp "$out/context-parallel.png" "$CP_PLOT"
fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $failed
