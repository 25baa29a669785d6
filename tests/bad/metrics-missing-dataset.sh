#!/bin/sh
# Bad input: a damaged metrics file (right format attributes, /steps/loss
# missing) is refused naming the dataset (exit 3) by the readers; hpt-train
# moves it aside and trains with a new file (exit 0; a damaged metrics file
# never ends a training job — issue 17, finding 9; before: exit 5).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
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
cp "$WORK/d.h5" "$WORK/d.orig"
expect_error 0 "metrics file $WORK/d.h5: dataset /steps/loss is missing or unreadable \(HDF5: .+\); moved to $WORK/d.h5.unreadable-" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 2 --batch 1 --seq-len 32 --eval-batches 1 --quiet --metrics "$WORK/d.h5"
cmp -s "$WORK"/d.h5.unreadable-* "$WORK/d.orig" || fail "the damaged file was not kept unchanged"
"$HPT_BUILD/src/hpt-metrics" summary "$WORK/d.h5" | grep -q "^steps: 2 (1-2)" || fail "no new file"
