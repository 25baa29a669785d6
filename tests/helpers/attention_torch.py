"""PyTorch reference of one causal grouped-query attention op (written
independently of hpt: explicit scores, -inf mask above the diagonal,
softmax, autograd) against the tensors tests/helpers/attn_dump wrote.

Usage: attention_torch.py DIR B T H KV HD
Computed in float64 from hpt's float32 inputs; hpt's float32 results must
agree to 1e-5 (forward) and 1e-4 (gradients) relative in the Frobenius
norm, the tolerances of tests/helpers/torch_ref.py. The denominator is at least
1e-2 |dout|: at T = 1 dq and dk are exactly 0 in PyTorch (one key, the
softmax is constant) and float rounding (~1e-7) in hpt. Exit status 1 on a
mismatch.
"""
import math
import sys

import numpy as np
import torch


def load(d, name, shape):
    return torch.from_numpy(np.fromfile(f"{d}/{name}.f32", dtype="<f4").reshape(shape)).double()


def rel(a, b, floor):
    return float((a - b).norm() / max(float(b.norm()), floor))


def main():
    d = sys.argv[1]
    B, T, H, KV, hd = (int(x) for x in sys.argv[2:7])
    qs, ks = (B, T, H, hd), (B, T, KV, hd)
    q = load(d, "q", qs).requires_grad_()
    k = load(d, "k", ks).requires_grad_()
    v = load(d, "v", ks).requires_grad_()
    dout = load(d, "dout", qs)
    # (B, heads, T, hd); query head h reads kv head h // (H // KV)
    qh = q.transpose(1, 2)
    kh = k.transpose(1, 2).repeat_interleave(H // KV, dim=1)
    vh = v.transpose(1, 2).repeat_interleave(H // KV, dim=1)
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    att = (qh @ kh.transpose(-2, -1)) / math.sqrt(hd) + mask
    out = (att.softmax(-1) @ vh).transpose(1, 2)
    out.backward(dout)
    tag = f"B={B} T={T} H={H} KV={KV} hd={hd}"
    fails = 0
    for name, got, ref, tol in (("out", load(d, "out", qs), out.detach(), 1e-5),
                                ("dq", load(d, "dq", qs), q.grad, 1e-4),
                                ("dk", load(d, "dk", ks), k.grad, 1e-4),
                                ("dv", load(d, "dv", ks), v.grad, 1e-4)):
        e = rel(got, ref, 1e-2 * float(dout.norm()))
        ok = e <= tol
        fails += not ok
        print(f"{'ok  ' if ok else 'FAIL'} attention {tag} {name} vs PyTorch: {e:.3e} (tolerance {tol:g})")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
