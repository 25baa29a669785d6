#!/bin/sh
# Elastic restart on a local Slurm cluster of 3 emulated nodes: E, submitted
# with jobs/train_tiny.sh (tiny model, 1 task per node) and --nodes=1-2, starts
# on n1 and n2 (DP 2, grad-accum 2), gets the warning signal mid-run while n2
# is drained, requeues itself and restarts on 1 node: DP 1, grad-accum 4 (the
# same global batch), the checkpoint re-sharded. R runs uninterrupted with the
# same DP 2 layout (2 tasks on n3). Every step's loss of E must be within 1e-5
# (relative) of R's.
. "$HPT_SRC/tests/helpers/lib.sh"
. "$HPT_SRC/tests/helpers/slurm-lib.sh"
need_slurm
need_corpus
STEPS=${HPT_TEST_STEPS:-100}
start_cluster --nodes 3 --cpus 2
dp_only_job 1 0
e=$(HPT_RUN_DIR="$WORK/E" submit --nodes=1-2 --exclusive -x n3 -o "$WORK/E.out" "$JOBS/train_tiny.sh")
r=$(HPT_RUN_DIR="$WORK/R" HPT_TASKS_PER_NODE=2 submit --nodes=1 --exclusive -w n3 -o "$WORK/R.out" "$JOBS/train_tiny.sh")
wait_rows "$WORK/E/log.tsv" 3 180
scontrol update nodename=n2 state=drain reason=elastic-test || fail "cannot drain n2"
scancel --signal=USR1 --batch "$e" || fail "scancel --signal=USR1 --batch $e"
wait_job "$r" 120
wait_job "$e" 120
cat "$WORK/E.out"
[ "$(job_end $r)" = "COMPLETED 0:0" ] || fail "R: $(job_end $r)"
[ "$(job_end $e)" = "COMPLETED 0:0" ] || fail "E: $(job_end $e)"
grep -q "^launch: 2 nodes x 1 task = 2 ranks = TP 1 x PP 1 x DP 2" "$WORK/E.out" || fail "E did not start on 2 nodes"
grep -q "micro-batch 1 x grad-accum 2 x DP 2" "$WORK/E.out" || fail "E: wrong batch split on 2 nodes"
grep -q "^launch: step ended with exit 75" "$WORK/E.out" || fail "E: no checkpoint + exit 75"
grep -q "^launch: job [0-9]* restart 1 " "$WORK/E.out" || fail "E: no restart with SLURM_RESTART_COUNT=1"
grep -q "^launch: 1 node x 1 task = 1 rank = TP 1 x PP 1 x DP 1" "$WORK/E.out" || fail "E did not restart on 1 node"
grep -q "micro-batch 1 x grad-accum 4 x DP 1" "$WORK/E.out" || fail "E: global batch not kept on 1 node"
grep -q "resumed from .*written by TP 1 x PP 1 x DP 2" "$WORK/E.out" || fail "E: did not re-shard the DP 2 checkpoint"
"$PYTHON" - "$WORK" "$STEPS" <<'PY' || fail "elastic run differs from the uninterrupted one"
import sys
w, steps = sys.argv[1], int(sys.argv[2])
def rows(n):
    return [l.split("\t") for l in open(f"{w}/{n}/log.tsv").read().split("\n")[1:] if l]
ref, got = rows("R"), rows("E")
assert len(ref) == len(got) == steps, (len(ref), len(got))
for a, b in zip(got, ref):
    x, y = float(a[1]), float(b[1])
    assert abs(x - y) <= 1e-5 * abs(y), ("step", a[0], x, y)
print("final loss", got[-1][1], "vs", ref[-1][1])
PY
# 3 nodes granted, but DP 3 does not divide the global batch of 4: the
# launcher rounds down to 2 nodes (DP 2) and says so
scontrol update nodename=n2 state=resume || fail "cannot resume n2"
g=$(HPT_RUN_DIR="$WORK/G" HPT_STEPS=2 submit --nodes=3 --exclusive -o "$WORK/G.out" "$JOBS/train_tiny.sh")
wait_job "$g" 120
cat "$WORK/G.out"
[ "$(job_end $g)" = "COMPLETED 0:0" ] || fail "G: $(job_end $g)"
grep -q "^launch: the layout does not fit 3 nodes (TP 1 x PP 1, global batch 4): using 2 of them" "$WORK/G.out" ||
  fail "G: no rounding down to 2 nodes"
grep -q "^launch: 2 nodes x 1 task = 2 ranks = TP 1 x PP 1 x DP 2" "$WORK/G.out" || fail "G: not on 2 nodes"
pass "elastic: 2 nodes -> requeue -> 1 node, re-sharded, global batch kept, losses within 1e-5; 3 granted nodes rounded down to 2"
