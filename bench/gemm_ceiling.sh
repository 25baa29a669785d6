#!/usr/bin/env bash
# gemm_ceiling.sh — the products of one `small` step through the CPU
# backend, against the SGEMM line (bench/gemm_ceiling.c; docs/PERFORMANCE.md):
# the ceiling of bench_small.sh's "% of SGEMM peak", and the tiled work split
# against the static one it replaced, side by side in one process.
#
#   bench/gemm_ceiling.sh BUILD_DIR [REPS]
#
# BUILD_DIR: the configured build directory (for hpt_config.h).
# Environment: THREADS [2]; N tokens per product [1024 = 4 x 256];
# GEMM_ITEMS tiles per thread of the tiled split [the backend's, 3];
# COMPETITOR busy loops (one core each) running meanwhile [0];
# CC an MPI C compiler [mpicc.mpich, else mpicc] (io/error.c uses MPI).
# Exit status: 0 done; 2 bad setup.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
die() { echo "gemm_ceiling.sh: $*" >&2; exit 2; }
build=${HPT_BUILD:-${1:-}}
[ -n "$build" ] && [ -f "$build/hpt_config.h" ] ||
  die "usage: bench/gemm_ceiling.sh BUILD_DIR [REPS] (BUILD_DIR holds hpt_config.h)"
THREADS=${THREADS:-2}
N=${N:-1024}
COMPETITOR=${COMPETITOR:-0}
case $COMPETITOR in ''|*[!0-9]*) die "COMPETITOR must be a number" ;; esac
cc=${CC:-}
if [ -z "$cc" ]; then
  if command -v mpicc.mpich >/dev/null; then cc=mpicc.mpich; else cc=mpicc; fi
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/hpt-gemm.XXXXXX")
pids=()
cleanup() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT
# the flags of the automake build (Makefile.am AM_CFLAGS, configure's -O3).
# lib/backend.c (the registry: hpt_backend_compiled, hpt_precision_name)
# is built against the build's config without HAVE_CUDA: the benchmark
# times the CPU backend and links no CUDA.
grep -v '^#define HAVE_CUDA ' "$build/hpt_config.h" > "$out/hpt_config.h"
# shellcheck disable=SC2086
"$cc" -std=gnu11 -g -O3 -fopenmp -fno-math-errno ${GEMM_ITEMS:+-DGEMM_ITEMS_PER_THREAD=$GEMM_ITEMS} -I"$out" -I"$src/lib" -I"$src/io" \
  -o "$out/gemm_ceiling" "$here/gemm_ceiling.c" "$src/lib/backend_cpu.c" "$src/lib/backend.c" \
  "$src/lib/attention_cpu.c" "$src/lib/kernels_cpu.c" "$src/io/error.c" \
  -lopenblas -lm 2>"$out/cc.log" || { cat "$out/cc.log" >&2; die "cannot build bench/gemm_ceiling.c with $cc"; }
gcc -O2 -o "$out/sgemm_peak" "$here/sgemm_peak.c" -lopenblas || die "cannot build sgemm_peak.c"
echo "== products of one small step, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')," \
  "$(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   environment: $(env | grep -E '^(OMP|GOMP|OPENBLAS)_' | sort | tr '\n' ' ')"
for ((i = 0; i < COMPETITOR; i++)); do
  bash -c 'while :; do :; done' &
  pids+=($!)
done
[ "$COMPETITOR" -eq 0 ] || echo "   $COMPETITOR busy-loop competitor(s) running"
peak=$(OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS "$out/sgemm_peak" 5 | tee "$out/peak" |
  awk '/^sgemm_peak_gflops/ { print $2 }')
head -n 1 "$out/peak" | sed 's/^/   /'
echo "   SGEMM line: $peak GFLOP/s"
OMP_NUM_THREADS=$THREADS "$out/gemm_ceiling" "$N" "${2:-9}" "$peak"
