#!/bin/sh
# Bad input: a damaged metrics file (right format attributes, /steps/loss
# missing) is refused naming the dataset (exit 3).
. "$HPT_SRC/tests/lib.sh"
"$PYTHON" - "$WORK/d.h5" <<'PY' || fail "h5py"
import sys, h5py
cols = ("step segment repeated skipped wall_time val_loss lr grad_norm clip_coef tokens step_time "
        "tokens_per_s flops mfu noise_g2 noise_s noise_scale").split()
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["format"] = "hpt-metrics"
    f.attrs["format_version"] = 1
    for c in cols:
        f["steps/" + c] = [1.0]
PY
expect_error 3 "d.h5: dataset /steps/loss is missing" "$HPT_BUILD/src/hpt-metrics" csv "$WORK/d.h5"
expect_error 3 "d.h5: dataset /steps/loss is missing" "$PYTHON" "$HPT_SRC/analysis/plot_metrics.py" "$WORK/d.h5" -o "$WORK/o"
