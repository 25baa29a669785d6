#!/bin/sh
# ZeRO-2 (--zero 2: gradients reduce-scattered per DP bucket during
# backward, AdamW state and reduced gradients sharded) trains like one rank:
# per-step loss, lr, grad norm and validation loss over 4 steps and the
# exported weights within 1e-5 (tests/helpers/compare_runs.py) at DP 2 with
# gradient accumulation, DP 3 with tied embeddings (616768 parameters: the
# shards are uneven), TP 2 x DP 2 with sequence parallelism (the norm
# buckets wait for the TP sum) and PP 2 x DP 2 with tied embeddings (the
# embedding buckets wait for the sum over the two stages). With gradient
# accumulation each micro-batch is reduce-scattered during its backward and
# summed into the shard (3 micro-batches x 3 buckets = 9 reduce-scatters a
# step, a receive buffer of one shard); without, at DP 2 the sums are the
# same additions as ZeRO-1's: log.tsv is bitwise that of --zero 1 (z2a1).
# --zero 2 on one rank notes that it runs as --zero 0.
# A ZeRO-2 checkpoint (DP 2, step 2 of 4) resumed at ZeRO-2 continues
# bitwise like the uninterrupted ZeRO-2 run (log.tsv compared); at ZeRO-1
# and no ZeRO (the micro-batches summed after the DP sum) and at DP 1
# (another layout) within 1e-5. --fault-nan-steps skips its step at ZeRO-2. The gradient buffers hpt-train reports
# (bytes, not load-dependent) are the full block plus the shard; on the CPU
# a bucket's pages go back to the OS once it is reduce-scattered and read
# as the next step's zeros (z2a1, no accumulation: bitwise ZeRO-1).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1   # up to 4 ranks on 2 cores
A="--model tiny --data $CORPUS --steps 4 --seq-len 32 --lr 1e-3 --warmup 2 --clip 0.5 --eval-interval 2 --eval-batches 1 --quiet"
run() { run_train "$@"; } # NAME RANKS ARGS... (tests/helpers/lib.sh)
run ref 1 --batch 6 --export "$WORK/ref.h5" --zero 2
[ "$(grep -c "note: --zero 2 with DP 1 shards nothing: running as --zero 0" "$WORK/ref.out")" = 1 ] ||
  fail "ref: no note (once) that --zero 2 runs as --zero 0 on DP 1"
run z2 2 --batch 1 --grad-accum 3 --zero 2 --export "$WORK/z2.h5" --comm-stats
run z1 2 --batch 1 --grad-accum 3 --zero 1 --export "$WORK/z1.h5"
# without accumulation the released gradient pages are the next step's zeros
run z2a1 2 --batch 3 --zero 2 --export "$WORK/z2a1.h5"
run z1a1 2 --batch 3 --zero 1
cmp "$WORK/z1a1/log.tsv" "$WORK/z2a1/log.tsv" || fail "z2a1 (DP 2, no accumulation): log.tsv differs from ZeRO-1's"
run tref 1 --batch 6 --tie-embeddings --export "$WORK/tref.h5"
run t3 3 --batch 2 --zero 2 --tie-embeddings --export "$WORK/t3.h5"
run tp2sp 4 --batch 3 --tp 2 --sequence-parallel --zero 2 --export "$WORK/tp2sp.h5"
run pp2t 4 --batch 1 --grad-accum 3 --pp 2 --tie-embeddings --zero 2 --export "$WORK/pp2t.h5"
grep -q "layout TP 1 x PP 1 x DP 2 (ZeRO-2) on 2 ranks" "$WORK/z2.out" || fail "z2: banner does not show ZeRO-2"
grep -q "layout TP 2 x PP 1 x DP 2 (ZeRO-2) on 4 ranks" "$WORK/tp2sp.out" || fail "tp2sp: banner"
# tiny: 1141056 parameters, shard ceil(/2) = 570528 floats; AdamW 2 x the shard
grep -q "^hpt-train: gradients: 4564224 bytes full block + 2282112 bytes reduced shard (ZeRO-2, bucket reduce-scatters; the block's pages given back after each bucket) + 2282112 bytes receive buffer (each of the 3 micro-batches reduce-scattered and summed into the shard); AdamW state 4564224 bytes$" \
  "$WORK/z2.out" || fail "z2: gradient buffers line: $(grep 'gradients:' "$WORK/z2.out")"
# tied, DP 3: 616768 parameters, shard ceil(/3) = 205590 floats
grep -q "^hpt-train: gradients: 2467072 bytes full block + 822360 bytes reduced shard (ZeRO-2" \
  "$WORK/t3.out" || fail "t3: gradient buffers line: $(grep 'gradients:' "$WORK/t3.out")"
"$PYTHON" "$HPT_SRC/tests/helpers/compare_runs.py" "$WORK" 4 ref=z2,z1,z2a1,tp2sp tref=t3,pp2t ||
  fail "ZeRO-2 runs differ from one rank"
# every micro-batch reduce-scattered in its backward: (layers + 2) buckets
# (the head, each layer, the embedding) per micro-batch, 3 micro-batches,
# plus the parameter all-gather, the norm and the loss sums: calls and bytes
# per step exact (1141056 parameters, DP 2)
"$TRAIN" --model tiny --print-config > "$WORK/tiny.json" || fail "--print-config"
"$PYTHON" - "$WORK/z2/comm.tsv" "$WORK/tiny.json" <<'PY' || fail "z2: DP calls or bytes per step"
import json, sys
L = json.load(open(sys.argv[2]))["num_hidden_layers"]
P, M = 1141056, 3
want_calls, want_bytes = M * (L + 2) + 3, M * 4 * P + 4 * P // 2 + 8 + 8
for l in open(sys.argv[1]).read().split("\n")[1:]:
    f = l.split("\t")
    if len(f) > 3 and f[1] == "dp":
        assert int(f[2]) == want_calls and int(f[3]) == want_bytes, \
            f"rank {f[0]}: {f[2]} DP calls, {f[3]} bytes per step; expected {want_calls}, {want_bytes}"
print(f"DP per step: {want_calls} calls, {want_bytes} bytes on each rank")
PY
# --fault-nan-steps: the gradients are already in the shards when the
# injection comes, so it poisons the shard; step 3 is skipped, step 4 trains
# (the released pages must not carry the poison into it)
run nan 2 --batch 3 --zero 2 --fault-nan-steps 3
grep -q "^done: 4 steps, 1 skipped" "$WORK/nan.out" || { cat "$WORK/nan.out"; fail "nan: step 3 not skipped once"; }
awk -F'\t' 'NR == 4 && $6 != 1 { exit 1 } NR == 5 && ($6 != 0 || $2 != $2 + 0) { exit 1 }' "$WORK/nan/log.tsv" ||
  { cat "$WORK/nan/log.tsv"; fail "nan: log.tsv does not flag step 3 alone"; }
# checkpoints: stop after step 2 at ZeRO-2, resume at other stages/layouts
run b 2 --batch 1 --grad-accum 3 --zero 2 --stop-at 2
[ -d "$WORK/b/checkpoints/step_00000002" ] || fail "b: no checkpoint at step 2"
for layout in "rz2 2 --batch 1 --grad-accum 3 --zero 2" "rz1 2 --batch 1 --grad-accum 3 --zero 1" \
              "rz0 2 --batch 1 --grad-accum 3" "rd1 1 --batch 6"; do
  set -- $layout
  name=$1; shift
  mkdir -p "$WORK/$name" && cp -r "$WORK/b/checkpoints" "$WORK/b/log.tsv" "$WORK/$name/"
  run "$name" "$@"
  grep -q "resumed from .*written by TP 1 x PP 1 x DP 2 ZeRO-2" "$WORK/$name.out" ||
    { cat "$WORK/$name.out"; fail "$name did not resume from the ZeRO-2 checkpoint"; }
done
cmp "$WORK/z2/log.tsv" "$WORK/rz2/log.tsv" || fail "rz2: ZeRO-2 resumed at ZeRO-2 differs from the uninterrupted run"
"$PYTHON" - "$WORK" <<'PY' || fail "resumes at ZeRO-1 / no ZeRO / DP 1 differ from the uninterrupted run"
import math, sys
w = sys.argv[1]
def rows(n):
    return [[float(x) for x in l.split("\t")[1:5]] for l in open(f"{w}/{n}/log.tsv").read().split("\n")[1:] if l]
ref = rows("z2")
for n in ("rz1", "rz0", "rd1"):
    got = rows(n)
    assert len(got) == 4, (n, len(got))
    for s, (a, b) in enumerate(zip(got, ref)):
        for x, y in zip(a, b):
            assert (math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-5 * abs(y), (n, s + 1, a, b)
    print(n, "matches the uninterrupted ZeRO-2 run within 1e-5")
PY
pass "ZeRO-2 equals one rank (DP 2 accum, DP 3 uneven tied, TP 2 SP, PP 2 tied), bitwise ZeRO-1 at DP 2; its checkpoint resumes at ZeRO 2/1/0 and DP 1"
