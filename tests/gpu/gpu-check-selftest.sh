#!/bin/sh
# bench/gpu-check.sh, the two prepared device calls of issues 12, 16 and 34,
# runs on the GPU machine only when one is lent, so its logic is checked
# here with no GPU (--selftest): the NCCL section's runs and checks on the
# CPU backend with MPI in place of NCCL, in the size-1 mode (log comparison
# bit for bit, banner and plan line, loss falling, tokens/s of a timed run),
# that the comparison can fail; the size-1 plan at 2 ranks and PP 2 and a
# bad HPT_NCCL_SIZE1 refused (--comm mpi standing in); stage()'s caps (a
# pass, exit 77 as SKIP, a stage killed at its own cap, one killed at the
# budget with its children, the next skipped); the figures with PyTorch
# missing and present; the loss comparisons; the kernel classes of an
# nsys kernel summary (call 3); the summary (verdicts first)
# and the one tarball that come back; call 2's reuse of call 1's build.
# Each must print PASS.
. "$HPT_SRC/tests/helpers/lib.sh"
st=0
bash "$HPT_SRC/bench/gpu-check.sh" --selftest "$HPT_BUILD" > "$WORK/out" 2>&1 || st=$?
cat "$WORK/out"
[ "$st" = 0 ] || fail "gpu-check.sh --selftest $HPT_BUILD: exit $st"
n=$(grep -c '^PASS' "$WORK/out")
[ "$n" = 13 ] || fail "gpu-check.sh --selftest: $n checks passed, expected 13"
pass "bench/gpu-check.sh's NCCL checks, size-1 plan, stage caps, figures, summary, tarball and build reuse work without a GPU"
