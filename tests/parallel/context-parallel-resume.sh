#!/bin/sh
# A run resumes at another context-parallel degree (issue 31): the
# checkpoint's data cursor does not depend on CP. One run goes CP 4 (steps
# 1-2, --stop-at) -> CP 2 (steps 3-4) -> CP 1 (steps 5-6) in one run
# directory. Compared bitwise where the maths is the same:
#  - its log rows of steps 1-2 equal a straight CP 4 run's;
#  - the step-4 checkpoint after the CP 2 segment equals (hpt-ckpt export,
#    max difference 0) that of another CP 2 run resumed from a copy of the
#    same step-2 checkpoint, and so do the log rows;
#  - the final weights (--export) after the CP 1 segment equal those of
#    another CP 1 run resumed from a copy of the step-4 checkpoint;
#  - the samples consumed (--log-samples: step, position, sample) equal a
#    straight one-rank run's, row for row;
# and the whole run's losses, grad norms and final weights are within 1e-5
# of the straight one-rank run (tests/helpers/compare_runs.py).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
A="--model tiny --data $CORPUS --steps 6 --seq-len 32 --batch 2 --lr 1e-3 --warmup 2 --clip 0.5 --eval-interval 0 --eval-batches 1 --quiet --log-samples"
seg() { # DIR RANKS WANT_STATUS ARGS...
  d=$1 n=$2 want=$3; shift 3
  st=0
  timeout 300 "$MPIEXEC" -n "$n" "$TRAIN" $A --run-dir "$WORK/$d" "$@" > "$WORK/$d.$n.out" 2>&1 || st=$?
  [ "$st" = "$want" ] || { cat "$WORK/$d.$n.out"; fail "$d on $n ranks ($*): exit $st, expected $want"; }
}
EXPORT() { "$HPT_BUILD/src/hpt-ckpt" export "$1" "$2" > /dev/null || fail "hpt-ckpt export $1"; }
seg chain 4 75 --cp 4 --stop-at 2
cp -r "$WORK/chain" "$WORK/at2"
seg chain 2 75 --cp 2 --stop-at 4
grep -q "layout TP 1 x CP 2 x PP 1 x DP 1 on 2 ranks" "$WORK/chain.2.out" || fail "CP 2 segment layout"
cp -r "$WORK/chain" "$WORK/at4"
seg chain 1 0 --export "$WORK/chain.h5"
seg at2 2 75 --cp 2 --stop-at 4   # the same step-2 checkpoint, resumed at CP 2 again
seg at4 1 0 --export "$WORK/at4.h5"
seg s4 4 75 --cp 4 --stop-at 2    # straight CP 4
seg ref 1 0 --export "$WORK/ref.h5"
grep -q "resumed from .*step_00000002 .*continuing as TP 1 x PP 1 x DP 1, context parallel CP 2$" "$WORK/chain.2.out" &&
  grep -q "resumed from .*step_00000004 .*continuing as TP 1 x PP 1 x DP 1$" "$WORK/chain.1.out" ||
  fail "the segments did not resume (or the resume line does not name CP)"
head -n 3 "$WORK/chain/log.tsv" > "$WORK/c.12"; head -n 3 "$WORK/s4/log.tsv" > "$WORK/s.12"
cmp "$WORK/c.12" "$WORK/s.12" || fail "steps 1-2 at CP 4 differ from a straight CP 4 run"
EXPORT "$WORK/at4/checkpoints/step_00000004" "$WORK/c4.h5"
EXPORT "$WORK/at2/checkpoints/step_00000004" "$WORK/a4.h5"
"$HPT_BUILD/tests/helpers/h5maxdiff" "$WORK/c4.h5" "$WORK/a4.h5" 0 > "$WORK/d4" ||
  { cat "$WORK/d4"; fail "the CP 2 segment's step-4 checkpoint differs from another CP 2 resume"; }
head -n 5 "$WORK/at2/log.tsv" > "$WORK/a.14"; head -n 5 "$WORK/at4/log.tsv" > "$WORK/c.14"
cmp "$WORK/a.14" "$WORK/c.14" || fail "the CP 2 segments' log rows differ"
"$HPT_BUILD/tests/helpers/h5maxdiff" "$WORK/chain.h5" "$WORK/at4.h5" 0 > "$WORK/d6" ||
  { cat "$WORK/d6"; fail "the CP 1 segment's final weights differ from another CP 1 resume"; }
cmp "$WORK/chain/samples.0.tsv" "$WORK/ref/samples.0.tsv" ||
  fail "samples consumed across CP 4 -> 2 -> 1 differ from one rank's"
[ "$(wc -l < "$WORK/ref/samples.0.tsv")" -eq 12 ] || fail "samples.0.tsv: expected 12 rows (6 steps x 2)"
"$PYTHON" "$HPT_SRC/tests/helpers/compare_runs.py" "$WORK" 6 ref=chain ||
  fail "the CP 4 -> 2 -> 1 run differs from one rank"
pass "resume across CP 4 -> 2 -> 1: bitwise where the maths is the same, samples as one rank's, within 1e-5 of it"
