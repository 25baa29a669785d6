"""A synthetic hpt metrics file (the layout of docs/METRICS.md) for hpt-live's
downsampling test and bench (tests/live/live-downsample.sh, bench/live-downsample.sh).

usage: live_synth.py PATH STEPS RANKS [RANK_COLS [STEP_TIME [END_TIME]]]
  RANK_COLS: space-separated /ranks columns to write (default "busy step_time");
  the others exist with the writer's chunking and read as NaN (no storage).
  STEP_TIME: seconds a step takes (default 10); END_TIME: Unix time of the last
  step (default 1.7e9 + STEPS x STEP_TIME).
The loss has one spike (at step STEPS//3, value 50) and one dip (at step
2*STEPS//3, value 0.5) that a downsampled history must keep; every 1000th step
has a validation loss; 100 checkpoint_save events spread over the run."""
import sys, time

import h5py
import numpy as np

STEP_COLS = ["step", "segment", "repeated", "skipped", "wall_time", "loss", "val_loss", "lr",
             "grad_norm", "clip_coef", "tokens", "step_time", "tokens_per_s", "flops", "mfu",
             "noise_g2", "noise_s", "noise_scale"]
RANK_COLS = ["step_time", "forward", "backward", "optimizer", "data", "pipeline_wait",
             "checkpoint", "comm_tp", "comm_pp", "comm_dp", "comm_mp", "comm_embed", "bytes_tp",
             "bytes_pp", "bytes_dp", "bytes_mp", "bytes_embed", "tokens", "loss", "grad_sumsq",
             "peak_rss", "device_mem", "busy", "nonfinite"]
SEG_T = np.dtype([("segment", "i4"), ("first_row", "i8"), ("first_step", "i8"),
                  ("resumed_from", "i8"), ("last_step_before", "i8"), ("world", "i4"),
                  ("tp", "i4"), ("pp", "i4"), ("dp", "i4"), ("zero1", "i4"),
                  ("grad_accum", "i4"), ("micro_batch", "i4"), ("seq_len", "i4"),
                  ("start_time", "f8"), ("flops_per_token", "f8"),
                  ("peak_flops_per_rank", "f8"), ("hpt_version", "S32"),
                  ("slurm_job_id", "S32"), ("host", "S64")])
EV_T = np.dtype([("step", "i8"), ("wall_time", "f8"), ("rank", "i4"), ("kind", "S24"),
                 ("message", "S256")])


def make(path, S, W, cols, step_time=10.0, end_time=None):
    rng = np.random.default_rng(0)
    f = h5py.File(path, "w", libver="latest")
    f.attrs["format"] = "hpt-metrics"
    f.attrs["format_version"] = np.int32(1)
    f.attrs["hpt_version"] = "synthetic"
    f.attrs["model_config"] = '{"hidden_size": 8192}'
    f.attrs["flops_per_token"] = 8.4e11
    f.attrs["peak_flops_per_rank"] = 989e12
    t = np.arange(S, dtype=np.float64)
    v = {"step": np.arange(1, S + 1), "segment": np.zeros(S), "repeated": np.zeros(S),
         "skipped": np.zeros(S),
         "wall_time": (end_time if end_time else 1.7e9 + S * step_time) - step_time * (S - 1 - t),
         "loss": 2 + 8 * np.exp(-t / (S / 10)) + 0.05 * rng.standard_normal(S),
         "val_loss": np.where((t + 1) % 1000 == 0, 2.1 + 8 * np.exp(-t / (S / 10)), np.nan),
         "lr": 3e-4 * np.minimum(1, (t + 1) / 2000), "grad_norm": 1 + 0.2 * rng.random(S),
         "clip_coef": np.ones(S), "tokens": np.full(S, 4.2e6),
         "step_time": step_time * (1 + 0.05 * rng.random(S)),
         "flops": np.full(S, 3.5e18)}
    v["loss"][S // 3 - 1] = 50.0
    v["loss"][2 * S // 3 - 1] = 0.5
    v["tokens_per_s"] = v["tokens"] / v["step_time"]
    v["mfu"] = v["flops"] / v["step_time"] / (W * 989e12)
    for k in ["noise_g2", "noise_s", "noise_scale"]:
        v[k] = np.full(S, np.nan)
    for k in STEP_COLS:
        dt = {"step": "i8", "segment": "i4", "repeated": "i1", "skipped": "i1"}.get(k, "f8")
        f.create_dataset("steps/" + k, data=v[k].astype(dt), maxshape=(None,), chunks=(1024,))
    for k in RANK_COLS:
        d = f.create_dataset("ranks/" + k, shape=(S, W), maxshape=(None, None), chunks=(64, 16),
                             dtype="f8", fillvalue=np.nan)
        if k in cols:
            for a in range(0, S, 4096):
                b = min(S, a + 4096)
                d[a:b] = 1 + 0.1 * rng.random((b - a, W))
    seg = np.zeros(1, SEG_T)
    seg[0]["world"], seg[0]["tp"], seg[0]["pp"], seg[0]["dp"] = W, 1, 1, W
    seg[0]["resumed_from"] = -1
    f.create_dataset("segments", data=seg, maxshape=(None,), chunks=(64,))
    ev = np.zeros(100, EV_T)
    ev["step"] = np.linspace(1, S, 100).astype(int)
    ev["kind"] = b"checkpoint_save"
    f.create_dataset("events", data=ev, maxshape=(None,), chunks=(64,))
    f.close()


if __name__ == "__main__":
    t0 = time.time()
    path, S, W = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    cols = (sys.argv[4] if len(sys.argv) > 4 else "busy step_time").split()
    make(path, S, W, cols, float(sys.argv[5]) if len(sys.argv) > 5 else 10.0,
         float(sys.argv[6]) if len(sys.argv) > 6 else None)
    print(f"wrote {path}: {S} steps x {W} ranks, per-rank columns written: {cols} "
          f"({time.time() - t0:.0f} s)")
