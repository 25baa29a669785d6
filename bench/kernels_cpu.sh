#!/usr/bin/env bash
# kernels_cpu.sh — micro-benchmark of the CPU element-wise kernels
# (bench/kernels_cpu.c): the scalar loops of the CPU backend before the
# vectorised tables against each table this CPU supports, one thread,
# shapes of the `small` preset (batch 4 x 256). docs/PERFORMANCE.md.
#
#   bench/kernels_cpu.sh [BUILD_DIR] [REPS]
#
# BUILD_DIR: the configured build directory (for hpt_config.h)
# [$HPT_BUILD, else the directory above this script when it holds one].
# CC: an MPI C compiler [mpicc.mpich, else mpicc] (io/error.c uses MPI).
# Exit status: 0 done; 2 bad setup.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
die() { echo "kernels_cpu.sh: $*" >&2; exit 2; }
build=${HPT_BUILD:-${1:-}}
[ -n "$build" ] || { [ -f "$src/hpt_config.h" ] && build=$src; }
[ -n "$build" ] && [ -f "$build/hpt_config.h" ] ||
  die "usage: bench/kernels_cpu.sh BUILD_DIR [REPS] (BUILD_DIR holds hpt_config.h)"
cc=${CC:-}
if [ -z "$cc" ]; then
  if command -v mpicc.mpich >/dev/null; then cc=mpicc.mpich; else cc=mpicc; fi
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/hpt-kernels.XXXXXX")
trap 'rm -rf "$out"' EXIT
# the flags of the automake build (Makefile.am AM_CFLAGS, configure's -O3)
"$cc" -std=gnu11 -g -O3 -fopenmp -fno-math-errno -I"$src/lib" -I"$src/io" -I"$build" \
  -o "$out/kernels_cpu" "$here/kernels_cpu.c" "$src/lib/kernels_cpu.c" "$src/io/error.c" -lm ||
  die "cannot build bench/kernels_cpu.c with $cc"
echo "== CPU kernels, one thread, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')," \
  "$(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
OMP_NUM_THREADS=1 "$out/kernels_cpu" "${2:-15}"
