#!/bin/sh
# hpt-plan --search enumerates selective recomputation and sequence
# parallelism (docs/PLAN.md "Search"). Llama 3 8B, sequence 8192, on 8 H100
# with TP 2 x PP 1 x micro-batch 1 and ZeRO-1 kept (3 recompute x 2 SP
# candidates), and the memory per GPU set (--mem-gb, GB = 1e9 bytes) so that
# (with hpt's bf16 allocations: none 80.33 GiB, none + SP 76.45, selective
# 72.08, selective + SP 68.20, full 60.09, full + SP 58.09 per GPU):
#   78.4 GB (73.0 GiB): no layout without recomputation fits; selective fits
#             and is faster than full, so it wins — with sequence parallelism,
#             whose forward all-gathers move the bf16 norm outputs where the
#             all-reduces move fp32 partial sums;
#   74.1 GB (69.0 GiB): only selective with sequence parallelism (or full) fits;
#   83.0 GB (77.3 GiB) with --recompute none kept: only sequence parallelism fits.
# With the ZeRO stage free (ZeRO 0-3, 24 candidates) at 78.4 GB, ZeRO-3 without
# recomputation fits (70.3 GiB: the CUDA backend backs only the own shard
# and the units in use of the parameter block, lib/train_zero3.h) and wins.
# The chosen layout's hpt-train options are printed for pasting (with the
# backend and precision the plan modelled), and the
# explanation under sequence parallelism names its reduce-scatters and
# all-gathers, not all-reduces. --recompute none keeps none (it was not a
# fixed choice before).
. "$HPT_SRC/tests/helpers/lib.sh"
P="$HPT_BUILD/src/hpt-plan"
M0="--model llama3-8b --cluster h100-80gb --seq-len 8192 --global-batch 64 --search --gpus 8 --tp 2 --pp 1 --micro-batch 1 --top 100"
M="$M0 --zero 1"
check() { # NAME WANT_RECOMPUTE WANT_SP FLAGS...
  name=$1 rc=$2 sp=$3; shift 3
  "$P" $M --json "$@" > "$WORK/$name.json" || fail "$name: search"
  "$P" $M "$@" > "$WORK/$name.txt" || fail "$name: search (text)"
  cat "$WORK/$name.txt"
  "$PYTHON" - "$WORK/$name.json" $rc $sp <<'PY' || fail "$name: wrong choice"
import json, sys
d, rc, sp = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3] == "yes"
best = d["ranked"][0]
assert best["recompute_mode"] == rc and best["sequence_parallel"] is sp, best
assert d["best"]["training"]["recompute_mode"] == rc, d["best"]["training"]
assert d["best"]["training"]["sequence_parallel"] is sp, d["best"]["training"]
opts = best["train_options"].split()
assert opts[opts.index("--recompute") + 1] == rc and ("--sequence-parallel" in opts) is sp, opts
print("best: %s (%d of %d layouts fit)" % (best["train_options"], d["fitting"], d["candidates"]))
PY
  grep -q "^hpt-train options: .*--recompute $rc.* --backend cuda --precision bf16\$" "$WORK/$name.txt" ||
    fail "$name: no options line with --recompute $rc, --backend cuda and --precision bf16"
}
check sel selective yes --mem-gb 78.4
"$PYTHON" - "$WORK/sel.json" <<'PY' || fail "a layout without recomputation fits in 78.4 GB"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["candidates"] == 6 and all(r["recompute_mode"] != "none" for r in d["ranked"]), d["ranked"]
assert {(r["recompute_mode"], r["sequence_parallel"]) for r in d["ranked"]} == \
    {("selective", False), ("selective", True), ("full", False), ("full", True)}, d["ranked"]
PY
check selsp selective yes --mem-gb 74.1
"$PYTHON" - "$WORK/selsp.json" <<'PY' || fail "selective without sequence parallelism fits in 74.1 GB"
import json, sys
d = json.load(open(sys.argv[1]))
assert {(r["recompute_mode"], r["sequence_parallel"]) for r in d["ranked"]} == \
    {("selective", True), ("full", False), ("full", True)}, d["ranked"]
PY
check sp none yes --mem-gb 83.0 --recompute none
"$PYTHON" - "$WORK/sp.json" <<'PY' || fail "--recompute none not kept, or a layout without SP fits"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["candidates"] == 2 and d["fitting"] == 1, d
assert {r["zero"] for r in d["ranked"]} == {1}, d["ranked"]
PY
M="$M0"
check z3 none yes --mem-gb 78.4
"$PYTHON" - "$WORK/z3.json" <<'PY' || fail "ZeRO-3 without recomputation is not the choice in 78.4 GB"
import json, sys
d = json.load(open(sys.argv[1]))
best = d["ranked"][0]
assert d["candidates"] == 24 and best["zero"] == 3, best
# no other stage fits without recomputation: ZeRO-2 keeps the parameter
# block whole on a GPU, and ZeRO-1/2 the full gradient block as ZeRO-3 does
assert all(r["zero"] == 3 for r in d["ranked"] if r["recompute_mode"] == "none"), d["ranked"]
PY
grep -q "^  - TP 2 with sequence parallelism stays inside a node: .*reduce-scatters and all-gathers" \
  "$WORK/sp.txt" || fail "the explanation does not describe sequence parallelism's collectives"
if grep -q "all-reduces per step" "$WORK/sp.txt"; then fail "sequence parallelism explained as all-reduces"; fi
# the pasted options carry what the plan modelled: --async-save, tf32, MPI
"$P" $M --mem-gb 200 --recompute none --async-save --comm mpi --precision tf32 > "$WORK/opts.txt" ||
  fail "search with --async-save --comm mpi --precision tf32"
grep -q "^hpt-train options: .* --async-save --backend cuda --precision tf32 --comm mpi\$" "$WORK/opts.txt" ||
  fail "options line lacks --async-save/tf32/--comm mpi: $(grep '^hpt-train options' "$WORK/opts.txt")"
# nothing fits: the count and the smallest need, no empty table
"$P" --model llama2-70b --cluster h100-80gb --seq-len 4096 --global-batch 8 --search --gpus 2 \
  > "$WORK/none.txt" || fail "search where nothing fits: exit status"
grep -q "^[0-9]* layouts for 2 GPUs, none fits in 74.5 GiB$" "$WORK/none.txt" &&
  grep -q "^no layout fits: the smallest needs [0-9.]* GiB per GPU$" "$WORK/none.txt" &&
  ! grep -q "TP   PP" "$WORK/none.txt" || { cat "$WORK/none.txt"; fail "search where nothing fits"; }
pass "hpt-plan --search picks selective recomputation and sequence parallelism where only they fit"
