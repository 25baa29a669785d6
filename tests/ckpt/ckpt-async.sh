#!/bin/sh
# Asynchronous checkpoints (--async-save): a run that saves in the
# background equals a synchronous one bitwise — losses and every
# checkpoint's tensors and attributes (h5diff) — at (1,1,1) and at
# (2,2,2)+ZeRO-1; an async checkpoint resumes bitwise at the same layout
# and within 1e-5 at another; with a slow writer (test-only delay) training
# goes on while the save is written (step lines before the save's line) and
# "checkpoint" is printed only at the commit; a stop signal during an
# in-flight save commits it, then writes the stop checkpoint, then exits 75;
# with a slow copy of the state into the staging buffer, the optimizer step
# waits for it (the checkpoints still equal the synchronous ones).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
A="--model tiny --data $CORPUS --seq-len 32 --lr 1e-3 --warmup 2 --eval-batches 1 --eval-interval 4 --quiet --save-every 2 --keep 5"
run() { # NAME RANKS ARGS...
  name=$1 n=$2; shift 2
  st=0; timeout 300 "$MPIEXEC" -n "$n" "$TRAIN" $A --run-dir "$WORK/$name" "$@" > "$WORK/$name.out" 2>&1 || st=$?
  [ $st = 0 ] || { cat "$WORK/$name.out"; fail "run $name: exit $st"; }
}
same_ckpts() { # A B: the same checkpoints, equal datasets and attributes
  la=$(ls "$WORK/$1/checkpoints" | grep '^step_') lb=$(ls "$WORK/$2/checkpoints" | grep '^step_')
  [ "$la" = "$lb" ] || fail "$1/$2: different checkpoints: $la / $lb"
  for s in $la; do
    h5diff -r "$WORK/$1/checkpoints/$s/checkpoint.h5" "$WORK/$2/checkpoints/$s/checkpoint.h5" > "$WORK/diff" 2>&1 ||
      { tail -20 "$WORK/diff"; fail "$1/$2: $s differs"; }
  done
}
async_lines() { # NAME MIN: at least MIN saves were written in the background
  [ "$(grep -c "checkpoint .*async: training stalled" "$WORK/$1.out")" -ge "$2" ] ||
    { cat "$WORK/$1.out"; fail "$1: fewer than $2 background saves"; }
}
# (1,1,1): 8 steps, saves at 2, 4, 6 in the background, 8 (final) synchronous
run s1 1 --batch 4 --steps 8
run a1 1 --batch 4 --steps 8 --async-save
async_lines a1 3
cmp "$WORK/s1/log.tsv" "$WORK/a1/log.tsv" || fail "(1,1,1): losses differ"
same_ckpts s1 a1
# the writer copies the state (CPU backend) while the next step's forward
# and backward run; the optimizer step waits for the copy. A slow copy
# (test-only delay) must still give the snapshot's values, not the next
# step's
export HPT_TEST_SLOW_COPY_MS=400
run c1 1 --batch 4 --steps 8 --async-save
unset HPT_TEST_SLOW_COPY_MS
async_lines c1 3
cmp "$WORK/s1/log.tsv" "$WORK/c1/log.tsv" || fail "(1,1,1) slow copy: losses differ"
same_ckpts s1 c1
"$HPT_BUILD/src/hpt-ckpt" verify "$WORK/a1/checkpoints" > "$WORK/v" 2>&1 || { cat "$WORK/v"; fail "verify"; }
# resume from the async step 6 at the same layout (bitwise) and at DP=2
for r in r1 r2; do
  mkdir -p "$WORK/$r" && cp -r "$WORK/a1/checkpoints" "$WORK/a1/log.tsv" "$WORK/$r/"
  rm -rf "$WORK/$r/checkpoints/step_00000008"
done
run r1 1 --batch 4 --steps 8 --async-save
grep -q "resumed from .*step_00000006" "$WORK/r1.out" || { cat "$WORK/r1.out"; fail "r1 did not resume from step 6"; }
cmp "$WORK/s1/log.tsv" "$WORK/r1/log.tsv" || fail "(1,1,1): resumed from an async checkpoint, differs"
run r2 2 --batch 2 --steps 8 --async-save
grep -q "resumed from .*step_00000006 (written by TP 1 x PP 1 x DP 1)" "$WORK/r2.out" || { cat "$WORK/r2.out"; fail "r2 did not resume from step 6"; }
"$PYTHON" - "$WORK" <<'PY' || fail "resume at DP=2 differs from the uninterrupted run"
import sys
w = sys.argv[1]
def rows(n):
    return [[float(x) for x in l.split("\t")[1:4]] for l in open(f"{w}/{n}/log.tsv").read().split("\n")[1:] if l]
ref, got = rows("s1"), rows("r2")
assert len(got) == 8, len(got)
for s, (a, b) in enumerate(zip(got, ref)):
    for x, y in zip(a, b):
        assert abs(x - y) <= 1e-5 * abs(y), (s + 1, a, b)
PY
# (2,2,2) with ZeRO-1: 5 steps, saves at 2 and 4 in the background
Z="--tp 2 --pp 2 --batch 1 --grad-accum 2 --zero1 --steps 5"
run s8 8 $Z
run a8 8 $Z --async-save
async_lines a8 2
cmp "$WORK/s8/log.tsv" "$WORK/a8/log.tsv" || fail "(2,2,2) ZeRO-1: losses differ"
same_ckpts s8 a8
# ... and its async step 4 resumes at (1,1,1)
mkdir -p "$WORK/r8" && cp -r "$WORK/a8/checkpoints" "$WORK/a8/log.tsv" "$WORK/r8/"
rm -rf "$WORK/r8/checkpoints/step_00000005"
run r8 1 --batch 4 --steps 5
grep -q "resumed from .*step_00000004 (written by TP 2 x PP 2 x DP 2 ZeRO-1)" "$WORK/r8.out" || { cat "$WORK/r8.out"; fail "r8 did not resume"; }
"$PYTHON" - "$WORK" <<'PY' || fail "(2,2,2) async checkpoint resumed at (1,1,1) differs"
import sys
w = sys.argv[1]
def rows(n):
    return [[float(x) for x in l.split("\t")[1:4]] for l in open(f"{w}/{n}/log.tsv").read().split("\n")[1:] if l]
ref, got = rows("s8"), rows("r8")
assert len(got) == 5, len(got)
for s, (a, b) in enumerate(zip(got, ref)):
    for x, y in zip(a, b):
        assert abs(x - y) <= 1e-5 * abs(y), (s + 1, a, b)
PY

# A slow writer (2 s, test-only): the steps after the snapshot run while
# the save is written; its line comes only at the commit, after them.
L="--model tiny --data $CORPUS --seq-len 32 --batch 2 --eval-batches 1 --eval-interval 0"
HPT_TEST_SLOW_WRITE_MS=2000 timeout 120 "$TRAIN" $L --steps 8 --save-every 3 --async-save \
  --run-dir "$WORK/slow" > "$WORK/slow.out" 2>&1 || { cat "$WORK/slow.out"; fail "slow writer run"; }
ln_save=$(grep -n "^step 3: checkpoint .*async" "$WORK/slow.out" | cut -d: -f1)
ln_step=$(grep -n "^step 5/8 " "$WORK/slow.out" | cut -d: -f1)
[ -n "$ln_save" ] && [ -n "$ln_step" ] && [ "$ln_step" -lt "$ln_save" ] ||
  { cat "$WORK/slow.out"; fail "training did not go on during the background write"; }
after=$(sed -n 's/^step 3: checkpoint .*committed after step \([0-9]*\))$/\1/p' "$WORK/slow.out")
[ "${after:-0}" -ge 5 ] || { cat "$WORK/slow.out"; fail "step 3 committed after step ${after:-?}: no steps ran during the save"; }
"$HPT_BUILD/src/hpt-metrics" summary "$WORK/slow/metrics.h5" > "$WORK/sum" 2>&1 || { cat "$WORK/sum"; fail "summary"; }
grep -q "step 3 rank 0 checkpoint_save: async: [0-9]* bytes, snapshot (training stall) [0-9.]* s, background write [0-9.]* s, commit waited [0-9.]* s, committed after step $after, [0-9.]* s in all; .*/step_00000003" "$WORK/sum" ||
  { cat "$WORK/sum"; fail "hpt-metrics summary does not show the async save's figures"; }

# A stop signal while a save is in flight: that save commits, then the stop
# checkpoint is written, then exit 75.
HPT_TEST_SLOW_WRITE_MS=3000 "$TRAIN" $L --steps 100000 --save-every 4 --async-save \
  --checkpoint-dir "$WORK/sig" > "$WORK/sig.out" 2>&1 &
pid=$!
j=0
until grep -q "^step *6/" "$WORK/sig.out"; do sleep 0.05; j=$((j + 1)); [ $j -lt 1200 ] || { kill -9 $pid; cat "$WORK/sig.out"; fail "no step 6"; }; done
grep -q "^step 4: checkpoint" "$WORK/sig.out" && fail "step 4 committed before its slow write could finish"
kill -USR1 $pid
st=0; wait $pid || st=$?
[ $st = 75 ] || { cat "$WORK/sig.out"; fail "stop signal during a save: exit $st, expected 75"; }
ln4=$(grep -n "^step 4: checkpoint .*async" "$WORK/sig.out" | cut -d: -f1)
stop=$(sed -n 's/^step \([0-9]*\): checkpoint [^ ]*step_[0-9]* ([0-9.]* MiB in .*/\1/p' "$WORK/sig.out")
lns=$(grep -n "^step $stop: checkpoint " "$WORK/sig.out" | cut -d: -f1)
[ -n "$ln4" ] && [ -n "$stop" ] && [ "$stop" -gt 4 ] && [ "$ln4" -lt "$lns" ] ||
  { cat "$WORK/sig.out"; fail "the in-flight save did not commit before the stop checkpoint"; }
[ "$(cat "$WORK/sig/latest")" = "$(printf 'step_%08d' "$stop")" ] || fail "latest does not name the stop checkpoint"
[ -d "$WORK/sig/step_00000004" ] || fail "the in-flight save is missing"
"$HPT_BUILD/src/hpt-ckpt" verify "$WORK/sig" > "$WORK/v" 2>&1 || { cat "$WORK/v"; fail "verify after the stop"; }
pass "async saves equal synchronous ones (1,1,1), (2,2,2)+ZeRO-1; resume; slow writer; stop mid-save"
