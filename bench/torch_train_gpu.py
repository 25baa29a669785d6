#!/usr/bin/env python3
"""PyTorch GPU baseline for bench/gpu-check.sh: the same Llama model as hpt
(Hugging Face shapes: RMSNorm, RoPE with the rotate_half pairing, GQA
attention, SwiGLU, untied LM head unless the config ties it), the way a user
would run it on a GPU: F.scaled_dot_product_attention (flash / cuDNN kernels),
fused AdamW, optional bf16 autocast and torch.compile. Times the training steps.

    torch_train_gpu.py CONFIG.json [--batch 4] [--seq-len 1024]
                       [--precision fp32|tf32|bf16] [--compile]
                       [--warmup-steps 5] [--steps 20] [--seed 0]
                       [--data DIR] [--device auto|cuda|cpu] [--eager-steps N]

CONFIG.json: a Hugging Face-style config (e.g. `hpt-train --model small
--print-config`). Tokens are uniform random ids (speed only), or with
--data the llm.c-format shard DIR/train_000000.bin read in order, B rows
of T + 1 tokens per step (the losses then mean something). --device cpu
runs on the CPU (bench/gpu-check.sh --rehearse: options, output format and
its parsing, on Debian's CPU PyTorch; no fused AdamW there); auto (the
default) exits 77 without a GPU. --eager-steps N (with --compile) first
times N steps without compile and prints their summary line, so a compile
that is killed at its time cap still leaves an eager figure. One step =
forward, cross-entropy, backward, global-norm clipping at 1.0, AdamW
(lr 6e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on 2-D weights).

Precision: fp32 = tensor cores off (torch.backends.cuda.matmul.allow_tf32 =
False); tf32 = TF32 GEMMs; bf16 = fp32 master weights and optimizer state,
autocast(bfloat16) for forward and backward (Megatron-style mixed precision
as PyTorch users run it).

Prints the attention kernel PyTorch picked (torch_sdpa_backend: flash,
efficient, cudnn, math, or manual where there is no
scaled_dot_product_attention; a math fallback would flatter hpt), one line
per timed step, then machine-readable summary lines:
    torch_sdpa_backend flash
    torch_eager_ms_per_step_median 15.0   (with --eager-steps)
    torch_ms_per_step_median 12.3
    torch_tokens_per_s 123456.0
    torch_peak_mem_bytes 1234567   (device; on the CPU the process's peak RSS)
    torch_flops_per_token 1.23e9   (same formula as hpt_model_flops_per_token)
    torch_losses 9.01 8.97 ...     (every timed step's loss, in order)
"""
import argparse
import json
import math
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F


class Llama(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
        H = cfg["num_attention_heads"]
        KV = cfg.get("num_key_value_heads", H)
        self.C, self.H, self.KV, self.hd, self.V = C, H, KV, C // H, V
        self.L = cfg["num_hidden_layers"]
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.theta = cfg.get("rope_theta", 10000.0)
        self.tied = cfg.get("tie_word_embeddings", False)
        P = torch.nn.Parameter
        hd = self.hd
        self.wte = P(torch.empty(V, C))
        self.layers = torch.nn.ModuleList()
        for _ in range(self.L):
            m = torch.nn.Module()
            m.ln1 = P(torch.ones(C))
            m.wqkv = P(torch.empty((H + 2 * KV) * hd, C))  # q, k, v stacked (one GEMM)
            m.wo = P(torch.empty(C, H * hd))
            m.ln2 = P(torch.ones(C))
            m.wgu = P(torch.empty(2 * I, C))  # gate, up stacked
            m.wd = P(torch.empty(C, I))
            self.layers.append(m)
        self.lnf = P(torch.ones(C))
        self.head = None if self.tied else P(torch.empty(V, C))

    def rms(self, x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * w

    def rope(self, x, cos, sin):
        hd = x.shape[-1]
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    def forward(self, idx):
        B, T = idx.shape
        H, KV, hd = self.H, self.KV, self.hd
        inv = 1.0 / (self.theta ** (torch.arange(0, hd, 2, device=idx.device).float() / hd))
        fr = torch.outer(torch.arange(T, device=idx.device).float(), inv)
        emb = torch.cat((fr, fr), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x = F.embedding(idx, self.wte)
        for m in self.layers:
            h = self.rms(x, m.ln1)
            qkv = h @ m.wqkv.T
            q, k, v = qkv.split([H * hd, KV * hd, KV * hd], dim=-1)
            q = q.view(B, T, H, hd).transpose(1, 2)
            k = k.view(B, T, KV, hd).transpose(1, 2)
            v = v.view(B, T, KV, hd).transpose(1, 2)
            q, k = self.rope(q, cos.to(q.dtype), sin.to(q.dtype)), self.rope(k, cos.to(k.dtype), sin.to(k.dtype))
            y = attention(q, k, v, H // KV)
            x = x + y.transpose(1, 2).reshape(B, T, H * hd) @ m.wo.T
            h = self.rms(x, m.ln2)
            g, u = (h @ m.wgu.T).chunk(2, dim=-1)
            x = x + (F.silu(g) * u) @ m.wd.T
        x = self.rms(x, self.lnf)
        return x @ (self.wte if self.tied else self.head).T


def attention(q, k, v, rep):
    """Causal attention (B, H, T, hd): SDPA with GQA where this PyTorch has
    it, else K/V repeated per query head; a manual softmax where it has no
    SDPA at all (PyTorch < 2.0, e.g. Debian's 1.13)."""
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    if sdpa is not None and rep > 1:
        try:
            return sdpa(q, k, v, is_causal=True, enable_gqa=True)
        except TypeError:  # PyTorch < 2.5: no enable_gqa
            pass
    if rep > 1:
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    if sdpa is not None:
        return sdpa(q, k, v, is_causal=True)
    T = q.shape[-2]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s.float(), dim=-1).to(q.dtype) @ v


def sdpa_backend(model, dev, B, T, dtype):
    """Which kernel scaled_dot_product_attention runs for the model's
    attention shapes: the CUDA kernel names seen by the profiler in one
    call (flash, efficient, cudnn, else math); 'manual' without SDPA."""
    if getattr(F, "scaled_dot_product_attention", None) is None:
        return "manual (no scaled_dot_product_attention in this PyTorch)"
    if dev.type != "cuda":
        return "cpu"
    q = torch.randn(B, model.H, T, model.hd, device=dev, dtype=dtype)
    kv = torch.randn(B, model.KV, T, model.hd, device=dev, dtype=dtype)
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            attention(q, kv, kv, model.H // model.KV)
            torch.cuda.synchronize()
        names = " ".join(e.key for e in prof.key_averages()).lower()
    except Exception as e:  # the profiler unusable: say so, not guess
        return f"unknown (profiler: {type(e).__name__}: {e})"
    for key, name in (("flash", "flash"), ("cudnn", "cudnn"), ("fmha", "efficient"),
                      ("efficient", "efficient"), ("mem_eff", "efficient")):
        if key in names:
            return name
    return "math (no flash/efficient/cudnn kernel seen: " + names[:200] + ")"


def shard_reader(path, B, T):
    """Batches of B rows of T + 1 tokens, read in order from an llm.c
    shard (magic 20240520, version 1, uint16 tokens), wrapping around."""
    import numpy as np
    with open(path, "rb") as f:
        head = np.frombuffer(f.read(1024), dtype="<i4")
        if head[0] != 20240520 or head[1] != 1:
            raise SystemExit(f"torch_train_gpu: {path}: not an llm.c shard (magic {head[0]}, "
                             f"version {head[1]}; want 20240520, 1)")
        tok = np.frombuffer(f.read(2 * int(head[2])), dtype="<u2").astype("int64")
    need, at = B * (T + 1), 0
    if tok.size < need:
        raise SystemExit(f"torch_train_gpu: {path}: {tok.size} tokens, a batch needs {need}")
    while True:
        if at + need > tok.size:
            at = 0
        yield torch.from_numpy(tok[at:at + need].reshape(B, T + 1).copy())
        at += need


def flops_per_token(cfg, T):
    C, I, V, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads", H)
    hd = C // H
    n = L * (C * H * hd + 2 * C * KV * hd + H * hd * C + 3 * C * I) + V * C
    return 6 * n + 6 * L * T * C  # causal attention: half of PaLM's 12*L*T*C (as hpt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="bf16")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--warmup-steps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", help="llm.c shard directory (train_000000.bin): real tokens")
    ap.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    ap.add_argument("--eager-steps", type=int, default=0,
                    help="with --compile: time this many eager steps first")
    a = ap.parse_args()
    if a.device != "cpu" and not torch.cuda.is_available():
        print("torch_train_gpu: no CUDA device visible", file=sys.stderr)
        return 77
    dev = torch.device("cuda" if a.device != "cpu" else "cpu")
    cuda = dev.type == "cuda"
    torch.manual_seed(a.seed)
    tf32 = a.precision != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    cfg = json.load(open(a.config))
    V, L = cfg["vocab_size"], cfg["num_hidden_layers"]
    model = Llama(cfg).to(dev)
    std, std_out = 0.02, 0.02 / math.sqrt(2 * L)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, std_out if n.endswith(".wo") or n.endswith(".wd") else std)
    params = list(model.parameters())
    opt = torch.optim.AdamW(
        [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
        lr=6e-4, betas=(0.9, 0.95), eps=1e-8, **({"fused": True} if cuda else {}))
    B, T = a.batch, a.seq_len
    batches = shard_reader(os.path.join(a.data, "train_000000.bin"), B, T) if a.data else None
    fwd = model

    def step():
        if batches is not None:
            w = next(batches).to(dev, non_blocking=True)
        else:
            w = torch.randint(0, V, (B, T + 1), device=dev)
        x, y = w[:, :-1], w[:, 1:]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=(a.precision == "bf16")):
            logits = fwd(x)
            loss = F.cross_entropy(logits.float().reshape(-1, V), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def timed(n, label):
        times, losses = [], []
        for s in range(n):
            t0 = time.perf_counter()
            loss = float(step())  # the float() synchronizes
            dt = time.perf_counter() - t0
            times.append(dt)
            losses.append(loss)
            print(f"torch {label}step {s + 1}/{n} | loss {loss:.4f} | {B * T / dt:.0f} tok/s | "
                  f"{dt * 1e3:.1f} ms/step", flush=True)
        return times, losses

    nparams = sum(p.numel() for p in params)
    print(f"torch_train_gpu: torch {torch.__version__}, "
          f"{torch.cuda.get_device_name() if cuda else 'cpu'}, "
          f"{nparams / 1e6:.1f} M parameters, batch {B} x {T}, precision {a.precision}, "
          f"compile {a.compile}, data {a.data or 'random tokens'}", flush=True)
    adt = torch.bfloat16 if a.precision == "bf16" else torch.float32
    print(f"torch_sdpa_backend {sdpa_backend(model, dev, B, T, adt)}", flush=True)
    if a.compile and a.eager_steps > 0:  # a figure before compile can be killed
        for _ in range(min(a.warmup_steps, 2)):
            step()
        sync()
        et, _ = timed(a.eager_steps, "eager ")
        print(f"torch_eager_ms_per_step_median {statistics.median(et) * 1e3:.2f}", flush=True)
    if a.compile:
        fwd = torch.compile(model)
    for _ in range(a.warmup_steps):
        step()
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times, losses = timed(a.steps, "")
    med = statistics.median(times)
    peak = (torch.cuda.max_memory_allocated() if cuda
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    print(f"torch_ms_per_step_median {med * 1e3:.2f}")
    print(f"torch_tokens_per_s {B * T / med:.1f}")
    print(f"torch_peak_mem_bytes {peak}")
    print(f"torch_flops_per_token {flops_per_token(cfg, T):.6e}")
    print("torch_losses " + " ".join(f"{x:.6f}" for x in losses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
