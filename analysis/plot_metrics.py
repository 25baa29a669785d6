#!/usr/bin/env python3
"""plot_metrics.py — figures and a text summary from hpt metrics files.

    plot_metrics.py FILE [FILE...] -o OUTDIR [--format png,svg] [--smooth X]
                    [--labels NAME...] [--dpi N]

For each run (FILE is RUN_DIR/metrics.h5, also of a live or killed run):
  curves     train loss (raw and smoothed), val loss, lr, grad norm with the
             notable events as vertical lines (a run of one anomaly kind as
             one shaded span, as on the live page), tokens/s, MFU — against
             step
  heatmap    rank x step heat maps of the per-rank busy time (own work,
             communication excluded: the straggler is bright) and step time
  breakdown  per-rank stacked bars: where the mean step's time goes
With several files also `compare`: every run on one figure, one series per
run on each panel. One file writes curves.png, heatmap.png, breakdown.png;
several write curves-LABEL.png etc. Every figure also gets FIG.json, a
manifest of what was drawn (pixel size, axes, titles, series, image shapes),
read back by the tests. The summary (hpt_metrics.summary_text) is printed
and written to OUTDIR/summary.txt. Each step is plotted once: after a resume
the last row of a step wins (docs/ANALYSIS.md).

Exit status: 0 done, 2 bad option, 3 missing or not an hpt metrics file,
5 OUTDIR not writable.
"""

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
import numpy as np  # noqa: E402

import hpt_metrics as hm  # noqa: E402

PROG = "plot_metrics.py"
EVENT_COLORS = {"resume": "tab:green", "layout_change": "tab:olive",
                "checkpoint_load": "tab:cyan", "signal": "tab:purple",
                "skipped_step": "tab:red", "grad_norm_spike": "tab:orange",
                "throughput_drop": "tab:brown", "slow_rank": "tab:pink"}
# The stacked breakdown: disjoint parts of the mean step (+ checkpoint).
BREAKDOWN = ("forward", "backward", "optimizer", "data", "other", "pipeline_wait", "pp_send",
             "comm_tp", "comm_dp", "comm_mp", "comm_embed", "comm_cp", "checkpoint")
DPI_MAX = 600  # 12 x 9 in at 600 dpi is 7200 x 5400 pixels


# ------------------------------------------------------------------ manifest

def _axes_manifest(ax, role):
    lines = [ln for ln in ax.get_lines() if ln.get_gid() != "event"]
    events = [ln for ln in ax.get_lines() if ln.get_gid() == "event"]
    spans = [_span_x(p) for p in ax.patches if p.get_gid() == "event_span"]
    # points drawn: NaN (a skipped step's loss, a step without validation) draws nothing
    series = [{"label": ln.get_label(),
               "points": int(np.isfinite(np.asarray(ln.get_ydata(), dtype=np.float64)).sum())}
              for ln in lines]
    series += [{"label": c.get_label(), "bars": len(c.patches)} for c in ax.containers]
    images = []
    for im in ax.get_images():
        a = im.get_array()
        images.append({"shape": list(a.shape), "data_shape": list(a.T.shape),
                       "row_means": [None if not np.isfinite(v) else float(v)
                                     for v in np.ma.filled(np.ma.mean(a, axis=1), np.nan)]})
    return {"role": role, "title": ax.get_title(), "xlabel": ax.get_xlabel(),
            "ylabel": ax.get_ylabel(), "series": series, "n_series": len(series),
            "events": len(events), "event_steps": sorted(float(ln.get_xdata()[0]) for ln in events),
            "event_spans": sorted(spans),
            "images": images}


def _span_x(p):
    """[x0, x1] of an axvspan patch (a Polygon before matplotlib 3.9, then a
    Rectangle)."""
    if hasattr(p, "get_width"):
        xs = [p.get_x(), p.get_x() + p.get_width()]
    else:
        xs = [v[0] for v in p.get_xy()]
    return [float(min(xs)), float(max(xs))]


def save_figure(fig, outdir, name, formats, extra=None):
    """Write fig as NAME.<fmt> for each format and NAME.json (the manifest);
    return the manifest. No tight bounding box, so the PNG is exactly
    figsize x dpi pixels."""
    cbars = {id(a) for a in fig.axes if a.get_label() == "<colorbar>"}
    man = {"figure": name, "dpi": fig.dpi,
           "width_px": int(round(fig.get_figwidth() * fig.dpi)),
           "height_px": int(round(fig.get_figheight() * fig.dpi)),
           "axes": [_axes_manifest(a, "colorbar" if id(a) in cbars else "plot") for a in fig.axes],
           "files": []}
    man["n_axes"] = sum(1 for a in man["axes"] if a["role"] == "plot")
    if extra:
        man.update(extra)
    for fmt in formats:
        path = os.path.join(outdir, "%s.%s" % (name, fmt))
        fig.savefig(path, format=fmt, dpi=fig.dpi)
        man["files"].append(os.path.basename(path))
    plt.close(fig)
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump(man, f, indent=1)
    return man


# ------------------------------------------------------------------- figures

def _mark_events(ax, run):
    """A dashed line per marked event; a run of one anomaly kind
    (hm.event_groups) one shaded span from its first step - 1/2 to its
    last + 1/2."""
    seen = set()
    marked = [e for e in run.events if e["kind"] in hm.MARKED_EVENTS and e["step"] > 0]
    for first, last, count in hm.event_groups(marked):
        kind = first["kind"]
        lab = kind if kind not in seen else "_nolegend_"
        seen.add(kind)
        color = EVENT_COLORS.get(kind, "grey")
        if count == 1:
            ax.axvline(first["step"], color=color, ls="--", lw=1, label=lab, gid="event")
        else:
            ax.axvspan(first["step"] - 0.5, last["step"] + 0.5, color=color, alpha=0.2, lw=0,
                       label=lab, gid="event_span")


def _style(ax, title, ylabel, log=False):
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if log:
        ax.set_yscale("log")


def fig_curves(run, smooth, dpi):
    s = run.steps
    x = s["step"]
    fig, axs = plt.subplots(3, 2, figsize=(12, 9), dpi=dpi)
    a = axs.ravel()
    loss = np.where(s["skipped"] == 0, s["loss"], np.nan)
    a[0].plot(x, loss, color="tab:blue", alpha=0.35, lw=1, label="raw")
    a[0].plot(x, hm.ema(loss, smooth), color="tab:blue", lw=2, label="EMA %.2f" % smooth)
    _style(a[0], "train loss", "nats/token")
    a[0].legend(fontsize=8)
    v = np.isfinite(s["val_loss"])
    a[1].plot(x[v], s["val_loss"][v], "o-", color="tab:red", label="val loss")
    _style(a[1], "validation loss", "nats/token")
    a[2].plot(x, s["lr"], color="tab:green", label="lr")
    _style(a[2], "learning rate", "lr")
    a[3].plot(x, s["grad_norm"], color="tab:purple", label="grad norm")
    _mark_events(a[3], run)
    _style(a[3], "gradient norm (before clipping), events", "L2 norm")
    if any(x.get_gid() in ("event", "event_span") for x in list(a[3].get_lines()) + list(a[3].patches)):
        a[3].legend(fontsize=7)
    a[4].plot(x, s["tokens_per_s"], color="tab:orange", label="tokens/s")
    _style(a[4], "throughput", "tokens/s")
    a[5].plot(x, 100 * s["mfu"], color="tab:brown", label="MFU")
    _style(a[5], "model FLOP utilisation", "MFU (%)")
    fig.suptitle("%s: %d steps, %d segment(s)" % (run.label, len(x), len(run.segments)))
    fig.tight_layout()
    return fig


def heatmap_data(run, col="busy"):
    """The heat-map array [steps, ranks] of /ranks/col (kept rows)."""
    return run.ranks[col]


def fig_heatmap(run, dpi):
    x = run.steps["step"]
    fig, axs = plt.subplots(2, 1, figsize=(10, 8), dpi=dpi)
    for ax, col, title in ((axs[0], "busy", "busy time per rank (own work, communication "
                                            "excluded)"),
                           (axs[1], "step_time", "step time per rank")):
        a = heatmap_data(run, col)
        ext = (x[0] - 0.5, x[-1] + 0.5, a.shape[1] - 0.5, -0.5) if len(x) else None
        cmap = plt.get_cmap("viridis").copy()
        cmap.set_bad("lightgrey")  # rank absent in that row's segment
        im = ax.imshow(np.ma.masked_invalid(a.T), aspect="auto", interpolation="nearest",
                       cmap=cmap, extent=ext)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=min(a.shape[1], 16)))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(title + (" (grey: rank absent)" if np.isnan(a).any() else ""))
        ax.set_xlabel("step")
        ax.set_ylabel("world rank")
        fig.colorbar(im, ax=ax, label="s")
    fig.suptitle("%s: rank x step" % run.label)
    fig.tight_layout()
    return fig


def breakdown_parts(run):
    """Per-rank mean seconds per step of each BREAKDOWN part: {part: [ranks]}
    and the mean step time [ranks]. forward, backward, optimizer and data are
    the trainer's own timers, compute only (the TP and DP communication
    inside forward and backward is excluded, lib/metrics.c); other = busy -
    those four (loss scaling, gradient zeroing, bookkeeping); pp_send =
    comm_pp - pipeline_wait. The parts add up to step_time + checkpoint."""
    m = {c: hm.rank_means(run, c) for c in ("forward", "backward", "optimizer", "data", "busy",
                                            "pipeline_wait", "comm_pp", "comm_tp", "comm_dp",
                                            "comm_mp", "comm_embed", "checkpoint", "step_time")}
    # the CP ring (a file older than the column: none)
    m["comm_cp"] = (hm.rank_means(run, "comm_cp") if "comm_cp" in run.ranks
                    else np.zeros_like(m["step_time"]))
    own = m["forward"] + m["backward"] + m["optimizer"] + m["data"]
    parts = {"forward": m["forward"], "backward": m["backward"], "optimizer": m["optimizer"],
             "data": m["data"], "other": np.maximum(m["busy"] - own, 0),
             "pipeline_wait": m["pipeline_wait"],
             "pp_send": np.maximum(m["comm_pp"] - m["pipeline_wait"], 0)}
    for c in ("comm_tp", "comm_dp", "comm_mp", "comm_embed", "comm_cp", "checkpoint"):
        parts[c] = m[c]
    return {k: np.nan_to_num(v) for k, v in parts.items()}, m["step_time"]


def fig_breakdown(run, dpi):
    parts, step_time = breakdown_parts(run)
    ranks = np.arange(len(step_time))
    fig, ax = plt.subplots(figsize=(max(8, 0.5 * len(ranks) + 4), 6), dpi=dpi)
    bottom = np.zeros(len(ranks))
    cmap = plt.get_cmap("tab20")
    for i, name in enumerate(BREAKDOWN):
        ax.bar(ranks, parts[name], bottom=bottom, color=cmap(i), label=name, width=0.8)
        bottom += parts[name]
    ax.set_title("mean time per step by rank")
    ax.set_xlabel("world rank")
    ax.set_ylabel("seconds per step")
    ax.set_xticks(ranks)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    extra = {"ranks": int(len(ranks)), "stack_totals": [float(v) for v in bottom],
             "mean_step_time": [float(v) for v in np.nan_to_num(step_time)]}
    return fig, extra


def fig_compare(runs, smooth, dpi):
    fig, axs = plt.subplots(3, 2, figsize=(12, 9), dpi=dpi)
    a = axs.ravel()
    panels = (("train loss (EMA %.2f)" % smooth, "nats/token", "loss"),
              ("validation loss", "nats/token", "val_loss"), ("learning rate", "lr", "lr"),
              ("gradient norm", "L2 norm", "grad_norm"), ("throughput", "tokens/s", "tokens_per_s"),
              ("model FLOP utilisation", "MFU (%)", "mfu"))
    for i, run in enumerate(runs):
        s, color = run.steps, "C%d" % (i % 10)
        for ax, (title, ylabel, col) in zip(a, panels):
            y = s[col].astype(np.float64)
            x = s["step"]
            if col == "loss":
                y = hm.ema(np.where(s["skipped"] == 0, y, np.nan), smooth)
            elif col == "val_loss":
                x, y = x[np.isfinite(y)], y[np.isfinite(y)]
            elif col == "mfu":
                y = 100 * y
            ax.plot(x, y, color=color, label=run.label, marker="o" if col == "val_loss" else None)
    for ax, (title, ylabel, _) in zip(a, panels):
        _style(ax, title, ylabel)
    a[0].legend(fontsize=8)
    fig.suptitle("%d runs compared" % len(runs))
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------- CLI

def _safe(label):
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", label) or "run"


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="FILE", help="metrics files (RUN_DIR/metrics.h5), or run directories")
    p.add_argument("-o", "--outdir", required=True, help="output directory (created)")
    p.add_argument("--format", default="png,svg", help="comma list of png, svg, pdf [png,svg]")
    p.add_argument("--smooth", type=float, default=0.8,
                   help="EMA weight of the smoothed train loss, in [0, 1) [0.8]")
    p.add_argument("--labels", nargs="+", help="one legend name per FILE [run directory names]")
    p.add_argument("--dpi", type=int, default=100, help="pixels per inch, 10 to %d [100]" % DPI_MAX)
    a = p.parse_args(argv)
    a.formats = [f.strip() for f in a.format.split(",") if f.strip()]
    bad = [f for f in a.formats if f not in ("png", "svg", "pdf")]
    if bad or not a.formats:
        p.error("--format %s: unknown format %r (png, svg, pdf)" % (a.format, bad[0] if bad else ""))
    if not 0 <= a.smooth < 1:
        p.error("--smooth %g: must be in [0, 1)" % a.smooth)
    if a.labels and len(a.labels) != len(a.files):
        p.error("--labels: %d names for %d files" % (len(a.labels), len(a.files)))
    if not 10 <= a.dpi <= DPI_MAX:
        p.error("--dpi %d: must be in [10, %d]" % (a.dpi, DPI_MAX))
    return a


def main(argv=None):
    a = parse_args(argv)
    try:
        runs = [hm.load(f, a.labels[i] if a.labels else None) for i, f in enumerate(a.files)]
    except hm.MetricsError as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return 3
    try:
        os.makedirs(a.outdir, exist_ok=True)
        with open(os.path.join(a.outdir, "summary.txt"), "w") as f:
            f.write("\n".join(hm.summary_text(r) for r in runs))
    except OSError as e:
        print("%s: output directory %s: %s" % (PROG, a.outdir, e.strerror or e), file=sys.stderr)
        return 5
    with open(os.path.join(a.outdir, "summary.txt")) as f:
        sys.stdout.write(f.read())
    names, used = [], set()
    for i, r in enumerate(runs):
        n = _safe(r.label)
        names.append(n if n not in used else "%s.%d" % (n, i))
        used.add(names[-1])
    for run, name in zip(runs, names):
        suf = "" if len(runs) == 1 else "-" + name
        if not len(run.steps["step"]):
            print("%s: %s: no rows yet, no figures" % (PROG, run.path), file=sys.stderr)
            continue
        save_figure(fig_curves(run, a.smooth, a.dpi), a.outdir, "curves" + suf, a.formats,
                    {"run": run.label, "steps": [int(v) for v in run.steps["step"]]})
        save_figure(fig_heatmap(run, a.dpi), a.outdir, "heatmap" + suf, a.formats,
                    {"run": run.label})
        fig, extra = fig_breakdown(run, a.dpi)
        save_figure(fig, a.outdir, "breakdown" + suf, a.formats, dict(extra, run=run.label))
    if len(runs) > 1:
        save_figure(fig_compare(runs, a.smooth, a.dpi), a.outdir, "compare", a.formats,
                    {"runs": [r.label for r in runs]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
