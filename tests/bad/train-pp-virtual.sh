#!/bin/sh
# Bad input for the interleaved pipeline schedule, each a usage error (exit
# 2) with its rule, before any step: --pp-virtual without --pp-schedule
# interleaved; interleaved with V < 2 or on one stage; the micro-batches
# not a multiple of --pp (naming the nearest valid counts); V whose P x V
# chunks do not divide the layers; more virtual stages than layers; a
# --pp-split without P x V counts.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$TRAIN" --model tiny --print-config > "$WORK/tiny.json" || fail "--print-config"
"$PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1])); c["num_hidden_layers"] = 6
json.dump(c, open(sys.argv[2], "w"))' "$WORK/tiny.json" "$WORK/t6.json" || fail "config"
A="--model $WORK/t6.json --data $CORPUS --seq-len 32 --steps 2 --batch 1 --quiet"
T="timeout 120 $MPIEXEC -n 2 $TRAIN $A"
expect_error 2 "\-\-pp-virtual 2 needs --pp-schedule interleaved" $T --pp 2 --grad-accum 4 --pp-virtual 2
expect_error 2 "\-\-pp-schedule interleaved needs --pp-virtual V >= 2" $T --pp 2 --grad-accum 4 --pp-schedule interleaved
expect_error 2 "\-\-pp-virtual 0: must be >= 1" $T --pp 2 --grad-accum 4 --pp-schedule interleaved --pp-virtual 0
expect_error 2 "\-\-grad-accum 5: --pp-schedule interleaved needs the micro-batches per step to be a multiple of --pp 2 \(the nearest: 4 or 6\)" \
  $T --pp 2 --grad-accum 5 --pp-schedule interleaved --pp-virtual 3
expect_error 2 "\-\-grad-accum 1: .* multiple of --pp 2 \(the nearest: 2\)" \
  $T --pp 2 --grad-accum 1 --pp-schedule interleaved --pp-virtual 3
expect_error 2 "\-\-pp-virtual 2: the model's 6 layers do not split into --pp 2 x 2 = 4 equal model chunks" \
  $T --pp 2 --grad-accum 4 --pp-schedule interleaved --pp-virtual 2
expect_error 2 "\-\-pp 2 x --pp-virtual 4 = 8 virtual stages: more than the model's 6 layers" \
  $T --pp 2 --grad-accum 4 --pp-schedule interleaved --pp-virtual 4
expect_error 2 "\-\-pp-split '3,3': 2 counts summing to 6, expected 4 counts \(--pp x --pp-virtual\)" \
  $T --pp 2 --grad-accum 4 --pp-schedule interleaved --pp-virtual 2 --pp-split 3,3
expect_error 2 "\-\-pp-schedule interleaved needs --pp >= 2" \
  timeout 120 "$TRAIN" $A --grad-accum 2 --pp-schedule interleaved --pp-virtual 2
expect_error 2 "\-\-pp-schedule 'zigzag': expected 1f1b, gpipe, interleaved or zb-h1" \
  timeout 120 "$TRAIN" $A --pp-schedule zigzag
pass "--pp-virtual / --pp-schedule interleaved: each bad input refused with its rule"
