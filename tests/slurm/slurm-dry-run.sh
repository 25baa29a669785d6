#!/bin/sh
# The 70B and 8B dry runs (no cluster needed): every TP group inside one node,
# group counts as in the templates' headers (70B: 16 nodes x 8 = 128 ranks,
# 32 TP groups of 4, 16 PP groups of 8, 32 DP groups of 4, interleaved 1F1B
# V = 2, selective recomputation and sequence parallelism — the fastest
# layout hpt-plan --search ranks with 10 % of the GPU free, as its header
# says; 8B: 16 TP groups of 2,
# 2 DP groups of 16 as HSDP, ZeRO-1 within each node's 4 DP ranks — the layout
# hpt-plan --search ranks fastest, as its header says), every rank in exactly
# one group of each kind, and the memory plan from hpt-plan when it is built. By default the groups are
# summarised (first and last of each kind); --verbose or
# HPT_DRY_RUN_VERBOSE=1 lists every one.
. "$HPT_SRC/tests/helpers/lib.sh"
# A dry run outside an allocation, even when make check itself runs in one.
unset SLURM_JOB_ID SLURM_JOB_NUM_NODES SLURM_JOB_NODELIST SLURM_NTASKS_PER_NODE
export HPT_BUILD
st=0
bash "$HPT_SRC/jobs/train_70b.sh" --dry-run > "$WORK/70b" 2>&1 || st=$?
cat "$WORK/70b"
[ $st = 0 ] || fail "70B dry run: exit $st"
grep -q "^launch: 16 nodes x 8 tasks = 128 ranks = TP 4 x PP 8 x DP 4 " "$WORK/70b" || fail "70B: layout line"
grep -q "micro-batch 1 x grad-accum 256 x DP 4" "$WORK/70b" || fail "70B: batch split"
grep -qx "TP groups: 32 of 4 ranks; 0 cross a node boundary" "$WORK/70b" || fail "70B: TP groups"
grep -qx "PP groups: 16 of 8 ranks; 16 cross a node boundary" "$WORK/70b" || fail "70B: PP groups"
grep -qx "DP groups: 32 of 4 ranks; 32 cross a node boundary" "$WORK/70b" || fail "70B: DP groups"
# the schedule, V, recomputation and sequence parallelism of the template's
# layout, named by the dry run (with or without hpt-plan)
grep -qx "== activations: selective recomputation, sequence parallelism over TP 4 (--recompute selective --sequence-parallel) ==" "$WORK/70b" ||
  fail "70B: the dry run does not name selective recomputation and sequence parallelism"
grep -qx "== pipeline schedule: interleaved 1F1B, V = 2 model chunks per pipeline rank over PP 8 (--pp-schedule interleaved --pp-virtual 2) ==" "$WORK/70b" ||
  fail "70B: the dry run does not name the interleaved schedule with V = 2"
grep -q "HSDP" "$WORK/70b" && fail "70B: HSDP on (the template shards ZeRO-1 over all of DP)"
# by default a summary: the first and the last group of each kind, and a
# line for those left out (one line per group was ~50 k lines at 16 k GPUs)
[ "$(grep -cE '^  (TP|PP|DP) group ' "$WORK/70b")" = 6 ] || fail "70B: not 2 group lines per kind by default"
grep -qx "  TP group 0 (pp 0 dp 0): ranks 0,1,2,3 on node0" "$WORK/70b" &&
  grep -qx "  TP group 31 (pp 7 dp 3): ranks 124,125,126,127 on node15" "$WORK/70b" &&
  grep -qx "  PP group 15 (tp 3 dp 3): ranks 15,31,47,63,79,95,111,127 on node1,node3,node5,node7,node9,node11,node13,node15" "$WORK/70b" &&
  grep -qx "  DP group 0 (tp 0 pp 0): ranks 0,4,8,12 on node0,node1" "$WORK/70b" ||
  fail "70B: the first or last group lines are wrong"
[ "$(grep -cx '  \.\.\. (\(14\|30\) more; --verbose or HPT_DRY_RUN_VERBOSE=1 lists every group)' "$WORK/70b")" = 3 ] ||
  fail "70B: no line per kind saying how many groups are left out"
# --verbose (and HPT_DRY_RUN_VERBOSE=1): every group
bash "$HPT_SRC/jobs/train_70b.sh" --dry-run --verbose > "$WORK/70bv" 2>&1 || fail "70B dry run --verbose: $(cat "$WORK/70bv")"
HPT_DRY_RUN_VERBOSE=1 bash "$HPT_SRC/jobs/train_70b.sh" --dry-run > "$WORK/70be" 2>&1 || fail "70B dry run HPT_DRY_RUN_VERBOSE=1"
cmp -s "$WORK/70bv" "$WORK/70be" || fail "70B: --verbose and HPT_DRY_RUN_VERBOSE=1 differ"
[ "$(grep -cE '^  (TP|PP|DP) group ' "$WORK/70bv")" = 80 ] || fail "70B --verbose: not 32+16+32 group lines"
grep -q "more; --verbose" "$WORK/70bv" && fail "70B --verbose: groups left out"
HPT_DRY_RUN_VERBOSE=yes bash "$HPT_SRC/jobs/train_70b.sh" --dry-run > "$WORK/70bx" 2>&1 && fail "HPT_DRY_RUN_VERBOSE=yes accepted"
grep -q "DRY_RUN_VERBOSE='yes': expected 0 or 1" "$WORK/70bx" || fail "HPT_DRY_RUN_VERBOSE=yes: $(cat "$WORK/70bx")"
"$PYTHON" - "$WORK/70bv" <<'PY' || fail "70B --verbose: group lines"
import re, sys
groups = {"TP": [], "PP": [], "DP": []}
for l in open(sys.argv[1]):
    m = re.match(r"  (TP|PP|DP) group \d+ \([^)]*\): ranks ([\d,]+) on (\S+)$", l)
    if m:
        groups[m[1]].append(([int(r) for r in m[2].split(",")], m[3].split(",")))
for kind, gs in groups.items():
    ranks = sorted(r for g, _ in gs for r in g)
    assert ranks == list(range(128)), (kind, "ranks not covered exactly once")
for g, nodes in groups["TP"]:
    assert g == list(range(g[0], g[0] + 4)) and g[0] % 4 == 0, ("TP group not 4 consecutive ranks", g)
    assert len(nodes) == 1 and nodes[0] == "node%d" % (g[0] // 8), ("TP group crosses nodes", g, nodes)
for g, nodes in groups["PP"]:
    assert [r // 16 for r in g] == list(range(8)), ("PP stages", g)   # rank = tp + dp*4 + pp*16
print("70B: every rank in one TP, PP and DP group; TP groups = 4 consecutive ranks on one node")
PY
if [ -x "$HPT_BUILD/src/hpt-plan" ]; then
  grep -q "hpt-plan --model llama2-70b --cluster h100-80gb --nodes 16 --gpus-per-node 8 --tp 4 --pp 8 --dp 4 --seq-len 4096 --global-batch 1024 --micro-batch 1 --recompute selective --sequence-parallel --zero 1 --pp-schedule interleaved --pp-virtual 2 --async-save --precision tf32$" "$WORK/70b" ||
    fail "70B: hpt-plan not called with the layout"
  # the plan of the template's layout: what its header states
  grep -qx "layout: TP 4 x PP 8 x DP 4; seq 4096, global batch 1024 = micro-batch 1 x 256 micro-batches x DP 4; tf32, selective recomputation, sequence parallel, ZeRO-1, interleaved 1F1B, V = 2" "$WORK/70b" &&
    grep -qx "  stage 0         8.21      8.21      4.11     39.32      0.00      2.77      1.86     64.48" "$WORK/70b" &&
    grep -qx "worst: stage 0, 64.48 GiB of 74.51 GiB: FITS" "$WORK/70b" &&
    grep -qx "interleaved 1F1B, V = 2 bubble: 0.013; .*" "$WORK/70b" &&
    grep -qx "step time 64.1 s, 6.544e+04 tokens/s, MFU 44.3 %" "$WORK/70b" ||
    fail "70B: the plan is not the header's (TP 4 x PP 8 x DP 4, interleaved V 2: 64.48 GiB, 64.1 s, bubble 0.013)"
  grep -q "^#   step 64.1 s, 6.544e4 tokens/s, MFU 44.3 %; 64.5 GiB on stage 0 of 74.5$" "$HPT_SRC/jobs/train_70b.sh" &&
    grep -q "^#   total 8.21 + 8.21 + 4.11 + 2.77 + 39.32 + 1.86 *= 64.48 GiB$" "$HPT_SRC/jobs/train_70b.sh" ||
    fail "70B: the header no longer states the planned figures"
else
  grep -q "^hpt-plan is not built" "$WORK/70b" || fail "70B: no word about the missing hpt-plan"
fi
bash "$HPT_SRC/jobs/train_8b.sh" --dry-run > "$WORK/8b" 2>&1 || fail "8B dry run failed: $(cat "$WORK/8b")"
grep -q "^launch: 4 nodes x 8 tasks = 32 ranks = TP 2 x PP 1 x DP 16 " "$WORK/8b" || fail "8B: layout line"
grep -qx "TP groups: 16 of 2 ranks; 0 cross a node boundary" "$WORK/8b" || fail "8B: TP groups"
grep -qx "DP groups: 2 of 16 ranks; 2 cross a node boundary" "$WORK/8b" || fail "8B: DP groups"
grep -qx "launch: HSDP: ZeRO-1 state sharded within 4 groups of 4 DP ranks, all-reduced across them (HPT_ZERO_SHARD_GROUP=auto)" "$WORK/8b" ||
  fail "8B: not HSDP 4 x 4 at ZeRO-1 by default"
grep -q "micro-batch 1 x grad-accum 64 x DP 16" "$WORK/8b" || fail "8B: batch split"
if [ -x "$HPT_BUILD/src/hpt-plan" ]; then
  # the plan of the template's layout: what its header states
  grep -q "hpt-plan --model llama3-8b --cluster h100-80gb --nodes 4 --gpus-per-node 8 --tp 2 --pp 1 --dp 16 --seq-len 4096 --global-batch 1024 --micro-batch 1 --sequence-parallel --zero 1 --zero-shard-group 4 --async-save --precision tf32$" "$WORK/8b" &&
    grep -qx "layout: TP 2 x PP 1 x DP 16; seq 4096, global batch 1024 = micro-batch 1 x 64 micro-batches x DP 16; tf32, sequence parallel, ZeRO-1, HSDP 4 shard groups of 4" "$WORK/8b" &&
    grep -qx "worst: stage 0, 64.27 GiB of 74.51 GiB: FITS" "$WORK/8b" &&
    grep -qx "step time 27.41 s, 1.53e+05 tokens/s, MFU 46.7 %" "$WORK/8b" ||
    fail "8B: the plan is not the header's (TP 2 x DP 16, SP, ZeRO-1, HSDP 4 x 4: 64.27 GiB, 27.41 s)"
  grep -q "^#   step 27.41 s, 1.53e5 tokens/s, MFU 46.7 %; 64.3 GiB per GPU of 74.5.$" "$HPT_SRC/jobs/train_8b.sh" ||
    fail "8B: the header no longer states the planned figures"
fi
# An override reaches the layout: 8 nodes instead of 16 -> DP 2, grad-accum 512
# (and the plan still fits: 70.6 GiB, as the header says)
HPT_NODES=8 bash "$HPT_SRC/jobs/train_70b.sh" --dry-run > "$WORK/70b8" 2>&1 || fail "70B on 8 nodes failed"
grep -q "TP 4 x PP 8 x DP 2 .*" "$WORK/70b8" && grep -q "grad-accum 512 x DP 2" "$WORK/70b8" ||
  fail "70B on 8 nodes: DP 2 and grad-accum 512 expected"
# HPT_INIT_FROM: named in the dry run (and passed as --init-from)
: > "$WORK/w.safetensors"
HPT_INIT_FROM="$WORK/w.safetensors" bash "$HPT_SRC/jobs/train_8b.sh" --dry-run > "$WORK/8bi" 2>&1 ||
  fail "8B dry run with HPT_INIT_FROM failed: $(cat "$WORK/8bi")"
grep -q "^== initial weights: --init-from $WORK/w.safetensors " "$WORK/8bi" || fail "HPT_INIT_FROM not in the dry run"
# HPT_TRACE_STEPS: named in the dry run
HPT_TRACE_STEPS=20-22 bash "$HPT_SRC/jobs/train_8b.sh" --dry-run > "$WORK/8bt" 2>&1 ||
  fail "8B dry run with HPT_TRACE_STEPS failed: $(cat "$WORK/8bt")"
grep -q "^== step timeline: --trace-steps 20-22 into RUN_DIR/metrics.h5 /trace" "$WORK/8bt" ||
  fail "HPT_TRACE_STEPS not in the dry run"
# HPT_ASYNC_SAVE=1: named in the dry run, and the plan counts the staging buffer
HPT_ASYNC_SAVE=1 bash "$HPT_SRC/jobs/train_8b.sh" --dry-run > "$WORK/8ba" 2>&1 ||
  fail "8B dry run with HPT_ASYNC_SAVE=1 failed: $(cat "$WORK/8ba")"
grep -q "^== checkpoints: --async-save" "$WORK/8ba" || fail "HPT_ASYNC_SAVE not in the dry run"
if [ -x "$HPT_BUILD/src/hpt-plan" ]; then
  grep -q "hpt-plan .* --async-save" "$WORK/8ba" && grep -q "^async-save staging buffer (host memory): " "$WORK/8ba" ||
    fail "HPT_ASYNC_SAVE=1: hpt-plan not asked for the staging buffer"
fi
# ... on by default in the 70B and 8B templates (measured to pay), off with HPT_ASYNC_SAVE=0
for f in 70b 8b; do
  grep -q "^== checkpoints: --async-save" "$WORK/$f" || fail "$f template: --async-save is not on by default"
done
HPT_ASYNC_SAVE=0 bash "$HPT_SRC/jobs/train_8b.sh" --dry-run > "$WORK/8b0" 2>&1 || fail "8B dry run with HPT_ASYNC_SAVE=0 failed"
grep -q -- "--async-save" "$WORK/8b0" && fail "HPT_ASYNC_SAVE=0: --async-save still given"
# HPT_ZERO=2 (hpt-train --zero 2) reaches the plan, over the template's HPT_ZERO1 default
if [ -x "$HPT_BUILD/src/hpt-plan" ]; then
  HPT_ZERO=2 bash "$HPT_SRC/jobs/train_70b.sh" --dry-run > "$WORK/70bz2" 2>&1 || fail "70B HPT_ZERO=2 dry run"
  grep -q "hpt-plan .* --micro-batch 1 --recompute selective --sequence-parallel --zero 2 " "$WORK/70bz2" &&
    grep -q "^layout: .*, ZeRO-2, interleaved 1F1B, V = 2$" "$WORK/70bz2" || { cat "$WORK/70bz2"; fail "70B: HPT_ZERO=2 not planned as --zero 2"; }
  # HSDP by default when DP spans nodes with several DP ranks per node: 8B
  # at TP 2 has 4 DP ranks per node and DP 16 -> shard groups of 4
  HPT_TP=2 HPT_ZERO=3 bash "$HPT_SRC/jobs/train_8b.sh" --dry-run > "$WORK/8bh" 2>&1 || fail "8B HSDP dry run"
  grep -q "^launch: HSDP: ZeRO-3 state sharded within 4 groups of 4 DP ranks, all-reduced across them (HPT_ZERO_SHARD_GROUP=auto)$" "$WORK/8bh" &&
    grep -q "hpt-plan .* --zero 3 --zero-shard-group 4 " "$WORK/8bh" &&
    grep -q "^layout: .*, ZeRO-3, HSDP 4 shard groups of 4$" "$WORK/8bh" ||
    { cat "$WORK/8bh"; fail "8B TP 2 HPT_ZERO=3: not planned as HSDP 4 x 4"; }
  HPT_TP=2 HPT_ZERO=3 HPT_ZERO_SHARD_GROUP=0 bash "$HPT_SRC/jobs/train_8b.sh" --dry-run > "$WORK/8bh0" 2>&1 ||
    fail "8B HPT_ZERO_SHARD_GROUP=0 dry run"
  grep -q -- "--zero-shard-group\|HSDP" "$WORK/8bh0" && fail "HPT_ZERO_SHARD_GROUP=0: HSDP still on"
  # hpt-train options win over the template's HPT_ZERO default (passed as
  # --zero 1, so a later --zero N is no contradiction), in the plan too
  HPT_TRAIN_ARGS="--zero 3 --zero-shard-group 8" bash "$HPT_SRC/jobs/train_8b.sh" --dry-run > "$WORK/8bt" 2>&1 ||
    { cat "$WORK/8bt"; fail "8B dry run with HPT_TRAIN_ARGS='--zero 3 --zero-shard-group 8'"; }
  grep -q "hpt-plan .* --zero 1 --zero-shard-group 4 .*--zero 3 --zero-shard-group 8" "$WORK/8bt" &&
    grep -q "^layout: .*, ZeRO-3, HSDP 2 shard groups of 8$" "$WORK/8bt" ||
    { cat "$WORK/8bt"; fail "8B: HPT_TRAIN_ARGS' --zero 3 --zero-shard-group 8 not planned"; }
  # HPT_PP_SCHEDULE / HPT_PP_VIRTUAL reach the plan: the template's own
  # interleaved V = 2 at PP 8 (m = 256 per DP rank) ...
  grep -q "^pipeline, interleaved 1F1B, V = 2: in flight per stage 23, 21, 19, 17, 15, 13, 11, 9 chunk forwards " "$WORK/70b" ||
    fail "70B: the template's interleaved V = 2 not planned"
  # ... and HPT_PP_SCHEDULE=1f1b alone: back to 1F1B, no V (the template sets
  # HPT_PP_VIRTUAL only for the interleaved schedule)
  HPT_PP_SCHEDULE=1f1b bash "$HPT_SRC/jobs/train_70b.sh" --dry-run > "$WORK/70bi" 2>&1 ||
    { cat "$WORK/70bi"; fail "70B dry run with HPT_PP_SCHEDULE=1f1b"; }
  grep -q "hpt-plan .* --micro-batch 1 --recompute selective --sequence-parallel --zero 1 --pp-schedule 1f1b --async-save " "$WORK/70bi" &&
    grep -qx "== pipeline schedule: 1F1B over PP 8 (--pp-schedule 1f1b) ==" "$WORK/70bi" &&
    grep -q "^layout: TP 4 x PP 8 x DP 4; .*, ZeRO-1$" "$WORK/70bi" &&
    grep -q "^pipeline, 1F1B: in flight per stage 8, 7, 6, 5, 4, 3, 2, 1 micro-batches" "$WORK/70bi" ||
    { cat "$WORK/70bi"; fail "70B: HPT_PP_SCHEDULE=1f1b not planned as 1F1B"; }
  grep -q -- "--pp-virtual" "$WORK/70bi" && fail "70B, HPT_PP_SCHEDULE=1f1b: --pp-virtual still given"
  HPT_PP_SCHEDULE=gpipe bash "$HPT_SRC/jobs/train_tiny.sh" --dry-run > "$WORK/tg" 2>&1 || fail "tiny dry run, gpipe"
  grep -q "hpt-plan .* --pp-schedule gpipe " "$WORK/tg" && grep -q "^GPipe bubble: " "$WORK/tg" ||
    { cat "$WORK/tg"; fail "tiny: HPT_PP_SCHEDULE=gpipe not planned"; }
  # HPT_RECOMPUTE=selective and HPT_SEQUENCE_PARALLEL=1: named in the dry run
  # and planned (tiny: TP 2)
  HPT_RECOMPUTE=selective HPT_SEQUENCE_PARALLEL=1 bash "$HPT_SRC/jobs/train_tiny.sh" --dry-run > "$WORK/tsel" 2>&1 ||
    { cat "$WORK/tsel"; fail "tiny dry run, HPT_RECOMPUTE=selective HPT_SEQUENCE_PARALLEL=1"; }
  grep -qx "== activations: selective recomputation, sequence parallelism over TP 2 (--recompute selective --sequence-parallel) ==" "$WORK/tsel" &&
    grep -q "hpt-plan .* --recompute selective --sequence-parallel " "$WORK/tsel" &&
    grep -q "^layout: .*, selective recomputation, sequence parallel" "$WORK/tsel" ||
    { cat "$WORK/tsel"; fail "tiny: HPT_RECOMPUTE=selective HPT_SEQUENCE_PARALLEL=1 not shown or not planned"; }
  # HPT_RECOMPUTE=full is HPT_RECOMPUTE=1: the same dry run
  HPT_RECOMPUTE=full bash "$HPT_SRC/jobs/train_tiny.sh" --dry-run > "$WORK/tfull" 2>&1 || fail "tiny dry run, HPT_RECOMPUTE=full"
  HPT_RECOMPUTE=1 bash "$HPT_SRC/jobs/train_tiny.sh" --dry-run > "$WORK/t1" 2>&1 || fail "tiny dry run, HPT_RECOMPUTE=1"
  cmp -s "$WORK/tfull" "$WORK/t1" && grep -qx "== activations: full recomputation (--recompute) ==" "$WORK/t1" &&
    grep -q "^layout: .*, recomputation" "$WORK/t1" || { cat "$WORK/tfull"; fail "tiny: HPT_RECOMPUTE=full is not HPT_RECOMPUTE=1"; }
  grep -q "^== activations" "$WORK/tg" && fail "tiny: an activations line without HPT_RECOMPUTE or HPT_SEQUENCE_PARALLEL"
  # ... and as hpt-train options of the job (--pp-virtual with its value)
  HPT_TRAIN_ARGS="--pp-schedule interleaved --pp-virtual 4" bash "$HPT_SRC/jobs/train_70b.sh" --dry-run > "$WORK/70bt" 2>&1 ||
    { cat "$WORK/70bt"; fail "70B dry run with HPT_TRAIN_ARGS='--pp-schedule interleaved --pp-virtual 4'"; }
  grep -q "hpt-plan .* --pp-schedule interleaved --pp-virtual 4$" "$WORK/70bt" &&
    grep -q "^layout: .*, interleaved 1F1B, V = 4$" "$WORK/70bt" ||
    { cat "$WORK/70bt"; fail "70B: --pp-virtual 4 in HPT_TRAIN_ARGS not planned"; }
fi
HPT_ASYNC_SAVE=yes bash "$HPT_SRC/jobs/train_8b.sh" --dry-run > "$WORK/8bx" 2>&1 && fail "HPT_ASYNC_SAVE=yes accepted"
grep -q "HPT_ASYNC_SAVE='yes': expected 0 or 1" "$WORK/8bx" || fail "HPT_ASYNC_SAVE=yes: $(cat "$WORK/8bx")"
pass "70B and 8B dry runs: TP groups inside nodes, group counts as documented"
