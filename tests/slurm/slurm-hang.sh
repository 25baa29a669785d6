#!/bin/sh
# Hang watchdog on a local Slurm cluster of 5 emulated nodes:
#   H  world rank 1 of a 2-node job stalls at step 4 (first run only):
#      every rank ends with exit 6 (--collective-timeout 5), the launcher
#      adds rank 1's node to the job's ExcNodeList and requeues; the job
#      resumes from its checkpoint on other nodes and completes; the new run
#      records a `hang` event naming rank 1 and keeps the dumps in hang.1;
#   A  a 1-node job whose rank 1 stalls at every start: requeued once
#      without its node, then stopped by HPT_MAX_STALLED_RESTARTS=1 (a hang
#      counts as a stalled restart).
. "$HPT_SRC/tests/helpers/lib.sh"
. "$HPT_SRC/tests/helpers/slurm-lib.sh"
need_slurm
need_corpus
STEPS=8
start_cluster --nodes 5 --cpus 2
dp_only_job 2 2
cat > "$WORK/stall-once.sh" <<EOS
#!/bin/sh
# the first run stalls world rank 1 before step 4; a requeued run does not
[ "\${SLURM_RESTART_COUNT:-0}" = 0 ] &&
  exec "$HPT_BUILD/src/hpt-train" "\$@" --collective-timeout 5 --fault-stall-rank 1 --fault-stall-step 4
exec "$HPT_BUILD/src/hpt-train" "\$@"
EOS
cat > "$WORK/stall-always.sh" <<EOS
#!/bin/sh
exec "$HPT_BUILD/src/hpt-train" "\$@" --collective-timeout 5 --fault-stall-rank 1 --fault-stall-step 2
EOS
chmod +x "$WORK/stall-once.sh" "$WORK/stall-always.sh"
h=$(HPT_RUN_DIR="$WORK/H" HPT_TRAIN="$WORK/stall-once.sh" \
    submit --nodes=2 --exclusive -o "$WORK/H.out" "$JOBS/train_tiny.sh")
a=$(HPT_RUN_DIR="$WORK/A" HPT_TRAIN="$WORK/stall-always.sh" HPT_MAX_STALLED_RESTARTS=1 \
    HPT_TASKS_PER_NODE=2 submit --nodes=1 --exclusive -o "$WORK/A.out" "$JOBS/train_tiny.sh")
wait_job "$h" 300
wait_job "$a" 300
echo "== H"; cat "$WORK/H.out"; echo "== A"; cat "$WORK/A.out"

# H: hang, requeue without the node, resume elsewhere, complete
grep -q "^launch: step ended with exit 6;" "$WORK/H.out" || fail "H: the first step did not end with exit 6"
bad=$(sed -n 's/^launch: the requeued job excludes the suspect node(s) \([^:]*\): ExcNodeList=.*/\1/p' "$WORK/H.out" | head -1)
[ -n "$bad" ] || fail "H: the launcher did not exclude a suspect node"
grep -q "^launch: excluded node(s) $bad from job $h\$" "$WORK/H.out" || fail "H: ExcNodeList not updated"
# 5 nodes, 1 excluded, 2 needed: no warning that the job cannot fit
! grep -q "^launch: warning: partition .* node(s) besides" "$WORK/H.out" || fail "H: a warning that the job cannot fit, though 4 nodes are left"
grep -q "^launch: hang (exit 6): hang: .*suspect: rank 1 on $bad " "$WORK/H.out" ||
  fail "H: the job log does not name rank 1 on $bad"
nodes1=$(sed -n "s/^launch: job $h restart 1 on \([^ ;]*\);.*/\1/p" "$WORK/H.out")
[ -n "$nodes1" ] || fail "H: no restart 1"
scontrol show hostnames "$nodes1" | grep -qx "$bad" && fail "H: restart 1 ran on the excluded node $bad ($nodes1)"
scontrol show job "$h" | grep -q "ExcNodeList=$bad" || fail "H: ExcNodeList does not hold $bad"
grep -q "resumed from .*step_0000000[2-9]" "$WORK/H.out" || fail "H: did not resume from a checkpoint"
[ "$(job_end $h)" = "COMPLETED 0:0" ] || fail "H: $(job_end $h)"
[ "$(tail -1 "$WORK/H/log.tsv" | cut -f1)" = "$STEPS" ] || fail "H: did not reach step $STEPS"
[ -s "$WORK/H/hang.1/summary.txt" ] || fail "H: the hang's dumps were not kept in hang.1"
"$HPT_BUILD/src/hpt-metrics" summary "$WORK/H/metrics.h5" > "$WORK/sum" 2>&1
grep -q "hang: the previous run hung: hang: .*suspect: rank 1 on $bad" "$WORK/sum" ||
  { cat "$WORK/sum"; fail "H: no hang event naming rank 1 in metrics.h5"; }

# A: hangs at every start: one requeue (without its node), then stopped
[ "$(grep -c "^launch: step ended with exit 6;" "$WORK/A.out")" = 2 ] || fail "A: expected 2 runs ending with exit 6"
[ "$(grep -c "^launch: requeueing job $a " "$WORK/A.out")" = 1 ] || fail "A: expected exactly 1 requeue"
# its node n was excluded after the first hang: the second run is elsewhere
a0=$(sed -n "s/^launch: job $a restart 0 on \([^ ;]*\);.*/\1/p" "$WORK/A.out")
a1=$(sed -n "s/^launch: job $a restart 1 on \([^ ;]*\);.*/\1/p" "$WORK/A.out")
[ -n "$a0" ] && [ -n "$a1" ] && [ "$a0" != "$a1" ] || fail "A: restart 1 ran on $a1, the node of the first hang was $a0"
grep -q "^launch: 2 runs in a row ended without a newer checkpoint (limit HPT_MAX_STALLED_RESTARTS=1 restarts): not requeueing" \
  "$WORK/A.out" || fail "A: not stopped by the stalled-restart limit"
[ "$(job_end $a)" = "FAILED 6:0" ] || fail "A: $(job_end $a), expected FAILED 6:0"
pass "stalled rank: exit 6, requeued without node $bad, resumed on $nodes1, completed; a job that hangs at every start stopped after the limit"
