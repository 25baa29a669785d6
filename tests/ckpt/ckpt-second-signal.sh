#!/bin/sh
# Stop signals are configurable (--signals); a second signal while the
# checkpoint is being written changes nothing: one checkpoint, exit 75, it
# verifies, and the resumed run continues bitwise. An unknown signal name is
# refused.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
CKPT="$HPT_BUILD/src/hpt-ckpt"
A="--model small --data $CORPUS --seq-len 64 --batch 1 --eval-batches 1 --eval-interval 0 --steps 12 --signals USR2"
"$TRAIN" $A --quiet --run-dir "$WORK/ref" > /dev/null 2>&1 || fail "reference run"
"$TRAIN" $A --run-dir "$WORK/s" > "$WORK/s.out" 2>&1 &
pid=$!
i=0
until [ "$(grep -c '^step ' "$WORK/s.out")" -ge 2 ]; do sleep 0.05; i=$((i + 1)); [ $i -lt 1200 ] || { kill $pid; fail "no progress"; }; done
kill -USR2 $pid
# keep signalling while the step finishes and the (~230 MiB) checkpoint is written
for k in 1 2 3 4 5 6 7 8 9 10; do sleep 0.1; kill -USR2 $pid 2>/dev/null || break; done
st=0; wait $pid || st=$?
[ $st = 75 ] || { cat "$WORK/s.out"; fail "exit $st, expected 75"; }
[ "$(ls "$WORK/s/checkpoints" | grep -c '^step_')" = 1 ] || fail "expected exactly one checkpoint"
"$CKPT" verify "$WORK/s/checkpoints" > "$WORK/v" 2>&1 || { cat "$WORK/v"; fail "checkpoint does not verify"; }
"$TRAIN" $A --quiet --run-dir "$WORK/s" > /dev/null 2>&1 || fail "resume"
cmp "$WORK/ref/log.tsv" "$WORK/s/log.tsv" || fail "resumed run differs"
# the metrics file tells the story: signal, save, load, resume; after the
# dedup rule its losses equal the uninterrupted run's
"$PYTHON" - "$WORK/s/metrics.h5" "$WORK/ref/metrics.h5" <<'PY' || fail "metrics events of the signal"
import sys, h5py, numpy as np
f, ref = (h5py.File(p, "r", libver="latest", swmr=True) for p in sys.argv[1:3])
kinds = [k.decode() for k in f["events"]["kind"]]
for k, n in (("signal", 1), ("checkpoint_save", 1), ("checkpoint_load", 1), ("resume", 1), ("run_start", 2), ("run_end", 2)):
    assert kinds.count(k) == n, (k, kinds)
last = {int(s): i for i, s in enumerate(f["steps/step"][:])}
loss = f["steps/loss"][:][[last[s] for s in sorted(last)]]
assert sorted(last) == list(range(1, 13)) and np.array_equal(loss, ref["steps/loss"][:]), loss
print("metrics: events", kinds)
PY
expect_error 2 "\-\-signals 'USR1,FOO': unknown signal 'FOO'" "$TRAIN" --model tiny --data "$CORPUS" --signals USR1,FOO
