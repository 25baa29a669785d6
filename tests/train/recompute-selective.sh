#!/bin/sh
# Selective recomputation (--recompute selective: keep the GEMM outputs,
# recompute the attention core, RMSNorms and SwiGLU in backward) changes
# memory, not results: losses, grad norms, validation losses and the final
# weights are bitwise identical to no recomputation on one rank and on a
# TP 2 x PP 2 x DP 2 layout (ZeRO-1, 1F1B); the activation block is smaller
# than without recomputation and larger than with full recomputation, and
# `--recompute` without a value still means full.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
A="--model tiny --data $CORPUS --steps 4 --seq-len 64 --batch 4 --eval-interval 2 --eval-batches 1 --quiet"
run() { # NAME RANKS ARGS...
  name=$1 n=$2; shift 2
  timeout 300 "$MPIEXEC" -n "$n" "$TRAIN" $A --run-dir "$WORK/$name" --export "$WORK/$name.h5" "$@" \
    > "$WORK/$name.out" 2>&1 || { cat "$WORK/$name.out"; fail "run $name"; }
}
run none 1
run sel 1 --recompute selective
run full 1 --recompute
grep -q "selective activation recomputation" "$WORK/sel.out" || fail "banner does not name selective"
grep -q ", full activation recomputation" "$WORK/full.out" || fail "--recompute alone is not full"
cmp "$WORK/none/log.tsv" "$WORK/sel/log.tsv" || fail "selective recomputation changed the results"
run pnone 8 --batch 1 --grad-accum 2 --tp 2 --pp 2 --zero1
run psel 8 --batch 1 --grad-accum 2 --tp 2 --pp 2 --zero1 --recompute=selective
cmp "$WORK/pnone/log.tsv" "$WORK/psel/log.tsv" ||
  fail "selective recomputation changed the TP 2 x PP 2 x DP 2 results"
"$PYTHON" - "$WORK" <<'PY' || fail "final weights differ"
import sys
import h5py, numpy as np
w = sys.argv[1]
def weights(name):
    out = {}
    with h5py.File(f"{w}/{name}.h5", "r") as f:
        f.visititems(lambda k, v: out.__setitem__(k, v[()]) if isinstance(v, h5py.Dataset) else None)
    return out
for a, b in (("none", "sel"), ("pnone", "psel")):
    A, B = weights(a), weights(b)
    assert A.keys() == B.keys() and A, (a, b)
    for k in A:
        assert A[k].tobytes() == B[k].tobytes(), f"{b}: {k} not bitwise equal to {a}"
    print(f"{b}: {len(A)} tensors bitwise equal to {a}")
PY
mib() { sed -n 's/.*; \([0-9.]*\) MiB of activations per rank/\1/p' "$1"; }
n=$(mib "$WORK/none.out") s=$(mib "$WORK/sel.out") f=$(mib "$WORK/full.out")
echo "activations per rank: $n MiB none, $s MiB selective, $f MiB full"
awk -v n="$n" -v s="$s" -v f="$f" 'BEGIN { exit !(f < s && s < n) }' ||
  fail "selective activation memory not between full and none"
# hpt-plan's exact (cpu-local) accounting saves what the trainer saved
plan() { "$HPT_BUILD/src/hpt-plan" --cluster cpu-local --model tiny --seq-len 64 --global-batch 4 \
  --micro-batch 4 --json --recompute "$1" | "$PYTHON" -c \
  'import json, sys; print(json.load(sys.stdin)["memory"]["worst"]["activations"] / 2**20)'; }
pn=$(plan none) ps=$(plan selective) pf=$(plan full)
echo "hpt-plan: selective saves $pn - $ps MiB, full $pn - $pf MiB"
awk -v n="$n" -v s="$s" -v f="$f" -v pn="$pn" -v ps="$ps" -v pf="$pf" 'BEGIN {
  d1 = (n - s) - (pn - ps); d2 = (n - f) - (pn - pf)
  exit !(d1 < 0.1 && d1 > -0.1 && d2 < 0.1 && d2 > -0.1) }' ||
  fail "hpt-plan's recomputation savings differ from the trainer's"
pass "selective recomputation: bitwise identical, less activation memory"
