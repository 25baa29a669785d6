#!/bin/sh
# hpt-plan --search with --cp: the winner's explanation names the real DP
# (the planner evaluates CP in its "CP view", DP' = CP x DP replicas): the
# gradient line of TP 2 x CP 2 x DP 1 on 4 GPUs said "DP 2", contradicting
# the "why ... DP 1" header and the hpt-train options (--dp 1). The --help
# texts of hpt-plan (--gpus, --search) and hpt-train (--dp) count CP.
. "$HPT_SRC/tests/helpers/lib.sh"
"$HPT_BUILD/src/hpt-plan" --model tiny --cluster cpu-local --seq-len 32 --global-batch 4 --search \
  --gpus 4 --cp 2 > "$WORK/s.out" 2>&1 || { cat "$WORK/s.out"; fail "hpt-plan --search --cp 2"; }
cat "$WORK/s.out"
why=$(sed -n 's/^why TP [0-9]* x CP 2 x PP [0-9]* x DP \([0-9]*\),.*/\1/p' "$WORK/s.out")
opt=$(sed -n 's/^hpt-train options: .*--dp \([0-9]*\) .*/\1/p' "$WORK/s.out")
[ -n "$why" ] && [ "$why" = "$opt" ] || fail "why line DP '$why' vs hpt-train --dp '$opt'"
grep -q "^  - DP $why x CP 2 (the weight replicas): gradient all-reduce of " "$WORK/s.out" ||
  fail "the gradient line does not name DP $why x CP 2"
# the --help texts count CP in the inferred DP and --search's layouts
"$HPT_BUILD/src/hpt-plan" --help | tr -s ' \n' '  ' > "$WORK/plan.help"
grep -q "DP = N / (TP x CP x PP) when --dp is not given" "$WORK/plan.help" || fail "hpt-plan --help: --gpus's DP"
grep -q "ZB-H1; cpu-local: CP 1, 2, 4, 8)" "$WORK/plan.help" || fail "hpt-plan --help: --search's CP and ZB-H1"
grep -q "(PP > 1), --cp N --top" "$WORK/plan.help" || fail "hpt-plan --help: --search keeps --cp"
"$TRAIN" --help | grep -q "data parallel size \[world size / (TP x CP x PP)\]" || fail "hpt-train --help: --dp"
pass "hpt-plan --search --cp 2: the explanation's DP is hpt-train's; --help counts CP"
