#!/bin/sh
# Bad input (hpt-plan): --comm other than nccl/mpi, --comm nccl on the CPU
# cluster (hpt's CPU backend refuses it too), --nccl-algo without NCCL and
# an unknown algorithm.
. "$HPT_SRC/tests/helpers/lib.sh"
P="$HPT_BUILD/src/hpt-plan"
expect_error 2 "\-\-comm 'gloo': expected nccl, mpi or auto" \
  "$P" --model small --cluster h100-80gb --seq-len 256 --global-batch 8 --comm gloo
expect_error 2 "\-\-comm nccl: cluster cpu-local is hpt's CPU backend, whose buffers NCCL cannot move" \
  "$P" --model small --cluster cpu-local --seq-len 256 --global-batch 8 --comm nccl
expect_error 2 "\-\-nccl-algo is only used with \-\-comm nccl \(the plan models MPI\)" \
  "$P" --model small --cluster h100-80gb --seq-len 256 --global-batch 8 --comm mpi --nccl-algo tree
expect_error 2 "\-\-nccl-algo is only used with \-\-comm nccl \(the plan models cluster cpu-local with MPI\)" \
  "$P" --model small --cluster cpu-local --seq-len 256 --global-batch 8 --nccl-algo ring
expect_error 2 "\-\-nccl-algo 'nvls': expected ring, tree or auto" \
  "$P" --model small --cluster h100-80gb --seq-len 256 --global-batch 8 --nccl-algo nvls
pass "hpt-plan refuses bad --comm / --nccl-algo values and combinations"
