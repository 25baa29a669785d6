#!/bin/sh
# bench/gpu-check.sh, the one prepared device call of issues 12 and 16, runs
# on the GPU machine only when one is lent, so its logic is checked here
# with no GPU (--selftest): the NCCL section's runs and checks on the CPU
# backend with MPI in place of NCCL (log comparison bit for bit, banner,
# loss falling, tokens/s of a timed run), that the comparison can fail, and
# stage()'s time budget (a passing stage; a hung one killed with its
# children at the budget; the next one skipped). Each must print PASS.
. "$HPT_SRC/tests/helpers/lib.sh"
st=0
bash "$HPT_SRC/bench/gpu-check.sh" --selftest "$HPT_BUILD" > "$WORK/out" 2>&1 || st=$?
cat "$WORK/out"
[ "$st" = 0 ] || fail "gpu-check.sh --selftest $HPT_BUILD: exit $st"
n=$(grep -c '^PASS' "$WORK/out")
[ "$n" = 6 ] || fail "gpu-check.sh --selftest: $n checks passed, expected 6"
pass "bench/gpu-check.sh's NCCL checks and stage time budget work without a GPU"
