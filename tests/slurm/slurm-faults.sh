#!/bin/sh
# Faults on a local Slurm cluster of 6 emulated nodes:
#   K  one rank of the training step is killed (SIGKILL): srun
#      --kill-on-bad-exit ends the whole step (no hang), the launcher requeues
#      the job, which resumes from its last checkpoint and completes;
#   F  an array task whose "trainer" fails at every start: requeued until
#      HPT_MAX_STALLED_RESTARTS=2 restarts made no checkpoint progress, then
#      not requeued again (the job fails with the trainer's status);
#   C  scancel mid-run: hpt-train checkpoints on the SIGTERM, but the job
#      is not requeued (that would undo the scancel).
. "$HPT_SRC/tests/helpers/lib.sh"
. "$HPT_SRC/tests/helpers/slurm-lib.sh"
need_slurm
need_corpus
STEPS=${HPT_TEST_STEPS:-100}
start_cluster --nodes 6 --cpus 2
dp_only_job 2 10
S="--nodes=2 --exclusive"
k=$(HPT_RUN_DIR="$WORK/K" submit $S -o "$WORK/K.out" "$JOBS/train_tiny.sh")
printf '#!/bin/sh\necho "fake trainer: failing at start"\nexit 1\n' > "$WORK/fail.sh"
chmod +x "$WORK/fail.sh"
f=$(HPT_RUN_DIR="$WORK/F" HPT_TRAIN="$WORK/fail.sh" HPT_MAX_STALLED_RESTARTS=2 \
    submit $S --array=3 -o "$WORK/F.out" "$JOBS/train_tiny.sh")
c=$(HPT_RUN_DIR="$WORK/C" HPT_STEPS=100000 submit $S -o "$WORK/C.out" "$JOBS/train_tiny.sh")

wait_rows "$WORK/C/log.tsv" 3 180
scancel "$c" || fail "scancel $c"
wait_rows "$WORK/K/log.tsv" 25 180
victim=$(pgrep -f -- "--run-dir $WORK/K --resume" | head -1)
[ -n "$victim" ] || fail "no rank of K found"
kill -9 "$victim"
i=0
until grep -q "^launch: step ended" "$WORK/K.out"; do
  sleep 0.2; i=$((i + 1))
  [ $i -lt 300 ] || fail "K: the step did not end within 60 s of a rank being killed (hang)"
done
echo "K: the step ended $((i / 5)) s after rank pid $victim was killed"
wait_job "$k" 180
wait_job "$f" 180
wait_job "$c" 60
echo "== C"; cat "$WORK/C.out"
[ "$(job_end $c | cut -d' ' -f1)" = CANCELLED ] || fail "C: $(job_end $c), expected CANCELLED"
# The launcher says so when it outlives the step (KillWait is 5 s here;
# under load SIGKILL may end the batch shell first): either way, no restart.
grep -q "requeueing job $c " "$WORK/C.out" && fail "C: a cancelled job asked for a requeue"
! grep -q "restart 1 " "$WORK/C.out" || fail "C: a cancelled job was requeued"
echo "== K"; cat "$WORK/K.out"; echo "== F"; cat "$WORK/F.out"; cat "$WORK/F/requeue.state"
[ "$(job_end $k)" = "COMPLETED 0:0" ] || fail "K: $(job_end $k)"
grep -q "^launch: requeueing job $k " "$WORK/K.out" || fail "K: not requeued after the killed rank"
grep -q "^launch: job $k restart 1 " "$WORK/K.out" || fail "K: no restart 1"
grep -q "resumed from .*step_000000[1-9]0" "$WORK/K.out" || fail "K: did not resume from a checkpoint"
[ "$(tail -1 "$WORK/K/log.tsv" | cut -f1)" = "$STEPS" ] || fail "K: did not reach step $STEPS"

# both fake tasks exit 1 at once; srun --kill-on-bad-exit may SIGTERM the
# second before it exits, and then reports 143: either is the failed step
case "$(job_end $f)" in "FAILED 1:0"|"FAILED 143:0") ;; *) fail "F: $(job_end $f), expected FAILED 1:0 (or 143:0)" ;; esac
grep -q "^launch: job ${f}_3 restart 2 " "$WORK/F.out" || fail "F: array task not restarted twice"
! grep -q "restart 3 " "$WORK/F.out" || fail "F: restarted more than twice"
[ "$(grep -c '^launch: requeueing job '"${f}_3"' ' "$WORK/F.out")" = 2 ] || fail "F: expected 2 requeues of ${f}_3"
grep -q "^launch: 3 runs in a row ended without a newer checkpoint (limit HPT_MAX_STALLED_RESTARTS=2 restarts): not requeueing" \
  "$WORK/F.out" || fail "F: no message about the restart limit"
grep -q "^stalled 3$" "$WORK/F/requeue.state" || fail "F: requeue.state does not count 3 stalled runs"
pass "killed rank: step ended, requeued, resumed, completed; failing trainer: requeued twice, then stopped; scancel: not requeued"
