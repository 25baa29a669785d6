#!/bin/sh
# Bad input: metrics options out of range → exit 2 naming the option.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
run() { "$TRAIN" --model tiny --data "$CORPUS" --steps 2 --batch 1 --seq-len 32 --eval-batches 1 "$@"; }
expect_error 2 "\-\-metrics-interval 0: must be >= 1" run --metrics-interval 0
expect_error 2 "\-\-peak-flops -1: must be >= 0" run --peak-flops -1
expect_error 2 "\-\-slow-rank-factor 0.5 / \-\-spike-factor 4: must be > 1" run --slow-rank-factor 0.5
expect_error 2 "\-\-fault-slow-rank needs \-\-fault-slow-ms > 0" run --fault-slow-rank 0
expect_error 2 "\-\-metrics-interval 'x': not an integer" run --metrics-interval x
# test faults that could not take effect are refused, not silently ignored
expect_error 2 "\-\-fault-nan-rank 1: not a rank of this 1-rank job" run --fault-nan-steps 2 --fault-nan-rank 1
expect_error 2 "\-\-fault-nan-rank needs \-\-fault-nan-steps" run --fault-nan-rank 0
expect_error 2 "\-\-fault-slow-rank 3: not a rank of this 1-rank job" run --fault-slow-rank 3 --fault-slow-ms 10
expect_error 2 "\-\-fault-slow-ms needs \-\-fault-slow-rank" run --fault-slow-ms 100
# the metrics file may not be another output of the run
expect_error 2 "\-\-metrics $WORK/r/log.tsv: is the run directory's log.tsv" run --run-dir "$WORK/r" --metrics "$WORK/r/log.tsv"
expect_error 2 "\-\-metrics $WORK/w.h5: same file as \-\-export" run --metrics "$WORK/w.h5" --export "$WORK/./w.h5"
pass "bad metrics options refused"
