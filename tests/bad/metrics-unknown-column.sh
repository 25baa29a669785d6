#!/bin/sh
# Bad input: hpt-metrics csv --ranks with a column the file does not have
# names it and lists the known ones (exit 2); -o into a missing directory
# is an output error naming the path (exit 5) and leaves nothing behind;
# so is plot_metrics.py -o under a regular file.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$TRAIN" --model tiny --data "$CORPUS" --seq-len 16 --batch 1 --steps 2 --eval-interval 0 --quiet \
  --run-dir "$WORK/r" > "$WORK/r.out" 2>&1 || { cat "$WORK/r.out"; fail "training run"; }
HM="$HPT_BUILD/src/hpt-metrics"
expect_error 2 "hpt-metrics: --ranks bogus: .*metrics.h5 has no per-rank column 'bogus' \(known: .*busy.*step_time" \
  "$HM" csv "$WORK/r/metrics.h5" --ranks bogus
expect_error 2 "hpt-metrics: --ranks \.\./steps/loss: .* has no per-rank column" "$HM" csv "$WORK/r/metrics.h5" --ranks ../steps/loss
expect_error 5 "hpt-metrics: -o $WORK/no/dir/x.csv: cannot write" "$HM" csv "$WORK/r/metrics.h5" -o "$WORK/no/dir/x.csv"
expect_error 5 "plot_metrics.py: output directory .*log.tsv/figs: Not a directory" \
  "$PYTHON" "$HPT_SRC/analysis/plot_metrics.py" "$WORK/r/metrics.h5" -o "$WORK/r/log.tsv/figs"
