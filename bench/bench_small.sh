#!/usr/bin/env bash
# bench_small.sh — hpt vs PyTorch vs the machine's SGEMM peak, side by side
# in one run on the same machine (docs/PERFORMANCE.md).
#
#   bench/bench_small.sh [BUILD_DIR]
#
# Each of ROUNDS rounds runs, one after the other:
#   1. bench/sgemm_peak.c   OpenBLAS SGEMM, n = 1024/1536/2048, best median
#   2. hpt-train            --model small --batch 4 --seq-len 256, STEPS steps
#   3. bench/torch_train.py the same model, shapes, optimizer and data in PyTorch,
#      out of the box and again with TORCH_TUNED_ENV ("PyTorch+")
# so that load from other processes hits all three alike; the table reports
# medians over all rounds. Per step (tokens = batch·seq_len = 1024):
#   FLOP/step = 6·N_matmul·tokens + 12·L·T·C·tokens
#   N_matmul  = L·(C·H·hd + 2·C·KV·hd + H·hd·C + 3·C·I) + V·C
# (every weight matrix incl. the LM head; not the embedding lookup or norms;
# the attention term counts QKᵀ and A·V, forward + backward, without causal
# savings — lib/model.c hpt_model_flops_per_token).
#
# Environment:
#   HPT_BUILD   build directory holding src/hpt-train [BUILD_DIR argument, else
#               the directory above this script when it holds src/hpt-train]
#   CORPUS      directory with train_*.bin (llm.c shards, vocab 8192)
#               [$HPT_BUILD/tests/corpus, else data/gcide]
#   STEPS       hpt-train steps per round [13]; the first SKIP are not timed
#   SKIP        warm-up steps dropped from hpt's and PyTorch's figures [3]
#   ROUNDS      rounds (sgemm, hpt, PyTorch, PyTorch+) [3]
#   THREADS     threads for all three [2]
#   HPT_ENV     extra environment for hpt-train, e.g. "OMP_WAIT_POLICY=active"
#   TORCH_TUNED_ENV  environment of a second PyTorch run per round, reported as
#               "PyTorch+" [OMP_WAIT_POLICY=passive; empty: no second run].
#               Out of the box, torch's OpenMP pool and OpenBLAS's pthread pool
#               spin against each other on 2 cores; passive waiting avoids it
#   PYTHON      interpreter with Debian's torch and numpy [/usr/bin/python3]
#   CC          compiler for sgemm_peak.c [gcc, else mpicc.mpich]
#   BENCH_OUT   keep the logs there [a temporary directory, removed at the end]
# The caller's environment applies to all three runs alike; note that
# OPENBLAS_CORETYPE, if set, overrides OpenBLAS's CPU detection (e.g. Haswell
# AVX2 kernels on an AVX-512 CPU) and so changes every figure, the peak too:
# the header prints it and the kernel OpenBLAS uses.
# Exit status: 0 done (whether or not the targets are met); 1 a run failed;
# 2 bad setup.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
die() { echo "bench_small.sh: $*" >&2; exit 2; }

HPT_BUILD=${HPT_BUILD:-${1:-}}
if [ -z "$HPT_BUILD" ] && [ -x "$src/src/hpt-train" ]; then HPT_BUILD=$src; fi
[ -n "$HPT_BUILD" ] || die "usage: bench/bench_small.sh BUILD_DIR (or HPT_BUILD=BUILD_DIR)"
TRAIN=$HPT_BUILD/src/hpt-train
[ -x "$TRAIN" ] || die "$TRAIN not found: build hpt first (configure && make)"
if [ -z "${CORPUS:-}" ]; then
  if [ -d "$HPT_BUILD/tests/corpus" ]; then CORPUS=$HPT_BUILD/tests/corpus; else CORPUS=data/gcide; fi
fi
SHARD=$(ls "$CORPUS"/train_*.bin 2>/dev/null | head -n 1 || true)
[ -n "$SHARD" ] || die "no $CORPUS/train_*.bin: set CORPUS, or prepare one with
  $HPT_BUILD/src/hpt-data --input /usr/share/dictd/gcide.dict.dz --out DIR"
STEPS=${STEPS:-13}
SKIP=${SKIP:-3}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
HPT_ENV=${HPT_ENV:-}
TORCH_TUNED_ENV=${TORCH_TUNED_ENV-OMP_WAIT_POLICY=passive}
PYTHON=${PYTHON:-/usr/bin/python3}
[ "$STEPS" -gt "$SKIP" ] || die "STEPS ($STEPS) must exceed SKIP ($SKIP)"
"$PYTHON" -c 'import torch, numpy' 2>/dev/null ||
  die "$PYTHON cannot import torch and numpy (Debian: python3-torch python3-numpy)"
BATCH=4
SEQ=256

if [ -n "${BENCH_OUT:-}" ]; then
  out=$BENCH_OUT; mkdir -p "$out"
else
  out=$(mktemp -d "${TMPDIR:-/tmp}/hpt-bench.XXXXXX")
  trap 'rm -rf "$out"' EXIT
fi

# --- sgemm_peak, built here, not by automake
cc=${CC:-}
if [ -z "$cc" ]; then
  if command -v gcc >/dev/null; then cc=gcc; else cc=mpicc.mpich; fi
fi
"$cc" -O2 -o "$out/sgemm_peak" "$here/sgemm_peak.c" -lopenblas ||
  die "cannot build sgemm_peak.c with $cc (install libopenblas-dev)"

"$TRAIN" --model small --print-config >"$out/small.json"

echo "== hpt vs PyTorch, model small, micro-batch $BATCH x $SEQ tokens, $THREADS threads"
echo "   host $(hostname -s), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "   $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   hpt: $TRAIN ${HPT_ENV:+(env $HPT_ENV)}, corpus $CORPUS"
echo "   environment: $(env | grep -E '^(OMP|GOMP|OPENBLAS|GOTO|MKL)_' | sort | tr '\n' ' ')"
echo "   $ROUNDS rounds; hpt $STEPS steps and PyTorch $SKIP+$((STEPS - SKIP)) steps per round, first $SKIP untimed"

# run_torch TAG ROUND EXTRA_ENV: torch_train.py with the hpt-train shapes
run_torch() {
  # shellcheck disable=SC2086
  env OPENBLAS_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" $3 "$PYTHON" "$here/torch_train.py" \
    "$out/small.json" "$SHARD" --batch $BATCH --seq-len $SEQ --threads "$THREADS" \
    --warmup-steps "$SKIP" --steps "$((STEPS - SKIP))" --seed "$2" >"$out/$1.$2" 2>&1 ||
    { tail -n 20 "$out/$1.$2" >&2; echo "bench_small.sh: torch_train.py ($1) failed" >&2; exit 1; }
  echo "   $1: $(grep torch_ms_per_step_median "$out/$1.$2")${3:+ (env $3)}"
}

for r in $(seq 1 "$ROUNDS"); do
  echo "-- round $r/$ROUNDS"
  OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS "$out/sgemm_peak" 5 >"$out/sgemm.$r" 2>&1 ||
    { cat "$out/sgemm.$r" >&2; echo "bench_small.sh: sgemm_peak failed" >&2; exit 1; }
  [ "$r" -gt 1 ] || echo "   $(head -n 1 "$out/sgemm.$r")"
  echo "   sgemm: $(tail -n 1 "$out/sgemm.$r")"
  # shellcheck disable=SC2086
  env OMP_NUM_THREADS="$THREADS" $HPT_ENV "$TRAIN" --model small --data "$CORPUS" \
    --batch $BATCH --seq-len $SEQ --steps "$STEPS" --warmup 100 \
    --eval-interval 0 --eval-batches 1 --seed "$r" >"$out/hpt.$r" 2>&1 ||
    { tail -n 20 "$out/hpt.$r" >&2; echo "bench_small.sh: hpt-train failed" >&2; exit 1; }
  echo "   hpt:   $(grep -c 'ms/step' "$out/hpt.$r") steps, $(grep '^done:' "$out/hpt.$r")"
  run_torch torch "$r" ""
  [ -z "$TORCH_TUNED_ENV" ] || run_torch torch_tuned "$r" "$TORCH_TUNED_ENV"
done

"$PYTHON" - "$out" "$ROUNDS" "$SKIP" "$BATCH" "$SEQ" "$TORCH_TUNED_ENV" <<'PY'
import json, re, statistics, sys
out, rounds, skip, B, T = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
c = json.load(open(f"{out}/small.json"))
C, I, V, L = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["num_hidden_layers"]
H = c["num_attention_heads"]; KV = c.get("num_key_value_heads", H); hd = C // H
n_matmul = L * (C * H * hd + 2 * C * KV * hd + H * hd * C + 3 * C * I) + V * C
tokens = B * T
flop_step = 6 * n_matmul * tokens + 12 * L * T * C * tokens

tuned_env = sys.argv[6]
systems = [("hpt", "hpt", skip), ("PyTorch", "torch", 0)]
if tuned_env:
    systems.append(("PyTorch+", "torch_tuned", 0))
peaks, steps, per_round = [], {}, {}
for r in range(1, rounds + 1):
    peaks.append(float(open(f"{out}/sgemm.{r}").read().split()[-1]))
    for name, tag, drop in systems:
        text = open(f"{out}/{tag}.{r}").read()
        pat = r"^step .*\| ([0-9.]+) ms/step" if tag == "hpt" else r"^torch step .*\| ([0-9.]+) ms/step"
        ms = [float(m) for m in re.findall(pat, text, re.M)][drop:]
        steps.setdefault(name, []).extend(ms)
        per_round.setdefault(name, []).append(statistics.median(ms))
peak = statistics.median(peaks)

print()
print(f"N_matmul = {n_matmul:,} ({n_matmul / 1e6:.2f} M); tokens/step = {tokens}")
print(f"FLOP/step = 6*N_matmul*tokens + 12*L*T*C*tokens = {6 * n_matmul * tokens / 1e9:.2f} + "
      f"{12 * L * T * C * tokens / 1e9:.2f} = {flop_step / 1e9:.2f} GFLOP")
busy = [p < 0.8 * max(peaks) for p in peaks]  # another process held a core
mark = lambda r: "*" if busy[r] else ""
print(f"SGEMM peak: median {peak:.1f} GFLOP/s over {rounds} rounds "
      f"(per round: {', '.join(f'{p:.1f}{mark(r)}' for r, p in enumerate(peaks))})")
if any(busy):
    print("* round with SGEMM < 80 % of the best round: the machine was busy then")
if tuned_env:
    print(f"PyTorch+ = PyTorch with {tuned_env}")
print()
print(f"{'median':9} {'ms/step':>8} {'tokens/s':>9} {'GFLOP/s':>8} {'% peak':>7}   per-round median ms/step; fastest step")
tps = {}
for name, _, _ in systems:
    m = statistics.median(steps[name])
    tps[name] = tokens / (m / 1e3)
    gf = flop_step / (m / 1e3) / 1e9
    print(f"{name:9} {m:8.1f} {tps[name]:9.0f} {gf:8.1f} {100 * gf / peak:6.1f}%   "
          f"{', '.join(f'{x:.1f}{mark(r)}' for r, x in enumerate(per_round[name]))}; {min(steps[name]):.1f}  "
          f"({len(steps[name])} steps)")
print()
for name, _, _ in systems[1:]:
    ratio = tps["hpt"] / tps[name]
    rr = [b / a for a, b in zip(per_round["hpt"], per_round[name])]
    print(f"hpt / {name + ' tokens/s:':18} {ratio:.2f}x  per round {', '.join(f'{x:.2f}{mark(r)}' for r, x in enumerate(rr))}"
          f"   (target >= 1.5x: {'met' if ratio >= 1.5 else 'NOT met'})")
pct = 100 * flop_step / (statistics.median(steps["hpt"]) / 1e3) / 1e9 / peak
print(f"hpt % of SGEMM peak:      {pct:.1f}%   (target >= 60%: {'met' if pct >= 60 else 'NOT met'})")
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
