#!/bin/sh
# Several ranks on one GPU (issue 12, fp32 mode, --comm mpi: host staging of
# device buffers, lib/comm_stage.c; NCCL refuses two ranks on one GPU):
#  - TP 2 x PP 2 (4 ranks) and DP 2 with ZeRO-1 (2 ranks) on --backend cuda
#    equal one CPU rank within 1e-5 (losses, gradient norms, per step);
#  - the DP 2 run stops at step 5 with a checkpoint (--stop-at), and CPU
#    ranks at another layout (TP 2) resume it: steps 6..10 equal the CPU
#    reference within 1e-5.
# Skipped (77) when hpt was built without CUDA or no GPU is visible.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
# global batch 4 sequences everywhere: DP x grad-accum x batch
A="--model tiny --data $CORPUS --steps 10 --seq-len 64 --batch 2 --eval-interval 0 --eval-batches 1 --quiet"
G2="--grad-accum 2"
st=0
"$TRAIN" $A --steps 1 --backend cuda > "$WORK/probe.out" 2>&1 || st=$?
if [ "$st" -ne 0 ]; then
  cat "$WORK/probe.out"
  grep -q "no CUDA device visible" "$WORK/probe.out" && { echo "SKIP: no CUDA device visible"; exit 77; }
  grep -q "built without the CUDA backend" "$WORK/probe.out" && { echo "SKIP: hpt built without CUDA"; exit 77; }
  fail "the one-step cuda probe failed (exit $st)"
fi
"$TRAIN" $A $G2 --backend cpu --run-dir "$WORK/ref" > "$WORK/ref.out" 2>&1 || { cat "$WORK/ref.out"; fail "cpu reference"; }
timeout 600 "$MPIEXEC" -n 4 "$TRAIN" $A $G2 --backend cuda --comm mpi --tp 2 --pp 2 --run-dir "$WORK/tp2pp2" \
  > "$WORK/tp2pp2.out" 2>&1 || { cat "$WORK/tp2pp2.out"; fail "cuda TP 2 x PP 2 on 4 ranks"; }
st=0
timeout 600 "$MPIEXEC" -n 2 "$TRAIN" $A --backend cuda --comm mpi --dp 2 --zero1 --stop-at 5 \
  --run-dir "$WORK/dp2" > "$WORK/dp2.out" 2>&1 || st=$?
[ "$st" -eq 75 ] || { cat "$WORK/dp2.out"; fail "cuda DP 2 + ZeRO-1 with --stop-at 5: exit $st, want 75"; }
cp "$WORK/dp2/log.tsv" "$WORK/dp2-gpu.tsv"
timeout 600 "$MPIEXEC" -n 2 "$TRAIN" $A $G2 --backend cpu --tp 2 --run-dir "$WORK/dp2" \
  > "$WORK/resume.out" 2>&1 || { cat "$WORK/resume.out"; fail "cpu TP 2 resuming the GPU checkpoint"; }
grep -q "resum" "$WORK/resume.out" || { cat "$WORK/resume.out"; fail "the cpu run did not resume"; }
"$PYTHON" - "$WORK/ref/log.tsv" "$WORK/tp2pp2/log.tsv" "$WORK/dp2-gpu.tsv" "$WORK/dp2/log.tsv" <<'PY' ||
import sys
TOL = 1e-5
def rows(path):
    with open(path) as f:
        head = f.readline().rstrip("\n").split("\t")
        return head, {int(r[0]): r for r in (l.rstrip("\n").split("\t") for l in f)}
hr, ref = rows(sys.argv[1])
assert len(ref) == 10, len(ref)
for name, path, want in (("cuda TP2xPP2", sys.argv[2], range(1, 11)),
                         ("cuda DP2+ZeRO-1", sys.argv[3], range(1, 6)),
                         ("GPU checkpoint resumed on cpu TP2", sys.argv[4], range(1, 11))):
    h, got = rows(path)
    for s in want:
        if s not in got:
            sys.exit("%s: step %d missing from %s" % (name, s, path))
        for col in ("loss", "grad_norm"):
            a, b = float(got[s][h.index(col)]), float(ref[s][hr.index(col)])
            e = abs(a - b) / max(abs(b), 1e-30)
            if not e <= TOL:
                sys.exit("%s: step %d %s %r, one cpu rank %r: rel err %.2e > %g" % (name, s, col, a, b, e, TOL))
print("all within", TOL)
PY
  fail "a GPU layout differs from one CPU rank"
pass "cuda TP2xPP2 and DP2+ZeRO-1 on one GPU equal one CPU rank; the GPU checkpoint resumes on CPU at TP 2"
