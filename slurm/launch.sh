#!/usr/bin/env bash
# slurm/launch.sh — the one launcher behind every sbatch template in jobs/.
#
#   exec bash "$HPT_ROOT/slurm/launch.sh" "$0" [--dry-run [--verbose]] [-- HPT-TRAIN-ARGS...]
#
# The template ($0, first argument) only sets HPT_* variables; everything else
# happens here, in the batch shell of the job:
#   1. layout: nodes granted (SLURM_JOB_NUM_NODES) x tasks per node = world;
#      TP must divide the tasks per node (TP groups never cross a node), DP =
#      world / (TP x PP) follows the nodes granted (elastic --nodes=MIN-MAX),
#      grad-accum = global batch / (micro-batch x DP), so the global batch is
#      the same on any node count and hpt-train's resume re-shards;
#   2. a probe step (hpt-mpi-probe) checks that MPI sees the whole allocation
#      (a PMI mismatch gives every task a world of size 1) and that each TP
#      group landed on one node;
#      GPU jobs: hpt-train's own set-up then checks, before NCCL starts, that
#      no two ranks share a GPU (all ranks' host + PCI bus id; --comm nccl
#      stops with exit 2 naming them, auto falls back to MPI) and agrees on
#      every group's ncclCommInitRank (docs/SLURM.md, "GPU checks");
#   3. the training step: srun --mpi=pmi2 --kill-on-bad-exit=1 hpt-train ...,
#      in the background, so the warning signal (HPT_SIGNAL, --signal=B:USR1@T)
#      and SIGTERM reach this shell's trap and are forwarded to the step;
#   4. on exit 75 ("checkpointed, requeue me") or an abnormal end (a killed
#      rank, a node failure: exit 1 or >= 128) the job requeues itself
#      (scontrol requeue, array tasks as ARRAYJOB_TASK) — unless
#      HPT_MAX_STALLED_RESTARTS restarts in a row ended without a newer
#      checkpoint (state in RUN_DIR/requeue.state). Exit 2-5 (bad option, data,
#      divergence, output) would fail again: never requeued. Exit 6 (hang
#      watchdog, --collective-timeout) requeues with the suspect nodes named
#      in RUN_DIR/hang/summary.txt added to ExcNodeList, and counts as a
#      stalled restart.
# With --dry-run (or HPT_DRY_RUN=1), outside or inside an allocation, it prints
# the layout (per kind of group, TP/PP/DP: the count, how many cross a node,
# the first and the last group with their ranks and nodes; every group with
# --verbose or HPT_DRY_RUN_VERBOSE=1), the settings beyond the layout that
# change memory or time (recomputation, sequence parallelism, the pipeline
# schedule, --async-save, ...) and hpt-plan's per-rank memory plan, and
# trains nothing.
#
# Variables (defaults in brackets; every template sets its own): see
# docs/SLURM.md. Exit status: 0 done or requeued; 2 bad variable, layout or
# PMI mismatch (and, in a dry run, a layout the memory plan says does not
# fit); otherwise hpt-train's status (75: checkpointed, not requeued).
set -uo pipefail
# The whole script is one compound command, parsed before it runs: a job
# keeps working when the file is edited or updated (git pull) under it.
{

say() { echo "launch: $*"; }
die() { echo "launch: error: $*" >&2; exit "${2:-2}"; }

# ------------------------------------------------------------- variables
TEMPLATE=${1:-}
[ -n "$TEMPLATE" ] || die "usage: launch.sh JOB-SCRIPT [--dry-run [--verbose]] [-- HPT-TRAIN-ARGS...]"
shift
DRY_RUN=${HPT_DRY_RUN:-0}
DRY_RUN_VERBOSE=${HPT_DRY_RUN_VERBOSE:-0}
EXTRA=()
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY_RUN=1; shift ;;
    --verbose) DRY_RUN_VERBOSE=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) die "unknown argument '$1' (expected --dry-run, --verbose, or -- followed by hpt-train options)" ;;
  esac
done

HPT_ROOT=${HPT_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
HPT_BUILD=${HPT_BUILD:-$HPT_ROOT}
HPT_MODEL=${HPT_MODEL:-small}
HPT_DATA=${HPT_DATA:-$HPT_ROOT/data/gcide}
HPT_BACKEND=${HPT_BACKEND:-cpu}
HPT_COMM=${HPT_COMM:-auto}             # hpt-train --comm (GPU backends): nccl, mpi or auto
HPT_PRECISION=${HPT_PRECISION:-fp32}   # hpt-train --precision (GPU backends): fp32, tf32 or bf16
HPT_TP=${HPT_TP:-1}
HPT_CP=${HPT_CP:-1}   # hpt-train --cp: context-parallel ranks per sequence (rank order tp, cp, dp, pp)
HPT_PP=${HPT_PP:-1}
HPT_PP_SCHEDULE=${HPT_PP_SCHEDULE:-}   # hpt-train --pp-schedule: 1f1b, gpipe, interleaved or zb-h1 [hpt-train's, 1f1b]
HPT_PP_VIRTUAL=${HPT_PP_VIRTUAL:-}     # hpt-train --pp-virtual N: model chunks per pipeline rank (interleaved)
HPT_SEQ_LEN=${HPT_SEQ_LEN:-256}
HPT_MICRO_BATCH=${HPT_MICRO_BATCH:-1}
HPT_STEPS=${HPT_STEPS:-1000}
HPT_SAVE_EVERY=${HPT_SAVE_EVERY:-100}
HPT_ZERO1=${HPT_ZERO1:-0}             # 1: --zero1 (the same as HPT_ZERO=1)
HPT_ZERO=${HPT_ZERO:-}                 # hpt-train --zero N: 0, 1, 2 or 3 [HPT_ZERO1]
HPT_ZERO_SHARD_GROUP=${HPT_ZERO_SHARD_GROUP:-auto} # HSDP (--zero-shard-group): auto, N, or 0 (off)
HPT_RECOMPUTE=${HPT_RECOMPUTE:-0}     # hpt-train --recompute: 0 (none), 1 or full, selective
HPT_SEQUENCE_PARALLEL=${HPT_SEQUENCE_PARALLEL:-0} # 1: --sequence-parallel (needs HPT_TP > 1)
HPT_ASYNC_SAVE=${HPT_ASYNC_SAVE:-0}   # 1: --async-save (periodic checkpoints written in the background)
HPT_TRACE_STEPS=${HPT_TRACE_STEPS:-}   # hpt-train --trace-steps A-B: the step timeline (docs/METRICS.md)
HPT_SIGNAL=${HPT_SIGNAL:-USR1}
HPT_SRUN_MPI=${HPT_SRUN_MPI:-pmi2}
HPT_REQUEUE=${HPT_REQUEUE:-1}
HPT_MAX_STALLED_RESTARTS=${HPT_MAX_STALLED_RESTARTS:-3}
HPT_CLUSTER=${HPT_CLUSTER:-cpu-local}
HPT_GPUS_PER_NODE=${HPT_GPUS_PER_NODE:-0}
HPT_RECIPE_ARGS=${HPT_RECIPE_ARGS:-}   # a template's recipe options (optimizer settings)
HPT_TRAIN_ARGS=${HPT_TRAIN_ARGS:-}     # the user's extra hpt-train options

is_count() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1='$2': expected a positive integer"; }
is_bool() { [[ $2 =~ ^[01]$ ]] || die "$1='$2': expected 0 or 1"; }
for v in HPT_TP HPT_CP HPT_PP HPT_SEQ_LEN HPT_MICRO_BATCH HPT_STEPS; do is_count $v "${!v}"; done
[[ $HPT_SAVE_EVERY =~ ^[0-9]+$ ]] || die "HPT_SAVE_EVERY='$HPT_SAVE_EVERY': expected an integer >= 0"
[[ $HPT_MAX_STALLED_RESTARTS =~ ^[0-9]+$ ]] ||
  die "HPT_MAX_STALLED_RESTARTS='$HPT_MAX_STALLED_RESTARTS': expected an integer >= 0"
for v in HPT_ZERO1 HPT_SEQUENCE_PARALLEL HPT_ASYNC_SAVE HPT_REQUEUE DRY_RUN DRY_RUN_VERBOSE; do is_bool $v "${!v}"; done
# Activation memory: recomputation (hpt-train's --recompute[=MODE]; 1 is full,
# as when this was a 0/1 switch) and sequence parallelism, which splits the
# norms and residual stream over the TP ranks along the tokens of a micro-batch
case $HPT_RECOMPUTE in
  0|none) HPT_RECOMPUTE=none ;;
  1|full) HPT_RECOMPUTE=full ;;
  selective) ;;
  *) die "HPT_RECOMPUTE='$HPT_RECOMPUTE': expected 0 (none), 1 or full (keep only each layer's input, redo the layer in backward) or selective (keep the GEMM outputs, redo attention and the norms/SwiGLU)" ;;
esac
if [ "$HPT_SEQUENCE_PARALLEL" = 1 ]; then
  [ "$HPT_TP" -gt 1 ] ||
    die "HPT_SEQUENCE_PARALLEL=1 needs HPT_TP > 1 (it splits the norms and residual stream over the TP ranks)"
  (( HPT_MICRO_BATCH * HPT_SEQ_LEN % HPT_TP == 0 )) ||
    die "HPT_SEQUENCE_PARALLEL=1: a micro-batch of HPT_MICRO_BATCH=$HPT_MICRO_BATCH x HPT_SEQ_LEN=$HPT_SEQ_LEN = $((HPT_MICRO_BATCH * HPT_SEQ_LEN)) tokens does not split into HPT_TP=$HPT_TP equal parts"
fi
[[ -z $HPT_TRACE_STEPS || $HPT_TRACE_STEPS =~ ^[1-9][0-9]*(-[1-9][0-9]*)?$ ]] ||
  die "HPT_TRACE_STEPS='$HPT_TRACE_STEPS': expected the steps to trace as A-B or A (1-based), e.g. 20-22"
[ -z "$HPT_TRACE_STEPS" ] || [ "${HPT_TRACE_STEPS%-*}" -le "${HPT_TRACE_STEPS#*-}" ] ||
  die "HPT_TRACE_STEPS=$HPT_TRACE_STEPS: reversed: the first step is after the last"
[ -z "$HPT_TRACE_STEPS" ] || [ "${HPT_TRACE_STEPS#*-}" -le "$HPT_STEPS" ] ||
  die "HPT_TRACE_STEPS=$HPT_TRACE_STEPS: beyond the run's HPT_STEPS=$HPT_STEPS"
if [ -n "$HPT_ZERO" ]; then
  [[ $HPT_ZERO =~ ^[0123]$ ]] || die "HPT_ZERO='$HPT_ZERO': expected 0, 1, 2 or 3 (the ZeRO stage)"
  [ "$HPT_ZERO1" = 0 ] || [ "$HPT_ZERO" = 1 ] ||
    die "HPT_ZERO1=1 and HPT_ZERO=$HPT_ZERO contradict: HPT_ZERO1=1 is HPT_ZERO=1; set one of them"
else
  HPT_ZERO=$HPT_ZERO1
fi
[[ $HPT_COMM =~ ^(auto|mpi|nccl)$ ]] || die "HPT_COMM='$HPT_COMM': expected auto, mpi or nccl"
# The pipeline schedule: interleaved needs a pipeline and V (its micro-batch
# rule needs DP: checked with the layout below)
[[ -z $HPT_PP_SCHEDULE || $HPT_PP_SCHEDULE =~ ^(1f1b|gpipe|interleaved|zb-h1)$ ]] ||
  die "HPT_PP_SCHEDULE='$HPT_PP_SCHEDULE': expected 1f1b, gpipe, interleaved or zb-h1"
if [ -n "$HPT_PP_VIRTUAL" ]; then
  is_count HPT_PP_VIRTUAL "$HPT_PP_VIRTUAL"
  [ "$HPT_PP_SCHEDULE" = interleaved ] ||
    die "HPT_PP_VIRTUAL=$HPT_PP_VIRTUAL needs HPT_PP_SCHEDULE=interleaved (model chunks per pipeline rank; the schedule is ${HPT_PP_SCHEDULE:-1f1b})"
fi
if [ "$HPT_PP_SCHEDULE" = interleaved ]; then
  [ -n "$HPT_PP_VIRTUAL" ] ||
    die "HPT_PP_SCHEDULE=interleaved needs HPT_PP_VIRTUAL=N (model chunks per pipeline rank, e.g. 2)"
  [ "$HPT_PP" -gt 1 ] ||
    die "HPT_PP_SCHEDULE=interleaved needs HPT_PP > 1 (it interleaves model chunks across pipeline stages)"
fi
[[ $HPT_PRECISION =~ ^(fp32|tf32|bf16)$ ]] || die "HPT_PRECISION='$HPT_PRECISION': expected fp32, tf32 or bf16"
[[ $HPT_SIGNAL =~ ^(USR1|USR2|TERM|INT|HUP)$ ]] || die "HPT_SIGNAL='$HPT_SIGNAL': expected USR1, USR2, TERM, INT or HUP"
# Initial weights (hpt-train --init-from); a requeued job resumes from its
# own checkpoint instead (the trainer's rule), so the variable can stay set.
HPT_INIT_FROM=${HPT_INIT_FROM:-}
[ -z "$HPT_INIT_FROM" ] || [ -e "$HPT_INIT_FROM" ] ||
  die "HPT_INIT_FROM='$HPT_INIT_FROM': no such file or directory (an --export file, a .safetensors file, a model.safetensors.index.json or a directory holding one)"

# sbatch_header OPTION: the value of "#SBATCH --OPTION=VALUE" in the template.
sbatch_header() { sed -n "s/^#SBATCH --$1=\([^ ]*\).*/\1/p" "$TEMPLATE" 2>/dev/null | tail -1; }

# ---------------------------------------------------------------- layout
IN_JOB=0
[ -n "${SLURM_JOB_ID:-}" ] && IN_JOB=1
# Tasks per node come from HPT_TASKS_PER_NODE, not from sbatch: with
# --ntasks-per-node, sbatch fixes the task count at MIN x tasks and Slurm
# 22.05 then grants only MIN nodes of a --nodes=MIN-MAX range.
TPN=${HPT_TASKS_PER_NODE:-${SLURM_NTASKS_PER_NODE:-1}}
if [ $IN_JOB = 1 ]; then
  NODES=${SLURM_JOB_NUM_NODES:?SLURM_JOB_NUM_NODES unset inside a job}
else                       # dry run outside Slurm: the template's header
  NODES=${HPT_NODES:-$(sbatch_header nodes)}
  NODES=${NODES##*-}       # --nodes=MIN-MAX: plan for MAX
fi
is_count "nodes (SLURM_JOB_NUM_NODES, HPT_NODES or the template's --nodes)" "${NODES:-}"
is_count HPT_TASKS_PER_NODE "${TPN:-}"
# Elastic (--nodes=MIN-MAX): when the nodes granted do not fit the layout
# (TP x CP x PP must divide the ranks, micro-batch x DP the global batch), use the
# largest number of them that does; the others stay idle for this run. (A
# dry run plans exactly the node count it is given, and refuses a misfit.)
usable() { # NODES
  local w=$(($1 * TPN)) d
  (( w % (HPT_TP * HPT_CP * HPT_PP) == 0 )) || return 1
  d=$((w / (HPT_TP * HPT_CP * HPT_PP)))
  [ -z "${HPT_GLOBAL_BATCH:-}" ] || { (( HPT_GLOBAL_BATCH % (HPT_MICRO_BATCH * d) == 0 )) &&
    { [ "$HPT_PP_SCHEDULE" != interleaved ] || (( HPT_GLOBAL_BATCH / (HPT_MICRO_BATCH * d) % HPT_PP == 0 )); }; }
}
if [ $IN_JOB = 1 ] && (( TPN % HPT_TP == 0 )) && ! usable "$NODES"; then
  for ((n = NODES - 1; n >= 1; n--)); do
    if usable "$n"; then
      say "the layout does not fit $NODES nodes (TP $HPT_TP x $([ "$HPT_CP" = 1 ] || echo "CP $HPT_CP x ")PP $HPT_PP, global batch ${HPT_GLOBAL_BATCH:-?}): using $n of them"
      NODES=$n
      break
    fi
  done
fi
WORLD=$((NODES * TPN))
(( TPN % HPT_TP == 0 )) ||
  die "HPT_TP=$HPT_TP does not divide the $TPN tasks per node: a TP group must stay inside one node"
(( WORLD % (HPT_TP * HPT_CP * HPT_PP) == 0 )) ||
  die "HPT_TP=$HPT_TP x $([ "$HPT_CP" = 1 ] || echo "HPT_CP=$HPT_CP x ")HPT_PP=$HPT_PP does not divide the $WORLD ranks ($NODES nodes x $TPN tasks)"
DP=$((WORLD / (HPT_TP * HPT_CP * HPT_PP)))
TC=$((HPT_TP * HPT_CP))   # ranks of one (dp, pp): TP x CP
HPT_GLOBAL_BATCH=${HPT_GLOBAL_BATCH:-$((HPT_MICRO_BATCH * DP))}
is_count HPT_GLOBAL_BATCH "$HPT_GLOBAL_BATCH"
(( HPT_GLOBAL_BATCH % (HPT_MICRO_BATCH * DP) == 0 )) ||
  die "HPT_GLOBAL_BATCH=$HPT_GLOBAL_BATCH sequences is not a multiple of HPT_MICRO_BATCH=$HPT_MICRO_BATCH x DP=$DP ($NODES nodes)"
ACCUM=$((HPT_GLOBAL_BATCH / (HPT_MICRO_BATCH * DP)))
if [ "$HPT_PP_SCHEDULE" = interleaved ] && (( ACCUM % HPT_PP )); then
  lo=$((ACCUM / HPT_PP * HPT_PP)) hi=$((ACCUM / HPT_PP * HPT_PP + HPT_PP))
  die "HPT_PP_SCHEDULE=interleaved needs the micro-batches per step, HPT_GLOBAL_BATCH=$HPT_GLOBAL_BATCH / (HPT_MICRO_BATCH=$HPT_MICRO_BATCH x DP=$DP) = $ACCUM, to be a multiple of HPT_PP=$HPT_PP (it runs them in groups of PP): nearest valid $([ $lo -gt 0 ] && echo "$lo or ")$hi (HPT_GLOBAL_BATCH=$([ $lo -gt 0 ] && echo "$((lo * HPT_MICRO_BATCH * DP)) or ")$((hi * HPT_MICRO_BATCH * DP)))"
fi
# HSDP's shard group: auto = the DP ranks of one node (TPN / TP, ranks in
# tp -> dp -> pp order) when ZeRO is on and DP spans several nodes with
# more than one DP rank per node; N as given; 0 shards over all of DP.
[[ $HPT_ZERO_SHARD_GROUP =~ ^(auto|0|[1-9][0-9]*)$ ]] ||
  die "HPT_ZERO_SHARD_GROUP='$HPT_ZERO_SHARD_GROUP': expected auto, 0 (off) or a shard group size"
SHARD="" shard_mode=$HPT_ZERO_SHARD_GROUP
if [[ $shard_mode =~ ^[1-9][0-9]*$ ]]; then
  [ "$HPT_ZERO" != 0 ] || die "HPT_ZERO_SHARD_GROUP=$shard_mode needs HPT_ZERO=1, 2 or 3"
  [ "$HPT_CP" = 1 ] || die "HPT_ZERO_SHARD_GROUP=$shard_mode with HPT_CP=$HPT_CP: hpt-train refuses HSDP with context parallelism (ZeRO shards over the CP x DP replicas); use HPT_ZERO_SHARD_GROUP=0"
  if (( DP % shard_mode )); then # a restart on fewer nodes too: the node's DP ranks instead
    say "warning: HPT_ZERO_SHARD_GROUP=$shard_mode does not divide DP=$DP ($NODES nodes): shard groups of the DP ranks of a node instead (auto)"
    shard_mode=auto
  elif (( shard_mode < DP )); then
    SHARD=$shard_mode
  fi
fi
if [ "$shard_mode" = auto ] && [ "$HPT_CP" = 1 ]; then # hpt-train has no HSDP with CP
  per=$((TPN / HPT_TP))
  [ "$HPT_ZERO" != 0 ] && (( per > 1 && per < DP && DP % per == 0 )) && SHARD=$per
fi
# sched_args: the hpt-train/hpt-plan options of HPT_PP_SCHEDULE and
# HPT_PP_VIRTUAL (none unset: hpt-train's default schedule, 1F1B)
cp_args() { [ "$HPT_CP" = 1 ] || echo --cp "$HPT_CP"; }   # HPT_CP's option
sched_args() {
  [ -z "$HPT_PP_SCHEDULE" ] || echo --pp-schedule "$HPT_PP_SCHEDULE"
  [ -z "$HPT_PP_VIRTUAL" ] || echo --pp-virtual "$HPT_PP_VIRTUAL"
}
# act_args: the hpt-train/hpt-plan options of HPT_RECOMPUTE (full as a bare
# --recompute) and HPT_SEQUENCE_PARALLEL
act_args() {
  case $HPT_RECOMPUTE in
    full) echo --recompute ;;
    selective) echo --recompute selective ;;
  esac
  [ "$HPT_SEQUENCE_PARALLEL" = 0 ] || echo --sequence-parallel
}
# zero_args: the hpt-train/hpt-plan options of HPT_ZERO (--zero N, so that
# a --zero N among the hpt-train options given later wins, as in hpt-train)
# and of the shard group
zero_args() {
  case $HPT_ZERO in 1|2|3) echo --zero "$HPT_ZERO" ;; esac
  [ -z "$SHARD" ] || echo --zero-shard-group "$SHARD"
}

# Node names: the allocation's, or node0.. in a dry run outside Slurm.
if [ $IN_JOB = 1 ] && [ -n "${SLURM_JOB_NODELIST:-}" ]; then
  mapfile -t NODE_NAMES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
else
  NODE_NAMES=()
  for ((i = 0; i < NODES; i++)); do NODE_NAMES+=("node$i"); done
fi
node_of() { echo "${NODE_NAMES[$(( $1 / TPN ))]:-?}"; }   # block placement (srun's default)

# GPUs: each rank takes GPU (node-local rank mod visible GPUs) — the CUDA
# backend's rule (lib/backend_cuda.cu). NCCL needs a distinct GPU per rank:
# with more tasks than GPUs on a node, auto falls back to MPI with host
# staging and an explicit HPT_COMM=nccl is refused.
SHARED_GPUS=0
if [ "$HPT_BACKEND" != cpu ] && [ "$HPT_GPUS_PER_NODE" -gt 0 ] && [ "$TPN" -gt "$HPT_GPUS_PER_NODE" ]; then
  SHARED_GPUS=1
  [ "$HPT_COMM" != nccl ] ||
    die "HPT_COMM=nccl: $TPN tasks per node share $HPT_GPUS_PER_NODE GPUs, and NCCL needs a distinct GPU per rank (use HPT_COMM=mpi, or HPT_TASKS_PER_NODE=$HPT_GPUS_PER_NODE)"
  [ "$HPT_COMM" = auto ] && HPT_COMM=mpi
fi
# plural COUNT NOUN: "1 node", "2 nodes"
plural() { if [ "$1" = 1 ]; then echo "$1 $2"; else echo "$1 ${2}s"; fi; }
if [ "$HPT_CP" = 1 ]; then
  say "$(plural "$NODES" node) x $(plural "$TPN" task) = $(plural "$WORLD" rank) = TP $HPT_TP x PP $HPT_PP x DP $DP (rank = tp + dp*$HPT_TP + pp*$((HPT_TP * DP)))"
else
  say "$(plural "$NODES" node) x $(plural "$TPN" task) = $(plural "$WORLD" rank) = TP $HPT_TP x CP $HPT_CP x PP $HPT_PP x DP $DP (rank = tp + cp*$HPT_TP + dp*$TC + pp*$((TC * DP)))"
fi
[ -z "$SHARD" ] || say "HSDP: ZeRO-$HPT_ZERO state sharded within $((DP / SHARD)) groups of $SHARD DP ranks, all-reduced across them (HPT_ZERO_SHARD_GROUP=$HPT_ZERO_SHARD_GROUP)"
say "global batch $HPT_GLOBAL_BATCH sequences x $HPT_SEQ_LEN tokens = $((HPT_GLOBAL_BATCH * HPT_SEQ_LEN)) tokens/step = micro-batch $HPT_MICRO_BATCH x grad-accum $ACCUM x DP $DP"

# find_prog NAME SUBDIR: the program in the build tree, else on PATH.
find_prog() {
  if [ -x "$HPT_BUILD/$2/$1" ]; then echo "$HPT_BUILD/$2/$1"; else command -v "$1" || true; fi
}

# --------------------------------------------------------------- dry run
# print_groups KIND: the groups of KIND (tp, pp, dp) and their nodes. By
# default a summary: the first and the last group, then the count and how
# many cross a node boundary; with --verbose (HPT_DRY_RUN_VERBOSE=1) one
# line per group. Pure shell arithmetic, no subshell per rank or group:
# 16 k ranks are 3 x 16 k loop turns, not ~150 k forks.
print_groups() {
  local kind=$1 a b i r n=0 cross=0 size ngroups node prev nodes ranks label one
  local c=0 m cl=""   # c: the group's cp index (HPT_CP > 1)
  case $kind in
    tp) size=$HPT_TP; ngroups=$((HPT_PP * DP * HPT_CP)) ;;
    pp) size=$HPT_PP; ngroups=$((DP * TC)) ;;
    dp) size=$DP; ngroups=$((HPT_PP * TC)) ;;
    cp) size=$HPT_CP; ngroups=$((HPT_PP * DP * HPT_TP)) ;;
  esac
  for ((n = 0; n < ngroups; n++)); do
    # rank = tp + cp*TP + dp*TP*CP + pp*TP*CP*DP; group n enumerates the other indices
    case $kind in
      tp) c=$((n % HPT_CP)) m=$((n / HPT_CP)); a=$((m / DP)) b=$((m % DP)) label="pp $a dp $b" ;; # a = pp, b = dp
      pp) a=$((n % HPT_TP)) m=$((n / HPT_TP)); c=$((m % HPT_CP)) b=$((m / HPT_CP)) label="tp $a dp $b" ;; # a = tp, b = dp
      dp) a=$((n % HPT_TP)) m=$((n / HPT_TP)); c=$((m % HPT_CP)) b=$((m / HPT_CP)) label="tp $a pp $b" ;; # a = tp, b = pp
      cp) a=$((n % HPT_TP)) m=$((n / HPT_TP)); c=$((m % DP)) b=$((m / DP)) label="tp $a dp $c pp $b" ;; # c = dp here
    esac
    [ "$HPT_CP" = 1 ] || [ $kind = cp ] || label+=" cp $c"
    ranks="" nodes="" prev="" one=1
    for ((i = 0; i < size; i++)); do
      case $kind in
        tp) r=$((i + c * HPT_TP + b * TC + a * TC * DP)) ;;
        pp) r=$((a + c * HPT_TP + b * TC + i * TC * DP)) ;;
        dp) r=$((a + c * HPT_TP + i * TC + b * TC * DP)) ;;
        cp) r=$((a + i * HPT_TP + c * TC + b * TC * DP)) ;;
      esac
      node=${NODE_NAMES[$((r / TPN))]:-?}   # block placement, as node_of
      ranks+=${ranks:+,}$r
      if [ "$node" != "$prev" ]; then
        nodes+=${nodes:+,}$node
        [ -z "$prev" ] || one=0
        prev=$node
      fi
    done
    [ $one = 1 ] || cross=$((cross + 1))
    if [ "$DRY_RUN_VERBOSE" = 1 ] || [ $n = 0 ] || [ $n = $((ngroups - 1)) ]; then
      [ "$DRY_RUN_VERBOSE" = 1 ] || [ $n = 0 ] || [ $ngroups -le 2 ] ||
        echo "  ... ($((ngroups - 2)) more; --verbose or HPT_DRY_RUN_VERBOSE=1 lists every group)"
      echo "  ${kind^^} group $n ($label): ranks $ranks on $nodes"
    fi
  done
  echo "${kind^^} groups: $ngroups of $size ranks; $cross cross a node boundary"
}

dry_run() {
  [ -z "$HPT_INIT_FROM" ] ||
    echo "== initial weights: --init-from $HPT_INIT_FROM (a requeued job resumes from its checkpoint instead) =="
  [ "$HPT_ASYNC_SAVE" = 0 ] ||
    echo "== checkpoints: --async-save (written in the background; the plan counts the staging buffer) =="
  if [ "$HPT_RECOMPUTE" != none ] || [ "$HPT_SEQUENCE_PARALLEL" = 1 ]; then
    local act=""
    [ "$HPT_RECOMPUTE" = none ] || act="$HPT_RECOMPUTE recomputation"
    [ "$HPT_SEQUENCE_PARALLEL" = 0 ] || act+="${act:+, }sequence parallelism over TP $HPT_TP"
    echo "== activations: $act ($(act_args | paste -sd ' ')) =="
  fi
  if [ -n "$HPT_PP_SCHEDULE" ]; then
    local sname=$HPT_PP_SCHEDULE
    case $sname in
      1f1b) sname=1F1B ;; gpipe) sname=GPipe ;;
      interleaved) sname="interleaved 1F1B, V = $HPT_PP_VIRTUAL model chunks per pipeline rank" ;;
    esac
    echo "== pipeline schedule: $sname over PP $HPT_PP ($(sched_args | paste -sd ' ')) =="
  fi
  [ -z "$HPT_TRACE_STEPS" ] ||
    echo "== step timeline: --trace-steps $HPT_TRACE_STEPS into RUN_DIR/metrics.h5 /trace (hpt-metrics trace RUN_DIR -o trace.json) =="
  if [ "$HPT_BACKEND" != cpu ]; then
    local g=$HPT_GPUS_PER_NODE
    echo "== GPUs: --backend $HPT_BACKEND --comm $HPT_COMM --precision $HPT_PRECISION; rank -> GPU (node-local rank mod $([ "$g" -gt 0 ] && echo "$g GPUs per node" || echo "the visible GPUs")) =="
    local n r0
    for ((n = 0; n < NODES; n++)); do
      # every node alike: the first and the last unless --verbose
      if [ "$DRY_RUN_VERBOSE" != 1 ] && [ $n -gt 0 ] && [ $n -lt $((NODES - 1)) ]; then
        [ $n != 1 ] || echo "  ... ($((NODES - 2)) more nodes alike; --verbose or HPT_DRY_RUN_VERBOSE=1 lists every node)"
        continue
      fi
      r0=$((n * TPN))
      if [ "$g" -gt 0 ] && [ "$TPN" -gt "$g" ]; then
        echo "  ${NODE_NAMES[$n]}: ranks $r0-$((r0 + TPN - 1)) -> GPUs 0-$((g - 1)), $(( (TPN + g - 1) / g )) ranks per GPU (shared: MPI with host staging)"
      else
        echo "  ${NODE_NAMES[$n]}: ranks $r0-$((r0 + TPN - 1)) -> GPUs 0-$((TPN - 1)), one per rank"
      fi
    done
  fi
  echo "== rank layout: block placement, $TPN ranks per node =="
  print_groups tp
  [ "$HPT_CP" = 1 ] || print_groups cp
  print_groups pp
  print_groups dp
  echo "== per-rank memory plan =="
  if [ "$SHARED_GPUS" = 1 ]; then
    echo "ranks share GPUs ($TPN tasks on $HPT_GPUS_PER_NODE GPUs per node): no memory plan (hpt-plan models one rank per GPU)"
    return 0
  fi
  if [ "$HPT_BACKEND" != cpu ] && [ "$HPT_CLUSTER" = cpu-local ]; then
    echo "HPT_CLUSTER=cpu-local models hpt's CPU backend: no memory plan for a $HPT_BACKEND job (set HPT_CLUSTER to a100-80gb, h100-80gb or h200-141gb)"
    return 0
  fi
  if [ "$HPT_BACKEND" = cpu ] && [ "$HPT_CLUSTER" != cpu-local ]; then
    echo "HPT_CLUSTER=$HPT_CLUSTER models GPUs: no memory plan for a cpu job (set HPT_CLUSTER=cpu-local, which models hpt's CPU backend on a machine like this one)"
    return 0
  fi
  local plan
  plan=$(find_prog hpt-plan src)
  if [ -z "$plan" ]; then
    echo "hpt-plan is not built (looked in $HPT_BUILD/src and on PATH): no memory plan"
    return 0
  fi
  local args=(--model "$HPT_MODEL" --cluster "$HPT_CLUSTER" --nodes "$NODES"
              --gpus-per-node "$([ "$HPT_GPUS_PER_NODE" -gt 0 ] && echo "$HPT_GPUS_PER_NODE" || echo "$TPN")"
              --tp "$HPT_TP" --pp "$HPT_PP" --dp "$DP" --seq-len "$HPT_SEQ_LEN"
              --global-batch "$HPT_GLOBAL_BATCH" --micro-batch "$HPT_MICRO_BATCH" $(cp_args))
  # shellcheck disable=SC2207  # nine words at most, no globs
  args+=($(act_args) $(zero_args) $(sched_args))
  [ "$HPT_ASYNC_SAVE" = 1 ] && args+=(--async-save)
  # hpt-plan models NCCL on GPU presets; a GPU job told to use MPI is planned with MPI
  [ "$HPT_BACKEND" != cpu ] && [ "$HPT_COMM" = mpi ] && args+=(--comm mpi)
  # the job's precision (its memory, attention scratch and peak FLOP/s); the
  # CPU backend trains in fp32 whatever HPT_PRECISION says
  args+=(--precision "$([ "$HPT_BACKEND" = cpu ] && echo fp32 || echo "$HPT_PRECISION")")
  # the hpt-train options of the template and the user (HPT_RECIPE_ARGS,
  # HPT_TRAIN_ARGS, -- ARGS) that change memory or time go to the plan as
  # well, later ones winning as in hpt-train; those it cannot model are named
  # (options are matched as written in full, as the docs spell them)
  local -a words unmodelled=()
  # shellcheck disable=SC2206  # word lists by design, as for hpt-train below
  words=($HPT_RECIPE_ARGS $HPT_TRAIN_ARGS "${EXTRA[@]}")
  local i w next
  for ((i = 0; i < ${#words[@]}; i++)); do
    w=${words[$i]} next=${words[$((i + 1))]:-}
    case $w in
      --recompute) # optional value: the next word when it is not an option (lib/cli.c)
        args+=("$w")
        if [ -n "$next" ] && [ "${next#-}" = "$next" ]; then args+=("$next"); i=$((i + 1)); fi ;;
      --sequence-parallel|--zero1|--zero=*|--async-save|--recompute=*|--pp-schedule=*|--pp-virtual=*|--tie-embeddings|--untie-embeddings)
        args+=("$w") ;;
      --zero|--zero-shard-group) args+=("$w" "$next"); i=$((i + 1)) ;;
      --zero-shard-group=*) args+=("$w") ;;
      --zero3-prefetch|--zero3-prefetch=*) # the plan assumes hpt-train's default, 1
        unmodelled+=("$w"); [ "${w#*=}" != "$w" ] || i=$((i + 1)) ;;
      --precision=*|--comm=*) [ "$HPT_BACKEND" = cpu ] || args+=("$w") ;;
      --pp-schedule|--pp-virtual) args+=("$w" "$next"); i=$((i + 1)) ;;
      --precision|--comm)
        [ "$HPT_BACKEND" = cpu ] || args+=("$w" "$next"); i=$((i + 1)) ;;
      --pp-split|--pp-split=*|--batch|--batch=*|--grad-accum|--grad-accum=*|--seq-len|--seq-len=*|--tp|--tp=*|--pp|--pp=*|--dp|--dp=*|--model|--model=*|--backend|--backend=*)
        unmodelled+=("$w") ;;
    esac
  done
  [ ${#unmodelled[@]} = 0 ] ||
    echo "note: the plan models the HPT_* layout, not these hpt-train options of the job: ${unmodelled[*]}"
  echo "$plan ${args[*]}"
  local out st
  out=$("$plan" "${args[@]}")
  st=$?
  [ -z "$out" ] || printf '%s\n' "$out"
  [ $st = 0 ] || return $st
  # hpt-plan exits 0 whatever its verdict; the dry run answers "can I submit
  # this?", so a layout that does not fit is its failure (scripts can run
  # `jobs/X.sh --dry-run && sbatch jobs/X.sh`)
  if printf '%s\n' "$out" | grep -q '^worst: .*: DOES NOT FIT$'; then
    die "the plan says this layout does not fit in $HPT_CLUSTER's $([ "$HPT_CLUSTER" = cpu-local ] && echo "memory" || echo "device memory") (line 'worst:' above): raise HPT_TP or HPT_PP, set HPT_RECOMPUTE=1 (or selective), HPT_SEQUENCE_PARALLEL=1 or HPT_ZERO=1 (2 or 3), lower HPT_MICRO_BATCH, drop the hpt-train options given to the plan above that raise it (they win over HPT_*), or plan another cluster with HPT_CLUSTER"
  fi
}

if [ "$DRY_RUN" = 1 ]; then
  dry_run
  exit $?
fi
[ $IN_JOB = 1 ] || die "not inside a Slurm job: submit with sbatch (or use --dry-run / HPT_DRY_RUN=1)"

# ----------------------------------------------------------- environment
TRAIN=${HPT_TRAIN:-$(find_prog hpt-train src)}
PROBE=${HPT_PROBE:-$(find_prog hpt-mpi-probe slurm)}
[ -n "$TRAIN" ] && [ -x "$TRAIN" ] || die "hpt-train not found (HPT_TRAIN, $HPT_BUILD/src, PATH): build hpt or set HPT_BUILD"
[ -n "$PROBE" ] && [ -x "$PROBE" ] || die "hpt-mpi-probe not found (HPT_PROBE, $HPT_BUILD/slurm, PATH): build hpt or set HPT_BUILD"
# Parallel file systems (Lustre, GPFS) often lack the POSIX locks HDF5 takes
# by default; checkpoints and metrics are written collectively anyway.
export HDF5_USE_FILE_LOCKING=${HDF5_USE_FILE_LOCKING:-FALSE}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
if [ "$HPT_BACKEND" != cpu ]; then
  # GPU backend: NCCL's warnings in the job log (NCCL_DEBUG=INFO for set-up
  # detail, NCCL_DEBUG_SUBSYS to narrow it). NCCL has no watchdog of its own
  # (NCCL_ASYNC_ERROR_HANDLING is PyTorch's variable; NCCL ignores it): a
  # stalled collective is caught by hpt-train's --collective-timeout (exit 6,
  # requeued below without the suspect nodes). Site-specific NCCL settings
  # (NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_IB_TIMEOUT, ...) pass through.
  export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
fi

if [ -n "${SLURM_ARRAY_JOB_ID:-}" ]; then
  JOB_REF=${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}
else
  JOB_REF=$SLURM_JOB_ID
fi
RESTART=${SLURM_RESTART_COUNT:-0}
RUN_DIR_GIVEN=${HPT_RUN_DIR:+1}
HPT_RUN_DIR=${HPT_RUN_DIR:-$HPT_ROOT/runs/${SLURM_JOB_NAME:-hpt}-$JOB_REF}
CKPT_DIR=${HPT_CHECKPOINT_DIR:-$HPT_RUN_DIR/checkpoints}
STATE=$HPT_RUN_DIR/requeue.state
# A job id can come round again (controller state reset, MaxJobId wrap,
# another cluster sharing the directory): a first run must not resume
# another job's checkpoints from the default run directory. To continue a
# run on purpose, name it: HPT_RUN_DIR=runs/NAME.
# ckpt_steps: the step_NNNNNNNN directories that hold a checkpoint.h5, in
# order (an empty one is what an interrupted --keep prune of an earlier
# version left: the trainer and hpt-ckpt ignore it, so does the launcher).
ckpt_steps() {
  local d
  for d in $(ls "$CKPT_DIR" 2>/dev/null | grep -E '^step_[0-9]{8}$' | sort); do
    [ -f "$CKPT_DIR/$d/checkpoint.h5" ] && echo "$d"
  done
}
if [ -z "$RUN_DIR_GIVEN" ] && [ "$RESTART" = 0 ] &&
   { [ -e "$STATE" ] || [ -n "$(ckpt_steps)" ]; }; then
  die "run directory $HPT_RUN_DIR already holds another run (job id $JOB_REF reused?): set HPT_RUN_DIR to continue that run on purpose, or move it away"
fi
mkdir -p "$HPT_RUN_DIR" || die "cannot create run directory $HPT_RUN_DIR" 5

# newest_step: step of the newest committed checkpoint, the newest
# step_NNNNNNNN directory as the trainer sees it (0: none).
newest_step() {
  local s
  s=$(ckpt_steps | tail -1)
  s=${s#step_}
  echo "$((10#${s:-0}))"
}
# state_get KEY: a value of the requeue state of this job (0 when absent).
state_get() {
  local v
  v=$(awk -v k="$1" '$1 == k {print $2}' "$STATE" 2>/dev/null | tail -1)
  echo "${v:-0}"
}

say "job $JOB_REF restart $RESTART on ${SLURM_JOB_NODELIST:-?}; run dir $HPT_RUN_DIR"

# The warning signal (and TERM) from here on: forwarded to the training
# step once it runs; before that, remembered (the job then requeues at once).
STEP_PID=
forward() { # SIG
  if [ -n "$STEP_PID" ]; then
    kill -s "$1" "$STEP_PID" 2>/dev/null # first: the message may wait on scontrol
    if [ "$1" = TERM ]; then
      local kw
      kw=$(scontrol show config 2>/dev/null | awk '$1 == "KillWait" {print $3, $4; exit}')
      say "got SIGTERM: forwarding to the training step (it checkpoints at the next step" \
          "boundary; saved only if that and the save end before Slurm's SIGKILL, KillWait =" \
          "${kw:-?} after the SIGTERM)"
    else
      say "got SIG$1: forwarding to the training step (it checkpoints at the next step boundary)"
    fi
  else
    say "got SIG$1 before the training step started"
  fi
  SIGNALLED=1
  [ "$1" != TERM ] || GOT_TERM=1
}
SIGNALLED=0 GOT_TERM=0
# shellcheck disable=SC2064
trap "forward $HPT_SIGNAL" "$HPT_SIGNAL"
[ "$HPT_SIGNAL" = TERM ] || trap 'forward TERM' TERM
# USR1 too: the templates' --signal=B:USR1@T stays in force when HPT_SIGNAL
# names another signal (the trainer always checkpoints on USR1)
[ "$HPT_SIGNAL" = USR1 ] || trap 'forward USR1' USR1

# ----------------------------------------------------------------- probe
SRUN=(srun --mpi="$HPT_SRUN_MPI" --kill-on-bad-exit=1 --nodes="$NODES" --ntasks="$WORLD"
      --ntasks-per-node="$TPN")
probe() {
  local out bad r size node
  out=$("${SRUN[@]}" "$PROBE" 2>&1) || die "probe step failed: $out" 1
  bad=$(awk -v w="$WORLD" '$1 == "rank" && $4 != w' <<< "$out" | head -1)
  if [ -n "$bad" ] || [ "$(grep -c '^rank ' <<< "$out")" != "$WORLD" ]; then
    die "PMI mismatch: srun started $WORLD tasks but MPI reports '${bad:-$(head -1 <<< "$out")}' — every task is its own MPI world (srun --mpi=$HPT_SRUN_MPI; the MPI library needs Slurm's PMI2: HPT_SRUN_MPI=pmi2 with MPICH built for Slurm)"
  fi
  # Each TP group must be on one node: rank r and the first rank of its
  # group, r - r % TP, report the same node.
  declare -A at
  while read -r _ r _ size _ node; do at[$r]=$node; done <<< "$out"
  for ((r = 0; r < WORLD; r++)); do
    [ "${at[$r]}" = "${at[$((r - r % HPT_TP))]}" ] ||
      die "rank $r runs on ${at[$r]} but rank $((r - r % HPT_TP)) of its TP group on ${at[$((r - r % HPT_TP))]}: use block distribution (unset SLURM_DISTRIBUTION)"
  done
  say "probe: MPI sees $WORLD ranks; every TP group is on one node"
}
# the data, once, before the probe and srun (not in a dry run, which plans a
# job on a machine that may not hold its data): a missing path would
# otherwise fail on every rank after the allocation's set-up
[ -e "$HPT_DATA" ] ||
  die "HPT_DATA='$HPT_DATA': no such file or directory (token shards: a directory of train_*.bin, as hpt-data prepares, or one shard)"
probe

# ----------------------------------------------------------------- train
SIGNALS=USR1,TERM
[ "$HPT_SIGNAL" = USR1 ] || [ "$HPT_SIGNAL" = TERM ] || SIGNALS+=",$HPT_SIGNAL"
ARGS=(--model "$HPT_MODEL" --data "$HPT_DATA" --backend "$HPT_BACKEND"
      --tp "$HPT_TP" $(cp_args) --pp "$HPT_PP" --dp "$DP" --batch "$HPT_MICRO_BATCH" --grad-accum "$ACCUM"
      --seq-len "$HPT_SEQ_LEN" --steps "$HPT_STEPS" --save-every "$HPT_SAVE_EVERY"
      --run-dir "$HPT_RUN_DIR" --resume auto --signals "$SIGNALS")
[ -n "${HPT_CHECKPOINT_DIR:-}" ] && ARGS+=(--checkpoint-dir "$HPT_CHECKPOINT_DIR")
[ -n "${HPT_LR:-}" ] && ARGS+=(--lr "$HPT_LR")
[ -n "${HPT_MIN_LR:-}" ] && ARGS+=(--min-lr "$HPT_MIN_LR")
[ -n "${HPT_WARMUP:-}" ] && ARGS+=(--warmup "$HPT_WARMUP")
[ -n "${HPT_EVAL_INTERVAL:-}" ] && ARGS+=(--eval-interval "$HPT_EVAL_INTERVAL")
[ -n "${HPT_EVAL_BATCHES:-}" ] && ARGS+=(--eval-batches "$HPT_EVAL_BATCHES")
[ -n "$HPT_INIT_FROM" ] && ARGS+=(--init-from "$HPT_INIT_FROM")
# shellcheck disable=SC2207  # seven words at most, no globs
ARGS+=($(zero_args) $(sched_args) $(act_args))
[ "$HPT_ASYNC_SAVE" = 1 ] && ARGS+=(--async-save)
[ -n "$HPT_TRACE_STEPS" ] && ARGS+=(--trace-steps "$HPT_TRACE_STEPS")
[ "$HPT_BACKEND" != cpu ] && ARGS+=(--comm "$HPT_COMM" --precision "$HPT_PRECISION")
# shellcheck disable=SC2206  # HPT_RECIPE_ARGS, HPT_TRAIN_ARGS are word lists by design
ARGS+=($HPT_RECIPE_ARGS $HPT_TRAIN_ARGS "${EXTRA[@]}")

START_STEP=$(newest_step)
if [ "$SIGNALLED" = 1 ]; then
  # Signalled during the probe: nothing to checkpoint, requeue at once.
  say "signalled before the training step started: not starting it"
  RC=75
else
  say "step: ${SRUN[*]} $TRAIN ${ARGS[*]}"
  touch "$HPT_RUN_DIR/.launch-step" # a hang summary newer than this is this step's
  "${SRUN[@]}" "$TRAIN" "${ARGS[@]}" &
  STEP_PID=$!
  while :; do
    SIGNALLED=0
    wait "$STEP_PID"
    RC=$?
    # A trapped signal interrupts `wait` (status 128+n) while the step runs
    # on; wait again: bash keeps the step's status once it has ended.
    [ "$SIGNALLED" = 1 ] || break
  done
  STEP_PID=
fi

# ---------------------------------------------------------------- requeue
# MPI_Abort(6) from hpt-train's hang watchdog reaches srun through PMI, and
# srun kills the tasks: the step's status is then 137, not 6. The
# watchdog's summary, written during this step, tells.
if [ "$RC" != 6 ] && [ "$HPT_RUN_DIR/hang/summary.txt" -nt "$HPT_RUN_DIR/.launch-step" ]; then
  say "the hang watchdog ended the step (srun reported exit $RC): handling it as exit 6"
  RC=6
fi
END_STEP=$(newest_step)
STALLED=0
[ "$RESTART" -gt 0 ] && [ "$(awk '$1 == "job" {print $2}' "$STATE" 2>/dev/null)" = "$JOB_REF" ] &&
  STALLED=$(state_get stalled)
# a hang (exit 6) counts as a stalled restart even after progress: a job that
# hangs at every start stops after the limit
if [ "$END_STEP" -gt "$START_STEP" ] && [ "$RC" != 6 ]; then STALLED=0; else STALLED=$((STALLED + 1)); fi
printf 'job %s\nrestart %s\nexit %s\ncheckpoint_step %s\nstalled %s\n' \
  "$JOB_REF" "$RESTART" "$RC" "$END_STEP" "$STALLED" > "$STATE.tmp" && mv "$STATE.tmp" "$STATE"
say "step ended with exit $RC; newest checkpoint step $END_STEP (was $START_STEP at start)"

case $RC in
  0) say "training finished"; exit 0 ;;
  2|3|4|5) say "exit $RC (bad option, data, divergence or output) would fail again: not requeueing"; exit "$RC" ;;
esac
say "runs in a row without a newer checkpoint: $STALLED"
[ "$HPT_REQUEUE" = 1 ] || { say "HPT_REQUEUE=0: not requeueing"; exit "$RC"; }
# SIGTERM comes from Slurm ending the job: scancel, a time limit, a
# preemption without the warning signal (slurmctld requeues that one itself
# in PreemptMode=REQUEUE). Requeueing here would undo a scancel.
if [ "$GOT_TERM" = 1 ] && [ "$HPT_SIGNAL" != TERM ]; then
  say "got SIGTERM: Slurm is ending this job (scancel, time limit or preemption; a preemption requeues it): not requeueing"
  exit "$RC"
fi
JOB_STATE=$(scontrol show job "$SLURM_JOB_ID" -o 2>/dev/null | grep -o 'JobState=[A-Z_]*')
case $JOB_STATE in
  JobState=CANCELLED|JobState=TIMEOUT|JobState=DEADLINE)
    say "$JOB_STATE: not requeueing"; exit "$RC" ;;
esac
if [ "$STALLED" -gt "$HPT_MAX_STALLED_RESTARTS" ]; then
  say "$STALLED runs in a row ended without a newer checkpoint (limit HPT_MAX_STALLED_RESTARTS=$HPT_MAX_STALLED_RESTARTS restarts): not requeueing"
  exit "$RC"
fi
# Exit 6: hpt-train's hang watchdog ended the job; RUN_DIR/hang/summary.txt
# names the suspect ranks as RANK@NODE. The job is requeued without those
# nodes, keeping the user's own exclusions (an elastic --nodes=MIN-MAX job
# then runs on fewer nodes; a fixed-size one waits for others). Slurm takes
# a new ExcNodeList only from a pending job: it is set right after the
# requeue (the job then waits for its BeginTime).
EXC=
if [ "$RC" = 6 ]; then
  SUSPECTS=$(awk '$1 == "suspects:" {for (i = 2; i <= NF; i++) {sub(/^[0-9]+@/, "", $i); if ($i != "?") print $i}}' \
               "$HPT_RUN_DIR/hang/summary.txt" 2>/dev/null | sort -u | paste -sd, -)
  say "hang (exit 6): $(head -1 "$HPT_RUN_DIR/hang/summary.txt" 2>/dev/null || echo "no $HPT_RUN_DIR/hang/summary.txt")"
  if [ -n "$SUSPECTS" ]; then
    OLD_EXC=$(scontrol show job "$SLURM_JOB_ID" -o 2>/dev/null | grep -o 'ExcNodeList=[^ ]*' | cut -d= -f2)
    [ "$OLD_EXC" = "(null)" ] && OLD_EXC=
    EXC=$(scontrol show hostnames "${OLD_EXC:+$OLD_EXC,}$SUSPECTS" 2>/dev/null | sort -u | paste -sd, -)
    EXC=${EXC:-${OLD_EXC:+$OLD_EXC,}$SUSPECTS}
    say "the requeued job excludes the suspect node(s) $SUSPECTS: ExcNodeList=$EXC"
    # a job as large as what is left of its partition would wait for ever
    # (squeue: BadConstraints); Slurm does not show an elastic job's
    # minimum, so this compares with this run's allocation: said, not undone
    PART_NODES=$(sinfo -h -N -p "${SLURM_JOB_PARTITION:-}" -o %N 2>/dev/null | sort -u)
    if [ -n "$PART_NODES" ]; then
      LEFT=$(tr , '\n' <<<"$EXC" | sort -u | comm -23 <(echo "$PART_NODES") - | wc -l)
      [ "$LEFT" -ge "${SLURM_JOB_NUM_NODES:-1}" ] ||
        say "warning: partition ${SLURM_JOB_PARTITION:-?} has $LEFT node(s) besides $EXC; this run" \
            "had ${SLURM_JOB_NUM_NODES:-?}: a job that needs as many waits until an exclusion is" \
            "lifted (scontrol update JobId=$SLURM_JOB_ID ExcNodeList=${OLD_EXC})"
    fi
  else
    say "hang (exit 6) without a named suspect node: the requeued job may use the same nodes"
  fi
fi
# The requeue sends this shell SIGTERM (and SIGKILL after KillWait): ignore
# TERM so the shell outlives scontrol, and exit right after it.
trap '' TERM USR1 "$HPT_SIGNAL"
if [ "$END_STEP" -gt 0 ]; then
  say "requeueing job $JOB_REF (restart $((RESTART + 1))); it resumes from checkpoint step $END_STEP"
else
  say "requeueing job $JOB_REF (restart $((RESTART + 1))); no checkpoint yet: it starts over"
fi
scontrol requeue "$JOB_REF" || { say "scontrol requeue $JOB_REF failed: not requeued"; exit "$RC"; }
if [ -n "$EXC" ]; then
  if scontrol update JobId="$SLURM_JOB_ID" ExcNodeList="$EXC"; then
    say "excluded node(s) $EXC from job $JOB_REF"
  else
    say "scontrol update JobId=$SLURM_JOB_ID ExcNodeList=$EXC failed: the job may restart on them"
  fi
fi
exit 0
}
