#!/bin/sh
# bf16 training through the tensor-core attention kernels (issue 28,
# lib/attention_mma.cu) at the head dims of the presets that matter, against
# the fp32 CPU run: two 1B-shaped tiny models (2 layers, hidden 512,
# SwiGLU 1408 = 2.75 x hidden as bench/llama-1b.json):
#  - hd 64, 8 heads, 1 kv head (GQA 8, the ~1B preset's head dim and ratio);
#  - hd 128, 4 heads, 1 kv head (GQA 4, Llama 3 8B's head dim);
# 30 steps each (batch 2 x 96 tokens: one whole 64-row tile and a partial
# one): every step's loss within 2e-2 relative of --backend cpu
# (fp32; the project's bf16 tolerance), the loss goes down, and the same
# run with HPT_CUDA_ATTENTION=blas (the cuBLAS chunks) within 2e-2 of the
# default's. Skipped (77) when hpt was built without CUDA or no GPU is
# visible.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
model() { # model NAME HEADS KV
  cat > "$WORK/$1.json" <<JSON
{"hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 2,
 "num_attention_heads": $2, "num_key_value_heads": $3, "vocab_size": 8192,
 "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
 "tie_word_embeddings": false}
JSON
}
model hd64 8 1
model hd128 4 1
A="--data $CORPUS --steps 30 --seq-len 96 --batch 2 --eval-interval 0 --eval-batches 1 --quiet --lr 1e-3"
st=0
# HPT_CUDA_ATTENTION=mma: the tensor-core kernels or a fatal error (never a
# silent fallback to the cuBLAS chunks, which would compare them with themselves)
HPT_CUDA_ATTENTION=mma "$TRAIN" --model "$WORK/hd64.json" $A --backend cuda --precision bf16 \
  --run-dir "$WORK/hd64-mma" > "$WORK/hd64-mma.out" 2>&1 || st=$?
if [ "$st" -ne 0 ]; then
  cat "$WORK/hd64-mma.out"
  skip_without_cuda "$WORK/hd64-mma.out"
  fail "hd 64: the cuda bf16 run failed (exit $st)"
fi
for m in hd64 hd128; do
  [ -f "$WORK/$m-mma/log.tsv" ] ||
    HPT_CUDA_ATTENTION=mma "$TRAIN" --model "$WORK/$m.json" $A --backend cuda --precision bf16 \
      --run-dir "$WORK/$m-mma" > "$WORK/$m-mma.out" 2>&1 ||
      { cat "$WORK/$m-mma.out"; fail "$m: the cuda bf16 run (HPT_CUDA_ATTENTION=mma) failed"; }
  HPT_CUDA_ATTENTION=blas "$TRAIN" --model "$WORK/$m.json" $A --backend cuda --precision bf16 \
    --run-dir "$WORK/$m-blas" > "$WORK/$m-blas.out" 2>&1 ||
    { cat "$WORK/$m-blas.out"; fail "$m: the cuda bf16 run with HPT_CUDA_ATTENTION=blas failed"; }
  "$TRAIN" --model "$WORK/$m.json" $A --backend cpu --run-dir "$WORK/$m-cpu" > "$WORK/$m-cpu.out" 2>&1 ||
    { cat "$WORK/$m-cpu.out"; fail "$m: the fp32 cpu run failed"; }
done
"$PYTHON" - "$WORK" <<'PY' || fail "a bf16 run through the tensor-core attention differs by more than 2e-2"
import sys
TOL = 2e-2
w = sys.argv[1]
def losses(d):
    with open(d + "/log.tsv") as f:
        i = f.readline().split("\t").index("loss")
        return [float(l.split("\t")[i]) for l in f]
for m in ("hd64", "hd128"):
    c, g, b = losses(f"{w}/{m}-cpu"), losses(f"{w}/{m}-mma"), losses(f"{w}/{m}-blas")
    assert len(c) == len(g) == len(b) == 30, (m, len(c), len(g), len(b))
    for label, x, ref in (("tensor-core kernels vs fp32 cpu", g, c), ("cuBLAS chunks vs tensor-core kernels", b, g)):
        worst = 0.0
        for step, (a, r) in enumerate(zip(x, ref), 1):
            e = abs(a - r) / abs(r)
            worst = max(worst, e)
            if not e <= TOL:
                sys.exit(f"{m} {label}: step {step} loss {a!r} vs {r!r}, rel err {e:.2e} > {TOL}")
        print(f"{m} {label}: worst relative loss difference {worst:.1e} over 30 steps")
    if not g[-1] < g[0]:
        sys.exit(f"{m}: the bf16 loss did not go down: {g[0]} -> {g[-1]}")
PY
pass "bf16 through the tensor-core attention (hd 64 GQA 8, hd 128 GQA 4): 30 steps within 2e-2 of fp32 cpu and of the cuBLAS chunks"
