#!/bin/sh
# Bad input: `hpt-metrics report|csv FILE -o OUT` where OUT is the input
# metrics file itself — the same path, another path to it, or a symbolic
# link to it (also a dangling OUT whose temporary OUT.tmp is the input) →
# exit 2 naming OUT and the input, before anything is written: the input is
# byte-for-byte unchanged and still reads as a metrics file.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
HM="$HPT_BUILD/src/hpt-metrics"
"$TRAIN" --model tiny --data "$CORPUS" --steps 2 --batch 1 --seq-len 32 --eval-batches 1 --quiet \
  --run-dir "$WORK/r" > "$WORK/train.out" 2>&1 || { cat "$WORK/train.out"; fail "training run"; }
M="$WORK/m.h5"
cp "$WORK/r/metrics.h5" "$M"
cp "$M" "$WORK/orig.h5"
unchanged() {
  cmp -s "$M" "$WORK/orig.h5" || fail "$1 changed the input metrics file"
  "$HM" summary "$M" > /dev/null || fail "$1: the input no longer reads as a metrics file"
}
msg="^hpt-metrics: -o $M: is the input metrics file $M \(it would be overwritten\)"
expect_error 2 "$msg" "$HM" report "$M" -o "$M"
unchanged "report -o INPUT"
expect_error 2 "$msg" "$HM" csv "$M" -o "$M"
unchanged "csv -o INPUT"
expect_error 2 "$msg" "$HM" csv "$M" --ranks step_time -o "$M"
unchanged "csv --ranks -o INPUT"
# another spelling of the same path; the input second among several runs
expect_error 2 "^hpt-metrics: -o $WORK/./m.h5: is the input metrics file $M" \
  "$HM" report "$WORK/r/metrics.h5" "$M" -o "$WORK/./m.h5"
unchanged "report -o ./INPUT"
# through a symbolic link: the link's target would have been replaced
ln -s m.h5 "$WORK/link.html"
expect_error 2 "^hpt-metrics: -o $WORK/link.html: is the input metrics file $M" "$HM" report "$M" -o "$WORK/link.html"
unchanged "report -o LINK-TO-INPUT"
[ -L "$WORK/link.html" ] || fail "the link was replaced"
expect_error 2 "^hpt-metrics: -o $WORK/link.html: is the input metrics file $M" "$HM" csv "$M" -o "$WORK/link.html"
unchanged "csv -o LINK-TO-INPUT"
# a new OUT whose temporary file OUT.tmp would be the input
cp "$M" "$WORK/n.h5.tmp"; cp "$M" "$WORK/tmp-orig.h5"
expect_error 2 "^hpt-metrics: -o $WORK/n.h5: its temporary file .*n.h5.tmp is the input metrics file" \
  "$HM" csv "$WORK/n.h5.tmp" -o "$WORK/n.h5"
cmp -s "$WORK/n.h5.tmp" "$WORK/tmp-orig.h5" || fail "csv -o OUT truncated the input OUT.tmp"
[ ! -e "$WORK/n.h5" ] || fail "an output was written"
"$PYTHON" -c "import h5py, sys; h5py.File(sys.argv[1], 'r')['steps/step'][:]" "$M" ||
  fail "h5py cannot read the input"
# an unrelated OUT still works
"$HM" report "$M" -o "$WORK/ok.html" && grep -q "window.HPT_DATA" "$WORK/ok.html" || fail "report to another file"
"$HM" csv "$M" -o "$WORK/ok.csv" && [ -s "$WORK/ok.csv" ] || fail "csv to another file"
pass "an output that is the input metrics file is refused"
