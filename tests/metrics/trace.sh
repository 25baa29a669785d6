#!/bin/sh
# The step timeline (hpt-train --trace-steps A-B, /trace in metrics.h5,
# hpt-metrics trace): a PP 2 x DP 2 run of 4 micro-batches, 1F1B, traced at
# steps 2-3 (step 3 checkpointed). Per rank and traced step, the ordered
# forwards and backwards are the 1F1B schedule of its stage (stage s: P-s-1
# warm-up forwards, then one forward one backward, then the remaining
# backwards); every communication call of the step appears: per group, the
# payload bytes of the traced calls inside the step (receives excluded, as
# the per-rank counters do) equal /ranks/bytes_GROUP of that step's row;
# the optimizer, the checkpoint and the step itself are spans. `hpt-metrics
# trace` writes valid Trace Event Format: every complete event has name,
# ph, ts, dur, pid, tid; one process per rank; within a thread ts never
# decreases and no span overlaps the next; --step 3 keeps step 3 only. A
# PP 2 run stopped after step 2 (--stop-at) gathers what it traced (steps
# 2-2) before exiting 75; resumed, it traces step 3 in a second segment,
# and the JSON has one process per segment and rank. /ranks/pipeline_bubble
# agrees with the trace's spans, and the summary sets it beside the theory
# (p-1)/(m+p-1) (the same line from analysis/hpt_metrics.py).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1   # 4 ranks on 2 cores
A="--model tiny --data $CORPUS --seq-len 32 --batch 2 --grad-accum 4 --quiet"
run_train pp 4 $A --steps 3 --pp 2 --dp 2 --trace-steps 2-3 --save-every 3
grep -q "^trace: steps 2-3, [0-9]* spans from 4 ranks written to /trace" "$WORK/pp.out" ||
  { cat "$WORK/pp.out"; fail "run pp: no 'trace: steps 2-3 ... from 4 ranks' line"; }
HM="$HPT_BUILD/src/hpt-metrics"
"$HM" trace "$WORK/pp" -o "$WORK/pp.json" || fail "hpt-metrics trace pp"
"$HM" trace "$WORK/pp" --step 3 -o "$WORK/pp3.json" || fail "hpt-metrics trace pp --step 3"
"$PYTHON" - "$WORK/pp/metrics.h5" "$WORK/pp.json" "$WORK/pp3.json" <<'PY' || fail "pp: see above"
import collections, json, sys
import h5py
f = h5py.File(sys.argv[1], "r")
tr = f["trace"][:]
P, M = 2, 4
bad = []
def s(x): return x.decode()
rows = {int(st): i for i, st in enumerate(f["steps/step"][:])}
for rank in range(4):
    for step in (2, 3):
        ev = sorted((r for r in tr if r["rank"] == rank and r["step"] == step),
                    key=lambda r: r["t_start"])
        if not ev:
            bad.append(f"rank {rank} step {step}: no spans"); continue
        stage = int(ev[0]["stage"])
        got = [s(r["name"])[0].upper() + str(r["micro"]) for r in ev
               if s(r["name"]) in ("forward", "backward")]
        warm = P - stage - 1
        want = ["F%d" % i for i in range(warm)]
        for j in range(M - warm):
            want += ["F%d" % (warm + j), "B%d" % j]
        want += ["B%d" % j for j in range(M - warm, M)]
        if got != want:
            bad.append(f"rank {rank} (stage {stage}) step {step}: {' '.join(got)}, 1F1B is {' '.join(want)}")
        names = collections.Counter(s(r["name"]) for r in ev)
        for need in ("step", "optimizer", "data") + (("checkpoint",) if step == 3 else ()):
            if not names[need]:
                bad.append(f"rank {rank} step {step}: no {need} span")
        span = [r for r in ev if s(r["name"]) == "step"][0]
        by = collections.Counter()
        for r in ev:
            g = s(r["stream"])
            if g not in ("step", "compute") and s(r["name"]) != "recv" and \
               r["t_start"] >= span["t_start"] and r["t_end"] <= span["t_end"]:
                by[{"dp-shard": "dp", "dp-replica": "dp"}.get(g, g)] += int(r["bytes"])
        for g in ("tp", "pp", "dp", "mp", "embed"):
            col = float(f["ranks/bytes_" + g][rows[step], rank])
            if by[g] != col:
                bad.append(f"rank {rank} step {step}: traced {g} bytes {by[g]}, /ranks/bytes_{g} {col:.0f}")
        # /ranks/pipeline_bubble: the pipeline phase (from before the first
        # data span to the end of the last backward) minus the data, forward
        # and backward spans: at least that from the first data span on,
        # at most that from the step's start on
        fb = [r for r in ev if s(r["name"]) in ("data", "forward", "backward")]
        busy = sum(r["t_end"] - r["t_start"] for r in fb)
        end = max(r["t_end"] for r in fb if s(r["name"]) == "backward")
        lo = end - min(r["t_start"] for r in fb) - busy
        hi = end - span["t_start"] - busy
        got = float(f["ranks/pipeline_bubble"][rows[step], rank])
        if not (lo - 1e-5 <= got <= hi + 1e-5):
            bad.append(f"rank {rank} step {step}: pipeline_bubble {got:.6f} s outside [{lo:.6f}, {hi:.6f}] from the trace")
if sum(1 for e in f["events"][:] if e["kind"] == b"trace") != 1:
    bad.append("not one 'trace' event in /events")
def check_json(path, steps):
    d = json.load(open(path))
    evs = d["traceEvents"]
    x = [e for e in evs if e.get("ph") == "X"]
    for e in x:
        for k in ("name", "ph", "ts", "dur", "pid", "tid", "args"):
            if k not in e:
                bad.append(f"{path}: event without {k}: {e}"); return
    procs = {e["pid"] for e in evs if e.get("ph") == "M" and e["name"] == "process_name"}
    if procs != {0, 1, 2, 3}:
        bad.append(f"{path}: processes {sorted(procs)}, expected ranks 0-3")
    last = {}
    for e in x:
        k = (e["pid"], e["tid"])
        if k in last and e["ts"] < last[k] - 5e-4:  # printed to the nanosecond
            bad.append(f"{path}: thread {k}: ts {e['ts']} after a span ending at {last[k]}"); break
        last[k] = e["ts"] + e["dur"]
    want = sum(1 for r in tr if r["step"] in steps)
    if len(x) != want:
        bad.append(f"{path}: {len(x)} complete events, /trace has {want} rows of steps {steps}")
    if {e["args"]["step"] for e in x} != set(steps):
        bad.append(f"{path}: steps {sorted({e['args']['step'] for e in x})}, expected {steps}")
check_json(sys.argv[2], [2, 3])
check_json(sys.argv[3], [3])
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
# the summary sets the measured bubble beside the theory (p-1)/(m+p-1) =
# 1/5 for PP 2 and 4 micro-batches, the same line from C and Python
"$HM" summary "$WORK/pp" > "$WORK/pp.sum" || fail "hpt-metrics summary pp"
grep -q "^pipeline bubble: [0-9.e-]* of the step (the most idle stage's, median of 3 steps); theory (p-1)/(m+p-1) = 0.2 (PP 2, 4 micro-batches)$" \
  "$WORK/pp.sum" || { cat "$WORK/pp.sum"; fail "pp: no pipeline bubble line in the summary"; }
grep "^pipeline bubble" "$WORK/pp.sum" > "$WORK/pp.b"
PYTHONPATH="$HPT_SRC/analysis" "$PYTHON" -c 'import sys, hpt_metrics as h; print(h.summary_text(h.load(sys.argv[1])), end="")' \
  "$WORK/pp/metrics.h5" | grep "^pipeline bubble" > "$WORK/pp.pyb"
cmp -s "$WORK/pp.b" "$WORK/pp.pyb" || fail "pp: analysis/hpt_metrics.py's bubble line differs from hpt-metrics summary's"
# stopped inside the traced steps, then resumed
run_train st 2 $A --steps 3 --pp 2 --trace-steps 2-3 --stop-at 2
grep -q "^trace: steps 2-2, " "$WORK/st.out" || { cat "$WORK/st.out"; fail "run st: no trace of steps 2-2 before the stop"; }
run_train st 2 $A --steps 3 --pp 2 --trace-steps 2-3
grep -q "^trace: steps 3-3, " "$WORK/st.out" || { cat "$WORK/st.out"; fail "run st (resumed): no trace of step 3"; }
"$HM" trace "$WORK/st" -o "$WORK/st.json" || fail "hpt-metrics trace st"
"$PYTHON" - "$WORK/st/metrics.h5" "$WORK/st.json" <<'PY' || fail "st: see above"
import json, sys
import h5py
tr = h5py.File(sys.argv[1], "r")["trace"][:]
seg = {(int(r["segment"]), int(r["step"])) for r in tr}
if seg != {(0, 2), (1, 3)}:
    sys.exit(f"FAIL: traced (segment, step) {sorted(seg)}, expected (0, 2) and (1, 3)")
names = sorted(e["args"]["name"] for e in json.load(open(sys.argv[2]))["traceEvents"]
               if e.get("name") == "process_name")
want = ["segment 0, rank 0 (stage 0)", "segment 0, rank 1 (stage 1)",
        "segment 1, rank 0 (stage 0)", "segment 1, rank 1 (stage 1)"]
if names != want:
    sys.exit(f"FAIL: processes {names}, expected {want}")
PY
pass "1F1B order per stage, every call's bytes, valid Trace Event Format, stop and resume"
