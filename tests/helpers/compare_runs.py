#!/usr/bin/env python3
"""tests/helpers/compare_runs.py WORK STEPS REF=RUN,RUN... [REF=RUN,...]

Parallel runs against their one-rank reference (tests/parallel/parallel-equivalence.sh,
tests/parallel/sequence-parallel.sh): for each REF=RUNS group, every RUN's
WORK/RUN/log.tsv must have STEPS rows whose loss, lr, grad_norm and val_loss
equal REF's within 1e-5 relative (NaN equals NaN), and its exported weights
WORK/RUN.h5 the same tensors as WORK/REF.h5 with a relative error (Frobenius
norm) of at most 1e-5 each. Prints one line per run (its worst tensor) and
one FAIL line per differing value; exits 1 when anything differs."""
import math
import sys

import h5py
import numpy as np

TOL = 1e-5


def log(work, name):
    rows = [l.split("\t") for l in open(f"{work}/{name}/log.tsv").read().split("\n")[1:] if l]
    return [[float(x) for x in r[1:5]] for r in rows]


def close(a, b, tol=TOL):
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol * abs(b)


def weights(work, name):
    out = {}
    with h5py.File(f"{work}/{name}.h5", "r") as f:
        f.visititems(lambda k, v: out.__setitem__(k, v[()]) if isinstance(v, h5py.Dataset) else None)
    return out


def main(work, steps, groups):
    bad = 0
    for group in groups:
        ref, runs = group.split("=", 1)
        R, RW = log(work, ref), weights(work, ref)
        for run in runs.split(","):
            L, W = log(work, run), weights(work, run)
            if not len(L) == len(R) == steps:
                print(f"FAIL {run}: {len(L)} steps in log.tsv ({ref}: {len(R)}), expected {steps}")
                bad += 1
                continue
            for s, (a, b) in enumerate(zip(L, R)):
                for col, x, y in zip(("loss", "lr", "grad_norm", "val_loss"), a, b):
                    if not close(x, y):
                        print(f"FAIL {run} step {s + 1} {col}: {x!r} vs {y!r}")
                        bad += 1
            if W.keys() != RW.keys():
                print(f"FAIL {run}: tensors differ from {ref}'s: {sorted(set(W) ^ set(RW))}")
                bad += 1
                continue
            errs = {k: float(np.linalg.norm(W[k] - RW[k]) / np.linalg.norm(RW[k])) for k in RW}
            worst = max(errs, key=errs.get)
            print(f"{run}: {steps} steps match {ref}; worst weight rel err {errs[worst]:.2e} ({worst})")
            bad += errs[worst] > TOL
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3:]))
