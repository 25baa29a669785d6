#!/bin/sh
# sbatch jobs/train_tiny.sh on a local Slurm cluster of 2 emulated nodes x 4
# tasks: TP 2 x PP 2 x DP 2, the tiny model and a few steps (the
# template's run lengths overridden through the environment). The job must
# complete with a checkpoint and a metrics file recording its layout and job.
# Before it, the same job with a PMI mismatch (srun --mpi=none: every task
# is an MPI world of size 1) must be refused by the launcher's probe: exit 2,
# one message, the trainer never started.
. "$HPT_SRC/tests/helpers/lib.sh"
. "$HPT_SRC/tests/helpers/slurm-lib.sh"
need_slurm
need_corpus
STEPS=${HPT_TEST_STEPS:-2}
start_cluster --nodes 2 --cpus 4
# ZeRO-1 off: its checkpoint gathers the AdamW moments over DP first, and an
# 8-rank checkpoint on 2 oversubscribed cores is already most of this test
# (~1 min at load 5, several at load 20; checkpoints with ZeRO-1 are covered
# by tests/ckpt/ckpt-resume.sh).
export HPT_MODEL=tiny HPT_SEQ_LEN=32 HPT_GLOBAL_BATCH=4 HPT_STEPS=$STEPS HPT_SAVE_EVERY=$STEPS \
  HPT_EVAL_INTERVAL=0 HPT_EVAL_BATCHES=1 HPT_ZERO1=0
bad=$(HPT_RUN_DIR="$WORK/M" HPT_SRUN_MPI=none submit -o "$WORK/M.out" "$JOBS/train_tiny.sh")
job=$(HPT_RUN_DIR="$WORK/T" submit -o "$WORK/T.out" "$JOBS/train_tiny.sh")
wait_job "$bad" 60
cat "$WORK/M.out"
[ "$(job_end $bad)" = "FAILED 2:0" ] || fail "PMI mismatch: $(job_end $bad), expected FAILED 2:0"
[ "$(grep -c "PMI mismatch: srun started 8 tasks but MPI reports 'rank 0 size 1" "$WORK/M.out")" = 1 ] ||
  fail "PMI mismatch: no single message naming it"
[ ! -f "$WORK/M/log.tsv" ] || fail "PMI mismatch: the trainer ran"
grep -q "requeueing" "$WORK/M.out" && fail "PMI mismatch: the job was requeued"

wait_job "$job" "${HPT_TEST_TIMEOUT:-900}"
cat "$WORK/T.out"
[ "$(job_end $job)" = "COMPLETED 0:0" ] || fail "train_tiny: $(job_end $job)"
grep -q "^launch: 2 nodes x 4 tasks = 8 ranks = TP 2 x PP 2 x DP 2" "$WORK/T.out" || fail "wrong layout"
grep -q "^hpt-train: layout TP 2 x PP 2 x DP 2 on 8 ranks" "$WORK/T.out" || fail "the trainer did not run at (2,2,2)"
grep -q "^launch: probe: MPI sees 8 ranks; every TP group is on one node" "$WORK/T.out" || fail "no probe"
[ -f "$WORK/T/checkpoints/step_$(printf %08d "$STEPS")/checkpoint.h5" ] || fail "no checkpoint at step $STEPS"
[ "$(tail -n +2 "$WORK/T/log.tsv" | wc -l)" = "$STEPS" ] || fail "log.tsv does not have $STEPS steps"
# the metrics file records the layout and the Slurm job of its segment
"$PYTHON" - "$WORK/T/metrics.h5" "$STEPS" "$job" <<'PY' || fail "metrics file"
import sys, h5py
f = h5py.File(sys.argv[1], "r", libver="latest", swmr=True)
seg = f["segments"][:]
assert len(seg) == 1, seg
s = seg[0]
assert (s["world"], s["tp"], s["pp"], s["dp"]) == (8, 2, 2, 2), s
assert s["slurm_job_id"].decode() == sys.argv[3], s
assert list(f["steps/step"][:]) == list(range(1, int(sys.argv[2]) + 1))
assert f["ranks/busy"].shape == (int(sys.argv[2]), 8)
print("metrics.h5: segment 0 = TP 2 x PP 2 x DP 2 on 8 ranks, job", sys.argv[3])
PY
pass "train_tiny on 2 nodes x 4 tasks (TP 2 x PP 2 x DP 2) completed with a checkpoint and metrics; PMI mismatch refused"
