#!/bin/sh
# The check before NCCL is initialised (issue 16): two ranks on one GPU
# (what a one-GPU machine gives two MPI ranks: node-local rank mod 1 GPU).
#  - --comm nccl stops before ncclCommInitRank with exit 2 and a message
#    naming rank 1, its host, the GPU's PCI bus id and rank 0, once;
#  - --comm auto falls back to MPI with host staging and trains (the banner
#    says so).
# Skipped (77) when hpt was built without CUDA or NCCL, or no GPU is visible.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
grep -q "define HAVE_NCCL 1" "$HPT_BUILD/hpt_config.h" || { echo "SKIP: hpt built without NCCL"; exit 77; }
A="--model tiny --data $CORPUS --steps 3 --seq-len 64 --batch 2 --dp 2 --eval-interval 0 --eval-batches 1 --backend cuda"
st=0
timeout 600 "$MPIEXEC" -n 2 "$TRAIN" $A --comm nccl > "$WORK/nccl.out" 2>&1 || st=$?
cat "$WORK/nccl.out"
if grep -q "no CUDA device visible" "$WORK/nccl.out"; then echo "SKIP: no CUDA device visible"; exit 77; fi
if grep -q "built without the CUDA backend" "$WORK/nccl.out"; then echo "SKIP: hpt built without CUDA"; exit 77; fi
[ "$st" -eq 2 ] || fail "--comm nccl with two ranks on one GPU: exit $st, expected 2"
pat="NCCL needs a distinct GPU per rank, but rank 1 on [^ ]+ shares GPU [0-9a-fA-F:.]+ with rank 0"
[ "$(grep -cE "$pat" "$WORK/nccl.out")" -eq 1 ] || fail "message missing or printed more than once: /$pat/"
timeout 600 "$MPIEXEC" -n 2 "$TRAIN" $A --comm auto > "$WORK/auto.out" 2>&1 ||
  { cat "$WORK/auto.out"; fail "--comm auto with two ranks on one GPU failed"; }
grep -q "backend cuda, comm mpi+host-staging$" "$WORK/auto.out" ||
  { head -3 "$WORK/auto.out"; fail "--comm auto did not fall back to MPI with host staging"; }
pass "two ranks on one GPU: --comm nccl refused before NCCL (exit 2, ranks named), auto trains on MPI"
