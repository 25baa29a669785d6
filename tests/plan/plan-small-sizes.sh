#!/bin/sh
# hpt-plan --search where nothing fits in less than 1 GiB per GPU (a tiny
# model, --mem-gb 0.001): the capacity and the smallest need are printed in
# MiB, not as "0.0 GiB"; 1 GiB and more stay in GiB.
. "$HPT_SRC/tests/helpers/lib.sh"
P="$HPT_BUILD/src/hpt-plan"
"$P" --model tiny --cluster h100-80gb --seq-len 32 --global-batch 4 --search --gpus 2 --mem-gb 0.001 \
  > "$WORK/tiny.txt" || { cat "$WORK/tiny.txt"; fail "search: exit status"; }
cat "$WORK/tiny.txt"
grep -q "^[0-9]* layouts for 2 GPUs, none fits in 1\.0 MiB$" "$WORK/tiny.txt" ||
  fail "the capacity below 1 GiB is not in MiB"
"$P" --model tiny --cluster cpu-local --seq-len 32 --global-batch 4 --search --gpus 2 --mem-gb 0.001 \
  > "$WORK/cpu.txt" || { cat "$WORK/cpu.txt"; fail "search (cpu-local): exit status"; }
cat "$WORK/cpu.txt"
grep -q "^no layout fits: the smallest needs [0-9]*\.[0-9] MiB per GPU$" "$WORK/cpu.txt" &&
  ! grep -q " 0\.0 GiB" "$WORK/cpu.txt" || fail "the smallest need below 1 GiB is not in MiB"
"$P" --model tiny --cluster h100-80gb --seq-len 32 --global-batch 4 --search --gpus 2 --mem-gb 4 \
  > "$WORK/gib.txt" || fail "search with 4 GB"
grep -q "^[0-9]* layouts for 2 GPUs, [0-9]* fit in 3\.7 GiB; fastest first:$" "$WORK/gib.txt" ||
  { cat "$WORK/gib.txt"; fail "1 GiB and more are no longer in GiB"; }
pass "hpt-plan prints capacities and needs below 1 GiB in MiB"
