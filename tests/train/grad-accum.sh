#!/bin/sh
# Gradient accumulation equals one big batch: micro-batch 4 × 1, 2 × 2 and
# 1 × 4 see the same samples and must give the same losses and gradient
# norms for 5 steps, within 1e-5 relative (float32 sums in another order).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
run() { "$TRAIN" --model tiny --data "$CORPUS" --steps 5 --batch "$1" --grad-accum "$2" \
  --seq-len 32 --warmup 2 --lr 1e-3 --eval-batches 1 --quiet --run-dir "$WORK/b$1" > /dev/null || fail "run $1x$2"; }
run 4 1; run 2 2; run 1 4
"$PYTHON" - "$WORK/b4/log.tsv" "$WORK/b2/log.tsv" "$WORK/b1/log.tsv" <<'PY' || fail "accumulation differs from one big batch"
import sys
def rows(p):
    lines = open(p).read().split("\n")[1:]
    return [[float(x) for x in l.split("\t")[1:4]] for l in lines if l]
ref = rows(sys.argv[1])
assert len(ref) == 5
for other in sys.argv[2:]:
    for r, o in zip(ref, rows(other)):
        for a, b in zip(r, o):
            assert abs(a - b) <= 1e-5 * abs(a), (other, r, o)
print("loss and grad norm agree within 1e-5 for 4x1, 2x2, 1x4")
PY
pass "gradient accumulation equals one big batch"
