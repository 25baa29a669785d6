#!/bin/sh
# bf16 mixed precision trains like fp32 (issue 12): the tiny model with
# --backend cuda --precision bf16 (bf16 operands, fp32 accumulation, fp32
# master weights and AdamW state) against --backend cpu (fp32):
#  - one rank, 20 steps (batch 4 x 64, grad-accum 2): every step's loss
#    within 2e-2 relative, and the loss goes down;
#  - DP 2 with ZeRO-1 on one GPU (--comm mpi): the same losses within 2e-2
#    (the bf16 working copies must follow the parameters the all-gather
#    brings in after each step);
#  - TP 2 with sequence parallelism on one GPU (--comm mpi): the same
#    losses within 2e-2 (the bf16 norm outputs are all-gathered as bytes);
#  - bf16 activation storage: the bf16 run's activation block (banner, "MiB
#    of activations per rank") is smaller than the fp32 CPU run's;
#  - the checkpoint format is unchanged (fp32 master weights): the bf16
#    run's final checkpoint resumes on the CPU backend.
# Skipped (77) when hpt was built without CUDA or no GPU is visible.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
# global batch 8 sequences: DP x grad-accum x batch
A="--model tiny --data $CORPUS --steps 20 --seq-len 64 --batch 4 --eval-interval 0 --eval-batches 1 --quiet"
st=0
"$TRAIN" $A --grad-accum 2 --backend cuda --precision bf16 --run-dir "$WORK/bf16" --save-every 20 \
  > "$WORK/bf16.out" 2>&1 || st=$?
if [ "$st" -ne 0 ]; then
  cat "$WORK/bf16.out"
  if grep -q "no CUDA device visible" "$WORK/bf16.out"; then
    echo "SKIP: no CUDA device visible"; exit 77
  fi
  if grep -q "built without the CUDA backend" "$WORK/bf16.out"; then
    echo "SKIP: hpt built without CUDA (configure --with-cuda)"; exit 77
  fi
  fail "the cuda bf16 run failed (exit $st)"
fi
"$TRAIN" $A --grad-accum 2 --backend cpu --run-dir "$WORK/cpu" > "$WORK/cpu.out" 2>&1 ||
  { cat "$WORK/cpu.out"; fail "the cpu run failed"; }
timeout 600 "$MPIEXEC" -n 2 "$TRAIN" $A --backend cuda --comm mpi --precision bf16 --dp 2 --zero1 \
  --run-dir "$WORK/dp2" > "$WORK/dp2.out" 2>&1 || { cat "$WORK/dp2.out"; fail "cuda bf16 DP 2 + ZeRO-1"; }
timeout 600 "$MPIEXEC" -n 2 "$TRAIN" $A --grad-accum 2 --backend cuda --comm mpi --precision bf16 \
  --tp 2 --sequence-parallel --run-dir "$WORK/sp2" > "$WORK/sp2.out" 2>&1 ||
  { cat "$WORK/sp2.out"; fail "cuda bf16 TP 2 + sequence parallelism"; }
mib() { sed -n 's/.*; \([0-9.]*\) MiB of activations per rank/\1/p' "$1" | head -n 1; }
ab=$(mib "$WORK/bf16.out") ac=$(mib "$WORK/cpu.out")
echo "activations per rank: $ab MiB bf16 (cuda), $ac MiB fp32 (cpu)"
awk -v b="$ab" -v c="$ac" 'BEGIN { exit !(b != "" && c != "" && b + 0 < c + 0) }' ||
  fail "bf16 activation block ($ab MiB) not smaller than fp32 ($ac MiB)"
"$PYTHON" - "$WORK/cpu/log.tsv" "$WORK/bf16/log.tsv" "$WORK/dp2/log.tsv" "$WORK/sp2/log.tsv" <<'PY' ||
import sys
TOL = 2e-2
def rows(path):
    with open(path) as f:
        head = f.readline().split("\t")
        return head, [l.rstrip("\n").split("\t") for l in f]
hc, c = rows(sys.argv[1])
i = hc.index("loss")
for label, path in (("bf16 1 rank", sys.argv[2]), ("bf16 DP2 ZeRO-1", sys.argv[3]),
                    ("bf16 TP2 SP", sys.argv[4])):
    hg, g = rows(path)
    assert len(g) == len(c) == 20, (label, len(g), len(c))
    worst = 0.0
    for a, b in zip(g, c):
        a_, b_ = float(a[hg.index("loss")]), float(b[i])
        e = abs(a_ - b_) / abs(b_)
        worst = max(worst, e)
        if not e <= TOL:
            sys.exit("%s step %s loss: gpu %r fp32 cpu %r rel err %.2e > %g" % (label, a[0], a_, b_, e, TOL))
    first, last = float(g[0][hg.index("loss")]), float(g[-1][hg.index("loss")])
    if not last < first:
        sys.exit("%s: loss did not go down: %g -> %g" % (label, first, last))
    print("%s vs fp32 cpu: worst relative loss difference %.1e; loss %.4f -> %.4f" % (label, worst, first, last))
PY
  fail "a bf16 run differs from the fp32 cpu run by more than 2e-2"
"$TRAIN" $A --grad-accum 2 --steps 22 --backend cpu --run-dir "$WORK/bf16" > "$WORK/resume.out" 2>&1 ||
  { cat "$WORK/resume.out"; fail "the bf16 run's checkpoint does not resume on the cpu backend"; }
grep -q "resum" "$WORK/resume.out" || { cat "$WORK/resume.out"; fail "the cpu run did not resume the bf16 checkpoint"; }
pass "bf16 on the GPU (1 rank, DP 2 + ZeRO-1) within 2e-2 of the fp32 CPU run; its checkpoint resumes on the CPU"
