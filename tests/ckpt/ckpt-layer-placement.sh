#!/bin/sh
# Every tensor of a checkpoint lands at its global layer under another
# layout: a checkpoint written at (TP 1, PP 2, DP 2) with ZeRO-1 on a 4-layer
# model (and one at (2,2,2) loaded at (4,2,1)),
# loaded at PP=4, PP=1 and TP=2 x PP=2 without training (--steps =
# the checkpoint's step) and exported, equals hpt-ckpt's consolidated export
# of the checkpoint bitwise (each layer's tensors differ from every other
# layer's, so a misplaced layer cannot pass); ZeRO-1 moments re-partition
# without padding leaking in (hpt-ckpt verify passes on a checkpoint re-saved
# from another layout).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
CKPT="$HPT_BUILD/src/hpt-ckpt"
cat > "$WORK/m.json" <<'JSON'
{"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 4, "num_attention_heads": 4,
 "num_key_value_heads": 2, "vocab_size": 8192, "max_position_embeddings": 256, "rms_norm_eps": 1e-5}
JSON
B="--model $WORK/m.json --data $CORPUS --seq-len 32 --eval-batches 1 --quiet --steps 3"
st=0; "$MPIEXEC" -n 4 "$TRAIN" $B --pp 2 --batch 1 --zero1 --stop-at 3 --run-dir "$WORK/r" > "$WORK/o" 2>&1 || st=$?
[ $st = 0 ] || [ $st = 75 ] || { cat "$WORK/o"; fail "save at PP=2 DP=2: exit $st"; }
"$CKPT" export "$WORK/r/checkpoints" "$WORK/ref.h5" > /dev/null || fail "hpt-ckpt export"
for layout in "pp4 4 --pp 4 --batch 2" "pp1 1 --batch 2" "tp2pp2 4 --tp 2 --pp 2 --batch 2"; do
  set -- $layout; name=$1; n=$2; shift 2
  mkdir -p "$WORK/$name" && cp -r "$WORK/r/checkpoints" "$WORK/$name/"
  "$MPIEXEC" -n "$n" "$TRAIN" $B "$@" --run-dir "$WORK/$name" --export "$WORK/$name.h5" > "$WORK/$name.out" 2>&1 ||
    { cat "$WORK/$name.out"; fail "$name: load"; }
  grep -q "resumed from" "$WORK/$name.out" || fail "$name did not load the checkpoint"
done
"$PYTHON" - "$WORK" <<'PY' || fail "a tensor landed in the wrong place"
import sys, h5py, numpy as np
w = sys.argv[1]
def load(p):
    out = {}
    with h5py.File(p, "r") as f:
        f.visititems(lambda k, v: out.__setitem__(k, v[()]) if isinstance(v, h5py.Dataset) else None)
    return out
ref = load(f"{w}/ref.h5")
ups = [ref[f"model.layers.{l}.mlp.up_proj.weight"] for l in range(4)]
assert all(not np.array_equal(ups[a], ups[b]) for a in range(4) for b in range(a + 1, 4)), "layers not distinct"
for name in ("pp4", "pp1", "tp2pp2"):
    got = load(f"{w}/{name}.h5")
    assert got.keys() == ref.keys(), name
    for k in ref:
        assert np.array_equal(got[k], ref[k]), (name, k)
    print(name, ": all", len(ref), "tensors equal the checkpoint bitwise")
PY
# (2,2,2) with ZeRO-1 → (4,2,1): 8 query / 4 kv heads so that TP=4 divides them.
sed 's/"num_attention_heads": 4,/"num_attention_heads": 8,/; s/"num_key_value_heads": 2/"num_key_value_heads": 4/' "$WORK/m.json" > "$WORK/m8.json"
C="--model $WORK/m8.json --data $CORPUS --seq-len 32 --eval-batches 1 --quiet --steps 3"
st=0; "$MPIEXEC" -n 8 "$TRAIN" $C --tp 2 --pp 2 --batch 1 --zero1 --stop-at 3 --run-dir "$WORK/s" > "$WORK/s.out" 2>&1 || st=$?
[ $st = 0 ] || [ $st = 75 ] || { cat "$WORK/s.out"; fail "save at (2,2,2): exit $st"; }
"$CKPT" export "$WORK/s/checkpoints" "$WORK/ref8.h5" > /dev/null || fail "hpt-ckpt export (2,2,2)"
mkdir -p "$WORK/t421" && cp -r "$WORK/s/checkpoints" "$WORK/t421/"
"$MPIEXEC" -n 8 "$TRAIN" $C --tp 4 --pp 2 --batch 2 --run-dir "$WORK/t421" --export "$WORK/t421.h5" > "$WORK/t421.out" 2>&1 ||
  { cat "$WORK/t421.out"; fail "load at (4,2,1)"; }
"$PYTHON" -c "
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], 'r'), h5py.File(sys.argv[2], 'r')
names = []
a.visititems(lambda k, v: names.append(k) if isinstance(v, h5py.Dataset) else None)
assert all(np.array_equal(a[k][()], b[k][()]) for k in names)
print('(2,2,2)+ZeRO-1 -> (4,2,1): all', len(names), 'tensors equal bitwise')
" "$WORK/ref8.h5" "$WORK/t421.h5" || fail "(4,2,1) load differs from the checkpoint"
# Re-save from another layout (PP=1, ZeRO-1 over DP=2) and verify it.
mkdir -p "$WORK/z" && cp -r "$WORK/r/checkpoints" "$WORK/z/"
st=0; "$MPIEXEC" -n 2 "$TRAIN" $B --steps 4 --batch 1 --zero1 --stop-at 4 --run-dir "$WORK/z" > "$WORK/z.out" 2>&1 || st=$?
[ $st = 0 ] || [ $st = 75 ] || { cat "$WORK/z.out"; fail "re-save: exit $st"; }
"$CKPT" verify "$WORK/z/checkpoints/step_00000004" > "$WORK/v.out" 2>&1 || { cat "$WORK/v.out"; fail "re-saved checkpoint does not verify"; }
pass "tensors land at their global layers under PP=4, PP=1, TP=2xPP=2; re-partitioned ZeRO-1 state verifies"
