#!/bin/sh
# Bad input: HPT_CPU_KERNELS naming a kernel set that does not exist (or that
# this CPU cannot run) is refused with the choices, exit 2, instead of being
# ignored or crashing on an illegal instruction.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "HPT_CPU_KERNELS=sse9: not a kernel set .*choose one of: .*generic" \
  env HPT_CPU_KERNELS=sse9 "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --run-dir "$WORK/run"
env HPT_CPU_KERNELS=generic "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 1 --seq-len 16 \
  --eval-interval 0 --quiet --run-dir "$WORK/ok" >/dev/null || fail "HPT_CPU_KERNELS=generic refused"
pass "HPT_CPU_KERNELS: unknown name refused, generic accepted"
