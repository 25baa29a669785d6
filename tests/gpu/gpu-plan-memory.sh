#!/bin/sh
# hpt-plan's per-rank memory estimate for a GPU layout against the peak
# device memory the CUDA backend records (issue 12: /ranks/device_mem in
# metrics.h5, the bytes held at the peak by the backend's allocations,
# bf16 working copies and scratch included). The `small` model, one rank,
# micro-batch 8 x 256 tokens, 3 steps, --comm mpi (host staging: no device
# communication buffers), in four modes: bf16 without recomputation, bf16
# with selective recomputation, fp32, tf32. hpt-plan runs the same layout on the
# h200-141gb preset with --baseline-mib 0 (the CUDA context and cuBLAS's
# workspace are not allocations of the backend) and --precision as the run.
# Asserts per mode: the predicted total within 25 % of the measured peak;
# that selective recomputation lowers the peak both measured and
# predicted; and that tf32's attention chunk scratch raises it above fp32's
# (the flash kernels') both measured and predicted. Skipped (77) when hpt was built without CUDA or no GPU is
# visible.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
PLAN="$HPT_BUILD/src/hpt-plan"
A="--model small --data $CORPUS --steps 3 --seq-len 256 --batch 8 --eval-interval 0 --eval-batches 1 --quiet --backend cuda --comm mpi"
run() {  # run NAME PRECISION RECOMPUTE
  st=0
  "$TRAIN" $A --precision "$2" --recompute "$3" --run-dir "$WORK/$1" > "$WORK/$1.out" 2>&1 || st=$?
  if [ "$st" -ne 0 ]; then
    cat "$WORK/$1.out"
    skip_without_cuda "$WORK/$1.out"
    fail "$1: hpt-train --backend cuda --precision $2 --recompute $3 failed (exit $st)"
  fi
  "$PLAN" --model small --cluster h200-141gb --tp 1 --pp 1 --dp 1 --seq-len 256 --global-batch 8 \
    --micro-batch 8 --recompute "$3" --precision "$2" --comm mpi --baseline-mib 0 --json \
    > "$WORK/$1.plan.json" || fail "$1: hpt-plan failed"
}
run bf16 bf16 none
run bf16sel bf16 selective
run fp32 fp32 none
run tf32 tf32 none
"$PYTHON" - "$WORK" <<'PY' || fail "hpt-plan's memory estimate against the measured device peak (above)"
import json, re, sys
w = sys.argv[1]
bad, got = [], {}
for name in ("bf16", "bf16sel", "fp32", "tf32"):
    # hpt-train's line (the bytes /ranks/device_mem records, tests/gpu/gpu-train.sh;
    # no h5py: the GPU machine's Python may have none)
    m = re.search(r"^peak device memory: .* \((\d+) bytes", open(f"{w}/{name}.out").read(), re.M)
    if not m:
        sys.exit(f"{name}: no 'peak device memory' line in its output")
    meas = float(m.group(1))
    pred = float(json.load(open(f"{w}/{name}.plan.json"))["memory"]["worst"]["total"])
    err = (pred - meas) / meas
    got[name] = (meas, pred)
    print(f"{name}: measured peak {meas / 2**20:.1f} MiB, hpt-plan {pred / 2**20:.1f} MiB, "
          f"error {err:+.1%}")
    if not abs(err) <= 0.25:
        bad.append(f"{name}: hpt-plan {pred:.0f} bytes vs measured {meas:.0f} ({err:+.1%}, limit 25 %)")
for i, what in ((0, "measured"), (1, "hpt-plan")):
    if not got["bf16sel"][i] < got["bf16"][i]:
        bad.append(f"selective recomputation does not lower the {what} peak: "
                   f"{got['bf16sel'][i]:.0f} vs {got['bf16'][i]:.0f} bytes")
    if not got["tf32"][i] > got["fp32"][i]:
        bad.append(f"tf32's attention scratch does not raise the {what} peak over fp32's: "
                   f"{got['tf32'][i]:.0f} vs {got['fp32'][i]:.0f} bytes")
for b in bad:
    print("FAIL", b)
sys.exit(1 if bad else 0)
PY
echo "PASS: hpt-plan's GPU memory estimate within 25 % of the measured device peak"
