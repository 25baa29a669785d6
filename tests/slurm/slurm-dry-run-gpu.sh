#!/bin/sh
# The launcher's GPU binding (issue 16), in --dry-run, for 1, 2 and 16 nodes
# of the GPU templates: every rank's GPU (node-local rank mod the node's
# GPUs), the --comm / --precision passed on; more tasks than GPUs on a node
# falls back from NCCL (auto) to MPI with host staging, and an explicit
# HPT_COMM=nccl is refused (NCCL needs one GPU per rank); bad HPT_COMM /
# HPT_PRECISION values are refused.
. "$HPT_SRC/tests/helpers/lib.sh"
unset SLURM_JOB_ID SLURM_JOB_NUM_NODES SLURM_JOB_NODELIST SLURM_NTASKS_PER_NODE
export HPT_BUILD
for n in 1 2 16; do
  HPT_NODES=$n HPT_PP=1 HPT_TP=8 bash "$HPT_SRC/jobs/train_8b.sh" --dry-run > "$WORK/n$n" 2>&1 ||
    fail "8B dry run on $n nodes: $(cat "$WORK/n$n")"
  grep -q "^== GPUs: --backend cuda --comm auto --precision tf32; rank -> GPU (node-local rank mod 8 GPUs per node) ==" "$WORK/n$n" ||
    fail "$n nodes: no GPU header: $(cat "$WORK/n$n")"
  # by default the first and the last node (all alike); --verbose: every node
  want=$((n < 2 ? n : 2))
  [ "$(grep -c ' -> GPUs 0-7, one per rank$' "$WORK/n$n")" -eq "$want" ] ||
    fail "$n nodes: want $want node lines with one GPU per rank: $(grep -- '->' "$WORK/n$n")"
  [ $n -le 2 ] || grep -q "^  \.\.\. ($((n - 2)) more nodes alike; --verbose or HPT_DRY_RUN_VERBOSE=1 lists every node)$" "$WORK/n$n" ||
    fail "$n nodes: no line for the $((n - 2)) nodes left out: $(grep -A1 -- '->' "$WORK/n$n" | head -3)"
  last=$((n * 8 - 8))
  grep -q "^  node$((n - 1)): ranks $last-$((last + 7)) -> GPUs 0-7, one per rank$" "$WORK/n$n" ||
    fail "$n nodes: last node's line wrong: $(grep -- '->' "$WORK/n$n" | tail -1)"
done
HPT_NODES=16 HPT_PP=1 HPT_TP=8 bash "$HPT_SRC/jobs/train_8b.sh" --dry-run --verbose > "$WORK/v16" 2>&1 ||
  fail "8B dry run on 16 nodes, --verbose: $(cat "$WORK/v16")"
[ "$(grep -c ' -> GPUs 0-7, one per rank$' "$WORK/v16")" -eq 16 ] ||
  fail "16 nodes, --verbose: want 16 node lines: $(grep -- '->' "$WORK/v16")"
HPT_NODES=1 HPT_TASKS_PER_NODE=16 HPT_PP=1 HPT_TP=8 bash "$HPT_SRC/jobs/train_8b.sh" --dry-run > "$WORK/shared" 2>&1 ||
  fail "16 tasks on 8 GPUs: $(cat "$WORK/shared")"
grep -q -- "--comm mpi --precision tf32" "$WORK/shared" && grep -q "ranks 0-15 -> GPUs 0-7, 2 ranks per GPU (shared: MPI with host staging)" "$WORK/shared" ||
  fail "shared GPUs: no fallback to MPI: $(grep -- 'GPU' "$WORK/shared")"
expect_error 2 "HPT_COMM=nccl: 16 tasks per node share 8 GPUs, and NCCL needs a distinct GPU per rank" \
  env HPT_COMM=nccl HPT_NODES=1 HPT_TASKS_PER_NODE=16 HPT_PP=1 HPT_TP=8 bash "$HPT_SRC/jobs/train_8b.sh" --dry-run
expect_error 2 "HPT_COMM='gloo': expected auto, mpi or nccl" \
  env HPT_COMM=gloo bash "$HPT_SRC/jobs/train_8b.sh" --dry-run
expect_error 2 "HPT_PRECISION='fp16': expected fp32, tf32 or bf16" \
  env HPT_PRECISION=fp16 bash "$HPT_SRC/jobs/train_8b.sh" --dry-run
# hpt-plan's communication model follows the job's --comm: NCCL's ring/tree
# model for nccl/auto on one GPU per rank, MPI's for HPT_COMM=mpi
grep -q "^communication per step (worst rank; nccl, all-reduce ring or tree (auto))" "$WORK/n2" ||
  fail "2 nodes, comm auto: the plan is not NCCL's: $(grep -A1 '^communication per step' "$WORK/n2")"
HPT_COMM=mpi HPT_NODES=2 HPT_PP=1 HPT_TP=8 bash "$HPT_SRC/jobs/train_8b.sh" --dry-run > "$WORK/mpi" 2>&1 ||
  fail "HPT_COMM=mpi dry run: $(cat "$WORK/mpi")"
grep -q -- "hpt-plan .* --comm mpi" "$WORK/mpi" && grep -q "^communication per step (worst rank; mpi, ring)" "$WORK/mpi" ||
  fail "HPT_COMM=mpi: the plan is not MPI's: $(grep -A1 '^communication per step' "$WORK/mpi")"
# the CPU template shows no GPU section
bash "$HPT_SRC/jobs/train_tiny.sh" --dry-run > "$WORK/tiny" 2>&1 || fail "tiny dry run: $(cat "$WORK/tiny")"
grep -q "== GPUs" "$WORK/tiny" && fail "the cpu template printed a GPU section"
# hpt-plan is given the job's precision: tf32 (fp32 storage at the tf32
# tensor-core peak), bf16 mixed
grep -q -- "hpt-plan .* --precision tf32" "$WORK/n2" && grep -q "^layout: .*; tf32[,]*" "$WORK/n2" &&
  grep -q "^cluster: .* 4.94e+05 GFLOP/s" "$WORK/n2" ||
  fail "tf32 job: hpt-plan not run with --precision tf32 at the tf32 peak: $(grep 'hpt-plan\|^cluster' "$WORK/n2")"
HPT_PRECISION=bf16 bash "$HPT_SRC/jobs/train_8b.sh" --dry-run > "$WORK/bf16" 2>&1 ||
  { cat "$WORK/bf16"; fail "HPT_PRECISION=bf16 dry run failed"; }
grep -q -- "hpt-plan .* --precision bf16" "$WORK/bf16" && grep -q "bf16 mixed precision" "$WORK/bf16" ||
  fail "bf16 job: hpt-plan not run with --precision bf16: $(grep 'hpt-plan\|precision' "$WORK/bf16")"
# a GPU job on the default cluster (cpu-local models the CPU backend): no
# plan, and the hint to name a GPU preset, not a precision error
HPT_BACKEND=cuda HPT_PRECISION=tf32 bash "$HPT_SRC/jobs/train_tiny.sh" --dry-run > "$WORK/cudalocal" 2>&1 ||
  fail "cuda job on cpu-local: dry run failed: $(cat "$WORK/cudalocal")"
grep -q "HPT_CLUSTER=cpu-local models hpt's CPU backend: no memory plan for a cuda job (set HPT_CLUSTER to a100-80gb, h100-80gb or h200-141gb)" "$WORK/cudalocal" ||
  fail "cuda job on cpu-local: no hint: $(tail -3 "$WORK/cudalocal")"
# a CPU job on a GPU preset: no plan (the preset models GPUs), the hint to
# plan cpu-local
HPT_BACKEND=cpu bash "$HPT_SRC/jobs/train_8b.sh" --dry-run > "$WORK/cpu8b" 2>&1 ||
  fail "cpu 8B dry run: $(cat "$WORK/cpu8b")"
grep -q "^HPT_CLUSTER=h100-80gb models GPUs: no memory plan for a cpu job (set HPT_CLUSTER=cpu-local" "$WORK/cpu8b" &&
  ! grep -q "hpt-plan " "$WORK/cpu8b" || fail "cpu job on h100-80gb: $(tail -3 "$WORK/cpu8b")"
# a CPU job is planned in fp32, what the CPU backend trains in, whatever
# HPT_PRECISION says
HPT_PRECISION=bf16 bash "$HPT_SRC/jobs/train_tiny.sh" --dry-run > "$WORK/cpubf16" 2>&1 ||
  fail "cpu tiny dry run with HPT_PRECISION=bf16: $(cat "$WORK/cpubf16")"
grep -q -- "hpt-plan .* --precision fp32" "$WORK/cpubf16" && grep -q "^layout: .*; fp32[,]*" "$WORK/cpubf16" ||
  fail "cpu job: hpt-plan not run with --precision fp32: $(grep 'hpt-plan\|^layout' "$WORK/cpubf16")"
# the job's own hpt-train options that change memory or time reach the
# plan (later ones winning, as in hpt-train); those it cannot model are named
HPT_TRAIN_ARGS="--lr 1e-4 --pp-schedule 1f1b" bash "$HPT_SRC/jobs/train_8b.sh" --dry-run -- \
  --recompute=selective --sequence-parallel --pp-split 16,16 > "$WORK/args" 2>&1 ||
  fail "8B dry run with hpt-train options: $(cat "$WORK/args")"
grep -q -- "hpt-plan .* --zero 1 --zero-shard-group 4 --async-save --precision tf32 --pp-schedule 1f1b --recompute=selective --sequence-parallel$" "$WORK/args" &&
  grep -q "^layout: .*, selective recomputation, sequence parallel, ZeRO-1, HSDP 4 shard groups of 4$" "$WORK/args" &&
  grep -q "^note: the plan models the HPT_\* layout, not these hpt-train options of the job: --pp-split$" "$WORK/args" ||
  fail "the job's hpt-train options did not reach the plan: $(grep 'hpt-plan\|^layout\|^note' "$WORK/args")"
pass "GPU binding in the dry run for 1, 2 and 16 nodes; shared GPUs fall back to MPI; bad HPT_COMM/HPT_PRECISION refused; the plan's comm model follows HPT_COMM and its precision HPT_PRECISION (fp32 for the CPU backend); no plan for a GPU job on cpu-local"
