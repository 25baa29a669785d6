#!/bin/sh
# ZeRO-3 (--zero 3: parameters sharded over DP as well, each unit —
# embedding, layer, final norm + head — all-gathered before its forward and
# its backward and dropped after use, the next ones prefetched) trains like
# one rank: per-step loss, lr, grad norm and validation loss over 4 steps
# and the exported weights within 1e-5 (tests/helpers/compare_runs.py) at
# DP 2 with gradient accumulation, DP 3 with tied embeddings and full
# recomputation (616768 parameters: uneven shards), TP 2 x DP 2 with
# sequence parallelism, selective recomputation and no prefetch, and PP 2
# x DP 2 with tied embeddings and prefetch 2. The gathered values are
# copies, so log.tsv and the export are bitwise those of --zero 2 (DP 2).
# The DP calls per step are the analytic count (gathers: every unit before
# each forward, all but the embedding before each backward). Checkpoints: a
# ZeRO-3 run stopped at step 2 resumes bitwise at ZeRO-3 and ZeRO-2; an
# --async-save ZeRO-3 run trains bitwise like the plain one and its step-2
# checkpoint resumes bitwise; a ZeRO-3 DP 4 checkpoint opened at ZeRO-1
# DP 2 and at TP 2 without ZeRO exports exactly what hpt-ckpt export
# writes from it. HSDP (--zero-shard-group 2 on DP 4: shard groups of 2,
# their shards all-reduced across the 2 replicas) at ZeRO-1 and ZeRO-3
# equals one rank, ZeRO-3's bitwise ZeRO-1's, with 14 DP calls per step,
# and its checkpoint opens at plain ZeRO-3 DP 2 with the same weights.
# --zero 3 on one rank notes that it runs as --zero 0.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1   # up to 4 ranks on 2 cores
A="--model tiny --data $CORPUS --steps 4 --seq-len 32 --lr 1e-3 --warmup 2 --clip 0.5 --eval-interval 2 --eval-batches 1 --quiet"
run() { run_train "$@"; } # NAME RANKS ARGS... (tests/helpers/lib.sh)
bitwise_h5() { # A.h5 B.h5 WHAT
  h5diff "$1" "$2" > "$WORK/h5diff.out" 2>&1 || { head -20 "$WORK/h5diff.out"; fail "$3"; }
}
run ref 1 --batch 6 --export "$WORK/ref.h5" --zero 3
[ "$(grep -c "note: --zero 3 with DP 1 shards nothing: running as --zero 0" "$WORK/ref.out")" = 1 ] ||
  fail "ref: no note (once) that --zero 3 runs as --zero 0"
run z3 2 --batch 1 --grad-accum 3 --zero 3 --export "$WORK/z3.h5" --comm-stats
run z2 2 --batch 1 --grad-accum 3 --zero 2 --export "$WORK/z2.h5" --zero3-prefetch 2
grep -q "^hpt-train: warning: --zero3-prefetch 2 applies to --zero 3 only (ZeRO-2 here): it does nothing$" \
  "$WORK/z2.out" || fail "z2: no warning that --zero3-prefetch does nothing at ZeRO-2"
run tref 1 --batch 6 --tie-embeddings --export "$WORK/tref.h5"
run t3 3 --batch 2 --zero 3 --tie-embeddings --recompute full --export "$WORK/t3.h5"
run tp2sp 4 --batch 3 --tp 2 --sequence-parallel --recompute selective --zero 3 --zero3-prefetch 0 \
  --export "$WORK/tp2sp.h5"
run pp2t 4 --batch 1 --grad-accum 3 --pp 2 --tie-embeddings --zero 3 --zero3-prefetch 2 \
  --export "$WORK/pp2t.h5"
# HSDP: shard groups of 2 DP ranks, 2 replicas (the shards all-reduced
# across them), at ZeRO-1 and ZeRO-3; the same sums in both
run h1 4 --batch 1 --grad-accum 1 --zero 1 --zero-shard-group 2 --export "$WORK/h1.h5"
run h3 4 --batch 1 --grad-accum 1 --zero 3 --zero-shard-group 2 --export "$WORK/h3.h5" --comm-stats
run href 1 --batch 4 --export "$WORK/href.h5"
grep -q "layout TP 1 x PP 1 x DP 4 (ZeRO-3, HSDP: 2 shard groups of 2 DP ranks) on 4 ranks" "$WORK/h3.out" ||
  fail "h3: banner does not show HSDP: $(grep layout "$WORK/h3.out")"
cmp "$WORK/h1/log.tsv" "$WORK/h3/log.tsv" || fail "h3: HSDP ZeRO-3 differs from HSDP ZeRO-1"
# 4 units, no accumulation: 4 + 3 gathers, 4 reduce-scatters, the replica
# all-reduce of the shard, the norm and the loss = 14 DP calls per step
awk -F'\t' '$2 == "dp" && $3 != 14 { print "rank " $1 ": " $3 " DP calls per step, expected 14"; bad = 1 }
            END { exit bad }' "$WORK/h3/comm.tsv" || fail "h3: DP calls per step"
grep -q "layout TP 1 x PP 1 x DP 2 (ZeRO-3) on 2 ranks" "$WORK/z3.out" || fail "z3: banner does not show ZeRO-3"
"$HPT_BUILD/src/hpt-metrics" summary "$WORK/z3" | grep -q "(TP 1 x PP 1 x DP 2, ZeRO-3)" ||
  fail "z3: hpt-metrics summary does not name ZeRO-3: $("$HPT_BUILD/src/hpt-metrics" summary "$WORK/z3" | grep segment)"
# tiny: 1141056 parameters, own block ceil(/2) = 570528 floats
grep -q "^hpt-train: parameters: 2282112 bytes own block of 4564224 (ZeRO-3: each layer all-gathered before its forward and its backward, prefetch 1; the other blocks' pages given back after use)$" \
  "$WORK/z3.out" || fail "z3: parameters line: $(grep 'parameters:' "$WORK/z3.out")"
grep -q "prefetch 2;" "$WORK/pp2t.out" || fail "pp2t: --zero3-prefetch 2 not in the parameters line"
"$PYTHON" "$HPT_SRC/tests/helpers/compare_runs.py" "$WORK" 4 ref=z3,tp2sp tref=t3,pp2t href=h1,h3 ||
  fail "ZeRO-3 runs differ from one rank"
cmp "$WORK/z2/log.tsv" "$WORK/z3/log.tsv" || fail "z3 (DP 2): log.tsv differs from ZeRO-2's"
bitwise_h5 "$WORK/z2.h5" "$WORK/z3.h5" "z3 (DP 2): exported weights differ from ZeRO-2's"
# DP calls per training step (--comm-stats), M = 3 micro-batches, 4 units
# (embedding, 2 layers, head): gathers 3 x 4 + 3 x 3, 4 bucket
# reduce-scatters in each micro-batch's backward (the gradients accumulate
# in the shard) 3 x 4, the norm and the loss all-reduces = 35
awk -F'\t' '$2 == "dp" && $3 != 35 { print "rank " $1 ": " $3 " DP calls per step, expected 35"; bad = 1 }
            END { exit bad }' "$WORK/z3/comm.tsv" || fail "z3: DP calls per step"
# metrics: comm_dp split into the parameter gathers and the gradient
# reduce-scatters: each row's reduce-scatter bytes are M x the block
# (4564224 bytes x 3), the gathers' the rest of bytes_dp but the norm and
# loss sums (16 bytes); their seconds within comm_dp; the gathers' hidden
# share in [0, 1]; DP 1 (ref) has neither (0, NaN)
"$PYTHON" - "$WORK/z3/metrics.h5" "$WORK/ref/metrics.h5" <<'PY' || fail "z3: the gather/reduce-scatter columns"
import math, sys
import h5py
f = h5py.File(sys.argv[1], "r")
r = {c: f["ranks/" + c][:] for c in ("comm_dp", "bytes_dp", "comm_dp_gather", "bytes_dp_gather",
                                      "comm_dp_rs", "bytes_dp_rs", "dp_gather_hidden")}
for i in range(r["comm_dp"].shape[0]):
    for w in range(2):
        v = {c: float(a[i, w]) for c, a in r.items()}
        assert v["bytes_dp_rs"] == 3 * 4564224, (i, w, v)
        assert v["bytes_dp_gather"] == v["bytes_dp"] - v["bytes_dp_rs"] - 16, (i, w, v)
        assert 0 < v["comm_dp_gather"] and 0 < v["comm_dp_rs"], (i, w, v)
        assert v["comm_dp_gather"] + v["comm_dp_rs"] <= v["comm_dp"] + 1e-9, (i, w, v)
        assert 0 <= v["dp_gather_hidden"] <= 1, (i, w, v)
g = h5py.File(sys.argv[2], "r")
assert (g["ranks/bytes_dp_gather"][:] == 0).all() and (g["ranks/bytes_dp_rs"][:] == 0).all()
assert all(math.isnan(x) for x in g["ranks/dp_gather_hidden"][:].ravel())
print("z3: gather/reduce-scatter split of comm_dp per row and rank as expected")
PY
# checkpoints: stop after step 2 at ZeRO-3, resume at ZeRO-3 and ZeRO-2
# (the same sums: each micro-batch reduce-scattered into the shard)
run b 2 --batch 1 --grad-accum 3 --zero 3 --stop-at 2
[ -d "$WORK/b/checkpoints/step_00000002" ] || fail "b: no checkpoint at step 2"
for layout in "rz3 2 --batch 1 --grad-accum 3 --zero 3" "rz2 2 --batch 1 --grad-accum 3 --zero 2"; do
  set -- $layout
  name=$1; shift
  mkdir -p "$WORK/$name" && cp -r "$WORK/b/checkpoints" "$WORK/b/log.tsv" "$WORK/$name/"
  run "$name" "$@"
  grep -q "resumed from .*written by TP 1 x PP 1 x DP 2 ZeRO-3" "$WORK/$name.out" ||
    { cat "$WORK/$name.out"; fail "$name did not resume from the ZeRO-3 checkpoint"; }
  cmp "$WORK/z3/log.tsv" "$WORK/$name/log.tsv" ||
    fail "$name: the ZeRO-3 checkpoint resumed differs from the uninterrupted run"
done
# --async-save: the snapshot copies the gathered block before it is dropped
run as 2 --batch 1 --grad-accum 3 --zero 3 --save-every 2 --async-save
cmp "$WORK/z3/log.tsv" "$WORK/as/log.tsv" || fail "as: --async-save changed the ZeRO-3 run"
mkdir -p "$WORK/ras/checkpoints" && cp -r "$WORK/as/checkpoints/step_00000002" "$WORK/ras/checkpoints/" &&
  head -3 "$WORK/as/log.tsv" > "$WORK/ras/log.tsv"
run ras 2 --batch 1 --grad-accum 3 --zero 3
grep -q "resumed from .*step_00000002" "$WORK/ras.out" || { cat "$WORK/ras.out"; fail "ras did not resume"; }
cmp "$WORK/z3/log.tsv" "$WORK/ras/log.tsv" || fail "ras: the async ZeRO-3 checkpoint resumed differs"
# a ZeRO-3 DP 4 checkpoint on other layouts: nothing left to train, the
# export is the checkpoint's weights
run d4 4 --batch 1 --zero 3 --save-every 4
"$HPT_BUILD/src/hpt-ckpt" export "$WORK/d4/checkpoints/step_00000004" "$WORK/d4.h5" > "$WORK/d4x.out" 2>&1 ||
  { cat "$WORK/d4x.out"; fail "hpt-ckpt export of the ZeRO-3 DP 4 checkpoint"; }
for layout in "o1 2 --batch 2 --zero 1" "o2 4 --batch 2 --tp 2"; do
  set -- $layout
  name=$1; shift
  mkdir -p "$WORK/$name" && cp -r "$WORK/d4/checkpoints" "$WORK/d4/log.tsv" "$WORK/$name/"
  run "$name" "$@" --export "$WORK/$name.h5"
  grep -q "written by TP 1 x PP 1 x DP 4 ZeRO-3" "$WORK/$name.out" ||
    { cat "$WORK/$name.out"; fail "$name did not open the ZeRO-3 DP 4 checkpoint"; }
  bitwise_h5 "$WORK/d4.h5" "$WORK/$name.h5" "$name: export differs from hpt-ckpt export of the ZeRO-3 checkpoint"
done
# an HSDP checkpoint (ZeRO-3, 2 x 2) opened at plain ZeRO-3 DP 2: the same weights
run hb 4 --batch 1 --zero 3 --zero-shard-group 2 --stop-at 2
mkdir -p "$WORK/hr" && cp -r "$WORK/hb/checkpoints" "$WORK/hb/log.tsv" "$WORK/hr/"
run hr 2 --batch 2 --zero 3 --steps 2 --export "$WORK/hr.h5"
grep -q "written by TP 1 x PP 1 x DP 4 ZeRO-3" "$WORK/hr.out" || { cat "$WORK/hr.out"; fail "hr did not open the HSDP checkpoint"; }
"$HPT_BUILD/src/hpt-ckpt" export "$WORK/hb/checkpoints/step_00000002" "$WORK/hb.h5" > "$WORK/hbx.out" 2>&1 ||
  { cat "$WORK/hbx.out"; fail "hpt-ckpt export of the HSDP checkpoint"; }
bitwise_h5 "$WORK/hb.h5" "$WORK/hr.h5" "hr: export differs from hpt-ckpt export of the HSDP checkpoint"
pass "HSDP 2 x 2 (ZeRO-1, ZeRO-3) and ZeRO-3 equal one rank (DP 2 accum, DP 3 uneven tied full recompute, TP 2 SP selective, PP 2 tied), bitwise ZeRO-2; resumes bitwise (sync, async) at ZeRO 3/2; a DP 4 ZeRO-3 checkpoint exports the same at ZeRO-1 DP 2 and TP 2"
