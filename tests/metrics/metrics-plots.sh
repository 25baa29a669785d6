#!/bin/sh
# analysis/plot_metrics.py on the metrics files of two real runs (4 ranks
# TP 2 x DP 2, and 2 ranks DP 2 with a non-finite loss injected at step 3,
# a skipped step, and throughput drops forced at steps 5-7, drawn as one
# span): every figure is a PNG of the stated pixel size that is
# not blank, and an SVG; its manifest has the expected axes and series,
# checked against the file read with plain h5py (points per curve = steps
# with a finite value, so the skipped step is not counted; val-loss points =
# evaluations; heat map = steps x ranks with the per-rank means of
# /ranks/busy; forward and backward bars = the means of /ranks/forward and
# /ranks/backward, stacked bars adding up to the step time; one series per
# run on each panel of the comparison); summary.txt holds the final losses
# of the file.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$PYTHON" -c "import h5py, numpy, matplotlib" || fail "python3-h5py/numpy/matplotlib missing (setup.sh installs them)"
export OMP_NUM_THREADS=1
PLOT="$HPT_SRC/analysis/plot_metrics.py"
A="--model tiny --data $CORPUS --steps 8 --batch 2 --seq-len 64 --eval-interval 4 --eval-batches 1 --metrics-interval 2 --quiet"
"$MPIEXEC" -n 4 "$TRAIN" $A --tp 2 --dp 2 --run-dir "$WORK/a" > "$WORK/a.out" 2>&1 || { cat "$WORK/a.out"; fail "run a"; }
"$MPIEXEC" -n 2 "$TRAIN" $A --lr 2e-3 --fault-nan-steps 3 --fault-nan-rank 1 --fault-anomaly throughput_drop:5-7 \
  --run-dir "$WORK/b" > "$WORK/b.out" 2>&1 || { cat "$WORK/b.out"; fail "run b"; }

"$PYTHON" "$PLOT" "$WORK/a" -o "$WORK/one" > "$WORK/one.out" 2>&1 || { cat "$WORK/one.out"; fail "plot one run"; }
"$PYTHON" "$PLOT" "$WORK/a/metrics.h5" "$WORK/b/metrics.h5" -o "$WORK/two" --labels tp2dp2 dp2 \
  --format png,svg --smooth 0.5 --dpi 80 > "$WORK/two.out" 2>&1 || { cat "$WORK/two.out"; fail "plot two runs"; }
cmp "$WORK/one.out" "$WORK/one/summary.txt" || fail "the printed summary differs from summary.txt"

PYTHONPATH="$HPT_SRC/tests/helpers" "$PYTHON" - "$WORK" <<'PY' || fail "figures"
import os, sys
import numpy as np
from metrics_check import h5_last_rows, manifest, plots
import h5py
w = sys.argv[1]
MARKED = ("resume", "layout_change", "checkpoint_load", "signal", "skipped_step",
          "grad_norm_spike", "throughput_drop", "slow_rank")

def events_of(path):
    """(kind, step, rank) of every event in the file, read with plain h5py."""
    with h5py.File(path, "r", libver="latest", swmr=True) as f:
        return [(e["kind"].decode(), int(e["step"]), int(e["rank"])) for e in f["events"][:]]

def lines_and_spans(ev):
    """The marked events' steps drawn as lines, and [first - 1/2, last + 1/2]
    of the runs drawn as spans: an anomaly of one kind (slow_rank: and rank)
    1..10 steps after the previous one joins its run (docs/LIVE.md)."""
    groups, last = [], {}
    for k, s, r in ev:
        if k not in MARKED or s <= 0:
            continue
        key = (k, r if k == "slow_rank" else None)
        flood = k in ("skipped_step", "grad_norm_spike", "throughput_drop", "slow_rank")
        if flood and key in last and 0 < s - last[key][1] <= 10:
            last[key][1] = s
            last[key][2] += 1
        else:
            groups.append([s, s, 1])
            if flood:
                last[key] = groups[-1]
    return (sorted(float(a) for a, b, n in groups if n == 1),
            sorted([a - 0.5, b + 0.5] for a, b, n in groups if n > 1))
files = {n: os.listdir(os.path.join(w, n)) for n in ("one", "two")}
want_one = {f"{fig}.{ext}" for fig in ("curves", "heatmap", "breakdown") for ext in ("png", "svg", "json")}
assert want_one | {"summary.txt"} == set(files["one"]), files["one"]
want_two = {f"{fig}-{lab}.{ext}" for fig in ("curves", "heatmap", "breakdown")
            for lab in ("tp2dp2", "dp2") for ext in ("png", "svg", "json")}
want_two |= {"compare.png", "compare.svg", "compare.json", "summary.txt"}
assert want_two == set(files["two"]), set(files["two"]) ^ want_two

for out, suf, dpi, runs in (("one", "", 100, [("a", 4)]), ("two", "-tp2dp2", 80, [("a", 4)]),
                            ("two", "-dp2", 80, [("b", 2)])):
    for run, nranks in runs:
        steps, ranks, _ = h5_last_rows(os.path.join(w, run, "metrics.h5"))
        n = len(steps["step"])
        assert n == 8 and list(steps["step"]) == list(range(1, 9)), steps["step"]
        d = os.path.join(w, out)
        # curves: 6 panels, 12 x 9 in
        m = manifest(d, "curves" + suf)
        assert (m["width_px"], m["height_px"]) == (12 * dpi, 9 * dpi), m
        p = plots(m)
        assert m["n_axes"] == 6 and len(m["axes"]) == 6, m["n_axes"]
        titles = [a["title"] for a in p]
        assert titles == ["train loss", "validation loss", "learning rate",
                          "gradient norm (before clipping), events", "throughput",
                          "model FLOP utilisation"], titles
        ok = steps["skipped"] == 0
        assert list(ok) == ([True] * 8 if run == "a" else [True, True, False] + [True] * 5), ok
        assert [s["label"] for s in p[0]["series"]][0] == "raw" and p[0]["n_series"] == 2, p[0]
        assert all(s["points"] == ok.sum() for s in p[0]["series"]), p[0]  # skipped: no point
        n_val = int(np.isfinite(steps["val_loss"]).sum())
        assert n_val == 2 and p[1]["series"][0]["points"] == n_val, p[1]
        for a, col in zip(p[2:], ("lr", "grad_norm", "tokens_per_s", "mfu")):
            want = int(np.isfinite(steps[col]).sum())
            assert a["n_series"] == 1 and a["series"][0]["points"] == want, (col, a)
        # events: the clean run has no grad_norm_spike and no non-finite
        # (skipped_step) event, the other exactly its skipped step 3; timing
        # events (slow_rank, throughput_drop) depend on the machine's load
        # and are not asserted. Every marked event of the file is drawn: a
        # line, or within the span of a run of its kind.
        ev = events_of(os.path.join(w, run, "metrics.h5"))
        for kind in ("grad_norm_spike", "skipped_step"):
            got = sorted(s for k, s, r in ev if k == kind)
            want = [3] if (run, kind) == ("b", "skipped_step") else []
            assert got == want, "run %s: %s events at steps %s, expected %s" % (run, kind, got, want)
        lines, spans = lines_and_spans(ev)
        if run == "b":  # the forced throughput drops of steps 5-7: one span; the skipped step a line
            assert [4.5, 7.5] in spans and 3.0 in lines, (lines, spans)
        assert p[3]["event_steps"] == lines and p[3]["event_spans"] == spans, \
            "run %s: event lines %s, spans %s; file's events %s" % (
                run, p[3]["event_steps"], p[3]["event_spans"], ev)
        # heat maps: busy and step time, [steps x ranks], row means = h5py's
        m = manifest(d, "heatmap" + suf)
        p = plots(m)
        assert m["n_axes"] == 2 and len(m["axes"]) == 4, m  # + 2 colour bars
        for a, col in zip(p, ("busy", "step_time")):
            img = a["images"][0]
            assert img["data_shape"] == [n, nranks] and ranks[col].shape == (n, nranks), img
            assert np.allclose(img["row_means"], ranks[col].mean(axis=0), rtol=1e-12), (col, img)
        # breakdown: one bar per rank per part, stacks = step_time + checkpoint
        m = manifest(d, "breakdown" + suf)
        p = plots(m)
        assert m["n_axes"] == 1 and m["ranks"] == nranks, m
        assert p[0]["n_series"] == 13 and all(s["bars"] == nranks for s in p[0]["series"]), p[0]
        assert [s["label"] for s in p[0]["series"]][:5] == ["forward", "backward", "optimizer",
                                                            "data", "other"], p[0]
        want = ranks["step_time"].mean(axis=0) + ranks["checkpoint"].mean(axis=0)
        assert np.allclose(m["stack_totals"], want, rtol=0.05, atol=2e-3), (m["stack_totals"], want)

# breakdown: forward and backward are the trainer's compute timers themselves
sys.path.insert(0, os.path.join(os.environ["HPT_SRC"], "analysis"))
import hpt_metrics as hm, plot_metrics as pm
for run in ("a", "b"):
    _, ranks, _ = h5_last_rows(os.path.join(w, run, "metrics.h5"))
    parts, _ = pm.breakdown_parts(hm.load(os.path.join(w, run, "metrics.h5")))
    for col in ("forward", "backward"):
        assert np.allclose(parts[col], ranks[col].mean(axis=0), rtol=1e-12), (run, col, parts[col])
    assert np.all(parts["other"] >= 0), parts["other"]

# comparison: 6 panels, one series per run, labelled; finite points only
m = manifest(os.path.join(w, "two"), "compare")
assert m["n_axes"] == 6 and m["runs"] == ["tp2dp2", "dp2"], m
want = {"validation loss": [2, 2], "train loss (EMA 0.50)": [8, 7], "gradient norm": [8, 7]}
for a in plots(m):
    assert a["n_series"] == 2 and [s["label"] for s in a["series"]] == ["tp2dp2", "dp2"], a
    assert [s["points"] for s in a["series"]] == want.get(a["title"], [8, 8]), a

# summary: final and best train/val loss of each run, from the file
text = open(os.path.join(w, "two", "summary.txt")).read()
for run in ("a", "b"):
    steps, _, _ = h5_last_rows(os.path.join(w, run, "metrics.h5"))
    ok = steps["skipped"] == 0
    v = steps["val_loss"][np.isfinite(steps["val_loss"])]
    loss = steps["loss"][ok]
    line = "train loss: final %.6g (step 8), best %.6g (step %d)" % (
        loss[-1], loss.min(), steps["step"][ok][np.argmin(loss)])
    assert line in text, (line, text)
    assert "val loss: final %.6g (step 8), best %.6g" % (v[-1], v.min()) in text, text
    assert "mean tokens/s: %.6g" % steps["tokens_per_s"][ok].mean() in text, text
print("figures: pixel sizes, axes, series and heat-map data match the files")
PY
pass "plot_metrics.py: curves, heat maps, breakdown and comparison figures checked against two real runs"
