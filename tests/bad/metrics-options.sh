#!/bin/sh
# Bad input: metrics options out of range → exit 2 naming the option.
. "$HPT_SRC/tests/lib.sh"
need_corpus
run() { "$TRAIN" --model tiny --data "$CORPUS" --steps 2 --batch 1 --seq-len 32 --eval-batches 1 "$@"; }
expect_error 2 "\-\-metrics-interval 0: must be >= 1" run --metrics-interval 0
expect_error 2 "\-\-peak-flops -1: must be >= 0" run --peak-flops -1
expect_error 2 "\-\-slow-rank-factor 0.5 / \-\-spike-factor 4: must be > 1" run --slow-rank-factor 0.5
expect_error 2 "\-\-fault-slow-rank needs \-\-fault-slow-ms > 0" run --fault-slow-rank 0
expect_error 2 "\-\-metrics-interval 'x': not an integer" run --metrics-interval x
pass "bad metrics options refused"
