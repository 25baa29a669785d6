#!/bin/sh
# Bad input (hpt-plan --search): a --seq-len beyond the model's
# max_position_embeddings is refused naming it, exit 2, as without
# --search — not "no valid layout for N GPUs: TP must divide the node ...",
# which blamed the layouts (also with --cp, whose chunks are shorter).
. "$HPT_SRC/tests/helpers/lib.sh"
P="$HPT_BUILD/src/hpt-plan --model tiny --cluster cpu-local --global-batch 8"
expect_error 2 "\-\-seq-len 4096 exceeds the model's max_position_embeddings = 256" \
  $P --seq-len 4096 --gpus 4
expect_error 2 "\-\-seq-len 4096 exceeds the model's max_position_embeddings = 256" \
  $P --seq-len 4096 --search --gpus 4
expect_error 2 "\-\-seq-len 4096 exceeds the model's max_position_embeddings = 256" \
  $P --seq-len 4096 --search --gpus 4 --cp 2
expect_error 2 "\-\-seq-len 512 exceeds the model's max_position_embeddings = 256" \
  "$HPT_BUILD/src/hpt-plan" --model tiny --cluster h100-80gb --global-batch 8 --seq-len 512 --search --gpus 8
# the largest valid length still searches
"$HPT_BUILD/src/hpt-plan" --model tiny --cluster cpu-local --global-batch 8 --seq-len 256 --search \
  --gpus 4 --cp 2 > "$WORK/ok.out" 2>&1 || { cat "$WORK/ok.out"; fail "--seq-len 256 --search refused"; }
grep -q "^hpt-train options: .*--cp 2" "$WORK/ok.out" || { cat "$WORK/ok.out"; fail "no winner at --seq-len 256"; }
pass "hpt-plan --search: a --seq-len beyond max_position_embeddings is named, exit 2"
