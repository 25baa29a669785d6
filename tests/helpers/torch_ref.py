#!/usr/bin/env python3
"""Independent PyTorch implementation of the Llama architecture (as Hugging
Face's LlamaForCausalLM computes it), used to check hpt.

    torch_ref.py CONFIG.json DUMP.h5 --lr X --warmup N --clip X

Loads hpt's initial weights from DUMP.h5 (written by tests/helpers/ref_dump), runs
the same batches and compares (‖a−b‖/‖b‖ unless stated):
  loss of batch 0            relative error ≤ 1e-5
  logits of batch 0          ≤ 1e-4
  every parameter gradient   ≤ 1e-4
  gradient norm (in double) and lr per AdamW step  relative ≤ 1e-5 / 1e-6
  every parameter after the AdamW steps (warm-up, cosine, clipping)  ≤ 1e-5
Exits 1 when any comparison fails, 0 otherwise. The model code is also
used by bench/ (LlamaRef).
"""
import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F


class LlamaRef(torch.nn.Module):
    """Llama in plain PyTorch ops, Hugging Face parameter names."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        C, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
        H = cfg["num_attention_heads"]
        KV = cfg.get("num_key_value_heads", H)
        hd = C // H
        self.H, self.KV, self.hd = H, KV, hd
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.theta = cfg.get("rope_theta", 10000.0)
        self.tied = cfg.get("tie_word_embeddings", False)
        P = torch.nn.Parameter
        self.params = torch.nn.ParameterDict()
        self.names = []

        def add(name, *shape):
            self.params[name.replace(".", "__")] = P(torch.zeros(*shape))
            self.names.append(name)

        add("model.embed_tokens.weight", V, C)
        for l in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{l}."
            add(p + "input_layernorm.weight", C)
            add(p + "self_attn.q_proj.weight", H * hd, C)
            add(p + "self_attn.k_proj.weight", KV * hd, C)
            add(p + "self_attn.v_proj.weight", KV * hd, C)
            add(p + "self_attn.o_proj.weight", C, H * hd)
            add(p + "post_attention_layernorm.weight", C)
            add(p + "mlp.gate_proj.weight", I, C)
            add(p + "mlp.up_proj.weight", I, C)
            add(p + "mlp.down_proj.weight", C, I)
        add("model.norm.weight", C)
        if not self.tied:
            add("lm_head.weight", V, C)

    def p(self, name):
        return self.params[name.replace(".", "__")]

    def rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w

    def rope(self, x):  # x (B, nh, T, hd), HF rotate_half pairing (i, i+hd/2)
        T, hd = x.shape[2], x.shape[3]
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, hd, 2).float() / hd))
        freqs = torch.outer(torch.arange(T).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()

    def forward(self, idx):
        B, T = idx.shape
        x = F.embedding(idx, self.p("model.embed_tokens.weight"))
        mask = torch.full((T, T), float("-inf")).triu(1)
        for l in range(self.cfg["num_hidden_layers"]):
            pre = f"model.layers.{l}."
            h = self.rms(x, self.p(pre + "input_layernorm.weight"))
            q = (h @ self.p(pre + "self_attn.q_proj.weight").T).view(B, T, self.H, self.hd).transpose(1, 2)
            k = (h @ self.p(pre + "self_attn.k_proj.weight").T).view(B, T, self.KV, self.hd).transpose(1, 2)
            v = (h @ self.p(pre + "self_attn.v_proj.weight").T).view(B, T, self.KV, self.hd).transpose(1, 2)
            q, k = self.rope(q), self.rope(k)
            rep = self.H // self.KV  # HF repeat_kv: kv head j serves query heads j*rep..j*rep+rep-1
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd) + mask
            y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, self.H * self.hd)
            x = x + y @ self.p(pre + "self_attn.o_proj.weight").T
            h = self.rms(x, self.p(pre + "post_attention_layernorm.weight"))
            g = F.silu(h @ self.p(pre + "mlp.gate_proj.weight").T) * (h @ self.p(pre + "mlp.up_proj.weight").T)
            x = x + g @ self.p(pre + "mlp.down_proj.weight").T
        x = self.rms(x, self.p("model.norm.weight"))
        head = self.p("model.embed_tokens.weight" if self.tied else "lm_head.weight")
        return x @ head.T


def lr_at(step, lr, min_lr, warmup, total):
    """Same schedule as hpt (lib/optim.c hpt_lr_at), written independently."""
    if step < warmup:
        return lr * (step + 1) / warmup
    if step >= total:
        return min_lr
    prog = (step - warmup) / (total - warmup)
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * prog))


def rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / max(float(b.norm()), 1e-30))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("dump")
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--warmup", type=int, required=True)
    ap.add_argument("--clip", type=float, required=True)
    args = ap.parse_args()
    import h5py

    torch.manual_seed(0)
    torch.set_num_threads(2)
    cfg = json.load(open(args.config))
    f = h5py.File(args.dump, "r")
    model = LlamaRef(cfg)
    with torch.no_grad():
        for n in model.names:
            model.p(n).copy_(torch.from_numpy(f["params_init/" + n][()]))
    inputs = torch.from_numpy(f["inputs"][()]).long()
    targets = torch.from_numpy(f["targets"][()]).long()
    V = cfg["vocab_size"]
    fails = []

    def check(name, err, tol):
        ok = err <= tol
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {err:.3e} (tolerance {tol:g})")
        if not ok:
            fails.append(name)

    logits = model(inputs[0])
    loss = F.cross_entropy(logits.view(-1, V), targets[0].view(-1))
    loss.backward()
    check("loss batch 0", abs(float(loss) - float(f["loss0"][0])) / abs(float(loss)), 1e-5)
    check("logits batch 0", rel(torch.from_numpy(f["logits"][()]), logits.detach()), 1e-4)
    worst = 0.0
    for n in model.names:
        e = rel(torch.from_numpy(f["grads/" + n][()]), model.p(n).grad)
        worst = max(worst, e)
        if e > 1e-4:
            check("grad " + n, e, 1e-4)
    check(f"all {len(model.names)} parameter gradients (worst)", worst, 1e-4)
    if cfg.get("tie_word_embeddings", False):
        check("tied: no lm_head.weight in hpt's export", float("lm_head.weight" in f["params_init"]), 0)

    # AdamW steps: decay on 2-D weights only, warm-up + cosine, global clipping.
    steps = inputs.shape[0]
    params = [model.p(n) for n in model.names]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    clipped = 0
    for s in range(steps):
        opt.zero_grad(set_to_none=True)
        logits = model(inputs[s])
        loss = F.cross_entropy(logits.view(-1, V), targets[s].view(-1))
        loss.backward()
        # The norm in double: torch's own fp32 norm (BLAS snrm2) is off by ~1e-5 relative here.
        norm = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in params))
        torch.nn.utils.clip_grad_norm_(params, args.clip)
        clipped += norm > args.clip
        lr = lr_at(s, args.lr, args.lr / 10, args.warmup, steps)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        check(f"step {s + 1} loss", abs(float(loss) - f["step_loss"][s]) / float(loss), 1e-5)
        check(f"step {s + 1} grad norm", abs(norm - f["step_norm"][s]) / norm, 1e-5)
        check(f"step {s + 1} lr", abs(lr - f["step_lr"][s]) / lr, 1e-6)
    if clipped == 0:
        print("FAIL clipping was never active: lower --clip")
        fails.append("clipping inactive")
    worst = 0.0
    for n in model.names:
        e = rel(torch.from_numpy(f["params_after/" + n][()]), model.p(n).detach())
        worst = max(worst, e)
        if e > 1e-5:
            check("after AdamW " + n, e, 1e-5)
    check(f"all parameters after {steps} AdamW steps (worst)", worst, 1e-5)
    print(f"torch_ref: {len(fails)} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
