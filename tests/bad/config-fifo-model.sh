#!/bin/sh
# Bad input: a FIFO given as --model (hpt-train and hpt-plan) is refused at
# once (fopen used to wait for a writer for ever). `timeout` turns a hang
# into a failure.
. "$HPT_SRC/tests/helpers/lib.sh"
mkfifo "$WORK/config.json" || fail "mkfifo"
expect_error 2 "config.json: model config is not a regular file \(a FIFO\)" \
  timeout -k 5 60 "$TRAIN" --model "$WORK/config.json" --print-config
expect_error 2 "config.json: model config is not a regular file \(a FIFO\)" \
  timeout -k 5 60 "$HPT_BUILD/src/hpt-plan" --model "$WORK/config.json" --cluster cpu-local \
  --seq-len 16 --global-batch 1
# a model directory whose config.json is the FIFO
expect_error 2 "config.json: model config is not a regular file \(a FIFO\)" \
  timeout -k 5 60 "$HPT_BUILD/src/hpt-plan" --model "$WORK" --cluster cpu-local \
  --seq-len 16 --global-batch 1
