#!/bin/sh
# Checkpoints: 12 steps uninterrupted vs 6 + save + resume 6 are bitwise
# identical at (1,1,1) and at (2,2,2) with ZeRO-1; a checkpoint written at
# (2,2,2) resumes at (1,1,1), (1,2,2), (2,2,1) and (2,1,4) — re-sharded, the
# global batch kept by changing gradient accumulation — within 1e-5 of the
# uninterrupted run.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
A="--model tiny --data $CORPUS --seq-len 32 --lr 1e-3 --warmup 2 --eval-batches 1 --eval-interval 4 --quiet --steps 12"
run() { # NAME RANKS ARGS... (exit 0 or 75 accepted)
  name=$1 n=$2; shift 2
  st=0; timeout 300 "$MPIEXEC" -n "$n" "$TRAIN" $A --run-dir "$WORK/$name" "$@" > "$WORK/$name.out" 2>&1 || st=$?
  [ $st = 0 ] || [ $st = 75 ] || { cat "$WORK/$name.out"; fail "run $name: exit $st"; }
  echo $st
}
# (1,1,1)
run a1 1 --batch 4 > /dev/null
[ "$(run b1 1 --batch 4 --stop-at 6)" = 75 ] || fail "--stop-at must exit 75"
[ -d "$WORK/b1/checkpoints/step_00000006" ] || fail "no checkpoint at step 6"
grep -q "step_00000006" "$WORK/b1/checkpoints/latest" || fail "latest does not name step 6"
run b1 1 --batch 4 > /dev/null
grep -q "resumed from .*step_00000006" "$WORK/b1.out" || fail "did not resume"
cmp "$WORK/a1/log.tsv" "$WORK/b1/log.tsv" || fail "(1,1,1): resumed run differs from the uninterrupted one"
# (2,2,2) with ZeRO-1
Z="--tp 2 --pp 2 --batch 1 --grad-accum 2 --zero1"
run a8 8 $Z > /dev/null
[ "$(run b8 8 $Z --stop-at 6)" = 75 ] || fail "--stop-at at (2,2,2) must exit 75"
for layout in "r111 1 --batch 4" "r122 4 --pp 2 --batch 2" "r221 4 --tp 2 --pp 2 --batch 2" "r214 8 --tp 2 --batch 1"; do
  set -- $layout
  name=$1; shift
  mkdir -p "$WORK/$name" && cp -r "$WORK/b8/checkpoints" "$WORK/b8/log.tsv" "$WORK/$name/"
  run "$name" "$@" > /dev/null
  grep -q "resumed from .*written by TP 2 x PP 2 x DP 2 ZeRO-1" "$WORK/$name.out" || fail "$name did not resume"
done
run b8 8 $Z > /dev/null
cmp "$WORK/a8/log.tsv" "$WORK/b8/log.tsv" || fail "(2,2,2) ZeRO-1: resumed run differs from the uninterrupted one"
"$PYTHON" - "$WORK" <<'PY' || fail "re-sharded resumes differ from the uninterrupted run"
import sys
w = sys.argv[1]
def rows(n):
    return [[float(x) for x in l.split("\t")[1:4]] for l in open(f"{w}/{n}/log.tsv").read().split("\n")[1:] if l]
ref = rows("a8")
for n in ("r111", "r122", "r221", "r214"):
    got = rows(n)
    assert len(got) == 12, (n, len(got))
    for s, (a, b) in enumerate(zip(got, ref)):
        for x, y in zip(a, b):
            assert abs(x - y) <= 1e-5 * abs(y), (n, s + 1, a, b)
    print(n, "matches the uninterrupted (2,2,2) run within 1e-5")
PY
pass "bitwise resume at (1,1,1) and (2,2,2)+ZeRO-1; re-shard to 4 layouts"
