"""Analytic communication volume per rank and group of one hpt training step
(shared by tests/parallel/comm-volume.sh and tests/metrics/metrics-run.sh).

expected(cfg, TP, PP, DP, zero, tied, M, B, T, rank, group) -> (calls, bytes)
for the exact algorithms in lib/train.c and lib/comm_mpi.c: TP all-reduces
of activations, PP sends of (B*T, C) activations and gradients plus the loss
sum, DP all-reduce of the stage's padded parameters per bucket (the head,
each layer, the embedding), or ZeRO-1's one reduce-scatter, or ZeRO-2's
reduce-scatter per bucket in every micro-batch's backward (the buckets
waiting for the tied embedding's sum over two stages once, at the end),
then the norm and the parameter all-gather, the model-parallel norm, the
tied-embedding sum."""


def expected(cfg, TP, PP, DP, zero, tied, M, B, T, w, g):
    C, L, H = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    KV, I, V = cfg["num_key_value_heads"], cfg["intermediate_size"], cfg["vocab_size"]
    N, hd, Vl = B * T, C // H, -(-V // TP)
    pad = lambda x: (x + 15) // 16 * 16

    def stage_params(s, nl):
        first, last = s == 0, s == PP - 1
        layer = sum(pad(x) for x in (C, H // TP * hd * C, KV // TP * hd * C, KV // TP * hd * C,
                                       C * H // TP * hd, C, I // TP * C, I // TP * C, C * I // TP))
        p = nl * layer + (pad(Vl * C) if first else 0)
        if last:
            p += pad(C) + (pad(Vl * C) if not tied or not first else 0)
        return p

    tpr, dpr, s = w % TP, (w // TP) % DP, w // (TP * DP)
    l0, l1 = s * L // PP, (s + 1) * L // PP
    nl, first, last = l1 - l0, s == 0, s == PP - 1
    want = (0, 0)
    if g == "tp" and TP > 1:
        floats = M * ((N * C if first else 0) + 4 * nl * N * C + (3 * N + N * C if last else 0))
        want = (M * ((1 if first else 0) + 4 * nl + (3 if last else 0)), 4 * floats)
    elif g == "pp" and PP > 1:
        ends = (0 if last else 1) + (0 if first else 1)
        want = (M * 2 * ends + 1, 4 * M * ends * N * C + 8)
    elif g == "dp" and DP > 1:
        P = stage_params(s, nl)
        if zero:
            S = -(-P // DP)
            own = max(0, min(S, P - dpr * S))
            if zero == 2:
                nb = nl + (1 if first else 0) + (1 if last else 0)
                # deferred: a tied embedding split over two stages (the
                # first stage's embedding bucket, the last's head bucket)
                nd, Pd = 0, 0
                if tied and PP > 1 and first:
                    nd, Pd = nd + 1, Pd + pad(Vl * C)
                if tied and PP > 1 and last:
                    nd, Pd = nd + 1, Pd + pad(C) + pad(Vl * C)
                want = (M * (nb - nd) + nd + 3, 4 * (M * (P - Pd) + Pd) + 4 * own + 8 + 8)
            else:
                want = (4, 4 * P + 4 * own + 8 + 8)
        else:
            want = (nl + (1 if first else 0) + (1 if last else 0) + 1, 4 * P + 8)
    elif g == "mp" and TP * PP > 1:
        want = (1, 8)
    elif g == "embed" and PP > 1 and tied and (first or last):
        want = (1, 4 * Vl * C)
    return want
