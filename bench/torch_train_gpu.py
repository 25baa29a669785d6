#!/usr/bin/env python3
"""PyTorch GPU baseline for bench/gpu-check.sh: the same Llama model as hpt
(Hugging Face shapes: RMSNorm, RoPE with the rotate_half pairing, GQA
attention, SwiGLU, untied LM head unless the config ties it), the way a user
would run it on a GPU: F.scaled_dot_product_attention (flash / cuDNN kernels),
fused AdamW, optional bf16 autocast and torch.compile. Times the training steps.

    torch_train_gpu.py CONFIG.json [--batch 4] [--seq-len 1024]
                       [--precision fp32|tf32|bf16] [--compile]
                       [--warmup-steps 5] [--steps 20] [--seed 0]

CONFIG.json: a Hugging Face-style config (e.g. `hpt-train --model small
--print-config`). Tokens are uniform random ids (speed only). One step =
forward, cross-entropy, backward, global-norm clipping at 1.0, AdamW
(lr 6e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on 2-D weights).

Precision: fp32 = tensor cores off (torch.backends.cuda.matmul.allow_tf32 =
False); tf32 = TF32 GEMMs; bf16 = fp32 master weights and optimizer state,
autocast(bfloat16) for forward and backward (Megatron-style mixed precision
as PyTorch users run it).

Prints one line per timed step, then machine-readable summary lines:
    torch_ms_per_step_median 12.3
    torch_tokens_per_s 123456.0
    torch_peak_mem_bytes 1234567
    torch_flops_per_token 1.23e9   (same formula as hpt_model_flops_per_token)
"""
import argparse
import json
import math
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
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=(H != KV))
            x = x + y.transpose(1, 2).reshape(B, T, H * hd) @ m.wo.T
            h = self.rms(x, m.ln2)
            g, u = (h @ m.wgu.T).chunk(2, dim=-1)
            x = x + (F.silu(g) * u) @ m.wd.T
        x = self.rms(x, self.lnf)
        return x @ (self.wte if self.tied else self.head).T


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
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_train_gpu: no CUDA device visible", file=sys.stderr)
        return 77
    dev = torch.device("cuda")
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
        lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    fwd = torch.compile(model) if a.compile else model
    B, T = a.batch, a.seq_len

    def step():
        w = torch.randint(0, V, (B, T + 1), device=dev)
        x, y = w[:, :-1], w[:, 1:]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=(a.precision == "bf16")):
            logits = fwd(x)
            loss = F.cross_entropy(logits.float().reshape(-1, V), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss

    nparams = sum(p.numel() for p in params)
    print(f"torch_train_gpu: torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"{nparams / 1e6:.1f} M parameters, batch {B} x {T}, precision {a.precision}, "
          f"compile {a.compile}", flush=True)
    for _ in range(a.warmup_steps):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for s in range(a.steps):
        t0 = time.perf_counter()
        loss = float(step())  # the float() synchronizes
        dt = time.perf_counter() - t0
        times.append(dt)
        print(f"torch step {s + 1}/{a.steps} | loss {loss:.4f} | {B * T / dt:.0f} tok/s | "
              f"{dt * 1e3:.1f} ms/step", flush=True)
    med = statistics.median(times)
    print(f"torch_ms_per_step_median {med * 1e3:.2f}")
    print(f"torch_tokens_per_s {B * T / med:.1f}")
    print(f"torch_peak_mem_bytes {torch.cuda.max_memory_allocated()}")
    print(f"torch_flops_per_token {flops_per_token(cfg, T):.6e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
