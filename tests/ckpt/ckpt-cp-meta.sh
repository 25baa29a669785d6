#!/bin/sh
# A checkpoint records its writer's context parallelism (root attribute cp;
# the tensors do not depend on CP, so it resumes at any CP): a CP 2 run
# (2 ranks, --stop-at 1) resumed on one rank at CP 1 names CP 2 in the
# resume line, hpt-ckpt list and info show it, and metrics.h5 records a
# layout_change naming CP 2 -> CP 1 (before, the resume said "written by
# TP 1 x PP 1 x DP 1" and no layout_change). A checkpoint without the
# attribute (written before it existed: tests/helpers/make_ckpt.py) reads
# as CP 1.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
CKPT="$HPT_BUILD/src/hpt-ckpt"
A="--model tiny --data $CORPUS --steps 2 --seq-len 32 --batch 2 --eval-interval 0 --eval-batches 1 --quiet"
run_train r 2 --cp 2 --stop-at 1
"$PYTHON" -c 'import h5py, sys; a = h5py.File(sys.argv[1], "r").attrs; assert int(a["cp"]) == 2, dict(a)' \
  "$WORK/r/checkpoints/step_00000001/checkpoint.h5" || fail "attribute cp is not 2"
"$CKPT" list "$WORK/r" > "$WORK/list" || fail "hpt-ckpt list"
grep -qE '^ +1  1x1x1,cp2 +no ' "$WORK/list" || { cat "$WORK/list"; fail "list does not name CP 2"; }
"$CKPT" info "$WORK/r" > "$WORK/info" || fail "hpt-ckpt info"
grep -q "^layout         tp 1 x cp 2 x pp 1 x dp 1, no ZeRO$" "$WORK/info" || { cat "$WORK/info"; fail "info does not name CP 2"; }
run_train r 1
grep -q "resumed from .*step_00000001 (written by TP 1 x PP 1 x DP 1, context parallel CP 2) in [0-9.]* s, continuing as TP 1 x PP 1 x DP 1$" \
  "$WORK/r.out" || { cat "$WORK/r.out"; fail "the resume line does not name the checkpoint's CP 2"; }
"$PYTHON" - "$WORK/r/metrics.h5" <<'PY' || fail "layout_change"
import sys, h5py
f = h5py.File(sys.argv[1], "r", libver="latest", swmr=True)
ev = [(e["kind"].decode(), e["message"].decode()) for e in f["events"][:]]
changes = [m for k, m in ev if k == "layout_change"]
assert changes == ["checkpoint written by TP 1 x CP 2 x PP 1 x DP 1, re-sharded to TP 1 x PP 1 x DP 1 (grad-accum 1)"], changes
PY
# no attribute cp: CP 1
tiny_ckpts "$WORK/old" --steps 3
"$CKPT" info "$WORK/old" > "$WORK/old.info" || fail "hpt-ckpt info (old)"
grep -q "^layout         tp 1 x cp 1 x pp 1 x dp 1, no ZeRO$" "$WORK/old.info" || { cat "$WORK/old.info"; fail "a checkpoint without cp does not read as CP 1"; }
"$CKPT" list "$WORK/old" | grep -qE '^ +3  1x1x1 +no ' || fail "list: a checkpoint without cp"
pass "the checkpoint records the writer's CP; resume line, hpt-ckpt list/info and layout_change name it; absent reads as CP 1"
