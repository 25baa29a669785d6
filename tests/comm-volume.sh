#!/bin/sh
# The bytes (and calls) each rank moves per training step in every group —
# TP all-reduces, PP sends, DP all-reduce or ZeRO-1 reduce-scatter +
# all-gather, the model-parallel norm, the tied-embedding sum — equal the
# layout's analytic volume exactly (counters from --comm-stats, comm.tsv).
. "$HPT_SRC/tests/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
"$TRAIN" --model tiny --print-config > "$WORK/tiny.json"
check() { # NAME RANKS TP PP DP ZERO TIED ACCUM B
  name=$1; shift
  n=$1 tp=$2 pp=$3 dp=$4 zero=$5 tied=$6 accum=$7 b=$8
  timeout 300 "$MPIEXEC" -n "$n" "$TRAIN" --model tiny --data "$CORPUS" --steps 2 --seq-len 32 \
    --batch "$b" --grad-accum "$accum" --tp "$tp" --pp "$pp" $( [ "$zero" = 1 ] && echo --zero1 ) \
    $( [ "$tied" = 1 ] && echo --tie-embeddings ) --eval-batches 1 --quiet --comm-stats \
    --run-dir "$WORK/$name" > "$WORK/$name.out" 2>&1 || { cat "$WORK/$name.out"; fail "run $name"; }
  "$PYTHON" - "$WORK/tiny.json" "$WORK/$name/comm.tsv" "$@" <<'PY' || fail "$name: volumes differ from the analytic ones"
import json, math, sys
cfg = json.load(open(sys.argv[1]))
rows = [l.split("\t") for l in open(sys.argv[2]).read().split("\n")[1:] if l]
n, TP, PP, DP, zero, tied, M, B = map(int, sys.argv[3:11])
T, C, L, H = 32, cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
KV, I, V = cfg["num_key_value_heads"], cfg["intermediate_size"], cfg["vocab_size"]
N, hd, Vl = B * T, C // H, -(-V // TP)
pad = lambda x: (x + 15) // 16 * 16
def stage_params(s, nl):
    first, last = s == 0, s == PP - 1
    layer = sum(pad(x) for x in (C, H // TP * hd * C, KV // TP * hd * C, KV // TP * hd * C,
                                   C * H // TP * hd, C, I // TP * C, I // TP * C, C * I // TP))
    p = nl * layer + (pad(Vl * C) if first else 0)
    if last:
        p += pad(C) + (pad(Vl * C) if not tied or not first else 0)
    return p
bad = 0
for r in rows:
    w, g, calls, nbytes = int(r[0]), r[1], float(r[2]), float(r[3])
    tpr, dpr, s = w % TP, (w // TP) % DP, w // (TP * DP)
    l0, l1 = s * L // PP, (s + 1) * L // PP
    nl, first, last = l1 - l0, s == 0, s == PP - 1
    want = (0, 0)
    if g == "tp" and TP > 1:
        floats = M * ((N * C if first else 0) + 4 * nl * N * C + (3 * N + N * C if last else 0))
        want = (M * ((1 if first else 0) + 4 * nl + (3 if last else 0)), 4 * floats)
    elif g == "pp" and PP > 1:
        ends = (0 if last else 1) + (0 if first else 1)
        want = (M * 2 * ends + 1, 4 * M * ends * N * C + 8)
    elif g == "dp" and DP > 1:
        P = stage_params(s, nl)
        if zero:
            S = -(-P // DP)
            own = max(0, min(S, P - dpr * S))
            want = (4, 4 * P + 4 * own + 8 + 8)
        else:
            want = (nl + (1 if first else 0) + (1 if last else 0) + 1, 4 * P + 8)
    elif g == "mp" and TP * PP > 1:
        want = (1, 8)
    elif g == "embed" and PP > 1 and tied and (first or last):
        want = (1, 4 * Vl * C)
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
pass "communication volume per group equals the analytic volume"
