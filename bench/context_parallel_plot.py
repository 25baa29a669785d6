#!/usr/bin/python3
"""Plot of bench/context-parallel.sh: tokens/s, peak memory per rank and the
ring's hidden share against the sequence length T, one line per CP degree.

    context_parallel_plot.py ROWS.tsv OUT.png

ROWS.tsv: the script's TSV (T, cp, status, ms_per_step, tokens_s, peak_mib,
plan_mib, ring_mb, ring_share, ring_hidden). Three panels, log-2 T axis:
tokens/s; measured peak RSS per rank (solid) with hpt-plan's prediction
(dashed, also where a run was skipped); the ring's hidden share (CP > 1).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
    cps = sorted({int(r["cp"]) for r in rows})
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.4))
    for cp in cps:
        mine = sorted((r for r in rows if int(r["cp"]) == cp), key=lambda r: int(r["T"]))
        ok = [r for r in mine if r["status"] == "ok"]
        line = ax[0].plot([int(r["T"]) for r in ok], [float(r["tokens_s"]) for r in ok], "o-",
                          label=f"CP {cp}")[0]
        ax[1].plot([int(r["T"]) for r in ok], [float(r["peak_mib"]) for r in ok], "o-",
                   color=line.get_color(), label=f"CP {cp} measured")
        ax[1].plot([int(r["T"]) for r in mine], [float(r["plan_mib"]) for r in mine], "--",
                   color=line.get_color(), label=f"CP {cp} hpt-plan")
        if cp > 1:
            hid = [r for r in ok if r["ring_hidden"]]
            ax[2].plot([int(r["T"]) for r in hid], [float(r["ring_hidden"]) for r in hid], "o-",
                       color=line.get_color(), label=f"CP {cp}")
    for a, title, ylabel in ((ax[0], "tokens/s (one sequence of T)", "tokens/s"),
                             (ax[1], "peak memory per rank", "MiB"),
                             (ax[2], "ring transfers hidden behind compute", "share of time in flight")):
        a.set_xscale("log", base=2)
        a.set_xlabel("sequence length T")
        a.set_title(title)
        a.set_ylabel(ylabel)
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=8)
    ax[0].set_yscale("log")
    ax[1].set_yscale("log")
    ax[2].set_ylim(0, 1.05)
    fig.suptitle("hpt context parallelism (ring attention), tiny width, CPU ranks", fontsize=11)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    print("wrote", sys.argv[2])


if __name__ == "__main__":
    main()
