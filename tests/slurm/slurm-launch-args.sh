#!/bin/sh
# The hpt-train options the launcher builds for the training step, with srun
# faked (no Slurm needed): HPT_PP_SCHEDULE and HPT_PP_VIRTUAL become
# --pp-schedule S --pp-virtual N, HPT_RECOMPUTE --recompute [selective],
# HPT_SEQUENCE_PARALLEL=1 --sequence-parallel, and nothing of them is passed
# when they are unset (hpt-train's defaults). The fake srun answers the probe
# step as a healthy MPI world (one "rank R of W on NODE" line per task) and
# records the training step's command line. The elastic rounding's message
# names CP (HPT_CP) with TP and PP.
. "$HPT_SRC/tests/helpers/lib.sh"
unset SLURM_JOB_NODELIST SLURM_NTASKS_PER_NODE SLURM_ARRAY_JOB_ID
mkdir -p "$WORK/bin" "$WORK/data"
cat > "$WORK/bin/srun" <<'SH'
#!/bin/sh
# fake srun: --ntasks=W --ntasks-per-node=T PROGRAM ARGS...
W=1 T=1
while [ $# -gt 0 ]; do
  case $1 in
    --ntasks=*) W=${1#*=} ;;
    --ntasks-per-node=*) T=${1#*=} ;;
    -*) ;;
    *) break ;;
  esac
  shift
done
case $1 in
  *hpt-mpi-probe) r=0; while [ $r -lt "$W" ]; do echo "rank $r of $W on node$((r / T))"; r=$((r + 1)); done ;;
  *) echo "$*" > "$FAKE_SRUN_ARGS" ;;
esac
SH
chmod +x "$WORK/bin/srun"
export PATH="$WORK/bin:$PATH" HPT_BUILD HPT_DATA="$WORK/data"
run() { # NAME VAR=VALUE...: the tiny template as job NAME in a fake allocation of 2 nodes
  name=$1; shift
  FAKE_SRUN_ARGS="$WORK/$name.args" env SLURM_JOB_ID=$name SLURM_JOB_NUM_NODES=2 SLURM_JOB_NAME=hpt-tiny \
    HPT_RUN_DIR="$WORK/run-$name" "$@" bash "$HPT_SRC/jobs/train_tiny.sh" > "$WORK/$name.out" 2>&1 ||
    { cat "$WORK/$name.out"; fail "$name: launcher failed"; }
  [ -s "$WORK/$name.args" ] || { cat "$WORK/$name.out"; fail "$name: no training step started"; }
  cat "$WORK/$name.args"
}
run 11 HPT_PP_SCHEDULE=interleaved HPT_PP_VIRTUAL=2 HPT_GLOBAL_BATCH=8
grep -Eq "/hpt-train .* --tp 2 --pp 2 --dp 2 --batch 1 --grad-accum 4 .* --pp-schedule interleaved --pp-virtual 2( |$)" "$WORK/11.args" ||
  fail "HPT_PP_SCHEDULE=interleaved HPT_PP_VIRTUAL=2: not passed to hpt-train"
run 12 HPT_PP_SCHEDULE=gpipe
grep -Eq " --pp-schedule gpipe( |$)" "$WORK/12.args" && ! grep -q -- "--pp-virtual" "$WORK/12.args" ||
  fail "HPT_PP_SCHEDULE=gpipe: not passed to hpt-train as --pp-schedule gpipe alone"
run 13
grep -q -- "--pp-schedule\|--pp-virtual" "$WORK/13.args" && fail "no HPT_PP_SCHEDULE: a schedule was passed"
# HPT_RECOMPUTE (0|1|full|selective; 1 and full: a bare --recompute) and
# HPT_SEQUENCE_PARALLEL=1 (--sequence-parallel)
run 14 HPT_RECOMPUTE=selective HPT_SEQUENCE_PARALLEL=1
grep -Eq " --recompute selective( |$)" "$WORK/14.args" && grep -Eq " --sequence-parallel( |$)" "$WORK/14.args" ||
  fail "HPT_RECOMPUTE=selective HPT_SEQUENCE_PARALLEL=1: not passed as --recompute selective --sequence-parallel"
for v in 1 full; do
  run 15$v HPT_RECOMPUTE=$v
  grep -Eq " --recompute( --|$)" "$WORK/15$v.args" || fail "HPT_RECOMPUTE=$v: not passed as a bare --recompute"
done
grep -q -- "--recompute\|--sequence-parallel" "$WORK/13.args" &&
  fail "no HPT_RECOMPUTE, HPT_SEQUENCE_PARALLEL: --recompute or --sequence-parallel passed"
# elastic: 3 nodes of 1 task do not fit TP 1 x CP 2 x PP 1; the message
# names CP, which the arithmetic uses (it said "TP 1 x PP 1")
run 16 SLURM_JOB_NUM_NODES=3 HPT_TASKS_PER_NODE=1 HPT_TP=1 HPT_CP=2 HPT_PP=1
grep -q "^launch: the layout does not fit 3 nodes (TP 1 x CP 2 x PP 1, global batch 8): using 2 of them$" "$WORK/16.out" &&
  grep -Eq " --nodes=2 --ntasks=2 " "$WORK/16.out" && grep -Eq " --tp 1 --cp 2 --pp 1 --dp 1 " "$WORK/16.args" ||
  { cat "$WORK/16.out"; fail "elastic with HPT_CP=2: the message does not name CP, or not 2 nodes"; }
pass "the launcher passes HPT_PP_SCHEDULE, HPT_PP_VIRTUAL, HPT_RECOMPUTE and HPT_SEQUENCE_PARALLEL to hpt-train; its elastic message names CP"
