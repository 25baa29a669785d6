#!/bin/sh
# Bad input (hpt-plan): a layout that does not divide the GPU count, or
# does not fill whole nodes, or does not match --nodes or --gpus, is
# refused; --gpus and --nodes that disagree (with and without --search) and
# options the mode does not use are refused, naming them.
. "$HPT_SRC/tests/helpers/lib.sh"
M="--model llama2-70b --cluster h100-80gb --seq-len 4096 --global-batch 96"
expect_error 2 "\-\-tp 8 x \-\-pp 3 = 24 does not divide the 16 GPUs of \-\-nodes 2 x \-\-gpus-per-node 8" \
  "$HPT_BUILD/src/hpt-plan" $M --tp 8 --pp 3 --nodes 2
expect_error 2 "layout \-\-tp 4 x \-\-pp 1 x \-\-dp 3 = 12 GPUs is not a whole number of 8-GPU nodes" \
  "$HPT_BUILD/src/hpt-plan" $M --tp 4 --pp 1 --dp 3
expect_error 2 "layout \-\-tp 8 x \-\-pp 2 x \-\-dp 3 = 48 GPUs does not match the cluster: \-\-nodes 4 x \-\-gpus-per-node 8 = 32 GPUs" \
  "$HPT_BUILD/src/hpt-plan" $M --tp 8 --pp 2 --dp 3 --nodes 4
expect_error 2 "\-\-gpus 12 is not a whole number of 8-GPU nodes" "$HPT_BUILD/src/hpt-plan" $M --search --gpus 12
# ... but a layout inside one node may use part of it, whether the node's
# size is the preset's or --gpus-per-node's (as --search's --gpus 2)
for g in "" "--gpus-per-node 4"; do
  "$HPT_BUILD/src/hpt-plan" $M --tp 2 $g > "$WORK/part.out" 2>&1 ||
    { cat "$WORK/part.out"; fail "--tp 2 $g: a layout on part of one node refused"; }
  grep -q "^cluster: h100-80gb, 1 node x 2 GPUs," "$WORK/part.out" ||
    fail "--tp 2 $g: $(grep '^cluster' "$WORK/part.out")"
done
expect_error 2 "\-\-tp 8 x \-\-pp 3 = 24 does not divide the 128 GPUs of \-\-gpus" \
  "$HPT_BUILD/src/hpt-plan" $M --tp 8 --pp 3 --gpus 128
expect_error 2 "layout \-\-tp 8 x \-\-pp 4 x \-\-dp 2 = 64 GPUs does not match the 128 GPUs of \-\-gpus" \
  "$HPT_BUILD/src/hpt-plan" $M --tp 8 --pp 4 --dp 2 --gpus 128
expect_error 2 "\-\-gpus 128 conflicts with \-\-nodes 4 x \-\-gpus-per-node 8 = 32 GPUs" \
  "$HPT_BUILD/src/hpt-plan" $M --tp 8 --pp 4 --gpus 128 --nodes 4
expect_error 2 "\-\-gpus 16 conflicts with \-\-nodes 4 x \-\-gpus-per-node 8 = 32 GPUs" \
  "$HPT_BUILD/src/hpt-plan" $M --search --gpus 16 --nodes 4
expect_error 2 "\-\-top is only used with \-\-search" "$HPT_BUILD/src/hpt-plan" $M --tp 8 --top 3
expect_error 2 "\-\-ranks-tsv is not used with \-\-search" \
  "$HPT_BUILD/src/hpt-plan" $M --search --gpus 8 --ranks-tsv "$WORK/r.tsv"
[ ! -e "$WORK/r.tsv" ] || fail "--ranks-tsv written although refused"
expect_error 2 "\-\-pp-schedule 'zb': expected 1f1b, gpipe, interleaved or zb-h1" "$HPT_BUILD/src/hpt-plan" $M --pp 2 --pp-schedule zb
