#!/bin/sh
# export → --init-from → export gives the same weights, bitwise: on one rank
# (untied), on TP = 2 (untied) and on PP = 2 (tied: both stages' copies of
# the embedding are loaded; the run checks them equal). The update of the
# one step is skipped (--fault-nan-steps 1), so the export is the init.
# Also: a checkpoint to resume wins over --init-from (with a note); a
# checkpoint's weights, through hpt-ckpt export, load the same way.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$PYTHON" -c "import h5py, numpy" || fail "python3-h5py / numpy missing"
export OMP_NUM_THREADS=1
ST="$PYTHON $HPT_SRC/tests/helpers/st_tool.py"
A="--model tiny --data $CORPUS --seq-len 32 --batch 2 --eval-batches 1 --quiet --metrics none"
run() { # NAME RANKS ARGS...
  name=$1 n=$2; shift 2
  timeout 300 "$MPIEXEC" -n "$n" "$TRAIN" $A --export "$WORK/$name.h5" "$@" > "$WORK/$name.out" 2>&1 ||
    { cat "$WORK/$name.out"; fail "run $name"; }
}
run a 1 --steps 2
run a1 1 --steps 1 --fault-nan-steps 1 --init-from "$WORK/a.h5"
$ST compare "$WORK/a.h5" "$WORK/a1.h5" || fail "1 rank: export → --init-from → export differs"
run a_tp 2 --steps 1 --fault-nan-steps 1 --init-from "$WORK/a.h5" --tp 2
$ST compare "$WORK/a.h5" "$WORK/a_tp.h5" || fail "TP=2: export → --init-from → export differs"
run t 1 --steps 2 --tie-embeddings
run t_pp 2 --steps 1 --fault-nan-steps 1 --init-from "$WORK/t.h5" --pp 2 --tie-embeddings
$ST compare "$WORK/t.h5" "$WORK/t_pp.h5" || fail "PP=2 tied: export → --init-from → export differs"
# a tied model ignores an untied source's head, and says so
run a_tied 1 --steps 1 --fault-nan-steps 1 --init-from "$WORK/a.h5" --tie-embeddings
grep -q "lm_head.weight is not used" "$WORK/a_tied.out" || fail "no note about the unused lm_head.weight"
# resume wins: a run that checkpointed step 2 continues from it, not from --init-from
run r 1 --steps 2 --save-every 2 --run-dir "$WORK/r"
run r2 1 --steps 3 --run-dir "$WORK/r" --init-from "$WORK/a.h5"
grep -q "resuming the checkpoint of step 2: --init-from $WORK/a.h5 is not read" "$WORK/r2.out" ||
  { cat "$WORK/r2.out"; fail "no note that the resume wins"; }
[ "$(grep -c . "$WORK/r/log.tsv")" -eq 4 ] || fail "the resumed run did not continue the log (steps 1-3)"
# a checkpoint's weights start a new run through hpt-ckpt export (same layout as --export)
"$HPT_BUILD/src/hpt-ckpt" export "$WORK/r/checkpoints/step_00000002" "$WORK/ckpt_w.h5" > /dev/null ||
  fail "hpt-ckpt export"
run ck 1 --steps 1 --fault-nan-steps 1 --init-from "$WORK/ckpt_w.h5"
$ST compare "$WORK/ckpt_w.h5" "$WORK/ck.h5" || fail "hpt-ckpt export → --init-from → export differs"
pass "export → --init-from → export is exact (1 rank, TP=2, PP=2 tied); a resume wins; hpt-ckpt export loads"
