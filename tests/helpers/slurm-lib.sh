# tests/helpers/slurm-lib.sh — helpers for the tests that run jobs on a local Slurm
# cluster (sourced after tests/helpers/lib.sh). Each test starts its own cluster
# (slurm/cluster.sh: own temp dir, own free ports) and stops it on exit.
CLUSTER="$WORK/cluster"
JOBS="$HPT_SRC/jobs"

# need_slurm: skip (77) when the Slurm packages are missing.
need_slurm() {
  for p in slurmctld slurmd munged sbatch; do
    command -v $p > /dev/null || { echo "SKIP: $p not installed (bash setup.sh)"; exit 77; }
  done
}

# start_cluster ARGS...: slurm/cluster.sh start with ARGS; stopped on exit.
start_cluster() {
  trap 'st=$?; [ $st = 0 ] || [ $st = 77 ] || dump_cluster
        bash "$HPT_SRC/slurm/cluster.sh" stop "$CLUSTER" > /dev/null 2>&1; rm -rf "$WORK"' EXIT
  bash "$HPT_SRC/slurm/cluster.sh" start "$CLUSTER" "$@" || fail "local cluster did not start"
  export SLURM_CONF="$CLUSTER/slurm.conf"
  # The launcher finds the build through HPT_BUILD; the job runs the tiny
  # model on the test corpus unless a test says otherwise.
  export HPT_ROOT="$HPT_SRC" HPT_BUILD HPT_DATA="$CORPUS" OMP_NUM_THREADS=1
}

# dp_only_job MICRO_BATCH SAVE_EVERY: the job environment of the tests that
# run train_tiny as pure data parallelism, one task per node: the tiny
# model, 32 tokens, global batch 4, $STEPS steps, no evaluation.
dp_only_job() {
  export HPT_MODEL=tiny HPT_SEQ_LEN=32 HPT_MICRO_BATCH=$1 HPT_GLOBAL_BATCH=4 HPT_STEPS=$STEPS \
    HPT_TASKS_PER_NODE=1 HPT_TP=1 HPT_PP=1 HPT_ZERO1=0 HPT_EVAL_INTERVAL=0 HPT_EVAL_BATCHES=1 \
    HPT_SAVE_EVERY=$2
}

# dump_cluster: on failure, what the jobs and daemons said.
dump_cluster() {
  echo "== squeue"; squeue 2>&1
  for f in "$WORK"/*.out; do [ -f "$f" ] && { echo "== $f"; tail -40 "$f"; }; done
  echo "== slurmctld.log"; tail -30 "$CLUSTER/log/slurmctld.log" 2>/dev/null
}

# submit ARGS...: sbatch --parsable ARGS; prints the job id.
submit() { sbatch --parsable "$@" || fail "sbatch $* failed"; }

# wait_job ID SECONDS: until the job has left the queue (done, failed,
# cancelled; a requeued job is still in it).
wait_job() {
  local i=0
  while [ -n "$(squeue -h -j "$1" -o %i 2>/dev/null)" ]; do
    sleep 0.5; i=$((i + 1))
    [ $i -lt $(($2 * 2)) ] || { scontrol show job "$1"; fail "job $1 still queued after $2 s"; }
  done
}

# job_end ID: "STATE EXITCODE" of the job's last completion record.
job_end() {
  grep "^JobId=$1 " "$CLUSTER/log/jobcomp.txt" | tail -1 |
    sed 's/.*JobState=\([A-Z_]*\).* ExitCode=\([0-9:]*\).*/\1 \2/'
}

# wait_rows FILE N SECONDS: until FILE (a log.tsv) has N step rows.
wait_rows() {
  local i=0
  while [ "$( (tail -n +2 "$1" | wc -l) 2>/dev/null || echo 0)" -lt "$2" ]; do
    sleep 0.1; i=$((i + 1))
    [ $i -lt $(($3 * 10)) ] || fail "$1: fewer than $2 steps after $3 s"
  done
}
