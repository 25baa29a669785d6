#!/bin/sh
# Bad inputs to the Slurm launcher and the local cluster script: each is
# refused with exit 2 and one message naming the variable, the value and the
# rule (no cluster needed: the checks run before any srun).
. "$HPT_SRC/tests/helpers/lib.sh"
unset SLURM_JOB_ID SLURM_JOB_NUM_NODES SLURM_JOB_NODELIST SLURM_NTASKS_PER_NODE
export HPT_BUILD
T="$HPT_SRC/jobs/train_tiny.sh"
expect_error 2 "HPT_TP=3 does not divide the 4 tasks per node: a TP group must stay inside one node" \
  env HPT_TP=3 bash "$T" --dry-run
expect_error 2 "HPT_TP=2 x HPT_PP=3 does not divide the 8 ranks \(2 nodes x 4 tasks\)" \
  env HPT_PP=3 bash "$T" --dry-run
expect_error 2 "HPT_GLOBAL_BATCH=6 sequences is not a multiple of HPT_MICRO_BATCH=2 x DP=2" \
  env HPT_GLOBAL_BATCH=6 HPT_MICRO_BATCH=2 bash "$T" --dry-run
expect_error 2 "HPT_STEPS='ten': expected a positive integer" env HPT_STEPS=ten bash "$T" --dry-run
expect_error 2 "HPT_ZERO1='yes': expected 0 or 1" env HPT_ZERO1=yes bash "$T" --dry-run
expect_error 2 "HPT_TRACE_STEPS='5-': expected the steps to trace as A-B or A \(1-based\), e.g. 20-22" \
  env HPT_TRACE_STEPS=5- bash "$T" --dry-run
expect_error 2 "HPT_TRACE_STEPS=3-2: reversed: the first step is after the last" \
  env HPT_TRACE_STEPS=3-2 bash "$T" --dry-run
expect_error 2 "HPT_TRACE_STEPS=20-22: beyond the run's HPT_STEPS=10" \
  env HPT_TRACE_STEPS=20-22 HPT_STEPS=10 bash "$T" --dry-run
expect_error 2 "HPT_ZERO='4': expected 0, 1, 2 or 3 \(the ZeRO stage\)" env HPT_ZERO=4 bash "$T" --dry-run
expect_error 2 "HPT_ZERO='two': expected 0, 1, 2 or 3 \(the ZeRO stage\)" env HPT_ZERO=two bash "$T" --dry-run
expect_error 2 "HPT_ZERO_SHARD_GROUP='x': expected auto, 0 \(off\) or a shard group size" \
  env HPT_ZERO_SHARD_GROUP=x bash "$T" --dry-run
expect_error 2 "HPT_ZERO_SHARD_GROUP='007': expected auto, 0 \(off\) or a shard group size" \
  env HPT_ZERO=3 HPT_ZERO_SHARD_GROUP=007 bash "$T" --dry-run
expect_error 2 "HPT_ZERO_SHARD_GROUP=2 needs HPT_ZERO=1, 2 or 3" env HPT_ZERO=0 HPT_ZERO_SHARD_GROUP=2 bash "$T" --dry-run
# HSDP with context parallelism: hpt-train refuses it, so a given group is
# refused here and auto (the default) is off with HPT_CP > 1 — before, auto
# passed --zero-shard-group 4 and the job's plan (and hpt-train) refused it
expect_error 2 "HPT_ZERO_SHARD_GROUP=4 with HPT_CP=2: hpt-train refuses HSDP with context parallelism" \
  env HPT_NODES=4 HPT_TP=1 HPT_PP=1 HPT_CP=2 HPT_ZERO=1 HPT_GLOBAL_BATCH=16 HPT_ZERO_SHARD_GROUP=4 bash "$T" --dry-run
env HPT_NODES=4 HPT_TP=1 HPT_PP=1 HPT_CP=2 HPT_ZERO=1 HPT_GLOBAL_BATCH=16 bash "$T" --dry-run > "$WORK/cp.out" 2>&1 ||
  { cat "$WORK/cp.out"; fail "HPT_CP=2 with HPT_ZERO=1 and the default HPT_ZERO_SHARD_GROUP=auto: the dry run failed"; }
! grep -q "zero-shard-group\|HSDP" "$WORK/cp.out" || { cat "$WORK/cp.out"; fail "auto HSDP with HPT_CP=2"; }
expect_error 2 "HPT_ZERO1=1 and HPT_ZERO=2 contradict: HPT_ZERO1=1 is HPT_ZERO=1; set one of them" \
  env HPT_ZERO1=1 HPT_ZERO=2 bash "$T" --dry-run
expect_error 2 "HPT_SIGNAL='KILL': expected USR1, USR2, TERM, INT or HUP" env HPT_SIGNAL=KILL bash "$T" --dry-run
expect_error 2 "HPT_TASKS_PER_NODE='0': expected a positive integer" env HPT_TASKS_PER_NODE=0 bash "$T" --dry-run
expect_error 2 "HPT_INIT_FROM='$WORK/none.safetensors': no such file or directory" \
  env HPT_INIT_FROM="$WORK/none.safetensors" bash "$T" --dry-run
# the pipeline schedule (train_tiny: TP 2 x PP 2 x DP 2, global batch 8)
expect_error 2 "HPT_PP_SCHEDULE='zb-h2': expected 1f1b, gpipe, interleaved or zb-h1" \
  env HPT_PP_SCHEDULE=zb-h2 bash "$T" --dry-run
expect_error 2 "HPT_PP_VIRTUAL='0': expected a positive integer" \
  env HPT_PP_SCHEDULE=interleaved HPT_PP_VIRTUAL=0 bash "$T" --dry-run
expect_error 2 "HPT_PP_VIRTUAL=2 needs HPT_PP_SCHEDULE=interleaved \(model chunks per pipeline rank; the schedule is 1f1b\)" \
  env HPT_PP_VIRTUAL=2 bash "$T" --dry-run
expect_error 2 "HPT_PP_VIRTUAL=2 needs HPT_PP_SCHEDULE=interleaved \(model chunks per pipeline rank; the schedule is gpipe\)" \
  env HPT_PP_SCHEDULE=gpipe HPT_PP_VIRTUAL=2 bash "$T" --dry-run
expect_error 2 "HPT_PP_SCHEDULE=interleaved needs HPT_PP_VIRTUAL=N \(model chunks per pipeline rank, e.g. 2\)" \
  env HPT_PP_SCHEDULE=interleaved bash "$T" --dry-run
expect_error 2 "HPT_PP_SCHEDULE=interleaved needs HPT_PP > 1" \
  env HPT_PP_SCHEDULE=interleaved HPT_PP_VIRTUAL=2 HPT_PP=1 bash "$T" --dry-run
expect_error 2 "HPT_PP_SCHEDULE=interleaved needs the micro-batches per step, HPT_GLOBAL_BATCH=6 / \(HPT_MICRO_BATCH=1 x DP=2\) = 3, to be a multiple of HPT_PP=2 \(it runs them in groups of PP\): nearest valid 2 or 4 \(HPT_GLOBAL_BATCH=4 or 8\)" \
  env HPT_PP_SCHEDULE=interleaved HPT_PP_VIRTUAL=2 HPT_GLOBAL_BATCH=6 bash "$T" --dry-run
expect_error 2 "HPT_GLOBAL_BATCH=2 / \(HPT_MICRO_BATCH=1 x DP=2\) = 1, to be a multiple of HPT_PP=2 \(it runs them in groups of PP\): nearest valid 2 \(HPT_GLOBAL_BATCH=4\)" \
  env HPT_PP_SCHEDULE=interleaved HPT_PP_VIRTUAL=2 HPT_GLOBAL_BATCH=2 bash "$T" --dry-run
# activation memory: HPT_RECOMPUTE is 0|1|full|selective (none too, as
# hpt-train's), HPT_SEQUENCE_PARALLEL 0|1 with TP > 1 dividing the tokens
for v in 2 yes on; do
  expect_error 2 "HPT_RECOMPUTE='$v': expected 0 \(none\), 1 or full \(keep only each layer's input, redo the layer in backward\) or selective \(keep the GEMM outputs, redo attention and the norms/SwiGLU\)" \
    env HPT_RECOMPUTE=$v bash "$T" --dry-run
done
expect_error 2 "HPT_SEQUENCE_PARALLEL='yes': expected 0 or 1" env HPT_SEQUENCE_PARALLEL=yes bash "$T" --dry-run
expect_error 2 "HPT_SEQUENCE_PARALLEL=1 needs HPT_TP > 1 \(it splits the norms and residual stream over the TP ranks\)" \
  env HPT_SEQUENCE_PARALLEL=1 HPT_TP=1 bash "$T" --dry-run
expect_error 2 "HPT_SEQUENCE_PARALLEL=1: a micro-batch of HPT_MICRO_BATCH=1 x HPT_SEQ_LEN=255 = 255 tokens does not split into HPT_TP=2 equal parts" \
  env HPT_SEQUENCE_PARALLEL=1 HPT_SEQ_LEN=255 bash "$T" --dry-run
# a layout whose memory plan does not fit: the dry run prints the plan, then
# fails (so `--dry-run && sbatch` submits nothing that would run out of memory)
[ -x "$HPT_BUILD/src/hpt-plan" ] || fail "hpt-plan not built in $HPT_BUILD/src"
# more model chunks than layers: refused by the dry run's plan (small: 8 layers)
expect_error 2 "hpt-plan: \-\-pp 2 x \-\-pp-virtual 8 = 16 model chunks: more than the model's 8 layers" \
  env HPT_PP_SCHEDULE=interleaved HPT_PP_VIRTUAL=8 bash "$T" --dry-run
expect_error 2 "the plan says this layout does not fit in h100-80gb's device memory \(line 'worst:' above\)" \
  env HPT_RECOMPUTE=0 HPT_ZERO1=0 HPT_MICRO_BATCH=4 bash "$HPT_SRC/jobs/train_70b.sh" --dry-run
grep -q "^worst: stage 0, .*: DOES NOT FIT$" "$WORK/out.$$" || fail "the misfit dry run did not print the plan"
# ... also when the misfit comes from the job's own hpt-train options (GPipe
# keeps every micro-batch's activations), which the plan is given (the
# template's interleaved schedule set back to 1F1B, so that it sets no V)
expect_error 2 "the plan says this layout does not fit in h100-80gb's device memory" \
  env HPT_PP_SCHEDULE=1f1b HPT_TRAIN_ARGS="--pp-schedule gpipe" bash "$HPT_SRC/jobs/train_70b.sh" --dry-run
grep -q "hpt-plan .* --pp-schedule gpipe$" "$WORK/out.$$" || fail "the plan was not given --pp-schedule gpipe"
# --recompute's optional value written as the next word reaches the plan too
# (was: dropped, so "--recompute none" was planned as full recomputation)
expect_error 2 "the plan says this layout does not fit in h100-80gb's device memory" \
  env HPT_TRAIN_ARGS="--recompute none" bash "$HPT_SRC/jobs/train_70b.sh" --dry-run
grep -q "hpt-plan .* --recompute selective --sequence-parallel --zero 1 --pp-schedule interleaved --pp-virtual 2 --async-save --precision tf32 --recompute none$" "$WORK/out.$$" ||
  fail "the plan was not given --recompute none"
expect_error 2 "unknown argument '--fast'" bash "$T" --fast
expect_error 2 "not inside a Slurm job: submit with sbatch" bash "$T"
expect_error 2 "cluster.sh: --nodes '0': expected a positive integer" \
  bash "$HPT_SRC/slurm/cluster.sh" start "$WORK/c" --nodes 0
expect_error 2 "cluster.sh: --nodes: missing value \(expected --nodes N\)$" \
  bash "$HPT_SRC/slurm/cluster.sh" start "$WORK/c" --nodes
expect_error 2 "cluster.sh: unknown option '--gpus'" bash "$HPT_SRC/slurm/cluster.sh" start "$WORK/c" --gpus 8
# a slurmd that fails to start: the daemons already started are stopped
mkdir -p "$WORK/fake"
printf '#!/bin/sh\necho "fake slurmd: cannot start" >&2\nexit 1\n' > "$WORK/fake/slurmd"
chmod +x "$WORK/fake/slurmd"
expect_error 1 "cluster.sh: slurmd n1 did not start; stopped the daemons it had started" \
  env PATH="$WORK/fake:$PATH" bash "$HPT_SRC/slurm/cluster.sh" start "$WORK/cf" --nodes 1
# (alive = a command line; a daemon killed here may stay a zombie: this
# machine's init does not reap them)
alive() { [ -n "$(tr -d '\0' < "/proc/$1/cmdline" 2>/dev/null)" ]; }
for p in $(pgrep -f "$WORK/cf/" || true); do
  ! alive "$p" || fail "daemon left running: $(tr '\0' ' ' < /proc/$p/cmdline)"
done
expect_error 1 "no cluster running in $WORK/cf" bash "$HPT_SRC/slurm/cluster.sh" status "$WORK/cf"
# a stale pid file naming an unrelated process: stop leaves it alone
mkdir -p "$WORK/cs/run"
sleep 300 & spid=$!
echo $spid > "$WORK/cs/run/munged.pid"
bash "$HPT_SRC/slurm/cluster.sh" stop "$WORK/cs" > /dev/null || fail "stop with a stale pid file"
kill -0 $spid 2>/dev/null || fail "cluster.sh stop killed an unrelated process named by a stale pid file"
kill $spid
# a cluster whose slurmctld and slurmd died (kill -9): start again works and
# stops the old munged; stop then leaves no daemon of the directory
bash "$HPT_SRC/slurm/cluster.sh" start "$WORK/cr" --nodes 1 > /dev/null || fail "start cr"
pkill -9 -f "slurmctld.*$WORK/cr/" || true
pkill -9 -f "slurmd.*$WORK/cr/" || true
sleep 1
bash "$HPT_SRC/slurm/cluster.sh" start "$WORK/cr" --nodes 1 > /dev/null || fail "start after a crash"
bash "$HPT_SRC/slurm/cluster.sh" stop "$WORK/cr" > /dev/null || fail "stop cr"
sleep 0.5
for p in $(pgrep -f "$WORK/cr/" || true); do
  ! alive "$p" || fail "daemon left running: $(tr '\0' ' ' < /proc/$p/cmdline)"
done
# a first run must not resume another job's checkpoints from a default run
# directory whose job id came round again (checked before any srun)
mkdir -p "$WORK/root/runs/hpt-tiny-7/checkpoints/step_00000003"
ln -s "$HPT_SRC/slurm" "$WORK/root/slurm"
# an empty step directory (left by an interrupted prune of an earlier
# version) is not a checkpoint: the launcher goes past the check (and then
# fails later for this fake job's missing allocation, which is not asserted)
st=0; env SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=2 SLURM_JOB_NAME=hpt-tiny HPT_ROOT="$WORK/root" \
  bash "$T" > "$WORK/empty.out" 2>&1 || st=$?
if grep -q "already holds another run" "$WORK/empty.out"; then
  cat "$WORK/empty.out"; fail "an empty step_00000003/ counted as another run's checkpoint"
fi
: > "$WORK/root/runs/hpt-tiny-7/checkpoints/step_00000003/checkpoint.h5"
expect_error 2 "run directory $WORK/root/runs/hpt-tiny-7 already holds another run \(job id 7 reused\?\)" \
  env SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=2 SLURM_JOB_NAME=hpt-tiny HPT_ROOT="$WORK/root" bash "$T"
# missing token shards: refused once by the launcher, before the probe and
# srun (was: on every rank, after the allocation's set-up)
expect_error 2 "HPT_DATA='$WORK/nodata': no such file or directory \(token shards" \
  env SLURM_JOB_ID=9 SLURM_JOB_NUM_NODES=2 SLURM_JOB_NAME=hpt-tiny HPT_RUN_DIR="$WORK/r9" \
  HPT_DATA="$WORK/nodata" bash "$T"
pass "launcher and cluster script refuse bad inputs"
