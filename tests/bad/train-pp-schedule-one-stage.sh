#!/bin/sh
# --pp-schedule on one pipeline stage (--pp 1): interleaved is refused
# (exit 2: it interleaves model chunks over pipeline ranks, as Megatron
# refuses a virtual pipeline without one); gpipe and zb-h1, which were
# accepted silently, have no pipeline to schedule: hpt-train runs them as
# 1f1b with a note (as it runs --zero 2 on DP 1 as --zero 0), also zb-h1
# with --zero 2 on DP 2 (refused only where a pipeline defers W); 1f1b, the
# default, says nothing. hpt-plan plans them as hpt-train runs them: as
# 1f1b with a note on stderr (GPipe's plan held all micro-batches).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
A="--model tiny --data $CORPUS --seq-len 32 --steps 1 --batch 1 --grad-accum 2 --eval-interval 0 --eval-batches 1 --quiet"
expect_error 2 "\-\-pp-schedule interleaved needs \-\-pp >= 2" \
  timeout 120 "$MPIEXEC" -n 1 "$TRAIN" $A --pp-schedule interleaved --pp-virtual 2
for s in gpipe zb-h1 1f1b; do
  timeout 120 "$MPIEXEC" -n 1 "$TRAIN" $A --pp-schedule $s > "$WORK/$s.out" 2>&1 ||
    { cat "$WORK/$s.out"; fail "--pp-schedule $s with --pp 1 did not run"; }
done
for s in gpipe zb-h1; do
  grep -q "^hpt-train: note: --pp-schedule $s with --pp 1 has no pipeline to schedule: running as 1f1b" \
    "$WORK/$s.out" || { cat "$WORK/$s.out"; fail "--pp-schedule $s with --pp 1: no note"; }
done
! grep -q "pp-schedule" "$WORK/1f1b.out" || { cat "$WORK/1f1b.out"; fail "1f1b (the default) with --pp 1 is not silent"; }
timeout 120 "$MPIEXEC" -n 2 "$TRAIN" $A --zero 2 --pp-schedule zb-h1 > "$WORK/z2.out" 2>&1 ||
  { cat "$WORK/z2.out"; fail "zb-h1 --zero 2 on DP 2, PP 1 was refused"; }
grep -q "note: --pp-schedule zb-h1 with --pp 1" "$WORK/z2.out" || { cat "$WORK/z2.out"; fail "zb-h1 --zero 2 PP 1: no note"; }
P="$HPT_BUILD/src/hpt-plan"
M="--model small --cluster cpu-local --seq-len 256 --global-batch 8 --micro-batch 1 --pp 1 --json"
"$P" $M > "$WORK/p1f1b.json" 2> "$WORK/p1f1b.err" || fail "hpt-plan 1f1b"
[ ! -s "$WORK/p1f1b.err" ] || { cat "$WORK/p1f1b.err"; fail "hpt-plan 1f1b with --pp 1 is not silent"; }
for s in gpipe zb-h1; do
  "$P" $M --pp-schedule $s > "$WORK/p$s.json" 2> "$WORK/p$s.err" || fail "hpt-plan $s"
  grep -q "^hpt-plan: note: --pp-schedule $s with --pp 1 has no pipeline to schedule: planned as 1f1b, as hpt-train runs it$" \
    "$WORK/p$s.err" || { cat "$WORK/p$s.err"; fail "hpt-plan $s with --pp 1: no note"; }
  cmp "$WORK/p$s.json" "$WORK/p1f1b.json" || fail "hpt-plan $s with --pp 1 differs from its 1f1b plan"
done
expect_error 2 "\-\-pp-schedule interleaved needs" "$P" $M --pp-schedule interleaved --pp-virtual 2
pass "--pp-schedule on one stage: interleaved refused, gpipe and zb-h1 run as 1f1b with a note, 1f1b silent; hpt-plan alike"
