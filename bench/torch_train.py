#!/usr/bin/python3
"""PyTorch baseline of bench/bench_small.sh: trains the same Llama model as
hpt (tests/helpers/torch_ref.py's LlamaRef, plain PyTorch ops) with the same shapes,
optimizer and data, and times the training steps.

    torch_train.py CONFIG.json SHARD.bin [--batch 4] [--seq-len 256]
                   [--warmup-steps 3] [--steps 10] [--threads 2] [--seed 0]

CONFIG.json: the model config, e.g. `hpt-train --model small --print-config`.
SHARD.bin: an llm.c token shard (e.g. train_000000.bin); every micro-batch is
`batch` random windows of seq_len+1 tokens (inputs, targets shifted by one).
One step = forward, cross-entropy, backward, global-norm clipping at 1.0 and
AdamW (lr 6e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on 2-D weights),
as hpt-train does. Init: normal(0, 0.02), output projections (o_proj,
down_proj) 0.02/sqrt(2L), norm weights 1 — hpt's initialisation.

Prints one line per timed step, then machine-readable summary lines:
    torch_ms_per_step_median 1234.5
    torch_tokens_per_s 830.0
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "helpers"))
from torch_ref import LlamaRef  # noqa: E402

SHARD_MAGIC, SHARD_MAGIC32 = 20240520, 20240801


def load_shard(path):
    header = np.fromfile(path, dtype="<i4", count=256)
    if header.size != 256 or header[0] not in (SHARD_MAGIC, SHARD_MAGIC32):
        sys.exit(f"torch_train.py: {path}: not an llm.c token shard")
    dtype = "<u2" if header[0] == SHARD_MAGIC else "<u4"
    ntok = int(header[2])
    tokens = np.fromfile(path, dtype=dtype, count=ntok, offset=1024)
    if tokens.size != ntok:
        sys.exit(f"torch_train.py: {path}: truncated ({tokens.size} of {ntok} tokens)")
    return tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config")
    ap.add_argument("shard")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--warmup-steps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    cfg = json.load(open(args.config))
    V, L = cfg["vocab_size"], cfg["num_hidden_layers"]
    tokens = load_shard(args.shard)
    B, T = args.batch, args.seq_len
    if tokens.size < T + 1:
        sys.exit(f"torch_train.py: {args.shard}: fewer than {T + 1} tokens")
    if int(tokens.max()) >= V:
        sys.exit(f"torch_train.py: {args.shard}: token id {int(tokens.max())} >= vocab_size {V}")

    model = LlamaRef(cfg)
    std, std_out = 0.02, 0.02 / math.sqrt(2 * L)
    with torch.no_grad():
        for n in model.names:
            p = model.p(n)
            if p.dim() < 2:
                p.fill_(1.0)
            elif n.endswith("o_proj.weight") or n.endswith("down_proj.weight"):
                p.normal_(0.0, std_out)
            else:
                p.normal_(0.0, std)
    params = [model.p(n) for n in model.names]
    opt = torch.optim.AdamW(
        [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
        lr=6e-4, betas=(0.9, 0.95), eps=1e-8)

    def batch():
        starts = rng.integers(0, tokens.size - T - 1, size=B)
        w = torch.from_numpy(np.stack([tokens[s:s + T + 1] for s in starts]).astype(np.int64))
        return w[:, :-1], w[:, 1:]

    def step():
        x, y = batch()
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return float(loss)

    nparams = sum(p.numel() for p in params)
    print(f"torch_train: torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{nparams / 1e6:.2f} M parameters, batch {B} x {T} tokens, "
          f"{args.warmup_steps} warm-up + {args.steps} timed steps", flush=True)
    for _ in range(args.warmup_steps):
        step()
    times = []
    for s in range(args.steps):
        t0 = time.perf_counter()
        loss = step()
        dt = time.perf_counter() - t0
        times.append(dt)
        print(f"torch step {s + 1}/{args.steps} | loss {loss:.4f} | {B * T / dt:.0f} tok/s | "
              f"{dt * 1e3:.1f} ms/step", flush=True)
    med = statistics.median(times)
    print(f"torch_ms_per_step_median {med * 1e3:.1f}")
    print(f"torch_tokens_per_s {B * T / med:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
