#!/usr/bin/env python3
"""Test helper for hpt-train --init-from (no safetensors package needed:
the format is written by hand — 8-byte little-endian header length, JSON
header padded with spaces to a multiple of 8, raw little-endian data).

  st_tool.py write CONFIG OUT --dtype D[,D2...] --expect EXPECT.h5 [--seed N]
        [--shards N] [--drop NAME] [--shape NAME=R,C] [--as-dtype NAME=DT]
        [--offsets NAME=B,E] [--header-len N] [--header-delta N] [--truncate N]
        [--extra NAME=R[,C]] [--nonfinite NAME=I,VALUE]
      Random weights for the model of CONFIG (Hugging Face names and
      shapes); OUT is a .safetensors file, or with --shards N a directory
      of N shards plus model.safetensors.index.json (shard k in the k-th
      dtype of --dtype). EXPECT.h5 gets the exact float32 values hpt must
      load (after BF16/F16 rounding). The other options damage the output
      for the bad-input tests (--header-delta: the length field off by N
      from the header, padded by 8 more spaces so the JSON still parses;
      --extra: one more tensor, also in EXPECT.h5; --nonfinite: flat
      element I of NAME set to VALUE (nan, inf, -inf), also in EXPECT.h5).
  st_tool.py reheader FILE dup-swap A,B | meta-nan
      Rewrite FILE's header (data unchanged) for the bad-input tests:
      dup-swap appends a second entry for tensors A and B (same size) with
      their data_offsets swapped (a reader that keeps the last duplicate
      loads them swapped); meta-nan puts "x": NaN in __metadata__.
  st_tool.py compare A B [--bf16]
      Exit 1 unless both hold the same tensors with bitwise equal float32
      values. A and B: HDF5 files (.h5) or safetensors (a .safetensors
      file, an index .json, or a directory with either; F32 and BF16 read
      by this file's own reader). --bf16: A's values rounded to bfloat16
      (nearest, ties to even) first.
  st_tool.py loss CONFIG WEIGHTS RUN_DIR SHARD T
      Exit 1 unless the step-1 loss of RUN_DIR/log.tsv equals (relative
      1e-5, the tolerance of tests/helpers/torch_ref.py) the loss tests/helpers/torch_ref.py's
      PyTorch model computes with WEIGHTS' values (read as compare reads
      them) on the samples
      RUN_DIR/samples.*.tsv lists for step 1, read from SHARD (llm.c
      format, the corpus's only training shard).
"""
import json
import os
import struct
import sys

import numpy as np


def tensors(cfg):
    """(name, shape) of every tensor, Hugging Face names (tests/helpers/torch_ref.py)."""
    C, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads", H)
    hd = C // H
    out = [("model.embed_tokens.weight", (V, C))]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        out += [(p + "input_layernorm.weight", (C,)), (p + "self_attn.q_proj.weight", (H * hd, C)),
                (p + "self_attn.k_proj.weight", (KV * hd, C)),
                (p + "self_attn.v_proj.weight", (KV * hd, C)),
                (p + "self_attn.o_proj.weight", (C, H * hd)),
                (p + "post_attention_layernorm.weight", (C,)),
                (p + "mlp.gate_proj.weight", (I, C)), (p + "mlp.up_proj.weight", (I, C)),
                (p + "mlp.down_proj.weight", (C, I))]
    out.append(("model.norm.weight", (C,)))
    if not cfg.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", (V, C)))
    return out


def encode(x, dtype):
    """(raw little-endian bytes, exact float32 value hpt must read)."""
    x = x.astype(np.float32)
    if dtype == "F32":
        return x.astype("<f4").tobytes(), x
    if dtype == "F16":
        h = x.astype("<f2")
        return h.tobytes(), h.astype(np.float32)
    if dtype == "BF16":
        hi = (x.view(np.uint32) >> 16).astype("<u2")
        return hi.tobytes(), (hi.astype(np.uint32) << 16).view(np.float32)
    if dtype == "I32":
        return x.astype("<i4").tobytes(), x
    raise SystemExit("unknown dtype " + dtype)


def write_file(path, items, header_len=None, truncate=None, offsets=None, header_delta=0):
    """items: [(name, dtype, shape, raw bytes)]."""
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, dt, shape, raw in items:
        header[name] = {"dtype": dt, "shape": list(shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    for name, (b, e) in (offsets or {}).items():
        header[name]["data_offsets"] = [b, e]
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8 + (8 if header_delta else 0))
    n = len(text) + header_delta if header_len is None else header_len
    blob = struct.pack("<Q", n) + text + data
    with open(path, "wb") as f:
        f.write(blob[:truncate] if truncate is not None else blob)


def opt(args, key, many=False):
    vals = [args[i + 1] for i in range(len(args) - 1) if args[i] == key]
    return vals if many else (vals[-1] if vals else None)


def cmd_write(args):
    import h5py
    cfg = json.load(open(args[0]))
    out = args[1]
    dtypes = opt(args, "--dtype").split(",")
    rng = np.random.default_rng(int(opt(args, "--seed") or 1))
    shards = int(opt(args, "--shards") or 0)
    drop = set(opt(args, "--drop", True))
    shapes = dict(s.split("=") for s in opt(args, "--shape", True))
    as_dt = dict(s.split("=") for s in opt(args, "--as-dtype", True))
    offs = {k: tuple(map(int, v.split(","))) for k, v in
            (s.split("=") for s in opt(args, "--offsets", True))}
    names = [t for t in tensors(cfg) if t[0] not in drop]
    names += [(k, tuple(map(int, v.split(",")))) for k, v in
              (e.split("=") for e in opt(args, "--extra", True))]
    bad = {k: (int(v.split(",")[0]), float(v.split(",")[1])) for k, v in
           (e.split("=") for e in opt(args, "--nonfinite", True))}
    nfiles = max(shards, 1)
    per = -(-len(names) // nfiles)
    files = [names[k * per:(k + 1) * per] for k in range(nfiles)]
    with h5py.File(opt(args, "--expect"), "w") as exp:
        written = []
        for k, group in enumerate(files):
            items = []
            for name, shape in group:
                if name in shapes:
                    shape = tuple(map(int, shapes[name].split(",")))
                norm = len(shape) == 1
                x = (1 + 0.1 * rng.standard_normal(shape)) if norm else 0.05 * rng.standard_normal(shape)
                if name in bad:
                    x.reshape(-1)[bad[name][0]] = bad[name][1]
                dt = as_dt.get(name, dtypes[k % len(dtypes)])
                raw, val = encode(x, dt)
                exp[name] = val
                items.append((name, dt, shape, raw))
            written.append(items)
    hl = opt(args, "--header-len")
    tr = opt(args, "--truncate")
    kw = dict(header_len=int(hl) if hl else None, truncate=int(tr) if tr else None, offsets=offs,
              header_delta=int(opt(args, "--header-delta") or 0))
    if not shards:
        write_file(out, written[0], **kw)
        return 0
    os.makedirs(out, exist_ok=True)
    wm = {}
    for k, items in enumerate(written):
        fn = f"model-{k + 1:05d}-of-{nfiles:05d}.safetensors"
        write_file(os.path.join(out, fn), items, **kw)
        wm.update({name: fn for name, *_ in items})
    json.dump({"metadata": {"total_size": 0}, "weight_map": wm},
              open(os.path.join(out, "model.safetensors.index.json"), "w"), indent=2)
    return 0


def read_st_file(path):
    """{name: float32 array} of one safetensors file (F32, BF16)."""
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    hdr = json.loads(blob[8:8 + n])
    out = {}
    for name, e in hdr.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = blob[8 + n + b:8 + n + end]
        if e["dtype"] == "F32":
            x = np.frombuffer(raw, dtype="<f4")
        elif e["dtype"] == "BF16":
            x = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f"{path}: {name}: dtype {e['dtype']} not read here")
        out[name] = x.astype(np.float32).reshape(e["shape"])
    return out


def load(path):
    """{name: float32 array} of an HDF5 export or a safetensors model."""
    if path.endswith(".h5"):
        import h5py
        with h5py.File(path, "r") as f:
            return {n: f[n][()].astype(np.float32) for n in f}
    if os.path.isdir(path):
        idx = os.path.join(path, "model.safetensors.index.json")
        path = idx if os.path.exists(idx) else os.path.join(path, "model.safetensors")
    if path.endswith(".json"):
        out = {}
        for fn in sorted(set(json.load(open(path))["weight_map"].values())):
            out.update(read_st_file(os.path.join(os.path.dirname(path), fn)))
        return out
    return read_st_file(path)


def to_bf16(x):
    """float32 → bfloat16 → float32, round to nearest even (finite x)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return (u.astype(np.uint32) << 16).view(np.float32)


def cmd_reheader(args):
    path, mode = args[0], args[1]
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    hdr = json.loads(blob[8:8 + n])
    meta = hdr.pop("__metadata__", {"format": "pt"})
    body = json.dumps(hdr)[1:-1]
    if mode == "dup-swap":
        a, b = args[2].split(",")
        ea, eb = dict(hdr[a]), dict(hdr[b])
        ea["data_offsets"], eb["data_offsets"] = hdr[b]["data_offsets"], hdr[a]["data_offsets"]
        text = "{" + json.dumps({"__metadata__": meta})[1:-1] + "," + body + "," + \
            json.dumps(a) + ":" + json.dumps(ea) + "," + json.dumps(b) + ":" + json.dumps(eb) + "}"
    elif mode == "meta-nan":
        text = '{"__metadata__": {"format": "pt", "x": NaN},' + body + "}"
    else:
        raise SystemExit(f"reheader: unknown mode {mode}")
    text += " " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text.encode() + blob[8 + n:])
    return 0


def cmd_compare(args):
    a, b = load(args[0]), load(args[1])
    if "--bf16" in args:
        a = {n: to_bf16(v) for n, v in a.items()}
    if sorted(a.keys()) != sorted(b.keys()):
        print("FAIL tensor names differ:", sorted(set(a) ^ set(b)))
        return 1
    bad = [n for n in a if a[n].shape != b[n].shape or
           not np.array_equal(a[n].view(np.uint32), b[n].astype(np.float32).view(np.uint32))]
    for n in bad:
        print("FAIL", n, "differs")
    print(f"compare: {len(a)} tensors, {len(bad)} differ")
    return 1 if bad else 0


def cmd_loss(args):
    import glob
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_ref import LlamaRef
    cfg = json.load(open(args[0]))
    f = load(args[1])
    run, shard, T = args[2], args[3], int(args[4])
    model = LlamaRef(cfg)
    with torch.no_grad():
        for n in model.names:
            model.p(n).copy_(torch.from_numpy(f[n]))
    toks = np.fromfile(shard, dtype="<u2", offset=1024).astype(np.int64)
    rows = []
    for p in sorted(glob.glob(os.path.join(run, "samples.*.tsv"))):
        rows += [tuple(map(int, l.split("\t"))) for l in open(p).read().split("\n") if l]
    samples = [s for step, _, s in sorted(rows, key=lambda r: r[1]) if step == 1]
    x = torch.from_numpy(np.stack([toks[s * T:s * T + T + 1] for s in samples]))
    with torch.no_grad():
        logits = model(x[:, :-1])
        want = float(F.cross_entropy(logits.reshape(-1, cfg["vocab_size"]), x[:, 1:].reshape(-1)))
    log = [l.split("\t") for l in open(os.path.join(run, "log.tsv")).read().split("\n")[1:] if l]
    got = float([r for r in log if r[0] == "1"][0][1])
    err = abs(got - want) / abs(want)
    print(f"{'ok  ' if err <= 1e-5 else 'FAIL'} step-1 loss {got:.8f}, PyTorch {want:.8f} on "
          f"{len(samples)} samples: relative error {err:.2e} (tolerance 1e-5)")
    return 0 if err <= 1e-5 and len(samples) > 0 else 1


if __name__ == "__main__":
    cmd = {"write": cmd_write, "reheader": cmd_reheader, "compare": cmd_compare, "loss": cmd_loss}
    if len(sys.argv) < 2 or sys.argv[1] not in cmd:
        raise SystemExit(__doc__)
    sys.exit(cmd[sys.argv[1]](sys.argv[2:]))
