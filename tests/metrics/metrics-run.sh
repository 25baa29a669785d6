#!/bin/sh
# Metrics of a real (2,2,2) ZeRO-1 run: one row per step globally and per
# rank, the logged loss equals the printed one and log.tsv, bytes per group
# equal the layout's analytic volume on every rank and step, units and
# descriptions on every dataset, the segment records the layout.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
"$TRAIN" --model tiny --print-config > "$WORK/tiny.json"
timeout 300 "$MPIEXEC" -n 8 "$TRAIN" --model tiny --data "$CORPUS" --steps 3 --seq-len 32 \
  --batch 1 --grad-accum 2 --tp 2 --pp 2 --zero1 --eval-interval 2 --eval-batches 1 \
  --metrics-interval 2 --run-dir "$WORK/run" > "$WORK/out" 2>&1 || { cat "$WORK/out"; fail "run"; }
cat "$WORK/out"
"$PYTHON" - "$WORK/tiny.json" "$WORK/run" "$WORK/out" "$HPT_SRC/tests/helpers" <<'PY' || fail "metrics file check"
import json, re, sys
import h5py, numpy as np
sys.path.insert(0, sys.argv[4])
from analytic_volume import expected
cfg = json.load(open(sys.argv[1]))
run, out = sys.argv[2], open(sys.argv[3]).read()
f = h5py.File(run + "/metrics.h5", "r", libver="latest", swmr=True)
assert f.attrs["format"] == "hpt-metrics" and f.attrs["format_version"] == 1
steps = f["steps/step"][:]
assert list(steps) == [1, 2, 3], steps
W, TP, PP, DP, M, B, T = 8, 2, 2, 2, 2, 1, 32
for name, d in f["ranks"].items():
    assert d.shape == (3, W), (name, d.shape)
for grp in ("steps", "ranks"):
    for name, d in f[grp].items():
        assert d.attrs["units"] and d.attrs["description"], name
# the loss as printed (4 decimals) and as in log.tsv (17 digits)
printed = [float(x) for x in re.findall(r"step \d+/3 \| loss ([0-9.]+)", out)]
log = np.loadtxt(run + "/log.tsv", skiprows=1)
loss = f["steps/loss"][:]
assert np.array_equal(loss, log[:, 1]), (loss, log[:, 1])
assert [round(x, 4) for x in loss] == printed, (loss, printed)
val = f["steps/val_loss"][:]
assert np.isnan(val[0]) and np.isfinite(val[1]) and np.isfinite(val[2]), val
assert np.allclose(f["steps/val_loss"][1:], log[1:, 4], rtol=0, atol=0, equal_nan=True)
# per-rank loss: the last stage's ranks average to the global loss
rl = f["ranks/loss"][:]
last = [w for w in range(W) if w // (TP * DP) == PP - 1]
assert np.all(np.isnan(rl[:, [w for w in range(W) if w not in last]]))
assert np.allclose(rl[:, last].mean(axis=1), loss, rtol=1e-6), (rl, loss)
# bytes per group: the analytic volume, every rank, every step
bad = 0
for g in ("tp", "pp", "dp", "mp", "embed"):
    got = f["ranks/bytes_" + g][:]
    for w in range(W):
        want = expected(cfg, TP, PP, DP, 1, 0, M, B, T, w, g)[1]
        if not np.all(got[:, w] == want):
            print(f"rank {w} {g}: {got[:, w]} bytes, expected {want}"); bad += 1
assert not bad
assert np.all(f["ranks/tokens"][:] == M * B * T) and np.all(f["steps/tokens"][:] == M * B * T * DP)
for c in ("step_time", "forward", "backward", "busy", "peak_rss", "comm_tp", "comm_dp"):
    assert np.all(f["ranks/" + c][:] > 0), c
assert np.all(np.isfinite(f["ranks/grad_sumsq"][:])) and np.all(f["ranks/grad_sumsq"][:] > 0)
assert np.all(np.isfinite(f["steps/noise_g2"][:])) and np.all(np.isfinite(f["steps/noise_s"][:]))
assert np.all(f["steps/mfu"][:] > 0) and "flop_formula" in f["steps/mfu"].attrs
seg = f["segments"][:]
assert len(seg) == 1 and (seg["world"][0], seg["tp"][0], seg["pp"][0], seg["dp"][0], seg["zero1"][0]) == (8, 2, 2, 2, 1), seg
kinds = [k.decode() for k in f["events"]["kind"]]
assert kinds[0] == "run_start" and kinds[-1] == "run_end", kinds
print("metrics file: 3 rows x 8 ranks, loss == printed == log.tsv, bytes == analytic volume")
PY
pass "metrics of a (2,2,2) ZeRO-1 run"
