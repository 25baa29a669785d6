"""hpt_metrics — read an hpt metrics file (RUN_DIR/metrics.h5) into NumPy.

The file layout is written by lib/metrics.c (docs/METRICS.md, docs/ANALYSIS.md):
/steps/<col> [rows], /ranks/<col> [rows, ranks], /segments and /events tables,
root attributes format="hpt-metrics", format_version=1.

Rows are appended in time order. After a resume a step can appear more than
once (the redone rows have repeated=1); the rule, applied by load(), is: for
each step keep the LAST row (the later segment wins). Curves made from
Run.steps / Run.ranks therefore have each step once, sorted by step.

    import hpt_metrics as hm
    run = hm.load("runs/demo/metrics.h5")
    run.steps["loss"], run.ranks["busy"]      # [steps], [steps, ranks]
    hm.ema(run.steps["loss"], 0.9)            # smoothed curve
    print(hm.summary_text(run))

Only h5py and NumPy (Debian's python3-h5py, python3-numpy) are needed.
"""

import os
import signal
import time

import h5py
import numpy as np

FORMAT = "hpt-metrics"
FORMAT_VERSION = 1

# Events worth a vertical line on a curve (run_start/run_end/checkpoint_save
# happen on every run and would only clutter the plot).
MARKED_EVENTS = ("resume", "layout_change", "checkpoint_load", "signal", "skipped_step",
                 "grad_norm_spike", "throughput_drop", "slow_rank")
# Anomaly kinds whose runs (occurrences 1..FLOOD_GAP steps apart; slow_rank:
# of one rank) are one span, not a line per step: the live page's rule
# (docs/LIVE.md, share/live/app.js eventGroups).
FLOOD_KINDS = ("skipped_step", "grad_norm_spike", "throughput_drop", "slow_rank")
FLOOD_GAP = 10


def event_groups(events):
    """events (dicts with kind, step, rank; in the file's order) with the
    floods collapsed: a list of (first, last, count) in the order of each
    group's first event. An event of FLOOD_KINDS joins the open group of its
    kind (slow_rank: and rank) when it follows that group's last event by 1
    to FLOOD_GAP steps; any other event is a group of its own."""
    out, open_ = [], {}
    for e in events:
        if e["kind"] not in FLOOD_KINDS:
            out.append([e, e, 1])
            continue
        key = (e["kind"], e["rank"] if e["kind"] == "slow_rank" else None)
        g = open_.get(key)
        if g is not None and 0 < e["step"] - g[1]["step"] <= FLOOD_GAP:
            g[1], g[2] = e, g[2] + 1
            continue
        g = open_[key] = [e, e, 1]
        out.append(g)
    return [tuple(g) for g in out]


# Datasets every version-1 file has and this module reads.
STEP_COLS = tuple("/steps/" + c for c in (
    "step", "segment", "repeated", "skipped", "wall_time", "loss", "val_loss", "lr", "grad_norm",
    "clip_coef", "tokens", "step_time", "tokens_per_s", "flops", "mfu", "noise_g2", "noise_s",
    "noise_scale"))
RANK_COLS = tuple("/ranks/" + c for c in (
    "step_time", "forward", "backward", "optimizer", "data", "pipeline_wait", "checkpoint",
    "comm_tp", "comm_pp", "comm_dp", "comm_mp", "comm_embed", "busy"))


class MetricsError(Exception):
    """The file is missing, not an hpt metrics file, or damaged. The message
    names the file and the field."""


class Run:
    """One metrics file, after the dedup rule.

    path, label       the file and a short name for legends
    attrs             root attributes (str / float / int)
    steps             {col: array [n]}: one entry per distinct step, sorted
    ranks             {col: array [n, ranks]} aligned with steps; NaN where a
                      rank did not exist in the segment that wrote the row
    units             {("steps"|"ranks", col): units string}
    raw_steps         {col: array [rows]}: every row as stored (time order)
    raw_rank0         {col: array [rows]}: rank 0's /ranks/checkpoint and
                      /ranks/validation of every row (a column the file
                      predates is absent)
    rows              number of stored rows; keep: row index of each step
    segments          list of dicts (strings decoded)
    events            list of dicts: step, wall_time, rank, kind, message
    """

    def __init__(self, path, label):
        self.path, self.label = path, label
        self.attrs, self.steps, self.ranks, self.units, self.raw_steps = {}, {}, {}, {}, {}
        self.raw_rank0 = {}
        self.segments, self.events = [], []
        self.rows, self.keep = 0, np.zeros(0, dtype=np.int64)

    @property
    def nranks(self):
        return next(iter(self.ranks.values())).shape[1] if self.ranks else 0


def _decode(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.generic):
        return v.item()
    return v


def _table(ds):
    arr = ds[:]
    return [{name: _decode(row[name]) for name in arr.dtype.names} for row in arr]


# Metadata read attempts in SWMR mode, as io/metrics_h5.h's
# HPT_METRICS_READ_ATTEMPTS: HDF5 1.10 retries a metadata checksum mismatch
# with sleeps of 1, 2, 4, ... ns, 100 times by default (for ever in practice:
# one flipped bit hangs the reader); 30 attempts sleep about 1 s in all.
READ_ATTEMPTS = 30


def _hdf5_lib():
    """The HDF5 library h5py itself loaded (ctypes handle), found in
    /proc/self/maps; None when it cannot be found (not Linux)."""
    import ctypes
    try:
        with open("/proc/self/maps") as f:
            paths = {ln.split()[-1] for ln in f if "/libhdf5" in ln and "_hl" not in ln}
    except OSError:
        return None
    for p in sorted(paths):
        try:
            lib = ctypes.CDLL(p)
            fn = lib.H5Pset_metadata_read_attempts
        except (OSError, AttributeError):
            continue
        fn.argtypes, fn.restype = [ctypes.c_int64, ctypes.c_uint], ctypes.c_int
        return fn
    return None


def _fapl():
    """h5py file access property list: libver latest, HDF5 file locking off
    (hpt locks FILE.lock itself), metadata read attempts bounded to
    READ_ATTEMPTS through HDF5's own H5Pset_metadata_read_attempts on the
    library h5py uses (h5py has no binding for it). Returns (fapl, bounded)."""
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_LATEST, h5py.h5f.LIBVER_LATEST)
    if hasattr(fapl, "set_file_locking"):
        fapl.set_file_locking(False, True)
    fn = _hdf5_lib()
    return fapl, fn is not None and fn(fapl.id, READ_ATTEMPTS) >= 0


def _close_hint(msg):
    return ("; a killed writer's file: `hpt-metrics close FILE` clears HDF5's open-for-write flag"
            if "already open" in msg else "")


def open_file(path):
    """Open a metrics file read-only in SWMR mode (works on a live run's file
    and on the file of a killed run), with metadata read attempts bounded
    (READ_ATTEMPTS), so a damaged file fails instead of hanging. Where the
    bound cannot be set (HDF5 library not found), the file is first opened
    without SWMR (one read attempt: damage fails at once) and only a file a
    writer holds open is opened in SWMR mode. Raises MetricsError naming the
    file."""
    if not os.path.exists(path):
        raise MetricsError("%s: no such file" % path)
    if os.path.isfile(path) and os.path.getsize(path) == 0:
        raise MetricsError("%s: not a readable HDF5 file: empty file (0 bytes)" % path)
    fapl, bounded = _fapl()
    flags = h5py.h5f.ACC_RDONLY | h5py.h5f.ACC_SWMR_READ
    try:
        if not bounded:
            try:
                return h5py.File(h5py.h5f.open(os.fsencode(path), h5py.h5f.ACC_RDONLY, fapl=fapl))
            except OSError as e:
                if "already open" not in str(e):
                    raise
        return h5py.File(h5py.h5f.open(os.fsencode(path), flags, fapl=fapl))
    except OSError as e:
        raise MetricsError("%s: not a readable HDF5 file, or truncated (%s)%s"
                           % (path, e, _close_hint(str(e)))) from None


PROBE_S = 60  # seconds the attribute probe may take (milliseconds on a sound file)


def _read_all_attrs(path):
    """Open path and read every attribute of the root, of /steps, /ranks and
    of their datasets and the tables (the strings live in HDF5's global
    heap). Exit status 0 whatever it finds: only a crash or a hang counts."""
    try:
        with open_file(path) as f:
            objs = [f] + [f[g] for g in ("steps", "ranks") if g in f]
            objs += [o[k] for o in objs[1:] for k in o] + [f[t] for t in ("segments", "events")
                                                             if t in f]
            for o in objs:
                for k in o.attrs:
                    o.attrs[k]
    except BaseException:  # an ordinary failure: the caller reports it itself
        pass


def probe(path):
    """Raise MetricsError when reading the attributes of path crashes or
    hangs HDF5, checked in a child process. HDF5 1.10 trusts the object
    sizes of a global heap collection (the variable-length strings of the
    attributes: format, model_config, units, ...), which carry no checksum:
    one overwritten size byte makes H5Aread crash the process with SIGSEGV
    or loop for minutes, where the caller should get a message and exit 3.
    Where fork is unavailable nothing is checked."""
    if not hasattr(os, "fork"):
        return
    pid = os.fork()
    if pid == 0:
        try:
            _read_all_attrs(path)
        finally:
            os._exit(0)
    deadline = time.monotonic() + PROBE_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise MetricsError("%s: damaged file: HDF5 did not finish reading its attributes in "
                               "%d s (a damaged global heap: the strings of the attributes)"
                               % (path, PROBE_S))
        time.sleep(0.01)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        raise MetricsError("%s: damaged file: HDF5 crashed reading its attributes (signal %d, %s; "
                           "a damaged global heap: the strings of the attributes)"
                           % (path, sig, signal.Signals(sig).name))


def dedup_index(step):
    """Row indices to keep: for each distinct step the last row, sorted by
    step. step: 1-D array of the stored rows in time order."""
    step = np.asarray(step)
    if step.size == 0:
        return np.zeros(0, dtype=np.int64)
    rev = step[::-1]
    _, first_in_rev = np.unique(rev, return_index=True)  # sorted by step
    return (step.size - 1 - first_in_rev).astype(np.int64)


# What h5py raises when HDF5 cannot read a part of the file (a damaged
# object header or chunk index: "incorrect metadata checksum after all read
# attempts"), besides KeyError for a missing name.
_H5_ERRORS = (OSError, RuntimeError, ValueError, KeyError)


def _damaged(path, what, e):
    cause = e.args[0] if e.args else str(e)
    return MetricsError("%s: %s (damaged file; HDF5: %s)" % (path, what, cause))


def _attr(f, path, name):
    try:
        return _decode(f.attrs.get(name))
    except _H5_ERRORS as e:
        raise _damaged(path, "cannot read the root attribute %s" % name, e) from None


def _dataset(f, path, name):
    """f[name] as a dataset; MetricsError naming it when it is missing, not a
    dataset, or unreadable."""
    try:
        exists = name in f
        d = f[name] if exists else None
    except _H5_ERRORS as e:
        raise _damaged(path, "dataset %s is missing or unreadable" % name, e) from None
    if d is None or not isinstance(d, h5py.Dataset):
        raise MetricsError("%s: dataset %s is missing (damaged file)" % (path, name))
    return d


def _read(path, name, fn):
    """fn() (a read of dataset `name`), with HDF5 failures as MetricsError."""
    try:
        return fn()
    except _H5_ERRORS as e:
        raise _damaged(path, "cannot read dataset %s" % name, e) from None


def _check_format(f, path):
    fmt = _attr(f, path, "format")
    if fmt != FORMAT:
        raise MetricsError('%s: not an hpt metrics file (root attribute format = %s, expected "%s")'
                           % (path, "missing" if fmt is None else '"%s"' % fmt, FORMAT))
    ver = _attr(f, path, "format_version")
    if ver != FORMAT_VERSION:
        raise MetricsError("%s: format_version %r, this reader knows version %d"
                           % (path, ver, FORMAT_VERSION))
    for name in STEP_COLS + ("/segments", "/events") + RANK_COLS:
        _dataset(f, path, name)


def _group(f, path, g):
    """{name: dataset} of group g, refreshed (SWMR)."""
    try:
        names = list(f[g])
    except _H5_ERRORS as e:
        raise _damaged(path, "cannot read group /%s" % g, e) from None
    out = {k: _dataset(f, path, "/%s/%s" % (g, k)) for k in names}
    for k, d in out.items():
        _read(path, "/%s/%s" % (g, k), d.refresh)
    return out


def load(path, label=None):
    """Read a metrics file into a Run with the dedup rule applied. A file
    being written may have some columns a few rows longer than others; only
    the rows every column holds are read. Raises MetricsError (a damaged
    file: naming the dataset; one whose attributes crash HDF5: see probe()).
    A run directory stands for its metrics.h5, as for hpt-metrics and
    hpt-live."""
    if os.path.isdir(path):
        inner = os.path.join(path, "metrics.h5")
        if not os.path.exists(inner):
            raise MetricsError("%s: a directory with no metrics.h5 (give a run directory or "
                               "a metrics file)" % path)
        path = inner
    if label is None:
        parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
        label = parent or os.path.basename(path)
    run = Run(path, label)
    if os.path.exists(path):
        probe(path)
    with open_file(path) as f:
        _check_format(f, path)
        try:
            run.attrs = {k: _decode(v) for k, v in f.attrs.items()}
        except _H5_ERRORS as e:
            raise _damaged(path, "cannot read the root attributes", e) from None
        sds, rds = _group(f, path, "steps"), _group(f, path, "ranks")
        bad = [k for k, d in rds.items() if d.ndim != 2] + [k for k, d in sds.items() if d.ndim != 1]
        if bad:
            raise MetricsError("%s: dataset %s has the wrong rank (damaged file)" % (path, bad[0]))
        n = min([d.shape[0] for d in sds.values()] + [d.shape[0] for d in rds.values()])
        run.rows = n
        run.raw_steps = {k: _read(path, "/steps/" + k, lambda d=d: d[:n]) for k, d in sds.items()}
        run.keep = dedup_index(run.raw_steps["step"])
        run.steps = {k: v[run.keep] for k, v in run.raw_steps.items()}
        raw = {k: _read(path, "/ranks/" + k, lambda d=d: d[:n]) for k, d in rds.items()}
        run.ranks = {k: v[run.keep] for k, v in raw.items()}
        run.raw_rank0 = {k: raw[k][:, 0] if raw[k].shape[1] else np.full(n, np.nan)
                         for k in ("checkpoint", "validation") if k in raw}
        for g, ds in (("steps", sds), ("ranks", rds)):
            for k, d in ds.items():
                run.units[(g, k)] = _read(path, "/%s/%s" % (g, k),
                                          lambda d=d: _decode(d.attrs.get("units", "")))
        run.segments = _read(path, "/segments", lambda: _table(f["segments"]))
        run.events = _read(path, "/events", lambda: _table(f["events"]))
    return run


def ema(x, smooth):
    """Exponential moving average with bias correction (TensorBoard's
    smoothing): s_t = smooth * s_{t-1} + (1 - smooth) * x_t, divided by
    1 - smooth^k after k finite values. Non-finite x_t (skipped steps) give
    NaN at t and leave the average untouched. smooth in [0, 1); 0 = raw."""
    x = np.asarray(x, dtype=np.float64)
    if not 0 <= smooth < 1:
        raise ValueError("smoothing %r: must be in [0, 1)" % smooth)
    out = np.full(x.shape, np.nan)
    acc, w = 0.0, 0.0
    for i, v in enumerate(x):
        if np.isfinite(v):
            acc = smooth * acc + (1 - smooth) * v
            w = smooth * w + (1 - smooth)
            out[i] = acc / w
    return out


def _finite(v):
    v = np.asarray(v, dtype=np.float64)
    return v[np.isfinite(v)]


def rank_means(run, col="busy"):
    """Mean of /ranks/col per rank over the kept rows, ignoring rows where
    the rank was absent (NaN). Returns [ranks] (NaN for a rank never seen)."""
    a = run.ranks[col]
    cnt = np.isfinite(a).sum(axis=0)
    tot = np.where(np.isfinite(a), a, 0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)


def slowest_ranks(run, col="busy", k=3):
    """The k ranks with the largest mean `col` (busy: the rank's own work,
    communication excluded, so a straggler stands out while the others wait
    for it), slowest first, ties to the lower rank. Returns a list of
    (rank, mean, median of the other ranks' means) — the comparison the
    trainer's slow_rank event makes; the median is NaN with one rank."""
    m = rank_means(run, col)
    ok = np.flatnonzero(np.isfinite(m))
    order = ok[np.argsort(-m[ok], kind="stable")]
    out = []
    for r in order[:k]:
        others = m[ok[ok != r]]
        out.append((int(r), float(m[r]), float(np.median(others)) if others.size else float("nan")))
    return out


def summary(run):
    """The summary facts as a dict (the same facts `hpt-metrics summary`
    prints). Means are over the kept rows of steps that were not skipped."""
    s = run.steps
    n = len(s["step"])
    ok = s["skipped"] == 0 if n else np.zeros(0, bool)
    out = {"file": run.path, "format_version": run.attrs.get("format_version"),
           "hpt_version": run.attrs.get("hpt_version"), "segments": len(run.segments),
           "steps": n, "rows": run.rows,
           "first_step": int(s["step"][0]) if n else None,
           "last_step": int(s["step"][-1]) if n else None,
           "repeated_rows": run.rows - n, "skipped": int((~ok).sum()),
           "tokens": float(np.nansum(s["tokens"])) if n else 0.0}
    for name, col in (("train_loss", "loss"), ("val_loss", "val_loss")):
        v = s[col].astype(np.float64) if n else np.zeros(0)
        fin = np.flatnonzero(np.isfinite(v) & (ok if col == "loss" else True))
        if fin.size:
            best = fin[np.argmin(v[fin])]
            out[name] = {"final": float(v[fin[-1]]), "final_step": int(s["step"][fin[-1]]),
                         "best": float(v[best]), "best_step": int(s["step"][best])}
        else:
            out[name] = None
    for name in ("tokens_per_s", "mfu"):  # mean_mfu: a fraction; summary_text prints percent
        v = _finite(s[name][ok]) if n else np.zeros(0)
        out["mean_" + name] = float(v.mean()) if v.size else float("nan")
    out["slowest_ranks"] = slowest_ranks(run, "busy", 3)
    out["pipeline_bubble"] = pipeline_bubble(run)
    out["cp_ring"] = cp_ring(run)
    out["events"] = run.events
    return out


def pipeline_bubble(run):
    """The last segment with PP > 1 (else None; None too for a file older
    than /ranks/pipeline_bubble): per kept step of that segment the most idle rank's
    pipeline_bubble over the step time, the median over the steps that have
    it, beside the schedule's theory as the segment records it
    (bubble_theory; (p - 1)/(m + p - 1), Narayanan et al. 2021, 2.2, in a
    file older than it): {"measured", "steps", "theory", "formula", "pp",
    "micro_batches"}."""
    if not run.segments or int(run.segments[-1]["pp"]) < 2 or "pipeline_bubble" not in run.ranks:
        return None
    pb, st = run.ranks["pipeline_bubble"], run.steps["step_time"]
    first = int(run.segments[-1]["first_step"])  # earlier segments: another layout or schedule
    ratio = []
    for i in range(len(st)):
        if run.steps["step"][i] <= first:
            continue
        row = pb[i][np.isfinite(pb[i])]
        if row.size and st[i] > 0:
            ratio.append(float(row.max()) / float(st[i]))
    if not ratio:
        return None
    sg = run.segments[-1]
    p, m = int(sg["pp"]), int(sg["grad_accum"])
    th = float(sg["bubble_theory"]) if "bubble_theory" in sg else float("nan")
    known = np.isfinite(th)
    sched, v = (int(sg["pp_schedule"]), int(sg["pp_virtual"])) if known else (0, 1)
    form = ("(p-1)/(m+p-1)" if sched <= 1 else
            "interleaved V = %d, (p-1)/(V m+p-1)" % v if sched == 2 else
            "ZB-H1, (p-1)z/(m+(p-1)z) (z = (F+B-W)/(F+B+W) from FLOPs)")
    return {"measured": float(np.median(ratio)), "steps": len(ratio),
            "theory": th if known else (p - 1) / (m + p - 1), "formula": form, "pp": p,
            "micro_batches": m}


def cp_ring(run):
    """The context-parallel ring (issue 31; None without CP or in a file
    older than /ranks/bytes_cp): over the kept steps where a rank sent ring
    bytes, the medians of the busiest rank's comm_cp seconds, of the most
    bytes a rank sent (MB) and of the ranks' mean cp_ring_hidden (NaN on
    NCCL or in a file older than that column): {"seconds", "steps", "mb",
    "hidden"}."""
    if "bytes_cp" not in run.ranks or "comm_cp" not in run.ranks:
        return None
    by, cs = run.ranks["bytes_cp"], run.ranks["comm_cp"]
    hd = run.ranks.get("cp_ring_hidden")
    sec, mb, hid = [], [], []
    for i in range(len(by)):
        bi, si = by[i], cs[i]
        b = max([float(x) for x in bi[np.isfinite(bi)] if x > 0], default=0.0)
        if b <= 0:
            continue
        sec.append(max([float(x) for x in si[np.isfinite(si)] if x > 0], default=0.0))
        mb.append(b)
        if hd is not None:
            hs = [float(h) for h, bw in zip(hd[i], bi) if np.isfinite(h) and np.isfinite(bw) and bw > 0]
            if hs:
                hid.append(sum(hs) / len(hs))
    if not sec:
        return None
    return {"seconds": float(np.median(sec)), "steps": len(sec), "mb": float(np.median(mb)) / 1e6,
            "hidden": float(np.median(hid)) if hid else float("nan")}


def goodput(run):
    """Where the run's wall time went over all its segments (docs/METRICS.md,
    "Goodput"), as lib/goodput.c computes it, step for step in the same
    order (so `hpt-metrics goodput` and this agree to the last bit): a dict
    of seconds wall, productive, redone, checkpoint, startup, validation,
    between, other, load, restart_startup; fraction = productive / wall;
    counts rows, steps, redone_steps, segments, resumes, saves,
    start_known, validation_known."""
    nan = float("nan")
    rs, segs, rows = run.raw_steps, run.segments, run.rows
    step, segc = rs.get("step", np.zeros(0)), rs.get("segment", np.zeros(0))
    wall, st = rs.get("wall_time", np.zeros(0)), rs.get("step_time", np.zeros(0))
    ck, val = run.raw_rank0.get("checkpoint"), run.raw_rank0.get("validation")
    kept = np.zeros(rows, bool)
    kept[dedup_index(step[:rows])] = True
    g = dict.fromkeys(("wall", "productive", "redone", "checkpoint", "startup", "validation",
                       "between", "other", "load", "restart_startup"), 0.0)
    g.update(saves=0, resumes=0, segments=len(segs), rows=rows, steps=int(kept.sum()),
             redone_steps=rows - int(kept.sum()), validation_known=int(val is not None or rows == 0),
             start_known=0, fraction=nan)
    def or0(a, i):
        return float(a[i]) if a is not None and np.isfinite(a[i]) else 0.0
    def fin(sg, k):
        v = sg.get(k, nan)
        return float(v) if np.isfinite(v) else nan
    S = len(segs)
    start, end, save = [0.0] * S, [0.0] * S, [-float("inf")] * S
    for s, sg in enumerate(segs):
        ps, t0 = fin(sg, "process_start"), float(sg["start_time"])
        start[s] = ps if np.isfinite(ps) and ps <= t0 else t0
        end[s] = max(start[s], t0)
        g["start_known"] += int(np.isfinite(ps))
    for i in range(rows if S else 0):
        c = float(segc[i])
        if 0 <= c < S:
            end[int(c)] = max(end[int(c)], float(wall[i]))
    for e in run.events if S else []:
        t, lo, hi = float(e["wall_time"]), 0, S  # the last segment started by t (C's search)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if start[mid] <= t else (lo, mid)
        end[lo] = max(end[lo], t)
        if e["kind"] == "checkpoint_save":  # one per save committed (async: at its commit)
            save[lo] = max(save[lo], t)
            g["saves"] += 1
    for s, sg in enumerate(segs):
        P, E = start[s], end[s]
        r0 = max(int(sg["first_row"]), 0)
        nxt = int(segs[s + 1]["first_row"]) if s + 1 < S else -1
        r1 = min(nxt if nxt >= 0 else rows, rows)
        prev, startup = nan, 0.0
        for i in range(r0, r1):
            if float(segc[i]) != float(sg["segment"]):
                continue
            t, c, v, w = or0(st, i), or0(ck, i), or0(val, i), float(wall[i])
            if np.isnan(prev):
                startup = (w - t - c - v) - P
            else:
                g["other"] += (w - prev) - t - c - v
            g["productive" if kept[i] else "redone"] += t
            g["checkpoint"] += c
            g["validation"] += v
            prev = w
        if np.isnan(prev):
            startup = E - P
        elif save[s] > prev:
            g["checkpoint"] += save[s] - prev
            g["other"] += E - save[s]
        else:
            g["other"] += E - prev
        g["startup"] += startup
        if int(sg["resumed_from"]) >= 0:
            g["restart_startup"] += startup
            g["resumes"] += 1
        ld = fin(sg, "load_seconds")
        g["load"] += ld if np.isfinite(ld) else 0.0
        if s > 0:
            g["between"] += start[s] - end[s - 1]
    g["wall"] = end[S - 1] - start[0] if S else 0.0
    g["fraction"] = g["productive"] / g["wall"] if g["wall"] > 0 else nan
    return g


def goodput_text(run):
    """goodput() as the lines `hpt-metrics goodput` prints after its file line."""
    g = goodput(run)
    W = g["wall"]
    def pct(v):
        return 100 * v / W if W > 0 else float("nan")
    L = ["wall: %.3f s, %d segment%s (%d resumed), from the first process start to the last "
         "known time" % (W, g["segments"], "" if g["segments"] == 1 else "s", g["resumes"]),
         "productive: %.3f s (%.2f %%), %d steps" % (g["productive"], pct(g["productive"]), g["steps"]),
         "redone: %.3f s (%.2f %%), %d steps run again after a restart"
         % (g["redone"], pct(g["redone"]), g["redone_steps"]),
         "checkpoint: %.3f s (%.2f %%), %d saves" % (g["checkpoint"], pct(g["checkpoint"]), g["saves"]),
         "startup: %.3f s (%.2f %%), of which checkpoint loading %.3f s; %d of %d segments with "
         "their process start recorded" % (g["startup"], pct(g["startup"]), g["load"],
                                           g["start_known"], g["segments"])]
    L.append("validation: %.3f s (%.2f %%)" % (g["validation"], pct(g["validation"]))
             if g["validation_known"] else
             "validation: not recorded (a file older than /ranks/validation: in other)")
    L += ["between segments: %.3f s (%.2f %%), after each segment's last known time"
          % (g["between"], pct(g["between"])),
          "other: %.3f s (%.2f %%), metrics, logging and agreements between steps"
          % (g["other"], pct(g["other"])),
          "goodput: %.2f %% (productive / wall: effective training time)" % pct(g["productive"])]
    return "\n".join(L) + "\n"


def _fmt(v):
    return "nan" if v is None or not np.isfinite(v) else "%.6g" % v


def summary_text(run):
    """summary() as text, one fact per line ("key: value"); hpt-metrics
    summary prints the same lines."""
    d = summary(run)
    L = ["file: %s" % d["file"],
         "format: hpt-metrics %s (hpt %s)" % (d["format_version"], d["hpt_version"]),
         "segments: %d" % d["segments"]]
    for sg in run.segments:
        res = ("fresh start" if sg["resumed_from"] < 0
               else "resumed from step %d" % sg["resumed_from"])
        sp = "sequence_parallel" in sg and sg["sequence_parallel"]  # absent in older files
        rc = sg["recompute"] if "recompute" in sg else 0
        tpd = int(sg["tp"]) * int(sg["pp"]) * int(sg["dp"])  # CP = world / (TP x PP x DP)
        cp = ("CP %d x " % (int(sg["world"]) // tpd)
              if tpd > 0 and sg["world"] > tpd and sg["world"] % tpd == 0 else "")
        L.append("  segment %d: first row %d, %s, world %d (TP %d x %sPP %d x DP %d%s%s%s), "
                 "micro-batch %d x grad-accum %d x seq %d, host %s, job %s"
                 % (sg["segment"], sg["first_row"], res, sg["world"], sg["tp"], cp, sg["pp"],
                    sg["dp"], ", ZeRO-%d" % int(sg["zero1"]) if sg["zero1"] else "",
                    ", sequence parallel" if sp else "",
                    {1: ", full recomputation", 2: ", selective recomputation"}.get(int(rc), ""),
                    sg["micro_batch"],
                    sg["grad_accum"], sg["seq_len"], sg["host"] or "-",
                    sg["slurm_job_id"] or "-"))
    if d["steps"]:
        L.append("steps: %d (%d-%d), %d rows, %d repeated rows, %d skipped"
                 % (d["steps"], d["first_step"], d["last_step"], d["rows"], d["repeated_rows"],
                    d["skipped"]))
    else:
        L.append("steps: 0")
    L.append("tokens: %.0f" % d["tokens"])
    for key, name in (("train_loss", "train loss"), ("val_loss", "val loss")):
        v = d[key]
        L.append("%s: none" % name if v is None else
                 "%s: final %s (step %d), best %s (step %d)"
                 % (name, _fmt(v["final"]), v["final_step"], _fmt(v["best"]), v["best_step"]))
    L.append("mean tokens/s: %s" % _fmt(d["mean_tokens_per_s"]))
    L.append("mean MFU (%%): %s" % _fmt(100 * d["mean_mfu"]))
    L.append("slowest ranks (mean busy s/step, against the median of the other ranks):")
    for r, v, med in d["slowest_ranks"]:
        if len(d["slowest_ranks"]) == 1:  # one rank: nothing to compare with
            L.append("  rank %d: %s (the only rank)" % (r, _fmt(v)))
            continue
        ratio = v / med if med > 0 else float("nan")
        L.append("  rank %d: %s (%.2fx, others %s)" % (r, _fmt(v), ratio, _fmt(med)))
    b = d["pipeline_bubble"]
    if b:
        L.append("pipeline bubble: %s of the step (the most idle stage's, median of %d steps); "
                 "theory %s = %s (PP %d, %d micro-batches)"
                 % (_fmt(b["measured"]), b["steps"], b["formula"], _fmt(b["theory"]), b["pp"],
                    b["micro_batches"]))
    c = d["cp_ring"]
    if c:
        L.append("context-parallel ring: %s s/step in its calls (the busiest rank's, median of %d "
                 "steps), %s MB/step sent per rank, hidden %s of its transfers' time in flight"
                 % (_fmt(c["seconds"]), c["steps"], _fmt(c["mb"]), _fmt(c["hidden"])))
    L.append("events: %d" % len(d["events"]))
    for e in d["events"]:
        L.append("  step %d rank %d %s: %s" % (e["step"], e["rank"], e["kind"], e["message"]))
    g = goodput(run)
    L.append("goodput: %.2f %% of %.3f s (redone %d steps %.3f s, checkpoint %.3f s, startup %.3f s, "
             "validation %.3f s, between segments %.3f s)"
             % (100 * g["productive"] / g["wall"] if g["wall"] > 0 else float("nan"), g["wall"],
                g["redone_steps"], g["redone"], g["checkpoint"], g["startup"], g["validation"],
                g["between"]))
    return "\n".join(L) + "\n"
