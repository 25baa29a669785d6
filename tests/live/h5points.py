#!/usr/bin/env python3
"""tests/live/h5points.py FILE — what h5py reads from a metrics file, as the
JSON the page's window.hptDebug is compared with: the step columns of the
kept rows (last row of each step, docs/METRICS.md; also wall_time),
val_step/val_loss (the steps with a finite validation loss), the per-rank
busy and step times [step][rank], the mean communication seconds per step
of each group and rank, the events (step, kind, rank) and the segments'
first steps. NaN and inf become null (as in the page's JSON). The per-rank
values (busy, step time, communication) are given to 6 significant digits,
as the live API writes them (docs/LIVE.md); step columns exactly."""
import json
import math
import sys

import h5py
import numpy as np


def clean(v):
    if isinstance(v, np.ndarray):
        return [clean(x) for x in v]
    v = float(v)
    return v if math.isfinite(v) else None


def sig6(v):
    if isinstance(v, list):
        return [sig6(x) for x in v]
    return None if v is None else float("%.6g" % v)


def main(path):
    f = h5py.File(path, "r", libver="latest", swmr=True)
    step = f["steps/step"][:]
    keep = {int(s): i for i, s in enumerate(step)}
    rows = np.array([keep[s] for s in sorted(keep)], dtype=np.int64)
    cols = {"step": "step", "loss": "loss", "lr": "lr", "grad_norm": "grad_norm", "clip": "clip_coef",
            "tokens_per_s": "tokens_per_s", "mfu": "mfu", "skipped": "skipped", "wall_time": "wall_time"}
    out = {k: clean(f["steps/" + v][:][rows]) if len(rows) else [] for k, v in cols.items()}
    val = f["steps/val_loss"][:][rows] if len(rows) else np.zeros(0)
    ok = np.isfinite(val)
    out["val_step"] = clean(f["steps/step"][:][rows][ok]) if len(rows) else []
    out["val_loss"] = clean(val[ok])
    for name, col in (("busy_s", "busy"), ("step_s", "step_time")):
        out[name] = [sig6(clean(r)) for r in f["ranks/" + col][:][rows]] if len(rows) else []
    out["comm"] = {}
    for g in ("tp", "pp", "dp", "mp", "embed", "cp"):  # mean seconds per step of each rank
        if "ranks/comm_" + g not in f:  # a file older than the column: null
            out["comm"][g] = [None] * f["ranks/busy"].shape[1]
            continue
        v = f["ranks/comm_" + g][:][rows] if len(rows) else np.zeros((0, 0))
        means = []
        for w in range(v.shape[1]):
            s, c = 0.0, 0
            for x in v[:, w]:
                if math.isfinite(x):
                    s, c = s + float(x), c + 1
            means.append(sig6(s / c) if c else None)
        out["comm"][g] = means
    ev = f["events"][:]
    out["events"] = [{"step": int(e["step"]), "kind": e["kind"].decode().rstrip("\0"),
                      "rank": int(e["rank"])} for e in ev]
    out["segments"] = [int(s["first_step"]) + 1 for s in f["segments"][:]]
    out["ranks"] = int(f["ranks/busy"].shape[1])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
