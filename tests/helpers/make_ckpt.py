#!/usr/bin/env python3
"""make_ckpt.py -- write small hpt checkpoints with h5py, in the format of
io/ckpt.h (docs/CHECKPOINT.md), for tests of hpt-ckpt and of --resume.

  make_ckpt.py --config CONFIG.json --dir RUN/checkpoints --steps 10 20
               [--latest STEP|none] [--format-version N] [--tp N --pp N --dp N]
               [--zero1] [--seed N] [--samples-per-step N]

For each step S: DIR/step_%08d/checkpoint.h5 with the root attributes of
ckpt.h (fixed-length null-terminated strings as hpt_ckpt_write_meta writes
them, int64 and int32 scalars), and /model, /optim/exp_avg, /optim/exp_avg_sq
holding every tensor of the config with its global (unsharded) shape:
float32, chunked by rows, Fletcher32, attribute "layer" (int32, -1 outside
the layers). Values are pseudo-random, a function of (seed, step, tensor).
DIR/latest names the newest step unless --latest says otherwise.
"""
import argparse
import json
import os
import zlib

import h5py
import numpy as np

FORMAT = "hpt-checkpoint"
LAYER_TENSORS = [  # (name suffix, shape function of the config)
    ("input_layernorm.weight", lambda c: (c["C"],)),
    ("self_attn.q_proj.weight", lambda c: (c["H"] * c["hd"], c["C"])),
    ("self_attn.k_proj.weight", lambda c: (c["KV"] * c["hd"], c["C"])),
    ("self_attn.v_proj.weight", lambda c: (c["KV"] * c["hd"], c["C"])),
    ("self_attn.o_proj.weight", lambda c: (c["C"], c["H"] * c["hd"])),
    ("post_attention_layernorm.weight", lambda c: (c["C"],)),
    ("mlp.gate_proj.weight", lambda c: (c["I"], c["C"])),
    ("mlp.up_proj.weight", lambda c: (c["I"], c["C"])),
    ("mlp.down_proj.weight", lambda c: (c["C"], c["I"])),
]


def tensors(cfg):
    """(Hugging Face name, global shape, layer) of every tensor, in hpt's order."""
    H, C = cfg["num_attention_heads"], cfg["hidden_size"]
    d = {"C": C, "I": cfg["intermediate_size"], "H": H,
         "KV": cfg.get("num_key_value_heads") or H, "hd": C // H}
    V = cfg["vocab_size"]
    out = [("model.embed_tokens.weight", (V, C), -1)]
    for l in range(cfg["num_hidden_layers"]):
        out += [("model.layers.%d.%s" % (l, n), f(d), l) for n, f in LAYER_TENSORS]
    out.append(("model.norm.weight", (C,), -1))
    if not cfg.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", (V, C), -1))
    return out


def put_str(obj, name, s):
    """A scalar fixed-length, null-terminated string attribute (H5T_C_S1 of
    strlen + 1 bytes), as io/ckpt.c writes it."""
    b = s.encode() + b"\0"
    tid = h5py.h5t.C_S1.copy()
    tid.set_size(len(b))
    tid.set_strpad(h5py.h5t.STR_NULLTERM)
    obj.attrs.create(name, np.array(b, dtype="S%d" % len(b)), dtype=h5py.Datatype(tid))


def write_meta(f, a, cfg_text, step):
    put_str(f, "format", FORMAT)
    put_str(f, "hpt_version", "0.1.0")
    put_str(f, "config_json", cfg_text)
    i64 = {"step": step, "samples": step * a.samples_per_step, "adam_t": step,
           "skipped_total": 0, "consecutive_skips": 0, "global_batch": a.samples_per_step,
           "seed": a.seed}
    i32 = {"format_version": a.format_version, "seq_len": 16, "micro_batch": 2,
           "tp": a.tp, "pp": a.pp, "dp": a.dp, "zero1": int(a.zero1)}
    for k, v in i64.items():
        f.attrs.create(k, np.int64(v), dtype=np.int64)
    for k, v in i32.items():
        f.attrs.create(k, np.int32(v), dtype=np.int32)


def put_tensor(f, path, data, layer):
    rows = data.shape[0]
    chunk = data.shape if data.ndim == 1 else (min(rows, 32), data.shape[1])
    ds = f.create_dataset(path, data=data, dtype=np.float32, chunks=chunk, fletcher32=True)
    ds.attrs.create("layer", np.int32(layer), dtype=np.int32)


def write_checkpoint(path, a, cfg, cfg_text, step):
    with h5py.File(path, "w") as f:
        write_meta(f, a, cfg_text, step)
        for name, shape, layer in tensors(cfg):
            rng = np.random.default_rng([a.seed, step, zlib.crc32(name.encode())])
            w = (0.02 * rng.standard_normal(shape)).astype(np.float32)
            put_tensor(f, "model/" + name, w, layer)
            put_tensor(f, "optim/exp_avg/" + name, (0.1 * w).astype(np.float32), layer)
            put_tensor(f, "optim/exp_avg_sq/" + name, (w * w).astype(np.float32), layer)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True, help="model config.json (hpt-train --print-config)")
    p.add_argument("--dir", required=True, help="checkpoints directory (created)")
    p.add_argument("--steps", type=int, nargs="+", required=True)
    p.add_argument("--latest", default=None, help="step for DIR/latest, or 'none' (default: newest)")
    p.add_argument("--format-version", type=int, default=1)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--dp", type=int, default=1)
    p.add_argument("--zero1", action="store_true")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--samples-per-step", type=int, default=8)
    a = p.parse_args()
    with open(a.config) as fh:
        cfg_text = fh.read()
    cfg = json.loads(cfg_text)
    os.makedirs(a.dir, exist_ok=True)
    for s in a.steps:
        d = os.path.join(a.dir, "step_%08d" % s)
        os.makedirs(d, exist_ok=True)
        write_checkpoint(os.path.join(d, "checkpoint.h5"), a, cfg, cfg_text, s)
    latest = max(a.steps) if a.latest is None else a.latest
    if latest != "none":
        tmp = os.path.join(a.dir, "latest.tmp")
        with open(tmp, "w") as fh:
            fh.write("step_%08d\n" % int(latest))
        os.replace(tmp, os.path.join(a.dir, "latest"))


if __name__ == "__main__":
    main()
