#!/bin/sh
# The bytes (and calls) each rank moves per training step in every group —
# TP all-reduces, PP sends, DP all-reduce or ZeRO-1 reduce-scatter +
# all-gather or ZeRO-2 bucket reduce-scatters + all-gather (uneven shards
# at DP 3, tied embedding across stages), the model-parallel norm, the tied-embedding sum — equal the
# layout's analytic volume exactly (counters from --comm-stats, comm.tsv).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
"$TRAIN" --model tiny --print-config > "$WORK/tiny.json"
check() { # NAME RANKS TP PP DP ZERO TIED ACCUM B
  name=$1; shift
  n=$1 tp=$2 pp=$3 dp=$4 zero=$5 tied=$6 accum=$7 b=$8
  timeout 300 "$MPIEXEC" -n "$n" "$TRAIN" --model tiny --data "$CORPUS" --steps 2 --seq-len 32 \
    --batch "$b" --grad-accum "$accum" --tp "$tp" --pp "$pp" --zero "$zero" \
    $( [ "$tied" = 1 ] && echo --tie-embeddings ) --eval-batches 1 --quiet --comm-stats \
    --run-dir "$WORK/$name" > "$WORK/$name.out" 2>&1 || { cat "$WORK/$name.out"; fail "run $name"; }
  "$PYTHON" - "$WORK/tiny.json" "$WORK/$name/comm.tsv" "$@" "$HPT_SRC/tests/helpers" <<'PY' || fail "$name: volumes differ from the analytic ones"
import json, sys
sys.path.insert(0, sys.argv[11])
from analytic_volume import expected
cfg = json.load(open(sys.argv[1]))
rows = [l.split("\t") for l in open(sys.argv[2]).read().split("\n")[1:] if l]
n, TP, PP, DP, zero, tied, M, B = map(int, sys.argv[3:11])
bad = 0
for r in rows:
    w, g, calls, nbytes = int(r[0]), r[1], float(r[2]), float(r[3])
    want = expected(cfg, TP, PP, DP, zero, tied, M, B, 32, w, g)
    if (calls, nbytes) != (float(want[0]), float(want[1])):
        print(f"rank {w} {g}: {calls:.0f} calls {nbytes:.0f} bytes, expected {want[0]} calls {want[1]} bytes")
        bad += 1
print(f"{len(rows)} rank x group counters match the analytic volume" if not bad else f"{bad} mismatches")
sys.exit(1 if bad else 0)
PY
}
check z222 8 2 2 2 1 0 2 1
check t122 4 1 2 2 0 1 2 1
check d212 4 2 1 2 0 0 1 2
check z2t122 4 1 2 2 2 1 2 1
check z2d113 3 1 1 3 2 1 1 1
pass "communication volume per group equals the analytic volume"
