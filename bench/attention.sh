#!/usr/bin/env bash
# bench/attention.sh — the CPU attention (lib/attention_cpu.c) against the
# kernel it replaced (stored the (T,T) softmax; kept in
# bench/attention_bench.c), forward + backward of one layer of the `small`
# preset's shape (6 heads, 2 kv heads, head dim 64), alternated in one
# process. Prints one line per T with the median ms of each kernel and the
# ratio old/new. B (default 2), TS (default "256 1024 2048"), REPS
# (default 7), CC (default mpicc) and OMP_NUM_THREADS can be set.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d /tmp/hpt-attn-bench.XXXXXX); trap 'rm -rf "$W"' EXIT
# io/error.c: attention_cpu.c's only dependency on libhpt (HPT_FATAL), which
# calls MPI_Abort, hence an MPI compiler
cc=${CC:-}
if [ -z "$cc" ]; then
  if command -v mpicc.mpich >/dev/null; then cc=mpicc.mpich; else cc=mpicc; fi
fi
"$cc" -O3 -fopenmp -fno-math-errno -I"$SRC/lib" -I"$SRC/io" "$SRC/bench/attention_bench.c" \
  "$SRC/lib/attention_cpu.c" "$SRC/io/error.c" -o "$W/attention_bench" -lopenblas -lm
for T in ${TS:-256 1024 2048}; do
  "$W/attention_bench" "${B:-2}" "$T" 6 2 64 "${REPS:-7}"
done
