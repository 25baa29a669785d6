#!/bin/sh
# No floods in the job log (issue 32): a real 2-rank run of 30 steps with a
# throughput drop forced at every step 5-30 (--fault-anomaly) and
# --event-window 10 prints exactly one line per window — the first
# occurrence, then "x9 more, steps 6-14" when the window has passed —, in
# the order they come, with --metrics-interval 4 so that windows end
# between flushes; /events holds all 26 occurrences, each once. The same run
# with --event-window 0 prints all 26 lines; a gradient-norm spike forced at
# steps 3-8 under the default window (50) prints its first line and, at the
# end of the run, "x5 more, steps 4-8"; so do non-finite steps 10-12
# (skipped_step, "x2 more, steps 11-12": a window of their own), each one
# event naming the poisoned rank.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$PYTHON" -c "import h5py" || fail "python3-h5py missing (setup.sh installs it)"
export OMP_NUM_THREADS=1
A="--model tiny --data $CORPUS --seq-len 32 --batch 1 --steps 30 --eval-interval 0 --eval-batches 1 --quiet"
A="$A --metrics-interval 4"
run_train w10 2 --event-window 10 --fault-anomaly throughput_drop:5-30
run_train w0 2 --event-window 0 --fault-anomaly throughput_drop:5-30
run_train spike 2 --fault-anomaly grad_norm_spike:3-8 --fault-nan-steps 10,11,12 --fault-nan-rank 1
cat "$WORK/w10.out"

# the job log: the throughput_drop lines, in order (other anomalies that a
# busy machine may cause, slow_rank say, are not these)
drops() { grep '^hpt-train: anomaly.*throughput_drop' "$1" | sed 's/ [0-9]* tokens\/s$//'; }
drops "$WORK/w10.out" > "$WORK/w10.got"
cat > "$WORK/w10.want" <<'EOF'
hpt-train: anomaly at step 5: throughput_drop: forced by --fault-anomaly (testing):
hpt-train: anomaly: throughput_drop x9 more, steps 6-14
hpt-train: anomaly at step 15: throughput_drop: forced by --fault-anomaly (testing):
hpt-train: anomaly: throughput_drop x9 more, steps 16-24
hpt-train: anomaly at step 25: throughput_drop: forced by --fault-anomaly (testing):
hpt-train: anomaly: throughput_drop x5 more, steps 26-30
EOF
diff "$WORK/w10.want" "$WORK/w10.got" || fail "--event-window 10: the job log's throughput_drop lines differ (< expected, > printed)"
[ "$(drops "$WORK/w0.out" | grep -c 'anomaly at step')" = 26 ] || { cat "$WORK/w0.out"; fail "--event-window 0: not one line per occurrence"; }
drops "$WORK/w0.out" | grep -q 'more' && fail "--event-window 0 printed a summary line"
grep '^hpt-train: anomaly.*grad_norm_spike' "$WORK/spike.out" | sed 's/: gradient norm .*//' > "$WORK/spike.got"
cat > "$WORK/spike.want" <<'EOF'
hpt-train: anomaly at step 3: grad_norm_spike: forced by --fault-anomaly (testing)
hpt-train: anomaly: grad_norm_spike x5 more, steps 4-8
EOF
diff "$WORK/spike.want" "$WORK/spike.got" || { cat "$WORK/spike.out"; fail "default window: the grad_norm_spike lines differ"; }
grep '^hpt-train: anomaly.*skipped_step' "$WORK/spike.out" > "$WORK/nan.got"
cat > "$WORK/nan.want" <<'EOF'
hpt-train: anomaly at step 10: skipped_step: non-finite values first seen on rank 1
hpt-train: anomaly: skipped_step x2 more, steps 11-12
EOF
diff "$WORK/nan.want" "$WORK/nan.got" || { cat "$WORK/spike.out"; fail "default window: the skipped_step lines differ"; }

# /events: every occurrence, once, in the format every reader knows
"$PYTHON" - "$WORK" <<'PY' || fail "/events"
import sys
import h5py
w = sys.argv[1]
for run, kind, steps in (("w10", b"throughput_drop", range(5, 31)), ("w0", b"throughput_drop", range(5, 31)),
                         ("spike", b"grad_norm_spike", range(3, 9)), ("spike", b"skipped_step", range(10, 13))):
    with h5py.File(w + "/" + run + "/metrics.h5", "r", libver="latest", swmr=True) as f:
        ev = f["events"][:]
    got = ev[ev["kind"] == kind]
    assert sorted(int(s) for s in got["step"]) == list(steps), (run, got["step"])
    if kind == b"skipped_step":  # one event per skipped step, naming the poisoned rank
        assert set(got["rank"]) == {1}, got
    else:
        assert all(m.startswith(b"forced by --fault-anomaly") for m in got["message"]), got["message"]
    assert ev["kind"][-1] == b"run_end", ev["kind"]
    print("%s: %d %s events at steps %d-%d, each once" % (run, len(got), kind.decode(), steps[0], steps[-1]))
PY
pass "a forced flood prints one job-log line per window, /events keeps every occurrence"
