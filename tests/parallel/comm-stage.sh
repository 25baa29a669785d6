#!/bin/sh
# Host staging of device buffers (lib/comm_stage.c): every operation of the
# communication table on emulated device memory (PROT_NONE outside the
# staging copies, so MPI touching it directly crashes the rank) equals the
# plain MPI backend bit for bit, on 2, 3 and 4 ranks.
. "$HPT_SRC/tests/helpers/lib.sh"
export OMP_NUM_THREADS=1
for n in 2 3 4; do
  timeout 120 "$MPIEXEC" -n $n "$HPT_BUILD/tests/unit/test_comm_stage" > "$WORK/out.$n" 2>&1 ||
    { cat "$WORK/out.$n"; fail "test_comm_stage on $n ranks"; }
  grep -q "all staged operations equal" "$WORK/out.$n" || { cat "$WORK/out.$n"; fail "no verdict on $n ranks"; }
done
pass "staged operations equal the MPI backend on 2, 3 and 4 ranks"
