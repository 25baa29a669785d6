#!/bin/sh
# Preemption on a local Slurm cluster (6 emulated nodes), jobs/train_tiny.sh
# with the tiny model, 2 nodes x 1 task (DP 2):
#   R  runs uninterrupted;
#   U  gets the warning signal mid-run (scancel --signal=USR1 --batch): the
#      launcher forwards it, hpt-train checkpoints and exits 75, the job
#      requeues itself and resumes (SLURM_RESTART_COUNT=1);
#   P  is preempted by a job in the higher-priority partition: same path,
#      started by slurmctld (preempt_send_user_signal).
# U and P must end with log.tsv bitwise identical to R's (same layout).
. "$HPT_SRC/tests/helpers/lib.sh"
. "$HPT_SRC/tests/helpers/slurm-lib.sh"
need_slurm
need_corpus
STEPS=${HPT_TEST_STEPS:-150}
start_cluster --nodes 6 --cpus 2
dp_only_job 2 0
S="--nodes=2 --exclusive"
r=$(HPT_RUN_DIR="$WORK/R" submit $S -o "$WORK/R.out" "$JOBS/train_tiny.sh")
u=$(HPT_RUN_DIR="$WORK/U" submit $S -o "$WORK/U.out" "$JOBS/train_tiny.sh")
p=$(HPT_RUN_DIR="$WORK/P" submit $S -o "$WORK/P.out" "$JOBS/train_tiny.sh")

wait_rows "$WORK/U/log.tsv" 3 120
scancel --signal=USR1 --batch "$u" || fail "scancel --signal=USR1 --batch $u"
wait_rows "$WORK/P/log.tsv" 3 120
nodes=$(squeue -h -j "$p" -o %N)
h=$(submit -p high --nodes=2 -w "$nodes" --exclusive -o "$WORK/H.out" --wrap "sleep 2")
for j in $r $u $p $h; do wait_job $j 240; done

for j in R U P; do echo "== $j"; cat "$WORK/$j.out"; done
[ "$(job_end $r)" = "COMPLETED 0:0" ] || fail "R: $(job_end $r)"
[ "$(job_end $h)" = "COMPLETED 0:0" ] || fail "high-priority job: $(job_end $h)"
for j in U P; do
  out="$WORK/$j.out"
  [ "$(job_end $(eval echo \$$(echo $j | tr UP up)))" = "COMPLETED 0:0" ] || fail "$j did not complete"
  # P is never signalled by the test: its USR1 comes from the preemption.
  grep -q "got SIGUSR1: forwarding" "$out" || fail "$j: the batch shell did not get USR1"
  grep -q "^launch: step ended with exit 75" "$out" || fail "$j: hpt-train did not exit 75"
  grep -q "^launch: requeueing job" "$out" || fail "$j: no requeue"
  grep -q "^launch: job [0-9]* restart 1 " "$out" || fail "$j: no restart with SLURM_RESTART_COUNT=1"
  grep -q "resumed from .*step_" "$out" || fail "$j: did not resume from its checkpoint"
  [ "$(tail -n +2 "$WORK/$j/log.tsv" | wc -l)" = "$STEPS" ] || fail "$j: log.tsv does not have $STEPS steps"
  cmp "$WORK/R/log.tsv" "$WORK/$j/log.tsv" || fail "$j: log.tsv differs from the uninterrupted run"
done
pass "USR1 and partition preemption: checkpoint, requeue, resume at restart 1, bitwise identical to the uninterrupted run"
