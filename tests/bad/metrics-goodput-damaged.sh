#!/bin/sh
# Bad input: hpt-metrics goodput (and hpt-plan --measured, which reads the
# same) on a run directory whose metrics.h5 is damaged — cut to its first
# 2 KiB, or an hpt metrics file with /steps/wall_time missing — is refused
# naming the file and what is wrong (exit 3), never a made-up goodput.
. "$HPT_SRC/tests/helpers/lib.sh"
"$PYTHON" -c "import h5py, numpy" || fail "python3-h5py missing (setup.sh installs it)"
HM="$HPT_BUILD/src/hpt-metrics"
mkdir "$WORK/cut" "$WORK/gone"
"$PYTHON" - "$WORK/full.h5" "$WORK/gone/metrics.h5" <<'PY' || fail "h5py"
import sys, h5py
cols = ("step segment repeated skipped wall_time loss val_loss lr grad_norm clip_coef tokens step_time "
        "tokens_per_s flops mfu noise_g2 noise_s noise_scale").split()
for path, drop in ((sys.argv[1], None), (sys.argv[2], "wall_time")):
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "hpt-metrics"
        f.attrs["format_version"] = 1
        for c in cols:
            if c != drop:
                f["steps/" + c] = [1.0] * 1000
        f["ranks/busy"] = [[1.0]] * 1000
        f["ranks/step_time"] = [[1.0]] * 1000
        f["segments"] = [1]
        f["events"] = [1]
PY
head -c 2048 "$WORK/full.h5" > "$WORK/cut/metrics.h5"
expect_error 3 "cut/metrics.h5: not a readable HDF5 file, or truncated" "$HM" goodput "$WORK/cut"
expect_error 3 "gone/metrics.h5: dataset /steps/wall_time is missing" "$HM" goodput "$WORK/gone"
expect_error 3 "\-\-measured $WORK/gone: .*gone/metrics.h5: dataset /steps/wall_time is missing" \
  "$HPT_BUILD/src/hpt-plan" --model tiny --cluster cpu-local --seq-len 32 --global-batch 2 --mtbf-hours 1 --measured "$WORK/gone"
