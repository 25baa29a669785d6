"""Helpers of the analysis tests (tests/metrics/metrics-*.sh): read a metrics file
with plain h5py, independently of analysis/hpt_metrics.py, and check the
figures plot_metrics.py writes by their pixels and their JSON manifests."""

import json
import os
import struct
import xml.etree.ElementTree as ET

import h5py
import numpy as np


def h5_last_rows(path):
    """(steps, ranks, raw): /steps and /ranks columns with the last row of
    each step, sorted by step — the rule written out with a dict — and the
    raw /steps columns."""
    f = h5py.File(path, "r", libver="latest", swmr=True)
    raw = {k: f["steps"][k][:] for k in f["steps"]}
    last = {}
    for i, s in enumerate(raw["step"]):
        last[int(s)] = i
    rows = [last[s] for s in sorted(last)]
    steps = {k: v[rows] for k, v in raw.items()}
    ranks = {k: f["ranks"][k][:][rows] for k in f["ranks"]}
    f.close()
    return steps, ranks, raw


def png_size(path):
    """(width, height) from the PNG signature and IHDR chunk."""
    with open(path, "rb") as fh:
        head = fh.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", path + ": not a PNG"
    return struct.unpack(">II", head[16:24])


def check_png(path, width, height):
    """The PNG is width x height pixels (header and decoded array) and not
    blank: pixel values vary and there are many distinct colours."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.image as mpimg
    assert png_size(path) == (width, height), (path, png_size(path), (width, height))
    img = mpimg.imread(path)
    assert img.shape[:2] == (height, width), (path, img.shape)
    rgb = img[..., :3].reshape(-1, 3)
    colours = len(np.unique((rgb * 255).astype(np.uint8), axis=0))
    assert rgb.std() > 0.02 and colours >= 16, (path, float(rgb.std()), colours)
    # not mostly background: at least 3 % of the pixels are not white
    assert (rgb.min(axis=1) < 0.95).mean() > 0.03, path + ": nearly empty"
    return img


def check_svg(path):
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg"), path
    assert sum(1 for e in root.iter() if e.tag.endswith("path")) > 20, path + ": nearly empty"


def manifest(outdir, name):
    with open(os.path.join(outdir, name + ".json")) as fh:
        m = json.load(fh)
    for f in m["files"]:
        p = os.path.join(outdir, f)
        if f.endswith(".png"):
            check_png(p, m["width_px"], m["height_px"])
        elif f.endswith(".svg"):
            check_svg(p)
    return m


def plots(m):
    return [a for a in m["axes"] if a["role"] == "plot"]
