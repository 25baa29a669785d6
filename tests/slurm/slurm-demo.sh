#!/bin/sh
# slurm/demo.sh (`make demo`) on the tiny model: the demo keeps its model —
# RUN_DIR/model.h5 (--export) and a checkpoint of the last step — validates
# several times along the run (default every 10 steps; it used to validate
# once, at the end), and HPT_DEMO_CONTINUE=1 resumes the same run to more
# steps. demo.sh starts and stops its own local Slurm cluster.
. "$HPT_SRC/tests/helpers/lib.sh"
. "$HPT_SRC/tests/helpers/slurm-lib.sh"
need_slurm
need_corpus
# The job's shape scaled down (tiny model, no ZeRO-1: see slurm-tiny.sh);
# the demo's own defaults (validation interval, checkpoint, export) stay.
export HPT_ROOT="$HPT_SRC" HPT_BUILD HPT_DATA="$CORPUS" OMP_NUM_THREADS=1 \
  HPT_MODEL=tiny HPT_SEQ_LEN=32 HPT_GLOBAL_BATCH=4 HPT_ZERO1=0 HPT_EVAL_BATCHES=1 \
  HPT_RUN_DIR="$WORK/demo"
unset HPT_EVAL_INTERVAL HPT_SAVE_EVERY HPT_DEMO_CONTINUE
run_demo() { # OUT: slurm/demo.sh, which must complete
  st=0
  bash "$HPT_SRC/slurm/demo.sh" > "$1" 2>&1 || st=$?
  cat "$1"
  [ "$st" = 0 ] || fail "slurm/demo.sh exited $st"
}
HPT_STEPS=20 run_demo "$WORK/first.out"
[ -f "$WORK/demo/model.h5" ] || fail "no exported model (RUN_DIR/model.h5)"
[ -f "$WORK/demo/checkpoints/step_00000020/checkpoint.h5" ] || fail "no checkpoint of the last step"
grep -q "^demo: model: weights $WORK/demo/model.h5" "$WORK/first.out" || fail "demo does not say where the model is"
vals() { awk -F'\t' 'NR > 1 && $5 != "nan" { printf "%s ", $1 }' "$WORK/demo/log.tsv"; }
[ "$(vals)" = "10 20 " ] || fail "validation at steps '$(vals)', expected 10 and 20"
cp "$WORK/demo/model.h5" "$WORK/model20.h5"
HPT_STEPS=22 HPT_DEMO_CONTINUE=1 run_demo "$WORK/second.out"
grep -q "^hpt-train: resumed from $WORK/demo/checkpoints/step_00000020" "$WORK/second.out" ||
  fail "the continued demo did not resume from step 20"
[ "$(tail -n +2 "$WORK/demo/log.tsv" | wc -l)" = 22 ] || fail "log.tsv does not have 22 steps"
[ -f "$WORK/demo/checkpoints/step_00000022/checkpoint.h5" ] || fail "no checkpoint of step 22"
cmp -s "$WORK/model20.h5" "$WORK/demo/model.h5" && fail "model.h5 not rewritten by the continued run"
grep -q "step 1/" "$WORK/second.out" && fail "the continued demo shows the first job's output again"
pass "the demo keeps its model, validates along the run and continues"
