#!/usr/bin/python3
"""Table and plot of bench/long-context.sh: tokens/s and peak memory against T.

    long_context_plot.py RESULTS.tsv OUT.png [--batch 1] [--busy-cores 0.3]
                         [--cap-gib 10] [--copy PATH]

RESULTS.tsv (written by bench/long-context.sh), one row per run:
    T  program(hpt|torch)  round  status  peak_mib
    predicted_mib  others  ms_per_step(comma-separated timed steps)
status: ok; over-cap (not run: the prediction exceeds the cap); stopped (run,
stopped at the cap: peak_mib is where); partial (stopped after RUN_LIMIT_S:
peak_mib is the peak so far, a lower bound, no time); failed. predicted_mib is hpt-plan's
prediction for hpt and the script's estimate for PyTorch. ms/step per T and program is the median over the timed steps of the
quiet rounds (others <= busy-cores), of all rounds when none was quiet (marked
*); tokens/s = batch·T / that median; peak = the largest over the rounds.

Prints a Markdown table and writes a PNG with two panels (tokens/s and peak
memory against T, log-2 x axis, log y axis for memory; hpt-plan's prediction dashed, PyTorch's
estimate dotted where it was not run) to OUT.png and, with --copy, to PATH.
"""
import argparse
import csv
import shutil
import statistics as st
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

NAMES = {"hpt": "hpt", "torch": "PyTorch+"}


def load(path):
    rows = {}
    with open(path) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            rows.setdefault((int(r["T"]), r["program"]), []).append(r)
    return rows


def summarise(runs, busy_cores):
    """One program at one T: dict(status, ms, quiet, peak, pred, per_round)."""
    pred = float(runs[0]["predicted_mib"]) if runs[0]["predicted_mib"] else None
    ok = [r for r in runs if r["status"] == "ok"]
    if not ok:
        stop = [float(r["peak_mib"]) for r in runs if r["status"] == "stopped" and r["peak_mib"]]
        part = [float(r["peak_mib"]) for r in runs if r["status"] == "partial" and r["peak_mib"]]
        return {"status": "partial" if part else runs[0]["status"], "pred": pred,
                "stopped_at": max(stop, default=None), "at_least": max(part, default=None)}
    quiet = [r for r in ok if float(r["others"]) <= busy_cores]
    use = quiet or ok
    steps = lambda r: [float(x) for x in r["ms_per_step"].split(",") if x]
    return {"status": "ok", "pred": pred, "quiet": bool(quiet),
            "ms": st.median([m for r in use for m in steps(r)]),
            "peak": max(float(r["peak_mib"]) for r in ok),
            "per_round": [(int(r["round"]), st.median(steps(r)), float(r["others"]) > busy_cores)
                          for r in ok],
            "others": [float(r["others"]) for r in ok]}


def table(ts, res, batch, busy_cores):
    print(f"ms/step: median of the timed steps; * = no quiet round (other processes used "
          f"> {busy_cores} cores meanwhile); (o) = those cores per round")
    print()
    print("| T | hpt ms/step | hpt tokens/s | PyTorch+ ms/step | PyTorch+ tokens/s | "
          "hpt / PyTorch+ tokens/s | hpt peak MiB | hpt-plan MiB (vs measured) | "
          "PyTorch+ peak MiB (estimate) | PyTorch+ / hpt memory |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for T in ts:
        h, t = res.get((T, "hpt")), res.get((T, "torch"))
        cells = [str(T)]
        for s in (h, t):
            if s and s["status"] == "ok":
                o = ", ".join(f"{x:.1f}" for x in s["others"])
                cells += [f"{s['ms']:,.0f}{'' if s['quiet'] else '*'} ({o})",
                          f"{batch * T / (s['ms'] / 1e3):,.1f}"]
            elif s:
                cells += [s["status"], "–"]
            else:
                cells += ["–", "–"]
        both = h and t and h["status"] == "ok" and t["status"] == "ok"
        cells.append(f"{t['ms'] / h['ms']:.2f}×" if both else "–")
        if h and h["status"] == "ok":
            cells.append(f"{h['peak']:,.0f}")
            cells.append(f"{h['pred']:,.0f} ({100 * (h['pred'] - h['peak']) / h['peak']:+.1f} %)"
                         if h["pred"] else "–")
        elif h and h.get("at_least"):
            cells += [f"≥ {h['at_least']:,.0f} (stopped for time)", f"{h['pred']:,.0f}"]
        else:
            cells += ["–", f"{h['pred']:,.0f} (not run: {h['status']})" if h and h["pred"] else "–"]
        if t and t["status"] == "ok":
            cells.append(f"{t['peak']:,.0f} ({t['pred']:,.0f})")
        elif t and t.get("at_least"):
            cells.append(f"≥ {t['at_least']:,.0f} (stopped for time; estimate {t['pred']:,.0f})")
        elif t and t.get("stopped_at"):
            cells.append(f"stopped at the cap (> {t['stopped_at']:,.0f}; estimate {t['pred']:,.0f})")
        elif t:
            cells.append(f"{t['status']}: needs ≈ {t['pred']:,.0f}, estimated")
        else:
            cells.append("–")
        if h and t and h["status"] == "ok":
            if t["status"] == "ok":
                cells.append(f"{t['peak'] / h['peak']:.2f}×")
            elif t.get("at_least"):
                cells.append(f"≥ {t['at_least'] / h['peak']:.1f}×")
            else:
                cells.append(f"≈ {t['pred'] / h['peak']:.1f}× (estimated)")
        else:
            cells.append("–")
        print("| " + " | ".join(cells) + " |")


def plot(ts, res, batch, cap_gib, path):
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.6), dpi=90)
    style = {"hpt": dict(color="tab:blue", marker="o"), "torch": dict(color="tab:red", marker="s")}
    for prog in ("hpt", "torch"):
        pts = [(T, res[(T, prog)]) for T in ts if (T, prog) in res]
        ok = [(T, s) for T, s in pts if s["status"] == "ok"]
        a1.plot([T for T, _ in ok], [batch * T / (s["ms"] / 1e3) for T, s in ok],
                label=NAMES[prog], **style[prog])
        a2.plot([T for T, _ in ok], [s["peak"] / 1024 for _, s in ok],
                label=f"{NAMES[prog]}, measured", **style[prog])
        part = [(T, s["at_least"]) for T, s in pts if s.get("at_least")]
        if part:
            a2.plot([T for T, _ in part], [p / 1024 for _, p in part], ls="none", marker="^",
                    mfc="none", color=style[prog]["color"],
                    label=f"{NAMES[prog]}, peak so far (stopped for time)")
        if prog == "hpt":
            pr = [(T, s["pred"]) for T, s in pts if s["pred"]]
            a2.plot([T for T, _ in pr], [p / 1024 for _, p in pr], ls="--", color="tab:blue",
                    label="hpt-plan prediction")
        est = [(T, s["pred"]) for T, s in pts if s["status"] not in ("ok", "partial") and s["pred"]]
        if prog == "torch" and est:
            last = [(T, s["peak"]) for T, s in ok[-1:]]
            xs = [T for T, _ in last] + [T for T, _ in est]
            ys = [p / 1024 for _, p in last] + [p / 1024 for _, p in est]
            a2.plot(xs, ys, ls=":", color="tab:red", marker="x",
                    label="PyTorch+, estimated (not run)")
    a2.axhline(cap_gib, color="grey", lw=0.8)
    a2.text(ts[-1], cap_gib * 0.8, f"cap per run, {cap_gib:g} GiB", color="grey", fontsize=8, ha="right")
    for a in (a1, a2):
        a.set_xscale("log", base=2)
        a.set_xticks(ts)
        a.set_xticklabels([str(T) for T in ts])
        a.set_xlabel("sequence length T (batch 1)" if batch == 1 else f"T (batch {batch})")
        a.grid(True, which="both", alpha=0.3)
    a2.set_yscale("log")
    a2.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    a2.yaxis.set_minor_formatter(NullFormatter())
    a1.set_ylim(bottom=0)
    a1.set_ylabel("tokens/s (median step)")
    a1.set_title("training speed, small preset", fontsize=10)
    a2.set_ylabel("peak RSS (GiB)")
    a2.set_title("peak memory (RSS) per process", fontsize=10)
    a1.legend(fontsize=8)
    a2.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results")
    ap.add_argument("png")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--busy-cores", type=float, default=0.3)
    ap.add_argument("--cap-gib", type=float, default=10)
    ap.add_argument("--copy", help="also write the PNG here")
    args = ap.parse_args()
    rows = load(args.results)
    if not rows:
        sys.exit(f"long_context_plot.py: {args.results}: no runs")
    res = {k: summarise(v, args.busy_cores) for k, v in rows.items()}
    ts = sorted({T for T, _ in rows})
    table(ts, res, args.batch, args.busy_cores)
    plot(ts, res, args.batch, args.cap_gib, args.png)
    print(f"\nplot: {args.png}")
    if args.copy:
        shutil.copyfile(args.png, args.copy)
        print(f"plot: {args.copy}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
