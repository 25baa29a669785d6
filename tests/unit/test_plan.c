/* test_plan.c — every formula piece of lib/plan.c against hand-computed
 * values on small configs, hpt's exact parameter and activation sizes
 * against lib/model.c itself (the model is built with a stand-in rank grid,
 * no communication), and the Megatron-LM FLOP formula for a GPT shape.
 * Prints one line per failed check; exit 1 if any. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "model.h"
#include "checkpoint.h"
#include "plan.h"

static int failures;

static void expect(const char *what, double got, double want, double rel)
{
    double err = fabs(got - want) / fmax(fabs(want), 1e-300);
    if (!(err <= rel)) {
        printf("FAIL %s: got %.17g, expected %.17g\n", what, got, want);
        failures++;
    } else {
        printf("ok   %s = %.17g\n", what, got);
    }
}

/* C 64, I 176, L 2, H 4, KV 2 (hd 16, g = 1/2), V 100, untied. The CUDA
 * attention on the cuBLAS chunks (HPT_CUDA_ATTENTION=blas: the hand values
 * below follow their scratch and score traffic); test_mma_path the
 * tensor-core kernels bf16 mode runs by default. */
static hpt_plan_setup hand_setup(void)
{
    hpt_plan_setup s;
    memset(&s, 0, sizeof s);
    s.attention = 'b';
    s.cfg = (hpt_config){64, 176, 2, 4, 2, 100, 256, 1e-5f, 1e4f, 0};
    hpt_cluster_preset("h100-80gb", &s.cl);
    s.tp = 2, s.pp = 2, s.dp = 2, s.nodes = 1, s.gpus_per_node = 8;
    s.seq_len = 8, s.micro_batch = 2, s.global_batch = 8; /* m = 8 / (2 x 2) = 2 */
    s.gpus_per_node = 8;
    s.nodes = 1;
    return s;
}

static void test_hand_values(void)
{
    hpt_plan_setup s = hand_setup();
    s.gpus_per_node = 8; /* 8 = 2 x 2 x 2 ranks on one node */
    /* per layer, one TP rank (t = 2): norms 2*64, q 32*64 = 2048, k and v
     * 16*64 = 1024 each, o 64*32 = 2048, gate and up 88*64 = 5632 each,
     * down 64*88 = 5632: 128 + 2048 + 2048 + 2048 + 11264 + 5632 = 23168 */
    expect("stage 0 params (layer 0 + embedding 50 x 64)", hpt_plan_stage_params(&s, 0),
           23168 + 3200, 0);
    expect("stage 1 params (layer 1 + norm + head 50 x 64)", hpt_plan_stage_params(&s, 1),
           23168 + 64 + 3200, 0);
    /* activations, bf16 (a = 2), s = 8, b = 2, h = 64, I = 176, t = 2:
     * 2*8*2*64*(4 + (2 + 2*0.5)/2) = 2048*5.5 = 11264; 2*3*8*2*176/2 = 8448;
     * softmax statistics 4 * b * H/t * s = 4*2*2*8 = 128 (Megatron's
     * count, Korthikanti et al. 2022 adapted: every tensor in a bytes) */
    expect("Megatron layer activations, bf16, flash", hpt_plan_megatron_layer_act_bytes(&s),
           11264 + 8448 + 128, 0);
    s.store_scores = 1; /* + 2 * b * H/t * s^2 = 2*2*2*64 = 512 instead of 128 */
    expect("Megatron layer activations, bf16, softmax stored",
           hpt_plan_megatron_layer_act_bytes(&s), 11264 + 8448 + 512, 0);
    s.store_scores = 0;
    /* hpt's CUDA backend in bf16 mode, N = 16 tokens: x, xmid fp32
     * 4*2*16*64 = 8192; ln1, ln2 2*2*16*64 = 4096; q, attention output
     * 2*2*16*32 = 2048; k, v 2*2*16*16 = 1024; gate, up, h 2*3*16*88 = 8448;
     * rstd1, rstd2 4*2*16 = 128; log-sum-exp 128: 24064 = 19840 + 2*2*16*64
     * (x, xmid in 4 bytes, not 2) + 128 (rstd) */
    expect("hpt layer activations, bf16", hpt_plan_layer_act_bytes(&s), 24064, 0);
    s.store_scores = 1;
    expect("hpt layer activations, bf16, softmax stored", hpt_plan_layer_act_bytes(&s),
           24064 - 128 + 512, 0);
    s.store_scores = 0;
    /* bf16 attention scratch: T = 8 padded to Tp = 16, Tc = 8, n = 2*2*8*16
     * = 512 scores: S, dP 4n = 2048 each, P, dS 2n = 1024 each, dO in bf16
     * 2*2*8*2*16 = 1024, GQA (1 kv head per rank for 2 heads): dK, dV per
     * query head 4*2*8*2*16 = 2048 each (all multiples of 256) */
    expect("bf16 attention chunk scratch", hpt_plan_attention_scratch_bytes(&s),
           2 * 2048 + 2 * 1024 + 1024 + 2 * 2048, 0);
    s.fp32 = 1;
    /* fp32 (and tf32): every tensor in 4 bytes — x, xmid 8192; ln1, ln2
     * 8192; q, attention output 4096; k, v 2048; gate, up, h 4*3*16*88 =
     * 16896; rstd 128; log-sum-exp 128: 39680 = Megatron's a = 4 count
     * 2*(11264 + 8448) + 128 plus the rstd, 128 */
    expect("fp32: hpt's layer activations", hpt_plan_layer_act_bytes(&s), 39680, 0);
    expect("fp32: Megatron's count with a = 4", hpt_plan_megatron_layer_act_bytes(&s),
           2 * (11264 + 8448) + 128, 0);
    expect("fp32: no attention scratch (flash kernels)", hpt_plan_attention_scratch_bytes(&s), 0,
           0);
    /* tf32: 8 bytes per score, Tc = 8, n = 512: S, dP 2048 each (P and dS
     * overwrite them, dO stays fp32), GQA dK, dV per query head 2048 each */
    s.tf32 = 1;
    expect("tf32 attention chunk scratch", hpt_plan_attention_scratch_bytes(&s), 4 * 2048, 0);
    expect("tf32: layer activations as fp32", hpt_plan_layer_act_bytes(&s), 39680, 0);
    /* hd 12: a head's row is 48 bytes in tf32 (16-byte aligned: cuBLAS path)
     * but 24 in bf16, where the backend runs the flash kernels (no scratch) */
    hpt_plan_setup s12 = s;
    s12.cfg.hidden_size = 48;
    expect("tf32, hd 12: cuBLAS path, chunk scratch", hpt_plan_attention_scratch_bytes(&s12) > 0,
           1, 0);
    s12.fp32 = 0, s12.tf32 = 0;
    expect("bf16, hd 12: flash kernels, no chunk scratch", hpt_plan_attention_scratch_bytes(&s12),
           0, 0);
    s.fp32 = 0, s.tf32 = 0;

    hpt_plan_result r;
    hpt_status st = hpt_plan_eval(&s, &r);
    expect("eval status", st, 0, 0);
    expect("micro-batches", r.micro_batches, 2, 0);
    expect("bubble (p-1)/(m+p-1) = 1/3", r.bubble, 1.0 / 3.0, 1e-15);
    /* stage 0 holds min(PP - 0, m) = 2 micro-batches, stage 1 one */
    expect("stage 0 in flight", r.stage[0].in_flight, 2, 0);
    expect("stage 1 in flight", r.stage[1].in_flight, 1, 0);
    double P0 = 26368;
    /* bf16 on hpt's CUDA backend: fp32 weights + bf16 working copy, fp32
     * gradients, AdamW m + v: 6 + 4 + 8 = 18 bytes per parameter */
    expect("stage 0 weights (fp32 + bf16 copy)", r.stage[0].mem.weights, 6 * P0, 0);
    expect("stage 0 grads (fp32)", r.stage[0].mem.grads, 4 * P0, 0);
    expect("stage 0 optimizer (m + v)", r.stage[0].mem.optimizer, 8 * P0, 0);
    /* hpt's bf16 allocations (lib/model.c layout_acts): per slot the layer
     * (24064) and the stage end: x_final 4*16*64 = 4096, rstdf 4*16,
     * tokens, targets, ce_mx, ce_sum + ce_tgt 4*5*16 = 320, on the last
     * stage lnf 2*16*64 = 2048: 4480 / 6528; once the fp32 backward scratch
     * 4*(2*16*64 + 2*16*32 + 2*16*16 + 3*16*88 + 2*2*8) = 31360 and the
     * attention scratch 11264 (above) and the bf16 operand scratch of the
     * products' output gradients 2 * max(4096, 16 * 88) = 8192 (the
     * widest product is gate/up, I/t = 88; the head's 25 columns are
     * fewer). Stage 0: 2 in flight, 1 layer. */
    expect("stage 0 activations", r.stage[0].mem.activations,
           2 * (24064 + 4480) + 31360 + 11264 + 8192, 0);
    expect("stage 1 activations", r.stage[1].mem.activations, 24064 + 6528 + 31360 + 11264 + 8192, 0);
    expect("stage 1 logits", r.stage[1].mem.logits, 4 * 16 * 50, 0);
    expect("stage 1 comm buffers (fp32 gradient send slot, 1 x N x C x 4 bytes)",
           r.stage[1].mem.comm_buffers, 4 * 16 * 64, 0);
    expect("stage 0 comm buffers (2 slots)", r.stage[0].mem.comm_buffers, 2 * 4 * 16 * 64, 0);
    /* TP bytes, stage 1: m x (4 all-reduces per layer + the head's) of
     * N*C*4 bytes (hpt's bf16 mode sums fp32 partial sums and gradients),
     * + cross-entropy stats 3N floats per micro-batch */
    expect("stage 1 TP bytes", r.stage[1].comm[HPT_PLAN_TP].bytes,
           2 * (4 + 1) * 16 * 64 * 4 + 2 * 12 * 16, 0);
    expect("stage 0 TP bytes (embedding + 4 per layer)", r.stage[0].comm[HPT_PLAN_TP].bytes,
           2 * (1 + 4) * 16 * 64 * 4, 0);
    /* PP: 2 micro-batches x one send of N*C*4 bytes (fp32 residual) + the loss */
    expect("stage 0 PP bytes", r.stage[0].comm[HPT_PLAN_PP].bytes, 2 * 4096 + 8, 0);
    /* sequence parallelism, stage 0: reduce-scatters of fp32 partial sums
     * m x (embedding + 4 per layer) x N*C*4; all-gathers (counted as the
     * rank's own part, N*C/2 elements) of the norm outputs in bf16, m x 2 per
     * layer x N*C/2*2, and of gradients in fp32, m x (2 per layer + the
     * embedding's) x N*C/2*4; the norm-weight gradients 4*2*64 */
    s.sequence_parallel = 1;
    hpt_plan_eval(&s, &r);
    expect("stage 0 TP bytes, sequence parallel", r.stage[0].comm[HPT_PLAN_TP].bytes,
           2 * 5 * 1024 * 4 + 2 * 2 * 512 * 2 + 2 * 3 * 512 * 4 + 4 * 2 * 64, 0);
    expect("stage 0 TP calls, sequence parallel", r.stage[0].comm[HPT_PLAN_TP].calls,
           2 * 5 + 2 * 2 + 2 * 3 + 1, 0);
    s.sequence_parallel = 0;
    hpt_plan_eval(&s, &r);
    /* DP all-reduce of the fp32 gradients + the loss */
    expect("stage 0 DP bytes", r.stage[0].comm[HPT_PLAN_DP].bytes, 4 * P0 + 8, 0);
    s.zero = 1;
    hpt_plan_eval(&s, &r);
    expect("stage 0 optimizer, ZeRO-1 over DP 2", r.stage[0].mem.optimizer, 8 * P0 / 2, 0);
    expect("stage 0 weights, ZeRO-1 (all of them on every DP rank)", r.stage[0].mem.weights,
           6 * P0, 0);
    /* + the gradient shard (4 P/2) beside the 2 fp32 gradient send slots */
    expect("stage 0 comm buffers, ZeRO-1", r.stage[0].mem.comm_buffers,
           4 * P0 / 2 + 2 * 4 * 16 * 64, 0);
    /* reduce-scatter of 4P, all-gather of the own shard of the fp32
     * weights, two f64 */
    expect("stage 0 DP bytes, ZeRO-1", r.stage[0].comm[HPT_PLAN_DP].bytes,
           4 * P0 + 4 * P0 / 2 + 16, 0);
    s.zero = 0;
    s.pp_schedule = HPT_PLAN_SCHEDULE_GPIPE; /* GPipe: every stage holds all m = 2 micro-batches */
    hpt_plan_eval(&s, &r);
    expect("GPipe stage 1 in flight", r.stage[1].in_flight, 2, 0);
    expect("GPipe stage 1 activations", r.stage[1].mem.activations,
           2 * (24064 + 6528) + 31360 + 11264 + 8192, 0);
    expect("GPipe stage 0 activations", r.stage[0].mem.activations,
           2 * (24064 + 4480) + 31360 + 11264 + 8192, 0);
    expect("GPipe bubble (p-1)/(m+p-1) = 1/3", r.bubble, 1.0 / 3.0, 1e-15);
    s.pp_schedule = HPT_PLAN_SCHEDULE_1F1B;
    s.recompute = 1; /* 2 more TP all-reduces per layer; layer input only */
    hpt_plan_eval(&s, &r);
    expect("stage 0 TP bytes, recompute", r.stage[0].comm[HPT_PLAN_TP].bytes,
           2 * (1 + 6) * 16 * 64 * 4, 0);
    /* per slot the fp32 input 4*16*64 and the stage end; one layer shared */
    expect("stage 0 activations, recompute (2 x input + one layer)",
           r.stage[0].mem.activations, 2 * (4 * 16 * 64 + 4480) + 24064 + 31360 + 11264 + 8192, 0);
}

/* --precision: the flags, the peak of the precision (unless --peak-flops
 * was given) and the refusals. */
static void test_precision(void)
{
    const struct {
        const char *cluster, *prec;
        int keep, fp32, tf32;
        double peak;
    } c[] = {{"h100-80gb", "bf16", 0, 0, 0, 989e12}, {"h100-80gb", "tf32", 0, 1, 1, 494e12},
             {"h100-80gb", "fp32", 0, 1, 0, 67e12},  {"a100-80gb", "tf32", 0, 1, 1, 156e12},
             {"a100-80gb", "fp32", 0, 1, 0, 19.5e12}, {"h200-141gb", NULL, 0, 0, 0, 989e12},
             {"h100-80gb", "fp32", 1, 1, 0, 989e12},  {"cpu-local", NULL, 0, 1, 0, 233.3e9},
             {"cpu-local", "fp32", 0, 1, 0, 233.3e9}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        hpt_plan_setup s = hand_setup();
        hpt_cluster_preset(c[i].cluster, &s.cl);
        char what[128];
        snprintf(what, sizeof what, "%s --precision %s%s", c[i].cluster,
                 c[i].prec ? c[i].prec : "(default)", c[i].keep ? " --peak-flops" : "");
        if (hpt_plan_set_precision(&s, c[i].prec, c[i].keep)) {
            printf("FAIL %s: %s\n", what, hpt_error_msg());
            failures++;
            continue;
        }
        char w2[160];
        snprintf(w2, sizeof w2, "%s: 2 fp32 + tf32", what);
        expect(w2, s.fp32 * 2 + s.tf32, c[i].fp32 * 2 + c[i].tf32, 0);
        snprintf(w2, sizeof w2, "%s: peak FLOP/s", what);
        expect(w2, s.cl.peak_flops, c[i].peak, 0);
    }
    hpt_plan_setup s = hand_setup();
    int st = hpt_plan_set_precision(&s, "fp16", 0);
    int ok = st == HPT_ERR_USAGE &&
             !strcmp(hpt_error_msg(), "--precision 'fp16': expected fp32, tf32 or bf16");
    printf("%s --precision fp16 refused: %s\n", ok ? "ok  " : "FAIL", hpt_error_msg());
    failures += !ok;
    for (int k = 0; k < 4; k++) { /* cpu-local trains fp32 only: set_precision and, for
                                    * a setup filled by hand, validate refuse the others */
        hpt_cluster_preset("cpu-local", &s.cl);
        s.gpus_per_node = 8;
        if (k < 2) {
            st = hpt_plan_set_precision(&s, k ? "tf32" : "bf16", 0);
        } else {
            s.fp32 = k == 3, s.tf32 = k == 3;
            st = hpt_plan_validate(&s);
        }
        char want[128];
        snprintf(want, sizeof want, "--precision %s: cluster cpu-local trains in fp32 only (hpt's "
                 "CPU backend)", k % 2 ? "tf32" : "bf16");
        ok = st == HPT_ERR_USAGE && !strcmp(hpt_error_msg(), want);
        printf("%s cpu-local --precision %s refused by %s: %s\n", ok ? "ok  " : "FAIL",
               k % 2 ? "tf32" : "bf16", k < 2 ? "set_precision" : "validate", hpt_error_msg());
        failures += !ok;
    }
}

/* The GPU model in fp32 mode is hpt's own carving without the 64-byte
 * rounding (lib/model.c layout_acts, fp32 on both backends): with every
 * piece a multiple of 16 floats it equals the exact model's activation
 * block (checked against hpt_model_init_opts in test_exact_sizes) byte for
 * byte, up to the two one-element placeholders a non-last stage carves per
 * slot (lnf and the logits, 64 bytes each). */
static void test_fp32_gpu_is_hpt_carving(void)
{
    for (int tp = 1; tp <= 2; tp++)
        for (int pp = 1; pp <= 2; pp++)
            for (int rs = 0; rs < 6; rs++) {
                hpt_plan_setup s = hand_setup();
                s.cfg = (hpt_config){64, 176, 4, 4, 2, 8192, 256, 1e-5f, 1e4f, 0};
                s.tp = tp, s.pp = pp, s.dp = 1, s.gpus_per_node = tp * pp;
                s.seq_len = 16, s.micro_batch = 2, s.global_batch = 6;
                s.recompute = rs % 3, s.sequence_parallel = rs / 3;
                hpt_plan_set_precision(&s, "fp32", 0);
                hpt_plan_result r;
                if (hpt_plan_eval(&s, &r)) {
                    printf("FAIL eval: %s\n", hpt_error_msg());
                    failures++;
                    continue;
                }
                for (int st = 0; st < pp; st++) {
                    int k = r.stage[st].in_flight, last = st == pp - 1;
                    double exact = hpt_plan_exact_act_bytes(&s, st, k, NULL);
                    char what[128];
                    snprintf(what, sizeof what, "fp32 GPU acts = hpt's carving: tp %d pp %d "
                             "stage %d rc %d sp %d", tp, pp, st, rs % 3, rs / 3);
                    expect(what, r.stage[st].mem.activations + r.stage[st].mem.logits +
                                     (last ? 0 : 128.0 * k), exact, 0);
                }
            }
}

static void test_alpha_beta(void)
{
    expect("ring all-reduce factor n=4", hpt_plan_coll_factor(HPT_COLL_ALLREDUCE, 4), 1.5, 0);
    expect("reduce-scatter factor n=4", hpt_plan_coll_factor(HPT_COLL_REDUCE_SCATTER, 4), 0.75, 0);
    expect("all-gather factor n=8", hpt_plan_coll_factor(HPT_COLL_ALLGATHER, 8), 0.875, 0);
    /* 1 MB over 1 GB/s, 1 us per step */
    expect("all-reduce n=4 time", hpt_plan_coll_seconds(HPT_COLL_ALLREDUCE, 4, 1e6, 1e9, 1e-6),
           1.5e-3 + 6e-6, 1e-12);
    expect("reduce-scatter n=4 time",
           hpt_plan_coll_seconds(HPT_COLL_REDUCE_SCATTER, 4, 1e6, 1e9, 1e-6), 0.75e-3 + 3e-6,
           1e-12);
    expect("p2p time", hpt_plan_coll_seconds(HPT_COLL_P2P, 2, 1e6, 1e9, 1e-6), 1e-3 + 1e-6, 1e-12);
    expect("all-reduce n=1 time", hpt_plan_coll_seconds(HPT_COLL_ALLREDUCE, 1, 1e6, 1e9, 1e-6), 0,
           0);
}

/* NCCL's model (hpt_plan_nccl_seconds): bus-bandwidth factors of
 * nccl-tests' doc/PERFORMANCE.md, latency steps of NCCL's tuning.cc. */
static void test_nccl_model(void)
{
    double f = -1;
    /* 16 ranks on 2 nodes, 1 MB, 1 GB/s, 1 us NVLink / 5 us network steps.
     * ring: 2*15/16 * 1e-3 = 1.875e-3; 30 steps of which 2(2-1) = 2 cross
     * the network: 28 us + 10 us */
    expect("nccl ring all-reduce 16 ranks / 2 nodes",
           hpt_plan_nccl_seconds(HPT_COLL_ALLREDUCE, HPT_NCCL_RING, 16, 2, 1e6, 1e9, 1e-6, 5e-6, &f),
           1.875e-3 + 38e-6, 1e-12);
    expect("  its bus-bandwidth factor 2(n-1)/n", f, 1.875, 0);
    /* tree: algbw = busbw/2: 2e-3; 2*((16/2 - 1)*1 us + log2(2)*5 us) = 24 us */
    expect("nccl tree all-reduce 16 ranks / 2 nodes",
           hpt_plan_nccl_seconds(HPT_COLL_ALLREDUCE, HPT_NCCL_TREE, 16, 2, 1e6, 1e9, 1e-6, 5e-6, &f),
           2e-3 + 24e-6, 1e-12);
    expect("  its bus-bandwidth factor 2", f, 2, 0);
    expect("nccl auto, 1 MB: ring is faster",
           hpt_plan_nccl_seconds(HPT_COLL_ALLREDUCE, HPT_NCCL_AUTO, 16, 2, 1e6, 1e9, 1e-6, 5e-6, &f),
           1.875e-3 + 38e-6, 1e-12);
    /* 8 bytes over 64 ranks on 8 nodes: ring 126 steps, 14 inter:
     * 112 + 70 us + 2*63/64*8 ns; tree 2*(7*1 + 3*5) us + 16 ns */
    expect("nccl ring all-reduce 8 B, 64 ranks / 8 nodes",
           hpt_plan_nccl_seconds(HPT_COLL_ALLREDUCE, HPT_NCCL_RING, 64, 8, 8, 1e9, 1e-6, 5e-6, NULL),
           182e-6 + 2.0 * 63 / 64 * 8e-9, 1e-12);
    expect("nccl auto, 8 B: tree is faster",
           hpt_plan_nccl_seconds(HPT_COLL_ALLREDUCE, HPT_NCCL_AUTO, 64, 8, 8, 1e9, 1e-6, 5e-6, &f),
           44e-6 + 16e-9, 1e-12);
    expect("  auto's factor is the tree's", f, 2, 0);
    /* reduce-scatter and all-gather are ring whatever the algorithm:
     * 7/8 * 1e-3 + (7 - 1) us + 1 * 5 us */
    expect("nccl reduce-scatter 8 ranks / 2 nodes (tree asked: ring)",
           hpt_plan_nccl_seconds(HPT_COLL_REDUCE_SCATTER, HPT_NCCL_TREE, 8, 2, 1e6, 1e9, 1e-6,
                                 5e-6, &f), 0.875e-3 + 11e-6, 1e-12);
    expect("  its factor (n-1)/n", f, 0.875, 0);
    expect("nccl p2p across nodes", hpt_plan_nccl_seconds(HPT_COLL_P2P, HPT_NCCL_AUTO, 2, 2, 1e6,
                                                          1e9, 1e-6, 5e-6, &f), 1e-3 + 5e-6, 1e-12);
    expect("nccl p2p in a node", hpt_plan_nccl_seconds(HPT_COLL_P2P, HPT_NCCL_AUTO, 2, 1, 1e6,
                                                       1e9, 1e-6, 5e-6, &f), 1e-3 + 1e-6, 1e-12);
    expect("nccl one rank", hpt_plan_nccl_seconds(HPT_COLL_ALLREDUCE, HPT_NCCL_AUTO, 1, 1, 1e6,
                                                  1e9, 1e-6, 5e-6, &f), 0, 0);
    /* in one node NCCL's ring is hpt's MPI ring */
    expect("nccl ring in one node = the MPI alpha-beta ring",
           hpt_plan_nccl_seconds(HPT_COLL_ALLREDUCE, HPT_NCCL_RING, 4, 1, 1e6, 1e9, 1e-6, 5e-6, NULL),
           hpt_plan_coll_seconds(HPT_COLL_ALLREDUCE, 4, 1e6, 1e9, 1e-6), 1e-15);

    /* Nodes a group spans (8 GPUs per node unless said). */
    hpt_plan_setup s = hand_setup();
    s.tp = 2, s.pp = 2, s.dp = 4, s.nodes = 2; /* ranks tp + 2 dp + 8 pp */
    expect("tp 2 dp 4 pp 2: TP group nodes", hpt_plan_group_nodes(&s, HPT_PLAN_TP), 1, 0);
    expect("  DP group (ranks 2 apart, 8 ranks per pipeline stage) nodes",
           hpt_plan_group_nodes(&s, HPT_PLAN_DP), 1, 0);
    expect("  PP group (8 apart) nodes", hpt_plan_group_nodes(&s, HPT_PLAN_PP), 2, 0);
    expect("  MP bound nodes", hpt_plan_group_nodes(&s, HPT_PLAN_MP), 2, 0);
    s.tp = 4, s.pp = 1, s.dp = 4; /* DP ranks 0, 4 | 8, 12 */
    expect("tp 4 dp 4: DP group nodes", hpt_plan_group_nodes(&s, HPT_PLAN_DP), 2, 0);
    s.gpus_per_node = 6, s.dp = 3; /* TP groups 0-3 | 4-7 straddle 6 | 8-11 */
    expect("tp 4 on 6-GPU nodes: a TP group straddles", hpt_plan_group_nodes(&s, HPT_PLAN_TP), 2,
           0);

    /* A layout: TP 2 x PP 2 x DP 2 on 4 nodes of 2 GPUs (h100 preset:
     * 50 GB/s, 1 us / 5 us): each DP pair spans 2 nodes. Stage 0 reduces 2
     * buckets of 4 * 26368 / 2 = 52736 bytes and the 8-byte loss; n = 2 on
     * 2 nodes: ring 52736 / 50e9 + 2 * 5 us, tree 2 * 52736 / 50e9 +
     * 2 * 5 us: auto picks the ring everywhere. */
    s = hand_setup();
    s.gpus_per_node = 2, s.nodes = 4;
    s.comm_lib = HPT_PLAN_COMM_NCCL;
    hpt_plan_result r;
    hpt_plan_eval(&s, &r);
    double ring = 52736 / 50e9 + 10e-6, tree = 2 * 52736 / 50e9 + 10e-6;
    expect("nccl auto: stage 0 DP seconds", r.stage[0].comm[HPT_PLAN_DP].seconds,
           2 * ring + 8 / 50e9 + 10e-6, 1e-12);
    expect("nccl auto: stage 0 DP wire bytes (ring factor 1)",
           r.stage[0].comm[HPT_PLAN_DP].wire_bytes, 2 * 52736 + 8, 0);
    s.nccl_algo = HPT_NCCL_TREE;
    hpt_plan_eval(&s, &r);
    expect("nccl tree: stage 0 DP seconds", r.stage[0].comm[HPT_PLAN_DP].seconds,
           2 * tree + 16 / 50e9 + 10e-6, 1e-12);
    expect("nccl tree: stage 0 DP wire bytes (factor 2)",
           r.stage[0].comm[HPT_PLAN_DP].wire_bytes, 2 * (2 * 52736 + 8), 0);
}

/* GPT shape: KV = H, 3*I = 8*C, so 4C^2 + 3CI = 12C^2 weights per layer. */
static void test_megatron_flops(void)
{
    hpt_config c = {96, 256, 2, 4, 4, 1000, 256, 1e-5f, 1e4f, 0};
    double s = 32, l = 2, h = 96, V = 1000;
    double megatron = 96 * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    /* causal attention: Megatron's full-square attention term s/6h halved */
    double causal = 96 * s * l * h * h * (1 + s / (12 * h) + V / (16 * l * h));
    /* by hand: per token 6*(2*110592 + 96000) + 6*2*32*96 = 1939968, with
     * recomputation + 2*2*110592 + 2*2*32*96 = 454656; x 32 tokens */
    expect("FLOPs per sequence with recomputation (hand)", hpt_plan_flops_per_seq(&c, 32, 1),
           76627968, 0);
    expect("= Megatron-LM 96Bslh^2(1 + s/12h + V/16lh) (causal half of s/6h)",
           hpt_plan_flops_per_seq(&c, 32, 1), causal, 1e-12);
    expect("Megatron-LM's full square minus the causal half 8Bls^2h",
           hpt_plan_flops_per_seq(&c, 32, 1), megatron - 8 * s * l * s * h, 1e-12);
    expect("without recomputation = hpt_model_flops_per_token x T",
           hpt_plan_flops_per_seq(&c, 32, 0), hpt_model_flops_per_token(&c, 32) * 32, 1e-12);
}

/* Exact model: parameter block and activation block equal what
 * hpt_model_init_opts allocates, for TP/PP ranks, slots, recompute (none,
 * full, selective) and sequence parallelism. */
static void test_exact_sizes(void)
{
    const hpt_backend *be = NULL;
    if (hpt_backend_get("cpu", &be)) {
        printf("FAIL no cpu backend\n");
        failures++;
        return;
    }
    /* tiny's shape with an odd vocabulary (padding over TP) and C = 40
     * (tensors not multiples of 16 elements) */
    hpt_config cfgs[2] = {{64, 176, 2, 4, 2, 8192, 256, 1e-5f, 1e4f, 0},
                          {40, 60, 3, 4, 2, 1001, 256, 1e-5f, 1e4f, 1}};
    for (int ci = 0; ci < 2; ci++)
        for (int tp = 1; tp <= 2; tp++)
            for (int pp = 1; pp <= 3; pp += 2)
                for (int rs = 0; rs < 6; rs++) /* recompute 0, 1, 2 x SP off, on */
                    for (int stage = 0; stage < pp && pp <= cfgs[ci].num_hidden_layers;
                         stage++) {
                        int rc = rs % 3, sp = rs / 3;
                        hpt_plan_setup s;
                        memset(&s, 0, sizeof s);
                        s.cfg = cfgs[ci];
                        hpt_cluster_preset("cpu-local", &s.cl);
                        s.tp = tp, s.pp = pp, s.dp = 1, s.seq_len = 16, s.micro_batch = 3;
                        s.global_batch = 12, s.recompute = rc, s.fp32 = 1;
                        s.sequence_parallel = sp;
                        hpt_comm fake; /* coordinates only: init does not communicate */
                        memset(&fake, 0, sizeof fake);
                        fake.tp = tp, fake.pp = pp, fake.dp = 1, fake.tp_rank = tp - 1;
                        fake.pp_rank = stage;
                        int l0, l1, nslots = pp - stage < 4 ? pp - stage : 4;
                        hpt_plan_stage_layers(s.cfg.num_hidden_layers, pp, stage, &l0, &l1);
                        hpt_model_opts mo = {.comm = &fake, .recompute = rc, .nslots = nslots,
                                             .l0 = l0, .l1 = l1, .sequence_parallel = sp};
                        hpt_model m;
                        if (hpt_model_init_opts(&m, &s.cfg, be, &mo, 3, 16, 1)) {
                            printf("FAIL model init: %s\n", hpt_error_msg());
                            failures++;
                            continue;
                        }
                        char what[160];
                        snprintf(what, sizeof what, "cfg %d tp %d pp %d stage %d rc %d params", ci,
                                 tp, pp, stage, rc);
                        expect(what, hpt_plan_stage_params(&s, stage), (double)m.nparams, 0);
                        snprintf(what, sizeof what,
                                 "cfg %d tp %d pp %d stage %d rc %d sp %d act bytes", ci, tp, pp,
                                 stage, rc, sp);
                        expect(what, hpt_plan_exact_act_bytes(&s, stage, nslots, NULL),
                               (double)m.act_bytes, 0);
                        /* --async-save's staging buffer: the plan's figure bounds what
                         * lib/checkpoint.c allocates (norms written by TP rank 0 only,
                         * vocabulary padding rows not staged), at DP 1 and 2 */
                        for (int dp = 1; dp <= 2; dp++) {
                            s.dp = fake.dp = dp, fake.dp_rank = dp - 1, s.async_save = 1;
                            hpt_ckpt_state cs = {.comm = &fake, .model = &m};
                            double real = (double)hpt_ckpt_async_staging_bytes(&cs);
                            double plan = hpt_plan_rank_mem(&s, stage * tp * dp + (dp - 1) * tp +
                                                                    tp - 1).staging;
                            int ok = real <= plan && real >= 0.9 * plan;
                            printf("%s cfg %d tp %d pp %d dp %d stage %d staging: plan %.0f, "
                                   "allocated %.0f bytes\n", ok ? "ok  " : "FAIL", ci, tp, pp,
                                   dp, stage, plan, real);
                            failures += !ok;
                        }
                        hpt_model_free(&m);
                    }
}

/* Parameter counts at the ends of the config limits: Llama 3.1 405B is
 * counted exactly; sizes each within 2^24 whose count (~3.3e22) used to
 * overflow int64 are refused by hpt_config_validate and saturate in
 * hpt_config_num_params instead of wrapping. */
static void test_param_count_range(void)
{
    hpt_config c;
    if (hpt_config_preset("llama3-405b", &c)) {
        printf("FAIL llama3-405b preset\n");
        failures++;
        return;
    }
    /* 2VC + C + L(2C + 2C^2 + 2C*KV*hd + 3CI), C 16384, I 53248, L 126, KV*hd 1024 */
    expect("llama3-405b parameters", (double)hpt_config_num_params(&c), 405853388800.0, 0);
    hpt_config big = {1 << 24, 1 << 24, 1 << 24, 1 << 23, 1 << 23, 1 << 24, 1 << 24, 1e-5f, 1e4f, 0};
    int refused = hpt_config_validate(&big, "big") != HPT_OK;
    printf("%s sizes within 2^24, ~3.3e22 parameters: %s\n", refused ? "ok  " : "FAIL",
           refused ? hpt_error_msg() : "accepted");
    failures += !refused;
    expect("its saturated count", (double)hpt_config_num_params(&big), (double)INT64_MAX, 0);
}

/* The attention core is charged at the CUDA cores' fp32 peak where bf16 or
 * tf32 fall back to the flash kernels (head row not a multiple of 16
 * bytes), else at the precision's peak; the stage time adds the two. */
static void test_attention_peak(void)
{
    const struct {
        const char *prec;
        int hd;
        double peak;
    } c[] = {{"bf16", 16, 989e12}, {"bf16", 12, 67e12}, {"tf32", 12, 494e12},
             {"tf32", 6, 67e12},   {"fp32", 12, 67e12}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        hpt_plan_setup s = hand_setup();
        s.cfg.hidden_size = 4 * c[i].hd; /* H 4 */
        hpt_plan_set_precision(&s, c[i].prec, 0);
        char what[96];
        snprintf(what, sizeof what, "attention peak, h100 %s, hd %d", c[i].prec, c[i].hd);
        expect(what, hpt_plan_attention_peak(&s), c[i].peak, 0);
        hpt_plan_result r;
        if (hpt_plan_eval(&s, &r)) {
            printf("FAIL %s: hpt_plan_eval: %s\n", what, hpt_error_msg());
            failures++;
            continue;
        }
        /* stage 0: layer 0 of 2; attention 6 T C per token, T b / tp tokens */
        double C = s.cfg.hidden_size, T = s.seq_len;
        double att = 6 * T * C * T * s.micro_batch / s.tp, eff = s.cl.efficiency;
        double want = (r.stage[0].flops_per_mb - att) / (s.cl.peak_flops * eff) +
                      att / (c[i].peak * eff);
        snprintf(what, sizeof what, "stage 0 compute s, h100 %s, hd %d", c[i].prec, c[i].hd);
        expect(what, r.stage[0].compute_s, want, 1e-12);
    }
    hpt_plan_setup s = hand_setup();
    hpt_cluster_preset("cpu-local", &s.cl);
    hpt_plan_set_precision(&s, NULL, 0);
    s.cfg.hidden_size = 48;
    expect("attention peak, cpu-local (fp32: the ranks' share)", hpt_plan_attention_peak(&s),
           s.cl.peak_flops / s.gpus_per_node, 0);
}

/* The memory-bound kernels (docs/PLAN.md, "Memory-bound kernels"): the
 * bytes per kernel class of hand_setup's layout (h100, bf16: C 64, I 176,
 * H 4, KV 2, hd 16, V 100; TP 2, PP 2: one layer per stage; b 2, s 8: N =
 * 16 tokens; per TP rank QD = 32, KD = 16, I/t = 88, V/t = 50; a = 2, f = 4)
 * computed by hand, and their time in the step. */
/* bf16's default attention, the tensor-core kernels (lib/attention_mma.cu,
 * hd 16 here): no chunk scratch, no score traffic — only their operands
 * (docs/PLAN.md): forward N (2 QD + 2 KD) a = 16 x 96 x 2 = 3072; backward
 * N (QD (3a + 3f) + 4 KD a + (QD + 2 KD) f) = 16 x (32 x 18 + 64 x 2 + 64 x
 * 4) = 15360, + 4 N KD d f = 8192 for the dK/dV kernel's partial sums: one
 * 64-row tile x b 2 x 1 kv head per rank = 2 blocks < 256, so the group of
 * 2 query heads splits into d = 2 parts, their partial dK, dV 2 x 4 x 16 x
 * 16 x 2 = 2 x 2048 bytes of scratch; the cast class loses the attention's
 * dO (16 x 32 x 6 = 3072: 21504 - 3072); the layer activations as before
 * minus the chunk scratch (11264) plus the partials' (4096).
 * HPT_CUDA_ATTENTION=flash: neither, and the fp32 CUDA cores' peak. */
static void test_mma_path(void)
{
    hpt_plan_setup s = hand_setup(), sb = s;
    s.attention = 0;
    expect("bf16 default (tensor-core kernels), hd 16: partial dK, dV scratch",
           hpt_plan_attention_scratch_bytes(&s), 4096, 0);
    s.attention = 'm';
    expect("HPT_CUDA_ATTENTION=mma: partial dK, dV scratch", hpt_plan_attention_scratch_bytes(&s),
           4096, 0);
    hpt_plan_setup s1 = s;
    s1.micro_batch = 256; /* 256 blocks without the split: none */
    expect("tensor-core kernels, 256 dK/dV blocks unsplit: no scratch",
           hpt_plan_attention_scratch_bytes(&s1), 0, 0);
    s.attention = 0;
    hpt_plan_result r, rb;
    if (hpt_plan_eval(&s, &r) || hpt_plan_eval(&sb, &rb)) {
        printf("FAIL mma path: hpt_plan_eval: %s\n", hpt_error_msg());
        failures++;
        return;
    }
    expect("tensor-core kernels: stage 0 attention bytes", r.stage[0].kbytes[HPT_PLAN_K_ATTENTION],
           3072 + 15360 + 8192.0, 0);
    expect("tensor-core kernels: stage 0 cast bytes (no dO cast)",
           r.stage[0].kbytes[HPT_PLAN_K_CAST], 21504 - 3072.0, 0);
    expect("tensor-core kernels: stage 0 activations = the cuBLAS path's minus its scratch plus "
           "the partials'", r.stage[0].mem.activations, rb.stage[0].mem.activations - 11264 + 4096,
           0);
    expect("tensor-core kernels: attention peak = the tensor cores'", hpt_plan_attention_peak(&s),
           s.cl.peak_flops, 0);
    s.attention = 'f';
    expect("HPT_CUDA_ATTENTION=flash in bf16: chunk scratch", hpt_plan_attention_scratch_bytes(&s),
           0, 0);
    expect("HPT_CUDA_ATTENTION=flash in bf16: the CUDA cores' fp32 peak",
           hpt_plan_attention_peak(&s), s.cl.peak_fp32, 0);
    /* hd 24 (48-byte bf16 rows): not a tensor-core head dim, the cuBLAS
     * chunks by default */
    hpt_plan_setup s24 = hand_setup();
    s24.attention = 0;
    s24.cfg.hidden_size = 96;
    expect("bf16, hd 24: the cuBLAS chunks' scratch by default",
           hpt_plan_attention_scratch_bytes(&s24) > 0, 1, 0);
}

static void test_memory_bound(void)
{
    hpt_plan_setup s = hand_setup();
    hpt_plan_result r;
    if (hpt_plan_eval(&s, &r)) {
        printf("FAIL memory-bound: hpt_plan_eval: %s\n", hpt_error_msg());
        failures++;
        return;
    }
    /* stage 0 (first): norm 2 x 16 x 64 x (12 + 2) = 28672 forward + 2 x 16
     * x 64 x 24 = 49152 backward; rope 16 x 48 x 2 x 2 = 3072 + 16 x 48 x 2
     * x 4 = 6144; swiglu 3 x 16 x 88 x 2 = 8448 + 16 x 88 x (4 + 8) = 16896
     * (dgate, dup written in bf16); cast 16 x (32 + 2 x 16 + 2 x 64 + 32) x
     * 6 = 21504 (gate and up's gradients need none);
     * attention via cuBLAS (hd 16 x 2 bytes = 32): b H/t s^2/2 = 2 x 2 x 32
     * = 128 scores x (12 + 26) = 4864; embedding 16 x 64 x 20 = 20480.
     * Stage 1 (last): norm + the final norm's backward 16 x 64 x 28 =
     * 28672; cast + the head's 16 x 50 x 6 = 4800; cross-entropy
     * (vocab-parallel, 4 passes) 16 x 50 x 4 x 4 = 12800. */
    const double want[2][HPT_PLAN_KCLASSES] = {
        {28672 + 49152, 3072 + 6144, 8448 + 16896, 21504, 4864, 0, 20480},
        {28672 + 49152 + 28672, 3072 + 6144, 8448 + 16896, 21504 + 4800, 4864, 12800, 0}};
    char what[120];
    for (int st = 0; st < 2; st++)
        for (int k = 0; k < HPT_PLAN_KCLASSES; k++) {
            snprintf(what, sizeof what, "stage %d bytes of %s, bf16", st,
                     hpt_plan_kclass_name((hpt_plan_kclass)k));
            expect(what, r.stage[st].kbytes[k], want[st][k], 0);
        }
    /* optimizer, stage 0: P = 26368 (test_hand_values) x (4 zero_grad + 4
     * norm + 28 AdamW + 6 working copy) */
    expect("stage 0 optimizer bytes, bf16", r.stage[0].optim_bytes, 26368.0 * 42, 0);
    /* roofline: element-wise classes at 3.35e12 x 0.9 B/s, the attention at
     * max(FLOP time, bytes time): its FLOPs 6 s C x s b / t = 24576 at 989e12
     * x 0.6 */
    double rate = 3.35e12 * 0.9, att_s = 24576 / (989e12 * 0.6);
    double elem0 = 77824 + 9216 + 25344 + 21504 + 20480;
    expect("stage 0 memory_s per micro-batch", r.stage[0].memory_s,
           elem0 / rate + fmax(0, 4864 / rate - att_s), 1e-12);
    int w = r.stage[1].compute_s + r.stage[1].memory_s > r.stage[0].compute_s + r.stage[0].memory_s;
    double opt = fmax(r.stage[0].optim_bytes, r.stage[1].optim_bytes) / rate;
    expect("memory_bound_s = m x the slowest stage's + the optimizer's", r.memory_bound_s,
           2 * r.stage[w].memory_s + opt, 1e-12);
    hpt_plan_result r0;
    s.cl.hbm_bw = 1e300; /* free memory traffic: FLOPs only, as before */
    hpt_plan_eval(&s, &r0);
    expect("1 + memory_s with unlimited bandwidth", 1 + r0.stage[0].memory_s, 1, 0);
    failures += !(r.step_time_s > r0.step_time_s);
    printf("%s step time with the memory-bound kernels %.6g s > without %.6g s\n",
           r.step_time_s > r0.step_time_s ? "ok" : "FAIL", r.step_time_s, r0.step_time_s);
    /* tf32: P and dS in fp32 (16 + 36 bytes per score), activations 4 bytes,
     * no casts; fp32: the flash kernels, no score traffic */
    s = hand_setup();
    hpt_plan_set_precision(&s, "tf32", 0);
    hpt_plan_eval(&s, &r);
    expect("stage 0 attention bytes, tf32", r.stage[0].kbytes[HPT_PLAN_K_ATTENTION], 128 * 52.0, 0);
    expect("stage 0 cast bytes, tf32", r.stage[0].kbytes[HPT_PLAN_K_CAST], 0, 0);
    /* norm with a = 4: 2 x 16 x 64 x 16 + 49152 */
    expect("stage 0 norm bytes, tf32", r.stage[0].kbytes[HPT_PLAN_K_NORM], 32768 + 49152.0, 0);
    s = hand_setup();
    hpt_plan_set_precision(&s, "fp32", 0);
    hpt_plan_eval(&s, &r);
    expect("stage 0 attention bytes, fp32 (flash)", r.stage[0].kbytes[HPT_PLAN_K_ATTENTION], 0, 0);
    /* selective recomputation, bf16: the norms alone 2 x 16 x 64 x (4 + 2)
     * = 12288, SwiGLU's forward 8448, the attention's forward 128 x 12 */
    s = hand_setup();
    s.recompute = 2;
    hpt_plan_eval(&s, &r);
    expect("stage 0 norm bytes, selective", r.stage[0].kbytes[HPT_PLAN_K_NORM], 77824 + 12288.0, 0);
    expect("stage 0 swiglu bytes, selective", r.stage[0].kbytes[HPT_PLAN_K_SWIGLU],
           25344 + 8448.0, 0);
    expect("stage 0 attention bytes, selective", r.stage[0].kbytes[HPT_PLAN_K_ATTENTION],
           4864 + 1536.0, 0);
    /* cpu-local: bytes reported, no time added */
    s = hand_setup();
    hpt_cluster_preset("cpu-local", &s.cl);
    hpt_plan_set_precision(&s, NULL, 0);
    s.nodes = 1, s.gpus_per_node = 8;
    if (hpt_plan_eval(&s, &r)) {
        printf("FAIL memory-bound, cpu-local: hpt_plan_eval: %s\n", hpt_error_msg());
        failures++;
        return;
    }
    expect("cpu-local memory_bound_s (covered by the measured efficiency) + 1",
           1 + r.memory_bound_s, 1, 0);
    expect("cpu-local stage 0 swiglu bytes (fp32: 3 x 16 x 88 x 4 + 16 x 88 x 20)",
           r.stage[0].kbytes[HPT_PLAN_K_SWIGLU], 16896 + 28160.0, 0);
}

/* HSDP shard groups --search tries (hpt_plan_hsdp_groups): b = gcd(GPUs
 * per node / TP, DP) and its multiples dividing DP, below DP, above 1; none
 * where a DP group fits in a node; and hpt-train's DP 1 rule for ZeRO 2/3
 * (hpt_plan_zero_dp1). */
static void test_hsdp_groups(void)
{
    static const struct {
        int tp, dp, gpn, n, want[6];
    } k[] = {
        {1, 32, 8, 2, {8, 16}}, /* a node's 8 DP ranks, two nodes' */
        {2, 16, 8, 2, {4, 8}},
        {8, 4, 8, 1, {2}},      /* one DP rank per node: groups of nodes */
        {1, 8, 8, 0, {0}},      /* DP inside one node */
        {2, 4, 8, 0, {0}},
        {1, 12, 8, 1, {4}},     /* 8 does not divide 12: b = 4, half a node */
        {2, 36, 8, 2, {4, 12}}, /* b = 4, 36 / 4 = 9: 4 x 1, 4 x 3 */
        {3, 30, 6, 3, {2, 6, 10}}, /* 6 GPUs per node, 2 DP ranks each */
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        hpt_plan_setup s = hand_setup();
        s.tp = k[i].tp, s.dp = k[i].dp, s.gpus_per_node = k[i].gpn;
        int out[64], n = hpt_plan_hsdp_groups(&s, out, 64);
        char what[96];
        snprintf(what, sizeof what, "HSDP groups, TP %d DP %d, %d per node: count", k[i].tp,
                 k[i].dp, k[i].gpn);
        expect(what, n, k[i].n, 0);
        for (int j = 0; j < n && j < k[i].n; j++) {
            snprintf(what, sizeof what, "HSDP groups, TP %d DP %d: group %d", k[i].tp, k[i].dp, j);
            expect(what, out[j], k[i].want[j], 0);
        }
    }
    hpt_plan_setup s = hand_setup();
    s.dp = 1, s.zero = 3, s.zero_shard = 1;
    expect("--zero 3 on DP 1: changed", hpt_plan_zero_dp1(&s), 1, 0);
    expect("--zero 3 on DP 1: runs as ZeRO 0", s.zero, 0, 0);
    expect("--zero 3 on DP 1: requested", s.zero_requested, 3, 0);
    s = hand_setup();
    s.dp = 1, s.zero = 1;
    expect("--zero 1 on DP 1: kept (as hpt-train)", hpt_plan_zero_dp1(&s) + 10 * s.zero, 10, 0);
    s = hand_setup();
    s.zero = 3; /* DP 2 */
    expect("--zero 3 on DP 2: kept", hpt_plan_zero_dp1(&s) + 10 * s.zero, 30, 0);
}

int main(void)
{
    test_param_count_range();
    test_hand_values();
    test_precision();
    test_fp32_gpu_is_hpt_carving();
    test_alpha_beta();
    test_nccl_model();
    test_megatron_flops();
    test_exact_sizes();
    test_attention_peak();
    test_memory_bound();
    test_mma_path();
    test_hsdp_groups();
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
