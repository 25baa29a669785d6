#!/bin/sh
# --max-runtime is kept as a double: 1e-50 s (0 as a float, which meant
# "no limit") is a limit that every step overruns, so the run checkpoints
# after its first step and exits 75.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
st=0; "$TRAIN" --model tiny --data "$CORPUS" --seq-len 32 --batch 2 --steps 5 --eval-batches 1 \
  --quiet --metrics none --max-runtime 1e-50 --run-dir "$WORK/r" > "$WORK/o" 2>&1 || st=$?
cat "$WORK/o"
[ $st = 75 ] || fail "exit $st, expected 75"
grep -q "checkpointed step 1 after --max-runtime" "$WORK/o" || fail "no checkpoint after step 1"
[ -d "$WORK/r/checkpoints/step_00000001" ] || fail "no step_00000001 checkpoint"
pass "--max-runtime 1e-50: checkpoint after step 1, exit 75"
