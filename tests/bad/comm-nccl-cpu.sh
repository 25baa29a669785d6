#!/bin/sh
# Bad input: --comm nccl with the cpu backend (NCCL moves GPU buffers only)
# is refused with a pointer to --comm mpi; --comm mpi and auto train.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
expect_error 2 "\-\-comm nccl: NCCL moves GPU buffers; \-\-backend cpu keeps its buffers in host memory" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --comm nccl
for c in mpi auto; do
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --seq-len 32 --batch 1 --eval-batches 1 --quiet \
    --comm $c > "$WORK/$c.out" 2>&1 || { cat "$WORK/$c.out"; fail "--comm $c refused on the cpu backend"; }
done
echo "PASS: --comm nccl refused on cpu; mpi and auto accepted"
