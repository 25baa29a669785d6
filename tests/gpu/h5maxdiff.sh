#!/bin/sh
# tests/helpers/h5maxdiff (the GPU tests' comparison of exported weights, which needs
# no h5py) can fail: equal files pass at tolerance 0; two runs of other
# seeds, a dataset missing from the first file, another shape and a NaN each
# fail (exit 1) naming the dataset.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
D="$HPT_BUILD/tests/helpers/h5maxdiff"
A="--model tiny --data $CORPUS --steps 2 --seq-len 16 --batch 2 --eval-interval 0 --eval-batches 1 --quiet --metrics none"
"$TRAIN" $A --export "$WORK/a.h5" > /dev/null || fail "run a"
"$TRAIN" $A --seed 7 --export "$WORK/b.h5" > /dev/null || fail "run b"
"$D" "$WORK/a.h5" "$WORK/a.h5" 0 > "$WORK/same" || { cat "$WORK/same"; fail "a file against itself"; }
grep -q "^worst .* 0.000e+00 (tolerance 0)$" "$WORK/same" || { cat "$WORK/same"; fail "not 0 against itself"; }
[ "$(grep -c "e[-+][0-9]*$" "$WORK/same")" -ge 5 ] || fail "fewer than 5 datasets compared"
st=0; "$D" "$WORK/a.h5" "$WORK/b.h5" 1e-5 > "$WORK/seed" || st=$?
[ $st = 1 ] || { cat "$WORK/seed"; fail "other seeds: exit $st, want 1"; }
"$PYTHON" - "$WORK" <<'PY' || fail "h5py"
import sys, h5py, numpy as np, shutil
w = sys.argv[1]
for case in ("extra", "shape", "nan"):
    shutil.copy(f"{w}/a.h5", f"{w}/{case}.h5")
with h5py.File(f"{w}/extra.h5", "r+") as f:
    f["extra"] = np.ones(3, dtype=np.float32)
with h5py.File(f"{w}/shape.h5", "r+") as f:
    n = sorted(k for k in f if isinstance(f[k], h5py.Dataset))[0]
    del f[n]; f[n] = np.ones(5, dtype=np.float32)
    open(f"{w}/shape.name", "w").write(n)
with h5py.File(f"{w}/nan.h5", "r+") as f:
    n = sorted(k for k in f if isinstance(f[k], h5py.Dataset))[0]
    d = f[n]; v = d[...]; v.flat[0] = np.nan; d[...] = v
    open(f"{w}/nan.name", "w").write(n)
PY
st=0; "$D" "$WORK/a.h5" "$WORK/extra.h5" 1 > "$WORK/o" || st=$?
[ $st = 1 ] && grep -q "^extra: missing from the first file$" "$WORK/o" || { cat "$WORK/o"; fail "missing dataset: exit $st"; }
st=0; "$D" "$WORK/a.h5" "$WORK/shape.h5" 1 > "$WORK/o" || st=$?
[ $st = 1 ] && grep -q "^$(cat "$WORK/shape.name"): shapes differ" "$WORK/o" || { cat "$WORK/o"; fail "other shape: exit $st"; }
st=0; "$D" "$WORK/nan.h5" "$WORK/a.h5" 1 > "$WORK/o" || st=$?
[ $st = 1 ] && grep -q "^$(cat "$WORK/nan.name") nan$" "$WORK/o" || { cat "$WORK/o"; fail "NaN: exit $st"; }
st=0; "$D" "$WORK/a.h5" "$WORK/none.h5" 1 > "$WORK/o" 2>&1 || st=$?
[ $st = 2 ] || fail "a missing file: exit $st, want 2"
pass "h5maxdiff: equal files pass, other seeds, missing dataset, other shape and NaN fail"
