#!/usr/bin/env python3
"""Greedy decoding with the independent PyTorch Llama of tests/helpers/torch_ref.py,
to check hpt-generate's key/value-cache inference.

    generate_ref.py CONFIG.json EXPORT.h5 IDS.txt VOCAB

EXPORT.h5: weights with Hugging Face names at the root (hpt-train --export).
IDS.txt: hpt-generate --ids output ("prompt: ..." and "generated: ..."
lines). The reference recomputes the whole sequence for every new token (no
cache), takes the argmax over the first VOCAB logits (the ids the tokenizer
decodes, as hpt-generate) and must produce the same tokens, each with the
same log-probability (hpt-generate's 'logprob:' line) within LOGPROB_TOL. On a
mismatch it prints the position, both tokens and the reference's margin
between them, or both log-probabilities.
Exits 1 on any mismatch (or too few tokens), 0 otherwise.
"""
import json
import os
import sys

import torch

# Absolute tolerance on each token's log-probability (nats): float32 logits
# of magnitude ~10 carry rounding ~1e-6; a wrong position or cache row moves
# them by far more than 1e-4.
LOGPROB_TOL = 1e-4

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ref import LlamaRef  # noqa: E402


def main():
    cfg_path, export, ids_path, vocab = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    import h5py

    torch.set_num_threads(2)
    cfg = json.load(open(cfg_path))
    lines = dict(l.split(":", 1) for l in open(ids_path).read().strip().splitlines())
    prompt = [int(t) for t in lines["prompt"].split()]
    hpt = [int(t) for t in lines["generated"].split()]
    hpt_lp = [float(t) for t in lines["logprob"].split()]
    if not prompt or len(hpt) < 2 or len(hpt_lp) != len(hpt):
        print("too few tokens: prompt %d, generated %d" % (len(prompt), len(hpt)))
        return 1
    model = LlamaRef(cfg)
    with h5py.File(export, "r") as f, torch.no_grad():
        for n in model.names:
            model.p(n).copy_(torch.from_numpy(f[n][()]))
    seq = list(prompt)
    worst = 0.0
    with torch.no_grad():
        for i, want in enumerate(hpt):
            logits = model(torch.tensor([seq]))[0, -1, :vocab].double()
            ref = int(logits.argmax())
            if ref != want:
                print("position %d (new token %d): PyTorch picks %d (logit %.7g), hpt-generate %d "
                      "(logit %.7g); margin %.3g" % (len(seq), i, ref, float(logits[ref]), want,
                                                     float(logits[want]),
                                                     float(logits[ref] - logits[want])))
                return 1
            lp = float(logits.log_softmax(-1)[ref])
            worst = max(worst, abs(lp - hpt_lp[i]))
            if abs(lp - hpt_lp[i]) > LOGPROB_TOL:
                print("position %d (new token %d): log-probability %.7g, hpt-generate %.7g" %
                      (len(seq), i, lp, hpt_lp[i]))
                return 1
            seq.append(ref)
    print("hpt-generate's %d greedy tokens equal PyTorch's (full recompute, no cache); largest "
          "log-probability difference %.3g (tolerance %g)" % (len(hpt), worst, LOGPROB_TOL))
    return 0


if __name__ == "__main__":
    sys.exit(main())
