#!/bin/sh
# hpt-generate on a tiny model trained for a few steps on the corpus:
# - greedy decoding (40 new tokens, KV cache) equals an independent PyTorch
#   greedy loop that recomputes the whole sequence each step
#   (tests/helpers/generate_ref.py), token for token;
# - the checkpoint (a run directory, a step directory, checkpoint.h5) and the
#   export give the same tokens, also for a run with TP 2; a run directory
#   holding tokenizer.model needs no --tokenizer;
# - same seed, same sampled text; another seed, other text; top-k 1 and a
#   tiny top-p are greedy; the context limit stops generation with a note;
# - text output starts with the prompt; mpiexec -n 1 works.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$PYTHON" -c "import torch, h5py" || fail "python3-torch / python3-h5py missing (setup.sh installs them)"
GEN="$HPT_BUILD/src/hpt-generate"
RUN="$WORK/run"
"$TRAIN" --model tiny --data "$CORPUS" --steps 150 --batch 8 --seq-len 64 --lr 3e-3 --warmup 10 \
  --eval-interval 0 --eval-batches 1 --run-dir "$RUN" --save-every 150 --export "$WORK/ex.h5" \
  --quiet > "$WORK/train.log" 2>&1 || { cat "$WORK/train.log"; fail "training"; }
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
VOCAB=$("$PYTHON" -c "import json; print(json.load(open('$CORPUS/prep.json'))['vocab_size'])")
PROMPT="The horse is an animal"
greedy() { # OUT WEIGHTS-ARGS...
  local out=$1; shift
  "$GEN" "$@" --prompt "$PROMPT" --temperature 0 --max-new-tokens 40 --ignore-eos --ids \
    > "$out" 2> "$out.err" || { cat "$out.err"; fail "hpt-generate $*"; }
}

# 1. greedy from the export (config from --model) against PyTorch
greedy "$WORK/g_export" --export "$WORK/ex.h5" --model tiny --tokenizer "$CORPUS"
cat "$WORK/g_export"
[ "$(sed -n 's/^generated://p' "$WORK/g_export" | wc -w)" -eq 40 ] || fail "not 40 new tokens"
"$PYTHON" "$HPT_SRC/tests/helpers/generate_ref.py" "$WORK/config.json" "$WORK/ex.h5" "$WORK/g_export" \
  "$VOCAB" || fail "greedy decoding differs from PyTorch's"

# 2. the checkpoint, named three ways, gives the same tokens (config from the file)
STEP="$RUN/checkpoints/step_00000150"
greedy "$WORK/g_run" "$RUN" --tokenizer "$CORPUS"
greedy "$WORK/g_step" --checkpoint "$STEP" --tokenizer "$CORPUS/tokenizer.model"
greedy "$WORK/g_file" "$STEP/checkpoint.h5" --tokenizer "$CORPUS"
for f in g_run g_step g_file; do
  cmp -s "$WORK/g_export" "$WORK/$f" || { cat "$WORK/$f"; fail "$f differs from the export's tokens"; }
done
cp "$CORPUS/tokenizer.model" "$RUN/"
greedy "$WORK/g_found" "$RUN"
cmp -s "$WORK/g_export" "$WORK/g_found" || fail "tokenizer.model in the run directory: other tokens"

# A checkpoint written with tensor parallelism (TP 2) loads as its export does
"$MPIEXEC" -n 2 "$TRAIN" --model tiny --tp 2 --data "$CORPUS" --steps 3 --batch 2 --seq-len 32 \
  --eval-interval 0 --eval-batches 1 --run-dir "$WORK/run_tp" --save-every 3 \
  --export "$WORK/ex_tp.h5" --quiet > "$WORK/train_tp.log" 2>&1 || { cat "$WORK/train_tp.log"; fail "TP training"; }
greedy "$WORK/g_tp_ckpt" "$WORK/run_tp" --tokenizer "$CORPUS"
greedy "$WORK/g_tp_export" "$WORK/ex_tp.h5" --model tiny --tokenizer "$CORPUS"
cmp -s "$WORK/g_tp_ckpt" "$WORK/g_tp_export" || fail "TP 2 checkpoint and its export: other tokens"

# 3. sampling: same seed same text, another seed other text
sample() { # SEED OUT [options]
  local seed=$1 out=$2; shift 2
  "$GEN" "$RUN" --prompt "$PROMPT" --seed "$seed" --temperature 1 --top-k 50 --top-p 0.9 \
    --max-new-tokens 40 --ignore-eos "$@" > "$out" 2> "$out.err" || { cat "$out.err"; fail "sampling"; }
}
sample 7 "$WORK/s7a"
sample 7 "$WORK/s7b"
sample 8 "$WORK/s8"
cat "$WORK/s7a" "$WORK/s8"
cmp -s "$WORK/s7a" "$WORK/s7b" || fail "same seed, different text"
cmp -s "$WORK/s7a" "$WORK/s8" && fail "seeds 7 and 8 gave the same 40 tokens"
case "$(head -c ${#PROMPT} "$WORK/s7a")" in "$PROMPT") ;; *) fail "text does not start with the prompt" ;; esac
"$MPIEXEC" -n 1 "$GEN" "$RUN" --prompt "$PROMPT" --seed 7 --temperature 1 --top-k 50 --top-p 0.9 \
  --max-new-tokens 40 --ignore-eos > "$WORK/s7m" 2>&1 || { cat "$WORK/s7m"; fail "mpiexec -n 1"; }
cmp -s "$WORK/s7a" "$WORK/s7m" || fail "mpiexec -n 1 gave another text"

# 4. top-k 1 and a tiny top-p are greedy, whatever the temperature and seed
for opt in "--top-k 1" "--top-p 1e-6"; do
  # shellcheck disable=SC2086
  sample 3 "$WORK/cut" $opt --temperature 1.7 --ids
  sed -n 's/^generated://p' "$WORK/cut" > "$WORK/cut.ids"
  sed -n 's/^generated://p' "$WORK/g_export" | cmp -s - "$WORK/cut.ids" || fail "$opt is not greedy"
done

# 5. the context (max_position_embeddings = 256) bounds generation
"$GEN" "$RUN" --prompt "$PROMPT" --max-new-tokens 400 --ignore-eos --ids > "$WORK/long" \
  2> "$WORK/long.err" || { cat "$WORK/long.err"; fail "long generation"; }
grep -q "context (max_position_embeddings = 256) is full" "$WORK/long.err" || fail "no context note"
np=$(sed -n 's/^prompt://p' "$WORK/long" | wc -w)
ng=$(sed -n 's/^generated://p' "$WORK/long" | wc -w)
[ $((np + ng)) -eq 257 ] || fail "prompt $np + generated $ng tokens: expected 256 positions + the last draw"
pass "hpt-generate: greedy equals PyTorch; checkpoint = export; seeds; top-k/top-p; context"
