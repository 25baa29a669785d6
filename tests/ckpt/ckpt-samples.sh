#!/bin/sh
# The data order survives a resume with a different DP and a fallback:
# steps 1-3 at DP=2 (micro-batch 2, checkpoints at 2 and 3), the newest
# checkpoint damaged, steps 3-8 at DP=1 (micro-batch 4, the same global
# batch) → the positions trained on are exactly 0..31, each once (no
# duplicate: samples.1.tsv, whose rank is gone, is cut back too; no gap),
# with the same sample ids as an uninterrupted DP=1 run. The step column is
# the step number (global batch 4: position // 4 + 1), also after a
# skipped (non-finite) step.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
B="--model tiny --data $CORPUS --seq-len 32 --eval-batches 1 --quiet --steps 8 --log-samples"
st=0; "$MPIEXEC" -n 2 "$TRAIN" $B --batch 2 --save-every 2 --stop-at 3 --run-dir "$WORK/r" > "$WORK/o1" 2>&1 || st=$?
[ $st = 75 ] || { cat "$WORK/o1"; fail "DP=2 part: exit $st"; }
: > "$WORK/r/checkpoints/step_00000003/checkpoint.h5"
"$TRAIN" $B --batch 4 --run-dir "$WORK/r" > "$WORK/o2" 2>&1 || { cat "$WORK/o2"; fail "DP=1 part"; }
grep -q "resumed from .*step_00000002" "$WORK/o2" || { cat "$WORK/o2"; fail "did not fall back to step 2"; }
"$TRAIN" $B --batch 4 --fault-nan-steps 2 --run-dir "$WORK/u" > "$WORK/o3" 2>&1 || { cat "$WORK/o3"; fail "uninterrupted run"; }
"$PYTHON" - "$WORK" <<'PY' || fail "duplicate, gap, other samples or wrong step numbers"
import glob, sys
w = sys.argv[1]
def rows(d):
    out = []
    for p in glob.glob(f"{w}/{d}/samples.*.tsv"):
        out += [tuple(map(int, l.split("\t"))) for l in open(p).read().split("\n") if l]
    return out
r, u = rows("r"), rows("u")
pos = sorted(p for _, p, _ in r)
assert pos == list(range(32)), pos
assert sorted((p, s) for _, p, s in r) == sorted((p, s) for _, p, s in u), "sample ids differ"
for name, rr in (("resumed", r), ("uninterrupted (step 2 skipped)", u)):
    bad = [(s, p) for s, p, _ in rr if s != p // 4 + 1]
    assert not bad, f"{name}: step column is not the step number: (step, position) {bad[:6]}"
print("32 positions, each once; sample ids equal the uninterrupted run's; steps numbered")
PY
pass "no duplicate and no gap across a DP change and a fallback; step column = step number"
