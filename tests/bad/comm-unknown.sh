#!/bin/sh
# Bad input: an unknown --comm backend is refused, on every rank alike
# (exit 2, one message), before any collective can hang.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "\-\-comm bogus: unknown communication backend \(mpi, nccl or auto\)" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --comm bogus
export OMP_NUM_THREADS=1
timeout 120 "$MPIEXEC" -n 2 "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --comm '' \
  > "$WORK/two" 2>&1 && fail "--comm '' accepted on 2 ranks"
[ "$(grep -c "unknown communication backend" "$WORK/two")" -eq 1 ] ||
  { cat "$WORK/two"; fail "2 ranks: the message is not printed exactly once"; }
echo "PASS: --comm bogus / '' refused (exit 2, one message on 2 ranks)"
