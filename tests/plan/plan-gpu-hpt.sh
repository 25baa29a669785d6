#!/bin/sh
# hpt-plan's GPU memory model counts what hpt's own CUDA backend allocates
# in the run's precision (docs/PLAN.md "Memory, analytic model"; docs/
# ARCHITECTURE.md "bf16 activations (stage 2)"), not Megatron's count: the
# residual stream (x, xmid, x_final), rstd, the attention log-sum-exp, the
# activation gradients and the PP gradient send slots in fp32; ln1, ln2,
# lnf, q, k, v, the attention output, gate, up and h in bf16 (--precision
# bf16) or fp32 (fp32, tf32); the bf16 (HPT_CUDA_ATTENTION=blas) and tf32
# attention's chunked cuBLAS scratch (12 and 8 bytes per score; none in
# fp32, whose flash kernels need only the row sums, nor in bf16's default,
# the tensor-core kernels) and bf16's operand scratch. The expected bytes are
# computed here, tensor by tensor, from lib/model.c's carving (layout_acts,
# carve_layer, carve_slot; 64-byte rounding left out, as the analytic model
# does), lib/schedule.c's grad_send and lib/backend_cuda.cu's attention
# scratch, for every stage of several layouts in each precision (no
# recomputation, selective, full; sequence parallelism; 1F1B and GPipe; T
# below and above the query chunk; ZeRO-1), and must equal hpt-plan's JSON
# byte for byte; so must the weights (fp32, + the bf16 working copy in bf16,
# on every DP rank), gradients and AdamW moments (ZeRO-1: the shard, plus
# the gradient shard's buffer).
. "$HPT_SRC/tests/helpers/lib.sh"
PLAN="$HPT_BUILD/src/hpt-plan"
cat > "$WORK/small.json" <<'JSON'
{"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 5,
 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
 "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
 "tie_word_embeddings": false}
JSON
n=0
run() { # hpt-plan options (HPT_CUDA_ATTENTION=$ATT when ATT is set)
  n=$((n + 1))
  if [ -n "${ATT:-}" ]; then
    HPT_CUDA_ATTENTION=$ATT "$PLAN" --json --cluster h100-80gb "$@" > "$WORK/p$n.json" 2> "$WORK/err" ||
      { cat "$WORK/err"; fail "HPT_CUDA_ATTENTION=$ATT hpt-plan $*"; }
    echo "HPT_CUDA_ATTENTION=$ATT $*" > "$WORK/p$n.args"
  else
    "$PLAN" --json --cluster h100-80gb "$@" > "$WORK/p$n.json" 2> "$WORK/err" ||
      { cat "$WORK/err"; fail "hpt-plan $*"; }
    echo "$*" > "$WORK/p$n.args"
  fi
}
S="--model $WORK/small.json --nodes 1 --seq-len 32 --global-batch 8"
# bf16: the tensor-core attention kernels by default (hd 16 and 128 here:
# no scratch), the cuBLAS chunks with HPT_CUDA_ATTENTION=blas
for ATT in "" blas; do
run $S --gpus-per-node 4 --tp 2 --pp 2 --micro-batch 2 --recompute=none
run $S --gpus-per-node 4 --tp 2 --pp 2 --micro-batch 2 --recompute=selective
run $S --gpus-per-node 4 --tp 2 --pp 2 --micro-batch 2 --recompute=full
run $S --gpus-per-node 4 --tp 2 --pp 2 --micro-batch 2 --recompute=none --sequence-parallel
run $S --gpus-per-node 4 --tp 2 --pp 2 --micro-batch 2 --recompute=selective --sequence-parallel
run $S --gpus-per-node 4 --tp 2 --pp 2 --micro-batch 1 --recompute=full --sequence-parallel --pp-schedule gpipe
run $S --gpus-per-node 6 --tp 2 --pp 3 --micro-batch 1 --recompute=none
run $S --gpus-per-node 8 --tp 2 --pp 2 --dp 2 --micro-batch 1 --recompute=selective --zero1
run $S --gpus-per-node 8 --tp 1 --pp 2 --dp 4 --micro-batch 2 --recompute=none --zero1
# T = 8192, 4 heads per TP rank: the query chunk Tc = 1360 < T
run --model llama3-8b --nodes 1 --gpus-per-node 8 --tp 8 --pp 1 --seq-len 8192 --global-batch 8 \
  --micro-batch 1 --recompute=selective --sequence-parallel
run --model llama3-8b --nodes 1 --gpus-per-node 8 --tp 8 --pp 1 --seq-len 8192 --global-batch 8 \
  --micro-batch 1 --recompute=none
# B 8 x 32 heads x T 8192: 512 MiB holds 16 query rows; the chunk is 80 rows
# (128 would pass the 2 GiB bound); B 2 x T 8192: 80 -> 128 rows
run --model llama3-8b --nodes 1 --gpus-per-node 8 --tp 1 --pp 1 --dp 8 --seq-len 8192 \
  --global-batch 64 --micro-batch 8 --recompute=full --zero1
run --model llama3-8b --nodes 1 --gpus-per-node 8 --tp 1 --pp 1 --dp 8 --seq-len 8192 \
  --global-batch 64 --micro-batch 2 --recompute=full --zero1
done
ATT=
# fp32 and tf32: every activation in 4 bytes; tf32's attention scratch
for prec in fp32 tf32; do
  run $S --gpus-per-node 4 --tp 2 --pp 2 --micro-batch 2 --recompute=none --precision $prec
  run $S --gpus-per-node 4 --tp 2 --pp 2 --micro-batch 2 --recompute=selective --sequence-parallel \
    --precision $prec
  run $S --gpus-per-node 4 --tp 2 --pp 2 --micro-batch 1 --recompute=full --sequence-parallel \
    --pp-schedule gpipe --precision $prec
  run $S --gpus-per-node 8 --tp 2 --pp 2 --dp 2 --micro-batch 1 --recompute=selective --zero1 \
    --precision $prec
  # T = 8192: tf32's query chunk is Tc = 2048 < T
  run --model llama3-8b --nodes 1 --gpus-per-node 8 --tp 8 --pp 1 --seq-len 8192 --global-batch 8 \
    --micro-batch 1 --recompute=selective --sequence-parallel --precision $prec
done
"$PYTHON" - "$WORK" "$n" <<'PY' || fail "hpt-plan's GPU memory is not hpt's CUDA allocations"
import json, sys
work, n = sys.argv[1], int(sys.argv[2])
bad = 0
for i in range(1, n + 1):
    d = json.load(open("%s/p%d.json" % (work, i)))
    args = open("%s/p%d.args" % (work, i)).read().strip()
    m, lay, tr = d["model"], d["layout"], d["training"]
    h, I, L = m["hidden_size"], m["intermediate_size"], m["num_hidden_layers"]
    H, KV = m["num_attention_heads"], m["num_key_value_heads"]
    t, p, b, s = lay["tp"], lay["pp"], tr["micro_batch"], tr["seq_len"]
    M, rc, sp = tr["micro_batches"], tr["recompute_mode"], tr["sequence_parallel"]
    hd = h // H
    N = b * s                         # tokens per micro-batch
    Nl = N // t if sp else N          # residual-stream tokens on this rank
    QD, KD, Il, Hl = H // t * hd, KV // t * hd, I // t, H // t
    for st in d["memory"]["stages"]:
        k, last = st["in_flight"], st["stage"] == p - 1
        nl = st["layers"][1] - st["layers"][0]
        want_k = M if tr["pp_schedule"] == "gpipe" else min(p - st["stage"], M)
        assert k == want_k, (args, st)
        prec = tr["precision"]
        a = 2 if prec == "bf16" else 4  # the layer tensors' bytes per element
        # lib/model.c carve_layer: what selective recomputation recomputes
        # (ln1, rstd1, attention log-sum-exp, atty, ln2, rstd2, h) ...
        elem = a * N * h + 4 * Nl + 4 * b * Hl * s + a * N * QD + a * N * h + 4 * Nl + a * N * Il
        # ... and what it keeps (q, k, v, xmid, gate, up)
        gemm = a * N * QD + a * N * KD + a * N * KD + 4 * Nl * h + a * N * Il + a * N * Il
        x = 4 * Nl * h                 # each layer's input (fp32)
        per = {"none": elem + gemm + x, "selective": gemm + x, "full": x}[rc]
        # layout_acts: one shared set (full: a whole layer + recompute_out)
        shared = {"none": 0, "selective": elem, "full": elem + gemm + 4 * Nl * h}[rc]
        # carve_slot's stage end: x_final (fp32), lnf (last stage),
        # rstdf, tokens, targets, ce_mx, ce_sum + ce_tgt
        end = 4 * Nl * h + (a * N * h if last else 0) + 4 * Nl + 4 * (N + N + N + 2 * N)
        # backward scratch (fp32): dx, dtmp, dq, dk, dv, datty, dh, dgate,
        # dup, dscores (B*Hl*T); sequence parallelism: sp_tmp, dfull and
        # the packed norm-weight gradients
        scratch = 4 * (2 * N * h + 2 * N * QD + 2 * N * KD + 3 * N * Il + b * Hl * s)
        if sp:
            scratch += 4 * (Nl * h + N * h + (2 * nl + (1 if last else 0)) * h)
        # lib/backend_cuda.cu bf16 and tf32 attention: query chunks of Tc
        # rows (att_backward_bytes): score rows padded to Tp, pieces rounded
        # up to 256 bytes; S and dP fp32, in bf16 also P, dS and dO in bf16
        # (tf32 overwrites S and dP); per-head dK/dV with GQA. fp32 runs the
        # flash kernels: no scratch of their own.
        r256 = lambda x: -(-x // 256) * 256
        Tp = -(-s // 16) * 16
        attn = 0
        # bf16's default: the tensor-core kernels (lib/attention_mma.cu), no
        # scratch, for head dims 16, 32, 64, 96, 128
        mma = prec == "bf16" and "HPT_CUDA_ATTENTION=blas" not in args and \
            "HPT_CUDA_ATTENTION=flash" not in args and hd in (16, 32, 64, 96, 128)
        if mma:
            # the dK/dV kernel splits each GQA group into d parts (the
            # smallest divisor with ceil(s/64) b KV/t d >= 256 blocks, else
            # the group): partial dK, dV (b, s, KV/t d, hd) fp32 when d > 1
            grp, base, d = H // KV, -(-s // 64) * b * (KV // t), 1
            while d < grp and not (grp % d == 0 and base * d >= 256):
                d += 1
            attn = 2 * r256(4 * b * s * (KV // t) * hd * d) if d > 1 else 0
        if prec != "fp32" and not mma:
            per_score = 12 if prec == "bf16" else 8
            tc = 536870912 // (per_score * b * Hl * Tp)
            tc -= tc % 16
            if tc < 128:  # ATT_MIN_ROWS while they fit 4 x 512 MiB
                most = 4 * 536870912 // (per_score * b * Hl * Tp)
                tc = min(128, most - most % 16)
            tc = min(s, max(16, tc))
            ns, nq = b * Hl * tc * Tp, b * s * Hl * hd
            attn = 2 * r256(4 * ns) + (2 * r256(2 * ns) + r256(2 * nq) if prec == "bf16" else 0) + \
                (2 * r256(4 * nq) if KV < H else 0)
        if prec == "bf16":
            # bf16_scratch(0): the output gradient of the widest product in
            # bf16 (the LM head's vocabulary shard on the last stage)
            # (not gate's and up's I/t: their gradients come in bf16,
            # matmul_backward_act, and are not rounded there)
            O = max(h, QD, -(-m["vocab_size"] // t) if last else 0)
            attn += 2 * max(4096, N * O)
        want = k * (nl * per + end) + shared + scratch + attn
        # lib/schedule.c grad_send; ZeRO-1: lib/train.c setup_zero1's
        # gradient shard of ceil(P/DP) floats (DP rank 0's, the largest)
        P, dp = st["params"], lay["dp"]
        own = -(-P // dp) if tr["zero1"] else P
        comm = (4 * Nl * h * k if p > 1 else 0) + (4 * own if tr["zero1"] else 0)
        # fp32 weights (all of them, also with ZeRO-1) + in bf16 their bf16
        # working copy, fp32 gradients, AdamW m and v (ZeRO-1: the shard)
        mem, wb = st["memory"], 6 if prec == "bf16" else 4
        if (mem["weights"], mem["grads"], mem["optimizer"]) != (wb * P, 4 * P, 8 * own):
            bad += 1
            print("FAIL %s | stage %d: weights/grads/optimizer %s, expected %s" % (
                args.replace(work + "/", ""), st["stage"],
                (mem["weights"], mem["grads"], mem["optimizer"]), (wb * P, 4 * P, 8 * own)))
        got = st["memory"]["activations"]
        gotc = st["memory"]["comm_buffers"]
        ok = got == round(want) and gotc == round(comm)
        bad += not ok
        print("%s %s | stage %d: activations %d (expected %d), comm %d (expected %d)"
              % ("ok  " if ok else "FAIL", args.replace(work + "/", ""), st["stage"], got, want,
                 gotc, comm))
sys.exit(1 if bad else 0)
PY
pass "hpt-plan's bf16, tf32 and fp32 activations and PP buffers equal hpt's CUDA allocations, tensor by tensor"
