#!/bin/sh
# A GPU training run equals the CPU run (issue 12, fp32 mode): 20 steps of
# the tiny model on --backend cuda and on --backend cpu give the same
# per-step losses and gradient norms, and the same exported weights, within
# 1e-5 relative (float rounding and summation order differ between the
# backends; a wrong kernel moves the loss by far more after a few steps).
# Skipped (77) when hpt was built without CUDA or no GPU is visible.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
A="--model tiny --data $CORPUS --steps 20 --seq-len 64 --batch 4 --eval-interval 10 --eval-batches 2 --quiet"
st=0
"$TRAIN" $A --backend cuda --run-dir "$WORK/gpu" --export "$WORK/gpu.h5" > "$WORK/gpu.out" 2>&1 || st=$?
if [ "$st" -ne 0 ]; then
  cat "$WORK/gpu.out"
  if grep -q "no CUDA device visible" "$WORK/gpu.out"; then
    echo "SKIP: no CUDA device visible"; exit 77
  fi
  if grep -q "built without the CUDA backend" "$WORK/gpu.out"; then
    echo "SKIP: hpt built without CUDA (configure --with-cuda)"; exit 77
  fi
  fail "the cuda run failed (exit $st)"
fi
"$TRAIN" $A --backend cpu --run-dir "$WORK/cpu" --export "$WORK/cpu.h5" > "$WORK/cpu.out" 2>&1 ||
  { cat "$WORK/cpu.out"; fail "the cpu run failed"; }
# (no h5py: the GPU machine's Python may have none, bench/gpu-check.sh runs this
# there) the logs in Python, the exported weights with tests/helpers/h5maxdiff
"$PYTHON" - "$WORK/gpu/log.tsv" "$WORK/cpu/log.tsv" <<'PY' ||
import sys
TOL = 1e-5
def rows(path):
    with open(path) as f:
        head = f.readline().split("\t")
        return head, [l.rstrip("\n").split("\t") for l in f]
hg, g = rows(sys.argv[1])
hc, c = rows(sys.argv[2])
assert len(g) == len(c) == 20, (len(g), len(c))
worst = {}
for col in ("loss", "grad_norm", "val_loss"):
    i = hc.index(col)
    for a, b in zip(g, c):
        if b[i] in ("", "nan", "-"):
            continue
        a_, b_ = float(a[i]), float(b[i])
        e = abs(a_ - b_) / max(abs(b_), 1e-30)
        worst[col] = max(worst.get(col, 0.0), e)
        if not e <= TOL:
            sys.exit("step %s %s: gpu %r cpu %r rel err %.2e > %g" % (a[0], col, a_, b_, e, TOL))
print("worst relative differences:", ", ".join("%s %.1e" % kv for kv in worst.items()))
PY
  fail "the cuda run differs from the cpu run"
"$HPT_BUILD/tests/helpers/h5maxdiff" "$WORK/gpu.h5" "$WORK/cpu.h5" 1e-5 > "$WORK/w.diff" ||
  { cat "$WORK/w.diff"; fail "the cuda run's exported weights differ from the cpu run's (max |gpu - cpu| / max |cpu| > 1e-5)"; }
tail -1 "$WORK/w.diff"
# the peak device memory is printed, the bytes metrics.h5 records; the CPU
# backend has no device memory and prints no such line
grep -q "^peak device memory: [0-9.]* GiB ([0-9]* bytes; the most of any rank" "$WORK/gpu.out" ||
  { cat "$WORK/gpu.out"; fail "the cuda run printed no peak device memory"; }
! grep -q "^peak device memory" "$WORK/cpu.out" || fail "the cpu run printed a peak device memory"
"$HPT_BUILD/src/hpt-metrics" csv "$WORK/gpu" --ranks device_mem > "$WORK/devmem.csv" ||
  fail "hpt-metrics csv --ranks device_mem"
"$PYTHON" - "$WORK/gpu.out" "$WORK/devmem.csv" <<'PY' || fail "printed peak device memory != /ranks/device_mem"
import math, re, sys
printed = int(re.search(r"^peak device memory: .* \((\d+) bytes", open(sys.argv[1]).read(), re.M).group(1))
vals = [float(v) for l in open(sys.argv[2]).read().split("\n")[1:] if l for v in l.split(",")[1:]]
recorded = int(max(v for v in vals if not math.isnan(v)))
assert printed == recorded, (printed, recorded)
print("peak device memory", printed, "bytes, printed and recorded")
PY
pass "20 steps on the GPU equal the CPU run within 1e-5; the peak device memory printed is the one recorded"
