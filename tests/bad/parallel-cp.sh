#!/bin/sh
# Bad input for context parallelism (--cp): CP that does not divide the
# ranks (alone and with --tp/--dp), --seq-len not a multiple of 2 x CP and
# too short for the zigzag split, --cp 0, and the refused combinations
# (ZeRO-2/3, HSDP; --comm nccl and --precision bf16 ring on the CUDA
# backend, and the CPU backend refuses both for its own reasons:
# tests/bad/comm-nccl-cpu.sh, model-precision-cpu.sh), --sequence-parallel
# whose TP does not divide a rank's batch x seq-len / CP; every rank exits
# 2, the message is printed once, nothing hangs. hpt-plan --cp refuses the
# same.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
export OMP_NUM_THREADS=1
T="timeout 120 $MPIEXEC"
A="--model tiny --data $CORPUS --steps 1 --seq-len 32"
expect_error 2 "3 ranks cannot be split into \-\-tp 1 x \-\-cp 2 x \-\-pp 1 x DP: the world size must be a multiple of tp\*cp\*pp = 2" \
  $T -n 3 "$TRAIN" $A --cp 2
expect_error 2 "\-\-tp 2 x \-\-cp 2 x \-\-pp 1 x \-\-dp 2 = 8 ranks, but the job has 4 ranks" \
  $T -n 4 "$TRAIN" $A --cp 2 --tp 2 --dp 2
expect_error 2 "\-\-seq-len 30 does not split into the 2 x \-\-cp 4 = 8 equal zigzag chunks .*multiple of 8 \(the nearest: 24 or 32\)" \
  $T -n 4 "$TRAIN" $A --cp 4 --seq-len 30
expect_error 2 "\-\-seq-len 3 is too short for \-\-cp 2: .*\(the nearest valid length: 4\)" \
  $T -n 2 "$TRAIN" $A --cp 2 --seq-len 3
expect_error 2 "\-\-cp 0: must be >= 1 \(ranks per sequence\)" "$TRAIN" $A --cp 0
# --cp rings with --comm nccl and --precision bf16 on the cuda backend;
# on the cpu backend they are refused as without --cp
expect_error 2 "\-\-comm nccl: NCCL moves GPU buffers; \-\-backend cpu keeps" \
  $T -n 2 "$TRAIN" $A --cp 2 --comm nccl --backend cpu
expect_error 2 "\-\-precision bf16: the cpu backend computes in fp32 only" \
  $T -n 2 "$TRAIN" $A --cp 2 --precision bf16 --backend cpu
expect_error 2 "\-\-cp 2 with \-\-zero 2: not supported yet" $T -n 2 "$TRAIN" $A --cp 2 --zero 2
expect_error 2 "\-\-cp 2 with \-\-zero 3: not supported yet" $T -n 2 "$TRAIN" $A --cp 2 --zero 3
expect_error 2 "\-\-cp 2 with \-\-zero-shard-group: not supported yet" \
  $T -n 4 "$TRAIN" $A --cp 2 --zero1 --zero-shard-group 2
# --sequence-parallel: TP must divide a rank's batch x seq-len / CP tokens
# (12 tokens split over TP 4, but CP 2's 6 do not); the message names CP
cat > "$WORK/kv4.json" <<JSON
{"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 4, "vocab_size": 8192, "max_position_embeddings": 256, "rms_norm_eps": 1e-5}
JSON
expect_error 2 "\-\-sequence-parallel with \-\-cp 2: a rank's micro-batch of \-\-batch 1 x \-\-seq-len 12 / CP 2 = 6 tokens does not split into \-\-tp 4 equal parts" \
  $T -n 8 "$TRAIN" $A --model "$WORK/kv4.json" --batch 1 --seq-len 12 --cp 2 --tp 4 --sequence-parallel
# hpt-plan --cp: the same rules (--search keeping a --cp too: each rule
# named, not "no valid layout for 4 GPUs: TP must divide the node ...")
P="$HPT_BUILD/src/hpt-plan --model tiny --cluster cpu-local --global-batch 4"
expect_error 2 "\-\-seq-len 30 does not split into the 2 x \-\-cp 4 = 8 equal zigzag chunks .*multiple of 8 \(the nearest: 24 or 32\)" \
  $P --seq-len 30 --cp 4
expect_error 2 "\-\-seq-len 3 is too short for \-\-cp 2: .*\(the nearest valid length: 4\)" \
  $P --seq-len 3 --cp 2
expect_error 2 "\-\-cp 2 with \-\-zero 2/3: hpt-train refuses it" $P --seq-len 32 --cp 2 --dp 2 --zero 2
expect_error 2 "\-\-tp 1 x \-\-cp 4 x \-\-pp 1 = 4 does not divide the 6 GPUs of \-\-gpus" \
  $P --seq-len 32 --cp 4 --gpus 6
expect_error 2 "\-\-cp 0: must be >= 1 \(ranks per sequence\)" $P --seq-len 32 --cp 0
expect_error 2 "\-\-cp 2 with \-\-zero 2/3: hpt-train refuses it" $P --seq-len 32 --cp 2 --zero 2 --search --gpus 4
expect_error 2 "\-\-cp 2 with \-\-zero-shard-group: hpt-train refuses it" \
  $P --seq-len 32 --cp 2 --zero 1 --zero-shard-group 2 --search --gpus 4
expect_error 2 "\-\-seq-len 32 does not split into the 2 x \-\-cp 3 = 6 equal zigzag chunks .*\(the nearest: 30 or 36\)" \
  $P --seq-len 32 --cp 3 --search --gpus 6
expect_error 2 "\-\-cp 8 does not divide the 4 GPUs of \-\-gpus" $P --seq-len 32 --cp 8 --search --gpus 4
expect_error 2 "\-\-sequence-parallel with \-\-cp 2: a rank's micro-batch of \-\-micro-batch 1 x \-\-seq-len 12 / CP 2 = 6 tokens does not split into \-\-tp 4 equal parts" \
  "$HPT_BUILD/src/hpt-plan" --model "$WORK/kv4.json" --cluster cpu-local --global-batch 1 --seq-len 12 --cp 2 --tp 4 --sequence-parallel
pass "context parallelism: bad layouts, lengths and combinations refused with exit status 2"
