/* plan.c — memory, FLOPs, communication and step-time model of a training
 * layout; see plan.h and docs/PLAN.md. */
#include "plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_ring.h"
#include "backend.h"

#define GIB 1073741824.0
/* This machine's memory bandwidth, bytes/s: a STREAM-style copy of 512 MiB
 * arrays measured 25.6 GB/s with one thread (best of 10; 17 GB/s with two,
 * the cores shared with other jobs), 2026-12-07; docs/PLAN.md. */
#define CPU_LOCAL_MEM_BW 25e9

/* ------------------------------------------------------------ clusters */

/* Sources in docs/PLAN.md ("Cluster presets"). Bandwidths are per device
 * and direction: NVLink 3 600 GB/s and NVLink 4 900 GB/s bidirectional;
 * one 200 Gb/s (HDR) or 400 Gb/s (NDR) InfiniBand NIC per GPU. Peaks:
 * dense bf16, tf32 and fp32 (CUDA cores) tensor FLOP/s from the SXM
 * datasheets (A100: 312, 156, 19.5 T; H100 and H200: 989, 494, 67 T).
 * Checkpoint storage per node: Llama 3's 2 TB/s sustained (Tectonic)
 * shared by the 3,072 nodes of its 24K-GPU cluster, ~0.65 GB/s (an
 * assumption; --ckpt-bw). HBM bandwidth from the same datasheets: A100
 * 80GB SXM 2,039 GB/s, H100 SXM 3.35 TB/s, H200 SXM 4.8 TB/s. */
static const hpt_cluster cluster_presets[] = {
    {"a100-80gb", 8, 312e12, 80e9, 300e9, 25e9, 1e-6, 5e-6, 0.6, 2e9, 0, 0, 156e12, 19.5e12,
     0.65e9, 2.039e12},
    {"h100-80gb", 8, 989e12, 80e9, 450e9, 50e9, 1e-6, 5e-6, 0.6, 2e9, 0, 0, 494e12, 67e12,
     0.65e9, 3.35e12},
    {"h200-141gb", 8, 989e12, 141e9, 450e9, 50e9, 1e-6, 5e-6, 0.6, 2e9, 0, 0, 494e12, 67e12,
     0.65e9, 4.8e12},
    /* this machine: 2 cores, OpenBLAS SGEMM peak 233.3 GFLOP/s
     * (docs/PERFORMANCE.md), hpt reaches 82 % of it; 24 GiB; MPI over
     * shared memory (docs/ENVIRONMENT: 1 MB all-reduce in 1.3 ms, a small
     * one in 1.2 us); baseline: measured process RSS outside the tensors;
     * checkpoints: the small model's 231 MiB saved in 0.15-0.19 s; memory
     * bandwidth: CPU_LOCAL_MEM_BW (reported; the efficiency, measured on
     * whole steps, already covers the element-wise work) */
    {"cpu-local", 1, 233.3e9, 24 * GIB, 0.77e9, 0.77e9, 0.6e-6, 0.6e-6, 0.82, 31.4 * 1048576.0, 1,
     1, 0, 0, 1.3e9, CPU_LOCAL_MEM_BW},
};

hpt_status hpt_cluster_preset(const char *name, hpt_cluster *c)
{
    for (size_t i = 0; i < sizeof cluster_presets / sizeof cluster_presets[0]; i++)
        if (!strcmp(cluster_presets[i].name, name)) {
            *c = cluster_presets[i];
            return HPT_OK;
        }
    return hpt_error_set(HPT_ERR_USAGE, "--cluster '%s': unknown preset (presets: a100-80gb, "
                         "h100-80gb, h200-141gb, cpu-local)", name);
}

double hpt_plan_save_seconds(const hpt_plan_setup *s, double *bytes)
{
    *bytes = 12.0 * (double)hpt_config_num_params(&s->cfg);
    return *bytes / (s->nodes * s->cl.ckpt_bw);
}

/* An fp32-only cluster (cpu-local) refuses tf32 and bf16. */
static hpt_status check_precision(const hpt_plan_setup *s)
{
    if (s->cl.fp32_only && (!s->fp32 || s->tf32))
        return hpt_error_set(HPT_ERR_USAGE, "--precision %s: cluster %s trains in fp32 only "
                             "(hpt's CPU backend)", hpt_plan_precision_name(s), s->cl.name);
    return HPT_OK;
}

hpt_status hpt_plan_set_precision(hpt_plan_setup *s, const char *precision, int keep_peak)
{
    if (!precision)
        precision = s->cl.fp32_only ? "fp32" : "bf16";
    if (strcmp(precision, "fp32") && strcmp(precision, "tf32") && strcmp(precision, "bf16"))
        return hpt_error_set(HPT_ERR_USAGE, "--precision '%s': expected fp32, tf32 or bf16",
                             precision);
    s->fp32 = strcmp(precision, "bf16") != 0;
    s->tf32 = !strcmp(precision, "tf32");
    hpt_status st = check_precision(s); /* at once: --search would only see no layout */
    if (st)
        return st;
    double peak = s->tf32 ? s->cl.peak_tf32 : s->fp32 ? s->cl.peak_fp32 : 0;
    if (!keep_peak && peak > 0)
        s->cl.peak_flops = peak;
    return HPT_OK;
}

const char *hpt_plan_precision_name(const hpt_plan_setup *s)
{
    return s->tf32 ? "tf32" : s->fp32 ? "fp32" : "bf16";
}

const char *hpt_plan_group_name(hpt_plan_group g)
{
    static const char *const names[HPT_PLAN_GROUPS] = {"tp", "pp", "dp", "mp", "embed", "cp"};
    return names[g];
}

/* ------------------------------------------------------------ CP view */

/* CP (1 without), and the real DP, sequence length and global batch of a
 * setup in the CP view. */
static int cpn(const hpt_plan_setup *s) { return s->cp > 1 ? s->cp : 1; }
static int real_dp(const hpt_plan_setup *s) { return s->dp / cpn(s); }
static int real_seq(const hpt_plan_setup *s) { return s->seq_len * cpn(s); }
static int real_gb(const hpt_plan_setup *s) { return s->global_batch / cpn(s); }

hpt_status hpt_plan_cp_view(hpt_plan_setup *s, int cp)
{
    if (cp <= 1)
        return HPT_OK;
    hpt_status st = hpt_cp_check(s->seq_len, cp); /* hpt-train's rule and message */
    if (st)
        return st;
    if (s->zero >= 2 || s->zero_shard)
        return hpt_error_set(HPT_ERR_USAGE, "--cp %d with %s: hpt-train refuses it (ZeRO-1 "
                             "shards over the CP x DP replicas; use --zero 1)", cp,
                             s->zero >= 2 ? "--zero 2/3" : "--zero-shard-group");
    s->cp = cp;
    s->dp *= cp;
    s->seq_len /= cp;
    s->global_batch *= cp;
    return HPT_OK;
}

/* The ring's backend memory (lib/attention_ring.c hpt_ring_bytes), n = B
 * x T/CP x KV/TP x hd: two K/V pairs in the activation dtype (4n elements
 * of act_elem_bytes: 4 fp32/tf32, 2 bf16) and 6n floats of dK/dV
 * accumulators, once per rank. */
static double act_elem_bytes(const hpt_plan_setup *s);
static double cp_ring_bytes(const hpt_plan_setup *s)
{
    const hpt_config *c = &s->cfg;
    if (cpn(s) == 1)
        return 0;
    double n = (double)s->micro_batch * s->seq_len * (c->num_key_value_heads / s->tp) *
               hpt_config_head_dim(c);
    return n * (4 * act_elem_bytes(s) + 6 * 4.0);
}

/* ------------------------------------------------------------ checks */

int hpt_plan_zero_dp1(hpt_plan_setup *s)
{
    if (s->zero < 2 || s->dp != 1)
        return 0;
    s->zero_requested = s->zero;
    s->zero = 0;
    s->zero_shard = 0;
    return 1;
}

/* The interleaved schedule's rules (Megatron-LM's, and hpt-train's):
 * a pipeline to interleave, V >= 1 chunks per rank, at least a layer per
 * chunk, and micro-batches in whole groups of PP. */
static hpt_status check_schedule(const hpt_plan_setup *s)
{
    if (s->pp_schedule == HPT_PLAN_SCHEDULE_ZBH1 && s->zero >= 2 && s->dp > 1 && s->pp > 1)
        return hpt_error_set(HPT_ERR_USAGE, "--pp-schedule zb-h1 with --zero %d: not supported "
                             "(hpt-train refuses it: ZeRO-2/3's per-micro-batch reduce-scatters "
                             "would start at the deferred weight-gradient passes); use --zero 1",
                             s->zero);
    if (s->pp_schedule != HPT_PLAN_SCHEDULE_INTERLEAVED)
        return HPT_OK;
    int V = s->pp_virtual, L = s->cfg.num_hidden_layers, p = s->pp;
    if (V < 1)
        return hpt_error_set(HPT_ERR_USAGE, "--pp-virtual %d: must be >= 1 (model chunks per "
                             "pipeline rank)", V);
    if (p < 2)
        return hpt_error_set(HPT_ERR_USAGE, "--pp-schedule interleaved needs --pp > 1 (it "
                             "interleaves model chunks across pipeline stages; --pp %d)", p);
    if ((long)p * V > L)
        return hpt_error_set(HPT_ERR_USAGE, "--pp %d x --pp-virtual %d = %ld model chunks: more "
                             "than the model's %d layers (each chunk needs one)", p, V,
                             (long)p * V, L);
    int m = hpt_plan_micro_batches(s);
    if (m % p == 0)
        return HPT_OK;
    long lo = (long)m / p * p, hi = lo + p, per = (long)s->micro_batch * s->dp;
    if (lo == 0)
        return hpt_error_set(HPT_ERR_USAGE, "--pp-schedule interleaved: %d micro-batches per step "
                             "(--global-batch %d / (--micro-batch %d x --dp %d)) is not a "
                             "multiple of --pp %d; nearest valid: %ld micro-batches "
                             "(--global-batch %ld)", m, s->global_batch, s->micro_batch, s->dp, p,
                             hi, hi * per);
    return hpt_error_set(HPT_ERR_USAGE, "--pp-schedule interleaved: %d micro-batches per step "
                         "(--global-batch %d / (--micro-batch %d x --dp %d)) is not a multiple of "
                         "--pp %d; nearest valid: %ld or %ld micro-batches (--global-batch %ld or "
                         "%ld)", m, s->global_batch, s->micro_batch, s->dp, p, lo, hi, lo * per,
                         hi * per);
}

hpt_status hpt_plan_validate(const hpt_plan_setup *s)
{
    const hpt_config *c = &s->cfg;
    const struct {
        const char *opt;
        int v;
    } pos[] = {{"tp", s->tp},           {"pp", s->pp},
               {"dp", s->dp},           {"seq-len", s->seq_len},
               {"global-batch", s->global_batch}, {"micro-batch", s->micro_batch},
               {"nodes", s->nodes},     {"gpus-per-node", s->gpus_per_node}};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v <= 0)
            return hpt_error_set(HPT_ERR_USAGE, "--%s %d: must be > 0", pos[i].opt, pos[i].v);
    const struct {
        const char *opt;
        double v;
    } posd[] = {{"peak-flops", s->cl.peak_flops}, {"mem-gb", s->cl.mem_bytes},
                {"intra-bw", s->cl.intra_bw},     {"inter-bw", s->cl.inter_bw},
                {"efficiency", s->cl.efficiency}, {"hbm-bw", s->cl.hbm_bw}};
    for (size_t i = 0; i < sizeof posd / sizeof posd[0]; i++)
        if (!(posd[i].v > 0))
            return hpt_error_set(HPT_ERR_USAGE, "--%s %g: must be > 0", posd[i].opt, posd[i].v);
    if (s->cl.intra_lat < 0 || s->cl.inter_lat < 0 || s->data_bytes < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--intra-lat, --inter-lat and --data-bytes must be >= 0");
    if (s->cl.efficiency > 1)
        return hpt_error_set(HPT_ERR_USAGE, "--efficiency %g: a fraction of peak, at most 1",
                             s->cl.efficiency);
    long world = (long)s->tp * s->pp * s->dp, gpus = (long)s->nodes * s->gpus_per_node;
    if (world != gpus)
        return hpt_error_set(HPT_ERR_USAGE,
                             "layout --tp %d x --pp %d x --dp %d = %ld GPUs does not match the "
                             "cluster: --nodes %d x --gpus-per-node %d = %ld GPUs",
                             s->tp, s->pp, s->dp, world, s->nodes, s->gpus_per_node, gpus);
    hpt_status st = hpt_config_check_tp(c, s->tp);
    if (st)
        return st;
    if (s->pp > c->num_hidden_layers || s->pp > HPT_PLAN_MAX_STAGES)
        return hpt_error_set(HPT_ERR_USAGE, "--pp %d: more pipeline stages than the model's %d "
                             "layers", s->pp, c->num_hidden_layers);
    if (s->global_batch % ((long)s->micro_batch * s->dp))
        return hpt_error_set(HPT_ERR_USAGE,
                             "--global-batch %d must be a multiple of --micro-batch %d x --dp %d "
                             "= %ld (each DP rank runs whole micro-batches)",
                             s->global_batch, s->micro_batch, s->dp, (long)s->micro_batch * s->dp);
    if (real_seq(s) > c->max_position_embeddings)
        return hpt_error_set(HPT_ERR_USAGE, "--seq-len %d exceeds the model's "
                             "max_position_embeddings = %d", real_seq(s),
                             c->max_position_embeddings);
    if ((st = check_precision(s)))
        return st;
    if (s->sequence_parallel && s->tp > 1 && ((long)s->micro_batch * s->seq_len) % s->tp) {
        if (cpn(s) > 1) /* the CP view: seq_len is a rank's T/CP tokens */
            return hpt_error_set(HPT_ERR_USAGE, "--sequence-parallel with --cp %d: a rank's "
                                 "micro-batch of --micro-batch %d x --seq-len %d / CP %d = %ld "
                                 "tokens does not split into --tp %d equal parts (hpt-train "
                                 "refuses it; choose them so that TP divides micro-batch x "
                                 "seq-len / CP)", cpn(s), s->micro_batch, real_seq(s), cpn(s),
                                 (long)s->micro_batch * s->seq_len, s->tp);
        return hpt_error_set(HPT_ERR_USAGE, "--sequence-parallel: a micro-batch of --micro-batch "
                             "%d x --seq-len %d = %ld tokens does not split into --tp %d equal "
                             "parts (hpt-train refuses it; choose them so that TP divides "
                             "micro-batch x seq-len)", s->micro_batch, s->seq_len,
                             (long)s->micro_batch * s->seq_len, s->tp);
    }
    return check_schedule(s);
}

/* ------------------------------------------------------------ sizes */

void hpt_plan_stage_layers(int L, int pp, int stage, int *l0, int *l1)
{
    *l0 = (int)((long)stage * L / pp);
    *l1 = (int)((long)(stage + 1) * L / pp);
}

void hpt_plan_chunk_layers(int L, int pp, int V, int stage, int chunk, int *l0, int *l1)
{
    hpt_plan_stage_layers(L, pp * V, chunk * pp + stage, l0, l1);
}

/* Model chunks per pipeline rank: V under the interleaved schedule, else 1. */
static int vchunks(const hpt_plan_setup *s)
{
    return s->pp_schedule == HPT_PLAN_SCHEDULE_INTERLEAVED && s->pp_virtual > 1 ? s->pp_virtual : 1;
}

int hpt_plan_stage_nlayers(const hpt_plan_setup *s, int stage)
{
    int n = 0, V = vchunks(s), l0, l1;
    for (int c = 0; c < V; c++) {
        hpt_plan_chunk_layers(s->cfg.num_hidden_layers, s->pp, V, stage, c, &l0, &l1);
        n += l1 - l0;
    }
    return n;
}

/* Layers of the stage's largest chunk (all its layers without interleaving). */
static int chunk_max_layers(const hpt_plan_setup *s, int stage)
{
    int most = 0, V = vchunks(s), l0, l1;
    for (int c = 0; c < V; c++) {
        hpt_plan_chunk_layers(s->cfg.num_hidden_layers, s->pp, V, stage, c, &l0, &l1);
        most = l1 - l0 > most ? l1 - l0 : most;
    }
    return most;
}

/* Elements of a tensor as allocated: hpt pads each to 16 elements. */
static double tensor_elems(const hpt_plan_setup *s, double n)
{
    return s->cl.exact ? ceil(n / 16.0) * 16.0 : n;
}

static double vocab_local(const hpt_plan_setup *s)
{
    return ceil((double)s->cfg.vocab_size / s->tp);
}

/* The ZeRO shard group's size: HSDP's --zero-shard-group, else DP. */
static int zshard(const hpt_plan_setup *s)
{
    return s->zero && s->zero_shard > 0 && s->zero_shard < s->dp ? s->zero_shard : s->dp;
}

/* The shard group as reported: zshard with ZeRO, 0 without (nothing sharded). */
static int shard_group(const hpt_plan_setup *s) { return s->zero ? zshard(s) : 0; }

double hpt_plan_stage_params(const hpt_plan_setup *s, int stage)
{
    const hpt_config *c = &s->cfg;
    double C = c->hidden_size, hd = hpt_config_head_dim(c), t = s->tp;
    double Hl = c->num_attention_heads / t, KVl = c->num_key_value_heads / t;
    double Il = c->intermediate_size / t, Vl = vocab_local(s);
    double layer = 2 * tensor_elems(s, C) + tensor_elems(s, Hl * hd * C) +
                   2 * tensor_elems(s, KVl * hd * C) + tensor_elems(s, C * Hl * hd) +
                   2 * tensor_elems(s, Il * C) + tensor_elems(s, C * Il);
    int first = stage == 0, last = stage == s->pp - 1;
    double p = hpt_plan_stage_nlayers(s, stage) * layer + (first ? tensor_elems(s, Vl * C) : 0);
    if (last)
        p += tensor_elems(s, C) +
             (!c->tie_word_embeddings || !first ? tensor_elems(s, Vl * C) : 0);
    return p;
}

int hpt_plan_micro_batches(const hpt_plan_setup *s)
{
    return s->global_batch / (s->micro_batch * s->dp);
}

static int micro_batches(const hpt_plan_setup *s) { return hpt_plan_micro_batches(s); }

static const char *const schedule_names[] = {"1f1b", "gpipe", "interleaved", "zb-h1"};

const char *hpt_plan_schedule_str(int schedule)
{
    return schedule >= HPT_PLAN_SCHEDULE_1F1B && schedule <= HPT_PLAN_SCHEDULE_ZBH1
               ? schedule_names[schedule]
               : NULL;
}

hpt_status hpt_plan_schedule_parse(const char *name, int *out)
{
    for (int k = HPT_PLAN_SCHEDULE_1F1B; k <= HPT_PLAN_SCHEDULE_ZBH1; k++)
        if (!strcmp(name, schedule_names[k])) {
            *out = k;
            return HPT_OK;
        }
    return hpt_error_set(HPT_ERR_USAGE, "--pp-schedule '%s': expected 1f1b, gpipe, interleaved or "
                         "zb-h1", name);
}

const char *hpt_plan_schedule_name(const hpt_plan_setup *s)
{
    const char *n = hpt_plan_schedule_str(s->pp_schedule);
    return n ? n : "1f1b";
}

int hpt_plan_in_flight(const hpt_plan_setup *s, int stage)
{
    long m = micro_batches(s), p = s->pp, V = vchunks(s);
    if (s->pp_schedule == HPT_PLAN_SCHEDULE_INTERLEAVED) {
        /* Megatron's warm-up forwards (all of them when m = p) */
        long warm = m == p ? m * V : (p - stage - 1) * 2 + (V - 1) * p;
        return (int)(warm + 1 < m * V ? warm + 1 : m * V);
    }
    long k = s->pp_schedule == HPT_PLAN_SCHEDULE_GPIPE  ? m
             : s->pp_schedule == HPT_PLAN_SCHEDULE_ZBH1 ? p
                                                        : p - stage;
    return (int)(k < m ? k : m);
}

/* Interleaved with m = p micro-batches: Megatron's order (and hpt-train's,
 * lib/train_pipeline.c il_warmup) runs every forward before the first
 * backward. */
static int all_warmup(const hpt_plan_setup *s)
{
    return s->pp_schedule == HPT_PLAN_SCHEDULE_INTERLEAVED && hpt_plan_micro_batches(s) == s->pp;
}

/* Slots of `stage` that hold the head's outputs (the final norm's, the
 * logits): on the last stage each of the k slots, except under the
 * interleaved schedule, where only the last chunk has the head and
 * Megatron's order runs each of its forwards right before that
 * micro-batch's backward (steady state: forward i + W, then backward i,
 * the same micro-batch's last chunk): one of them in flight — m of them
 * when every forward runs first (all_warmup). */
static int head_slots(const hpt_plan_setup *s, int k)
{
    if (s->pp_schedule != HPT_PLAN_SCHEDULE_INTERLEAVED || k <= 1)
        return k;
    return all_warmup(s) ? hpt_plan_micro_batches(s) : 1;
}

double hpt_plan_zb_factor(const hpt_plan_setup *s)
{
    if (s->pp_schedule != HPT_PLAN_SCHEDULE_ZBH1)
        return 1.0;
    const hpt_config *c = &s->cfg;
    double C = c->hidden_size, I = c->intermediate_size, T = s->seq_len;
    double hd = hpt_config_head_dim(c), H = c->num_attention_heads, KV = c->num_key_value_heads;
    double G = 2 * (C * H * hd + 2 * C * KV * hd + H * hd * C + 3 * C * I), A = 2 * T * C;
    double R = s->recompute == 1 ? G + A : s->recompute == 2 ? A : 0; /* per token and layer */
    double F = G + A, B = G + 2 * A + R, W = G;
    return (F + B - W) / (F + B + W);
}

double hpt_plan_bubble(const hpt_plan_setup *s)
{
    /* idle time in micro-batch slots */
    double p = s->pp, idle = (p - 1) / vchunks(s) * hpt_plan_zb_factor(s);
    return idle / (micro_batches(s) + idle);
}

/* ", recomputation", ", selective recomputation" or "" for a layout line. */
static const char *rc_label(int recompute)
{
    return recompute == 1 ? ", recomputation" : recompute == 2 ? ", selective recomputation" : "";
}

/* Sequence parallelism in effect (hpt-train applies it with TP > 1 only). */
static int sp_on(const hpt_plan_setup *s) { return s->sequence_parallel && s->tp > 1; }

/* ", sequence parallel" or "" for a layout line. */
static const char *sp_label(const hpt_plan_setup *s) { return sp_on(s) ? ", sequence parallel" : ""; }

/* The recomputation mode as hpt-train's --recompute names it. */
static const char *rc_mode(int recompute)
{
    return recompute == 1 ? "full" : recompute == 2 ? "selective" : "none";
}

/* ------------------------------------------------------------ activations */

/* hpt's carve(): count elements of 4 bytes rounded up to 64 bytes. */
static double carve(double count)
{
    return ceil(count * 4.0 / 64.0) * 64.0;
}

/* lib/model.c carve_layer: one layer's saved activations, bytes, on the CPU
 * backend, the parts in `which`: 1 the GEMM outputs and the residual (q, k,
 * v, xmid, gate, up: what selective recomputation keeps), 2 the
 * element-wise ones (ln1, rstd1, attention state, atty, ln2, rstd2, h: what
 * it recomputes), 3 both. Its attention (lib/attention_cpu.c) saves the
 * per-row log-sum-exp, B*H*T floats (attention_saved_floats), and its
 * backward scratch is as large: no T^2 term. */
/* Tokens of a micro-batch whose residual stream a rank holds: N/TP under
 * sequence parallelism (lib/model.c set_sp), else N. */
static double local_tokens(const hpt_plan_setup *s)
{
    double N = (double)s->micro_batch * s->seq_len;
    return s->sequence_parallel && s->tp > 1 ? N / s->tp : N;
}

static double exact_layer_bytes(const hpt_plan_setup *s, int which)
{
    const hpt_config *c = &s->cfg;
    double B = s->micro_batch, T = s->seq_len, N = B * T, C = c->hidden_size, Nl = local_tokens(s);
    double hd = hpt_config_head_dim(c), Hl = c->num_attention_heads / s->tp;
    double QD = Hl * hd, KD = c->num_key_value_heads / s->tp * hd, I = c->intermediate_size / s->tp;
    double saved = (double)hpt_backend_cpu.attention_saved_floats((int)B, (int)T, (int)Hl);
    double gemm = carve(N * QD) + 2 * carve(N * KD) + carve(Nl * C) + 2 * carve(N * I);
    double elem = 2 * (carve(N * C) + carve(Nl)) + carve(saved) + carve(N * QD) + carve(N * I);
    return (which & 1 ? gemm : 0) + (which & 2 ? elem : 0);
}

/* Four bytes per element, unrounded (the analytic model's size of an fp32
 * piece; carve is the exact model's). */
static double f32_bytes(double count) { return 4.0 * count; }

/* lib/model.c's fp32 backward scratch of one rank whose stage has nl
 * layers (layout_acts: dx, dtmp N x h; dq, datty N x h/t; dk, dv N x g h/t;
 * dh, dgate, dup N x I/t; the attention's row sums B x H/t x T; under
 * sequence parallelism sp_tmp N_l x h, dfull N x h and the packed
 * norm-weight gradients (2 nl + last) x h), bytes, each piece sized by
 * f32 (carve or f32_bytes). The same on both backends. */
static double backward_scratch(const hpt_plan_setup *s, int nl, int last, double (*f32)(double))
{
    const hpt_config *c = &s->cfg;
    double B = s->micro_batch, T = s->seq_len, N = B * T, C = c->hidden_size, Nl = local_tokens(s);
    double hd = hpt_config_head_dim(c), Hl = c->num_attention_heads / s->tp;
    double QD = Hl * hd, KD = c->num_key_value_heads / s->tp * hd, I = c->intermediate_size / s->tp;
    double scratch = 2 * f32(N * C) + 2 * f32(N * QD) + 2 * f32(N * KD) + 3 * f32(N * I) +
                     f32((double)hpt_backend_cpu.attention_scratch_floats((int)B, (int)T, (int)Hl));
    if (Nl < N) /* sequence parallelism: sp_tmp, dfull, packed norm gradients */
        scratch += f32(Nl * C) + f32(N * C) + f32((2.0 * nl + last) * C);
    return scratch;
}

double hpt_plan_exact_act_bytes(const hpt_plan_setup *s, int stage, int nslots, double *logits)
{
    const hpt_config *c = &s->cfg;
    double N = (double)s->micro_batch * s->seq_len, C = c->hidden_size;
    int last = stage == s->pp - 1, nl = hpt_plan_stage_nlayers(s, stage);
    double layer = exact_layer_bytes(s, 3), lg = carve(last ? N * vocab_local(s) : 1);
    /* per layer and slot: all (none), the input only (full), the GEMM
     * outputs (selective); one shared set of the recomputed ones */
    double Nl = local_tokens(s);
    double kept = s->recompute == 1 ? 0 : s->recompute == 2 ? exact_layer_bytes(s, 1) : layer;
    double shared = s->recompute == 1   ? layer + carve(Nl * C)
                    : s->recompute == 2 ? exact_layer_bytes(s, 2) : 0;
    /* a slot: its chunk's layers (interleaved: counted at the stage's
     * largest chunk), the stage end; the head's part (final norm output,
     * logits) only in head_slots of them, 64 bytes in the others */
    double slot = chunk_max_layers(s, stage) * (kept + carve(Nl * C)) + carve(Nl * C) +
                  carve(Nl) + 3 * carve(N) + carve(2 * N);
    double head = carve(last ? N * C : 1) + lg, nhead = head_slots(s, nslots);
    if (logits)
        *logits = nhead * lg + (nslots - nhead) * carve(1);
    return shared + nslots * slot + nhead * head + (nslots - nhead) * 2 * carve(1) +
           backward_scratch(s, nl, last, carve) + hpt_plan_wstash_bytes(s, stage, 1);
}

static double act_elem_bytes(const hpt_plan_setup *s) { return s->fp32 ? 4.0 : 2.0; }

double hpt_plan_wstash_bytes(const hpt_plan_setup *s, int stage, int exact)
{
    int m = micro_batches(s);
    if (s->pp_schedule != HPT_PLAN_SCHEDULE_ZBH1 || s->pp < 2 || stage == 0)
        return 0;
    const hpt_config *c = &s->cfg;
    double N = (double)s->micro_batch * s->seq_len, C = c->hidden_size, t = s->tp;
    double hd = hpt_config_head_dim(c), QD = c->num_attention_heads / t * hd;
    double KD = c->num_key_value_heads / t * hd, I = c->intermediate_size / t;
    double a = exact ? 4 : act_elem_bytes(s);
#define PIECE(count, bytes) (exact ? carve(count) : (bytes) * (count))
    double per = 2 * PIECE(N * C, 4) + 2 * PIECE(N * I, 4) + PIECE(N * QD, 4) + 2 * PIECE(N * KD, 4);
    if (s->recompute)
        per += 2 * PIECE(N * C, a) + PIECE(N * QD, a) + PIECE(N * I, a);
#undef PIECE
    int sets = stage + 1 < m ? stage + 1 : m;
    return sets * hpt_plan_stage_nlayers(s, stage) * per;
}

/* Korthikanti et al. 2022's per-layer term for the scores: the stored
 * softmax (a bytes per element) or only its row statistics (fp32). */
static double scores_bytes(const hpt_plan_setup *s, double a)
{
    double t = s->tp, b = s->micro_batch, sq = s->seq_len, H = s->cfg.num_attention_heads;
    return s->store_scores ? a * b * (H / t) * sq * sq : 4.0 * b * (H / t) * sq;
}

double hpt_plan_megatron_layer_act_bytes(const hpt_plan_setup *s)
{
    const hpt_config *c = &s->cfg;
    double a = act_elem_bytes(s), t = s->tp, b = s->micro_batch, sq = s->seq_len;
    double h = c->hidden_size, I = c->intermediate_size, H = c->num_attention_heads;
    double g = (double)c->num_key_value_heads / H;
    return a * sq * b * h * (4.0 + (2.0 + 2.0 * g) / t) + a * 3.0 * sq * b * I / t +
           scores_bytes(s, a);
}

/* hpt's CUDA backend (lib/model.c carve_layer; act_elem = 2 in bf16 mode,
 * docs/ARCHITECTURE.md "bf16 activations (stage 2)", 4 in fp32 and tf32
 * modes): one layer's saved bytes for one micro-batch on one TP rank,
 * without the 64-byte rounding of each piece, split as carve_layer splits
 * them; a = act_elem_bytes. *elem: what selective recomputation recomputes —
 * ln1, ln2 (a, N x h), rstd1, rstd2 (fp32, N_l), the attention state (fp32
 * log-sum-exp B x H/t x T, or the stored softmax in a bytes with
 * store_scores), the attention output (a, N x h/t), SwiGLU's h (a, N x
 * I/t); *gemm: what it keeps — q (a, N x h/t), k, v (a, N x g h/t), xmid
 * (fp32, N_l x h), gate, up (a, N x I/t); *x: the layer input (fp32, N_l x
 * h). N_l = N/t under sequence parallelism (local_tokens). */
static void hpt_gpu_layer(const hpt_plan_setup *s, double *elem, double *gemm, double *x)
{
    const hpt_config *c = &s->cfg;
    double a = act_elem_bytes(s), t = s->tp, N = (double)s->micro_batch * s->seq_len;
    double Nl = local_tokens(s), h = c->hidden_size, hd = hpt_config_head_dim(c);
    double QD = c->num_attention_heads / t * hd, KD = c->num_key_value_heads / t * hd;
    double Il = c->intermediate_size / t;
    *elem = a * (2 * N * h) + 2 * (4 * Nl) + scores_bytes(s, a) + a * N * QD + a * N * Il;
    *gemm = a * N * QD + a * (2 * N * KD) + 4 * Nl * h + a * (2 * N * Il);
    *x = 4 * Nl * h;
}

double hpt_plan_layer_act_bytes(const hpt_plan_setup *s)
{
    double elem, gemm, x;
    hpt_gpu_layer(s, &elem, &gemm, &x);
    return elem + gemm + x;
}

static double round256(double bytes) { return ceil(bytes / 256.0) * 256.0; }

/* 1 when the run's attention is the CUDA backend's tensor-core kernels
 * (lib/attention_cuda.cu att_use_mma: bf16 mode, head dims 16, 32, 64, 96,
 * 128; attention_mma.cu): no scores in device memory. */
static int attention_via_mma(const hpt_plan_setup *s)
{
    return !s->fp32 && s->attention != 'b' && s->attention != 'f' &&
           hpt_cuda_mma_head_dim_ok(hpt_config_head_dim(&s->cfg));
}

/* The parts the tensor-core dK/dV kernel splits a GQA group's query heads
 * into for this rank (hpt_cuda_mma_kv_split, the backend's own rule); with
 * more than one, its partial dK, dV are scratch. */
static int mma_kv_split(const hpt_plan_setup *s)
{
    return hpt_cuda_mma_kv_split(s->micro_batch, s->seq_len, s->cfg.num_attention_heads / s->tp,
                                 s->cfg.num_key_value_heads / s->tp);
}

double hpt_plan_attention_scratch_bytes(const hpt_plan_setup *s)
{
    if (s->fp32 && !s->tf32) /* fp32: the flash kernels, no scratch of their own */
        return 0;
    const hpt_config *c = &s->cfg;
    if (attention_via_mma(s)) { /* bf16: the tensor-core kernels' partial dK, dV */
        int ns = mma_kv_split(s);
        double nke = (double)s->micro_batch * s->seq_len * (c->num_key_value_heads / s->tp) *
                     hpt_config_head_dim(c);
        return ns > 1 ? 2 * round256(4 * nke * ns) : 0;
    }
    double B = s->micro_batch, T = s->seq_len, Hl = c->num_attention_heads / s->tp;
    double hd = hpt_config_head_dim(c), Tp = ceil(T / 16.0) * 16.0;
    if (fmod(hd * (s->tf32 ? 4.0 : 2.0), 16.0) != 0 || s->attention == 'f')
        return 0; /* the flash kernels instead (att_use_blas) */
    double per = s->tf32 ? 8.0 : 12.0; /* bytes per score (att_score_bytes) */
    double tc = floor(536870912.0 / (per * B * Hl * Tp));
    tc -= fmod(tc, 16.0);
    if (tc < 128) { /* ATT_MIN_ROWS while they fit ATT_MIN_ROWS_BYTES (4 x 512 MiB) */
        double most = floor(4.0 * 536870912.0 / (per * B * Hl * Tp));
        tc = fmin(128.0, most - fmod(most, 16.0));
    }
    tc = fmin(T, fmax(16.0, tc));
    double n = B * Hl * tc * Tp, nq = B * T * Hl * hd;
    int gqa = c->num_key_value_heads < c->num_attention_heads;
    /* S, dP fp32; bf16 only: P, dS and dO in bf16 (tf32 writes P and dS
     * over S and dP and reads dO as it is); GQA: dK, dV per query head */
    double bf = s->tf32 ? 0 : round256(2 * n) * 2 + round256(2 * nq);
    return round256(4 * n) * 2 + bf + (gqa ? 2 * round256(4 * nq) : 0);
}

/* Persistent bf16 operand scratch of hpt's CUDA backend in bf16 mode
 * (lib/backend_cuda.cu bf16_scratch(0): matmul_backward rounds the fp32
 * output gradient (N, O) to bf16 there), bytes: 2 * max(4096, N * O) for
 * the widest O a stage's products round (h, H/t*hd; the LM head's
 * vocabulary shard on the last stage; not I/t: gate's and up's gradients
 * come in bf16, matmul_backward_act). */
static double bf16_operand_scratch(const hpt_plan_setup *s, int last)
{
    if (s->fp32) /* fp32 and tf32 modes: every operand is fp32 */
        return 0;
    const hpt_config *c = &s->cfg;
    double N = (double)s->micro_batch * s->seq_len, t = s->tp;
    /* gate's and up's gradients come in bf16 (matmul_backward_act): not I/t */
    double O = fmax(c->hidden_size, c->num_attention_heads / t * hpt_config_head_dim(c));
    if (last)
        O = fmax(O, vocab_local(s));
    return 2.0 * fmax(4096.0, N * O);
}

/* ------------------------------------------------------------ memory */

/* Analytic (GPU) activations of one rank of `stage` holding k micro-batches:
 * hpt's CUDA allocations (lib/model.c layout_acts, act_elem 2 in bf16 mode
 * and 4 in fp32 and tf32 modes, without the 64-byte rounding): per layer
 * and slot hpt_gpu_layer's pieces (all; x + the GEMM outputs with selective
 * recomputation; x only with full), one shared set (full: a whole layer +
 * recompute_out, N_l x h fp32; selective: the recomputed pieces), per slot
 * the stage end (x_final N_l x h fp32, lnf N x h in the activation dtype on
 * the last stage, rstdf N_l, tokens, targets, ce_mx N and ce_sum + ce_tgt
 * 2N, fp32), the fp32 backward scratch (dx, dtmp N x h; dq, datty N x h/t;
 * dk, dv N x g h/t; dh, dgate, dup N x I/t; dscores B x H/t x T; under
 * sequence parallelism sp_tmp N_l x h, dfull N x h and the packed
 * norm-weight gradients (2 layers + last) x h), the bf16 and tf32
 * attention's chunk scratch (hpt_plan_attention_scratch_bytes) and in bf16
 * the operand scratch (bf16_operand_scratch). */
static double analytic_acts(const hpt_plan_setup *s, int stage, int k)
{
    const hpt_config *c = &s->cfg;
    double a = act_elem_bytes(s), N = (double)s->micro_batch * s->seq_len, h = c->hidden_size;
    int last = stage == s->pp - 1, nl = hpt_plan_stage_nlayers(s, stage);
    double Nl = local_tokens(s);
    double elem, gemm, x; /* layer = elem + gemm + x; selective recomputes elem */
    hpt_gpu_layer(s, &elem, &gemm, &x);
    double layer = elem + gemm + x;
    double per_layer = s->recompute == 1 ? x : s->recompute == 2 ? gemm + x : layer;
    double shared = s->recompute == 1 ? layer : s->recompute == 2 ? elem : 0;
    /* k slots of a chunk's layers (interleaved: the stage's largest) and
     * the stage end; lnf only in the slots that hold the head */
    double end = 4 * Nl * h + 4 * Nl + 4 * 5 * N, head = last ? a * N * h : 0;
    return k * (chunk_max_layers(s, stage) * per_layer + end) + head_slots(s, k) * head + shared +
           backward_scratch(s, nl, last, f32_bytes) + hpt_plan_attention_scratch_bytes(s) +
           bf16_operand_scratch(s, last) + hpt_plan_wstash_bytes(s, stage, 0);
}

/* ZeRO-1 shard of DP rank d: contiguous blocks of ceil(P/DP) elements
 * (lib/train.c setup_zero), the same for ZeRO-1 and ZeRO-2. */
/* DP gradient buckets of a stage: the head, each layer, the embedding. */
static double dp_buckets(int nl, int first, int last) { return nl + first + last; }

/* ZeRO-2/3 buckets reduce-scattered only once a step, after the sum over
 * another group (lib/train_dp_buckets.c needs_later_sum): under sequence
 * parallelism every layer's and the head's (replicated norm weights); with
 * a tied embedding split over two stages the embedding's and the last
 * stage's head (its copy). Returns their elements; *n their count. The
 * others are reduce-scattered in every micro-batch's backward. P: the
 * stage's parameters; nl layers. */
static double zero2_deferred(const hpt_plan_setup *s, double P, int nl, int first, int last,
                             double *n)
{
    double C = s->cfg.hidden_size, Pm = tensor_elems(s, vocab_local(s) * C);
    int tied_pp = s->pp > 1 && s->cfg.tie_word_embeddings;
    double Pemb = first ? Pm : 0;
    double Phead = last ? tensor_elems(s, C) + (!s->cfg.tie_word_embeddings || tied_pp ? Pm : 0) : 0;
    double d = 0;
    *n = 0;
    if (first && tied_pp)
        d += Pemb, ++*n;
    if (last && (sp_on(s) || tied_pp))
        d += Phead, ++*n;
    if (sp_on(s) && nl > 0)
        d += P - Pemb - Phead, *n += nl;
    return d;
}

/* "1F1B", "GPipe" or "interleaved 1F1B, V = 2": s's schedule in words. */
static const char *sched_title(const hpt_plan_setup *s)
{
    static char buf[48];
    if (s->pp_schedule != HPT_PLAN_SCHEDULE_INTERLEAVED)
        return s->pp_schedule == HPT_PLAN_SCHEDULE_GPIPE  ? "GPipe"
               : s->pp_schedule == HPT_PLAN_SCHEDULE_ZBH1 ? "ZB-H1"
                                                          : "1F1B";
    snprintf(buf, sizeof buf, "interleaved 1F1B, V = %d", vchunks(s));
    return buf;
}

/* ", GPipe" or ", interleaved 1F1B, V = 2" for a layout line; "" for 1F1B
 * and without a pipeline. */
static const char *sched_label(const hpt_plan_setup *s)
{
    static char buf[56];
    if (s->pp == 1 || s->pp_schedule == HPT_PLAN_SCHEDULE_1F1B)
        return "";
    snprintf(buf, sizeof buf, ", %s", sched_title(s));
    return buf;
}

/* ", ZeRO-1" / ", ZeRO-2" / ", ZeRO-3" for stage z, "" for 0 (the text reports). */
static const char *zero_label(int z)
{
    return z == 3 ? ", ZeRO-3" : z == 2 ? ", ZeRO-2" : z ? ", ZeRO-1" : "";
}

/* ", HSDP 2 shard groups of 4" (text reports); "" without HSDP. */
static const char *hsdp_label(const hpt_plan_setup *s)
{
    static char buf[64];
    if (zshard(s) == s->dp)
        return "";
    snprintf(buf, sizeof buf, ", HSDP %d shard groups of %d", s->dp / zshard(s), zshard(s));
    return buf;
}

/* ZeRO-3 (lib/train_zero3.c): the most parameter elements of `stage` held
 * at once besides the own block — the gathered units (embedding, each
 * layer, final norm + head, as lib/model.c hpt_model_param_units) in use or
 * prefetched: a window of prefetch + 2 consecutive units (a layer's
 * forward also needs the next unit for its norm weight, and that need
 * prefetches the units after it before the layer's own unit is dropped),
 * and on one stage with tied embeddings the head with the embedding —
 * outside the own block of shard rank d (elements [d S, (d + 1) S) of the
 * stage's block, S = ceil(P / N), N the shard group; the units lie in the
 * block in that order): what the rank holds (rank 0's own block is the
 * embedding and the first layers, so its largest window outside it is at
 * the end) — the GPU's figure, the bytes its device block backs; d < 0:
 * the window's share 1 - 1/N outside, an average over the ranks — the
 * CPU's figure, whose peak RSS comes while the window is smaller (measured
 * within 10 %, tests/plan/plan-measured.sh, where the rank's figure is up to
 * 9.5 % high under HSDP). hpt-train's default prefetch, 1. */
static double zero3_gathered(const hpt_plan_setup *s, int stage, int d)
{
    const hpt_config *c = &s->cfg;
    double C = c->hidden_size, Vl = vocab_local(s);
    int first = stage == 0, last = stage == s->pp - 1, prefetch = 1;
    int nl = hpt_plan_stage_nlayers(s, stage), tied1 = c->tie_word_embeddings && first && last;
    double layer = (hpt_plan_stage_params(s, stage) - (first ? tensor_elems(s, Vl * C) : 0) -
                    (last ? tensor_elems(s, C) + (tied1 ? 0 : tensor_elems(s, Vl * C)) : 0)) /
                   (nl > 0 ? nl : 1);
    double unit[nl + 2];
    int n = 0;
    unit[0] = 0; /* (written below whenever read: first) */
    if (first)
        unit[n++] = tensor_elems(s, Vl * C);
    for (int i = 0; i < nl; i++)
        unit[n++] = layer;
    if (last)
        unit[n++] = tensor_elems(s, C) + (tied1 ? 0 : tensor_elems(s, Vl * C));
    double at[nl + 3], P = hpt_plan_stage_params(s, stage), S = ceil(P / zshard(s));
    double lo = d < 0 ? 0 : fmin(d * S, P), hi = d < 0 ? 0 : fmin(lo + S, P);
    at[0] = 0;
    for (int i = 0; i < n; i++) /* unit i: elements [at[i], at[i + 1]) */
        at[i + 1] = at[i] + unit[i];
    double out[nl + 2]; /* each unit's elements outside the own block */
    out[0] = 0;         /* (as unit[0]) */
    for (int i = 0; i < n; i++)
        out[i] = unit[i] - fmax(0, fmin(at[i + 1], hi) - fmax(at[i], lo));
    int w = prefetch + 2;
    double most = tied1 ? out[n - 1] + out[0] : 0;
    for (int i = 0; i < n; i++) {
        double sum = 0;
        for (int j = i; j < n && j < i + w; j++)
            sum += out[j];
        most = fmax(most, sum);
    }
    return d < 0 ? most * (1.0 - 1.0 / zshard(s)) : most;
}

/* Bytes a ZeRO-3 rank's device parameter block holds beyond its own block
 * and gathered window: both are backed in whole granules (2 MiB, the
 * minimum allocation granularity of current GPUs), half a granule more on
 * average at each of the two ranges' ends (lib/backend_cuda.cu). */
#define GPU_GRANULES (4 * 0.5 * 2097152.0)

static double shard_of(double P, int dp, int d)
{
    double S = ceil(P / dp), lo = fmin(d * S, P);
    return fmin(S, P - lo);
}

/* Activation slots hpt-train allocates on `stage` (lib/train_pipeline.c
 * pipeline_slots): the chunk forwards in flight, and one more on the last
 * stage under the interleaved schedule (V > 1), whose pool keeps the head
 * chunk's slot apart: there the warm-up forwards, all of earlier chunks,
 * reach the in-flight count without it — except when every forward runs
 * first (m = p), where the head's m slots are part of the m V. Checked
 * against hpt-train's simulation for p <= 16, V 2-5, m p..8p. */
static int alloc_slots(const hpt_plan_setup *s, int stage)
{
    int k = hpt_plan_in_flight(s, stage);
    return s->pp_schedule == HPT_PLAN_SCHEDULE_INTERLEAVED && vchunks(s) > 1 &&
                   stage == s->pp - 1 && !all_warmup(s)
               ? k + 1
               : k;
}

static hpt_plan_mem mem_of(const hpt_plan_setup *s, int stage, int d)
{
    hpt_plan_mem m = {0};
    int M = micro_batches(s), k = alloc_slots(s, stage);
    double P = hpt_plan_stage_params(s, stage), N = (double)s->micro_batch * s->seq_len;
    double C = s->cfg.hidden_size, lg = 0;
    if (s->cl.exact) { /* hpt's fp32 allocations, lib/model.c + optim.c + train.c */
        double own = s->zero ? shard_of(P, zshard(s), d % zshard(s)) : P;
        /* ZeRO-3: the own block and the gathered units; the other pages go
         * back to the OS once a unit is used (lib/train_zero3.c) */
        m.weights = s->zero == 3 && s->dp > 1
                        ? 4 * fmin(P, own + zero3_gathered(s, stage, -1))
                        : 4 * P;
        m.grads = 4 * P;
        if (s->zero >= 2 && s->dp > 1) {
            /* ZeRO-2/3: a bucket's pages go back to the OS once
             * reduce-scattered (lib/train_dp_buckets.c), at most two in
             * flight and one being written: 3 buckets resident — in every
             * micro-batch, the deferred ranges excepted (they accumulate
             * in place); with accumulation a receive buffer of one shard */
            int nl = hpt_plan_stage_nlayers(s, stage), first = stage == 0, last = stage == s->pp - 1;
            double nd, Pd = zero2_deferred(s, P, nl, first, last, &nd);
            double nb = dp_buckets(nl, first, last);
            double live = M == 1 ? P * fmin(1, 3 / nb)
                                 : Pd + (nb > nd ? (P - Pd) * fmin(1, 3 / (nb - nd)) : 0);
            m.grads = 4 * fmin(P, live) + (M > 1 ? 4 * shard_of(P, zshard(s), 0) : 0);
        }
        m.optimizer = 8 * own;
        double act = hpt_plan_exact_act_bytes(s, stage, k, &lg);
        m.logits = lg;
        /* + host input/target batch (whole sequences under CP) and the
         * CP ring's buffers */
        m.activations = act - lg + 2 * 4 * N * cpn(s) + cp_ring_bytes(s);
        /* ZeRO-1/2 receive shard; PP gradient send slots; MPICH's
         * temporaries: the pairwise-exchange reduce-scatter copies the own
         * shard (ZeRO-2's bucket reduce-scatters together: taken as the
         * same), and the in-flight nonblocking bucket all-reduces hold
         * copies of about half the gradient block at their peak (measured,
         * docs/PLAN.md). hpt keeps the full fp32 gradient block with ZeRO-2
         * too (backward writes into it; docs/ARCHITECTURE.md) */
        m.comm_buffers = (s->zero ? 4 * fmax(ceil(P / zshard(s)), 1) : 0) +
                         (s->pp > 1 ? 4 * local_tokens(s) * C * k : 0);
        /* ZeRO-3 measured about one own block below that (small, DP 4,
         * docs/PLAN.md): the temporary goes with the whole-block
         * all-gather ZeRO-1/2 run after the step, which ZeRO-3 has not,
         * and which a shard group of one rank runs as a local no-op. HSDP:
         * the blocking all-reduce of the own shard across the replicas
         * holds about half a shard, as the buckets' — in the memory the
         * all-gather's temporary left, where there is one (measured at
         * shard groups of 1 and 2, docs/PLAN.md) */
        if (s->dp > 1 && !s->zero)
            m.comm_buffers += 0.5 * 4 * P;
        if (s->dp > 1 && s->zero)
            m.comm_buffers += fmax(s->zero < 3 && zshard(s) > 1 ? 4 * own : 0,
                                   zshard(s) < s->dp ? 0.5 * 4 * own : 0);
        m.baseline = s->cl.baseline_bytes + s->data_bytes;
    } else {
        /* hpt's CUDA backend: the fp32 weights (the master copy the
         * optimizer updates, on every DP rank also with ZeRO-1: lib/train.c
         * shards only the moments) and in bf16 mode their bf16 working copy
         * (lib/backend_cuda.cu weight_bf16), 4 (+ 2); fp32 gradients 4; AdamW
         * m and v 8, over DP with ZeRO-1 (lib/optim.c), plus then the fp32
         * reduce-scatter target of the own gradient shard (lib/train.c
         * setup_zero): 16 (fp32, tf32) or 18 (bf16) bytes per parameter
         * without ZeRO; ZeRO-2 as ZeRO-1 (the full gradient block stays),
         * with gradient accumulation + the shard-sized receive buffer of
         * the micro-batches' reduce-scatters (lib/train_dp_buckets.c);
         * ZeRO-3: the fp32 block backed only for the own block and the
         * gathered window (lib/train_zero3.h; CUDA virtual memory
         * management, lib/backend_cuda.cu), in whole granules of 2 MiB —
         * on average half a granule more at each end of the two ranges,
         * GPU_GRANULES — while the bf16 working copy stays whole */
        double own = s->zero ? ceil(P / zshard(s)) : P;
        double w32 = 4 * P;
        if (s->zero == 3 && s->dp > 1)
            w32 = fmin(w32, 4 * fmin(P, own + zero3_gathered(s, stage, d % zshard(s))) +
                                 GPU_GRANULES);
        m.weights = w32 + (s->fp32 ? 0 : 2) * P;
        m.grads = 4 * P;
        m.optimizer = 8 * own;
        m.logits = stage == s->pp - 1 ? 4 * N * vocab_local(s) : 0;
        m.activations = analytic_acts(s, stage, k) + cp_ring_bytes(s);
        /* PP: the fp32 gradient send slots, one per micro-batch in flight
         * (lib/train_pipeline.c setup_pipeline; the output is sent from the
         * slot's x_final, counted in the activations) */
        m.comm_buffers = (s->pp > 1 ? 4 * local_tokens(s) * C * k : 0) + (s->zero ? 4 * own : 0) +
                         (s->zero >= 2 && s->dp > 1 && M > 1 ? 4 * own : 0);
        m.baseline = s->cl.baseline_bytes + s->data_bytes;
    }
    /* --async-save (lib/checkpoint.c): each rank stages the fp32 weights and
     * both moments of the slabs it writes or checksums — its (stage, TP)
     * share once without DP, about 2/DP of it with DP > 1; a tied
     * embedding's copy on the last stage is not written */
    if (s->async_save) {
        int dup = s->cfg.tie_word_embeddings && s->pp > 1 && stage == s->pp - 1;
        m.staging = 12.0 * (P - (dup ? vocab_local(s) * C : 0)) * fmin(1.0, 2.0 / s->dp);
    }
    m.total = m.weights + m.grads + m.optimizer + m.activations + m.logits + m.comm_buffers +
              m.baseline + (s->cl.exact ? m.staging : 0);
    if (s->cl.exact) { /* initialisation: a host copy of the parameters, before optimizer state */
        double init = 2 * m.weights + m.grads + m.activations + m.logits + m.baseline;
        m.total = fmax(m.total, init);
    }
    return m;
}

hpt_plan_mem hpt_plan_rank_mem(const hpt_plan_setup *s, int rank)
{
    int d = (rank / s->tp) % s->dp, stage = rank / (s->tp * s->dp);
    return mem_of(s, stage, d);
}

/* ------------------------------------------------------------ communication */

double hpt_plan_coll_factor(hpt_coll op, int n)
{
    if (n <= 1)
        return 0;
    switch (op) {
    case HPT_COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
    case HPT_COLL_REDUCE_SCATTER: case HPT_COLL_ALLGATHER: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

double hpt_plan_coll_seconds(hpt_coll op, int n, double bytes, double bw, double lat)
{
    if (n <= 1)
        return 0;
    double steps = op == HPT_COLL_ALLREDUCE ? 2.0 * (n - 1) : op == HPT_COLL_P2P ? 1.0 : n - 1.0;
    return hpt_plan_coll_factor(op, n) * bytes / bw + steps * lat;
}

/* Does a group of n ranks `stride` apart (grid order tp + dp*TP + pp*TP*DP,
 * nodes of consecutive ranks) span nodes? */
static int spans_nodes(const hpt_plan_setup *s, int n, long stride)
{
    int g = s->gpus_per_node;
    if (n <= 1 || stride <= 0)
        return 0;
    if ((long)(n - 1) * stride >= g)
        return 1;
    return stride * n <= g && g % (stride * n) != 0; /* a group straddling a node boundary */
}

static int group_inter(const hpt_plan_setup *s, hpt_plan_group g)
{
    long TP = s->tp, DP = s->dp;
    switch (g) {
    case HPT_PLAN_TP: return spans_nodes(s, s->tp, 1);
    case HPT_PLAN_DP: return spans_nodes(s, s->dp, TP);
    case HPT_PLAN_PP: return spans_nodes(s, s->pp, TP * DP);
    case HPT_PLAN_EMBED: return s->pp > 1 && spans_nodes(s, 2, TP * DP * (s->pp - 1));
    case HPT_PLAN_CP: return spans_nodes(s, cpn(s), TP);
    default: return spans_nodes(s, s->tp, 1) || spans_nodes(s, s->pp, TP * DP);
    }
}

static double ring_seconds(hpt_coll op, int n, int nodes, double bytes, double bw, double li,
                           double le)
{
    double steps = op == HPT_COLL_ALLREDUCE ? 2.0 * (n - 1) : op == HPT_COLL_P2P ? 1.0 : n - 1.0;
    double inter = op == HPT_COLL_ALLREDUCE ? 2.0 * (nodes - 1)
                   : op == HPT_COLL_P2P     ? (nodes > 1)
                                            : nodes - 1.0;
    return hpt_plan_coll_factor(op, n) * bytes / bw + (steps - inter) * li + inter * le;
}

static double tree_seconds(int n, int nodes, double bytes, double bw, double li, double le)
{
    int depth = 0; /* floor(log2 nodes), NCCL's log2i */
    for (int k = nodes; k > 1; k >>= 1)
        depth++;
    return 2.0 * bytes / bw + 2.0 * ((double)(n / nodes - 1) * li + depth * le);
}

double hpt_plan_nccl_seconds(hpt_coll op, hpt_nccl_algo algo, int n, int nodes, double bytes,
                             double busbw, double lat_intra, double lat_inter, double *factor)
{
    if (n <= 1) {
        if (factor)
            *factor = 0;
        return 0;
    }
    nodes = nodes < 1 ? 1 : nodes > n ? n : nodes;
    double ring = ring_seconds(op, n, nodes, bytes, busbw, lat_intra, lat_inter);
    if (op != HPT_COLL_ALLREDUCE || algo == HPT_NCCL_RING) {
        if (factor)
            *factor = hpt_plan_coll_factor(op, n);
        return ring;
    }
    double tree = tree_seconds(n, nodes, bytes, busbw, lat_intra, lat_inter);
    int use_tree = algo == HPT_NCCL_TREE || tree < ring;
    if (factor)
        *factor = use_tree ? 2.0 : hpt_plan_coll_factor(op, n);
    return use_tree ? tree : ring;
}

/* Nodes spanned by ranks b, b + stride, ..., b + (n-1)*stride. */
static int span_nodes(long b, int n, long stride, int g)
{
    if (n <= 1)
        return 1;
    if (stride >= g) /* every member on a node of its own */
        return n;
    return (int)((b % g + (long)(n - 1) * stride) / g + 1);
}

/* Worst span over the groups' first ranks b = i*step + j*step2
 * (i < count, j < count2); residues mod g repeat after g values of each. */
static int worst_span(const hpt_plan_setup *s, int n, long stride, long step, long count,
                      long step2, long count2)
{
    int g = s->gpus_per_node, worst = 1;
    for (long i = 0; i < count && i < g; i++)
        for (long j = 0; j < count2 && j < g; j++) {
            int k = span_nodes(i * step + j * step2, n, stride, g);
            worst = k > worst ? k : worst;
        }
    return worst;
}

int hpt_plan_group_nodes(const hpt_plan_setup *s, hpt_plan_group g)
{
    long TP = s->tp, DP = s->dp, PP = s->pp;
    switch (g) {
    case HPT_PLAN_TP: return worst_span(s, s->tp, 1, TP, DP * PP, 1, 1);
    case HPT_PLAN_DP: return worst_span(s, s->dp, TP, 1, TP, TP * DP, PP);
    case HPT_PLAN_PP: return worst_span(s, s->pp, TP * DP, 1, TP * DP, 1, 1);
    case HPT_PLAN_EMBED:
        return s->pp > 1 ? worst_span(s, 2, TP * DP * (PP - 1), 1, TP * DP, 1, 1) : 1;
    case HPT_PLAN_CP: return worst_span(s, cpn(s), TP, 1, TP, TP * cpn(s), DP / cpn(s) * PP);
    default: {
        long k = (long)hpt_plan_group_nodes(s, HPT_PLAN_TP) * hpt_plan_group_nodes(s, HPT_PLAN_PP);
        return (int)(k < TP * PP ? k : TP * PP);
    }
    }
}

/* Accumulate `calls` operations of `bytes` payload each over n ranks
 * whose group spans `nodes` nodes (inter: it crosses a node boundary). */
static void add_op_on(hpt_plan_comm *pc, const hpt_plan_setup *s, int inter, int nodes,
                      hpt_coll op, int n, double calls, double bytes, double counted)
{
    double factor = hpt_plan_coll_factor(op, n), t;
    if (s->comm_lib == HPT_PLAN_COMM_NCCL) {
        double bw = nodes > 1 ? s->cl.inter_bw : s->cl.intra_bw;
        t = hpt_plan_nccl_seconds(op, (hpt_nccl_algo)s->nccl_algo, n, nodes, bytes, bw,
                                  s->cl.intra_lat, s->cl.inter_lat, &factor);
    } else {
        double bw = inter ? s->cl.inter_bw : s->cl.intra_bw;
        t = hpt_plan_coll_seconds(op, n, bytes, bw, inter ? s->cl.inter_lat : s->cl.intra_lat);
    }
    pc->calls += calls;
    pc->bytes += calls * counted;
    pc->wire_bytes += calls * factor * bytes;
    pc->seconds += calls * t;
}

/* add_op_on over group g's span. */
static void add_op(hpt_plan_comm *pc, const hpt_plan_setup *s, hpt_plan_group g, hpt_coll op,
                   int n, double calls, double bytes, double counted)
{
    int inter = group_inter(s, g);
    int nodes = op == HPT_COLL_P2P ? 1 + inter : hpt_plan_group_nodes(s, g);
    add_op_on(pc, s, inter, nodes, op, n, calls, bytes, counted);
}

/* HSDP (lib/train.c grad_norm): the all-reduce of a DP rank's reduced
 * gradient shard, own elements in fp32, across the DP/N replicas of its
 * shard group (N = zshard, ranks N x TP apart), once per step; nothing
 * without HSDP. */
static void add_hsdp_allreduce(hpt_plan_comm *pc, const hpt_plan_setup *s, double own)
{
    int N = zshard(s), R = s->dp / N;
    long TP = s->tp;
    if (R > 1)
        add_op_on(pc, s, spans_nodes(s, R, TP * N),
                  worst_span(s, R, TP * N, 1, TP * N, TP * s->dp, s->pp), HPT_COLL_ALLREDUCE, R,
                  1, 4 * own, 4 * own);
}

/* add_hsdp_allreduce's share of DP rank 0's communication on `stage`. */
static hpt_plan_comm hsdp_allreduce(const hpt_plan_setup *s, int stage)
{
    hpt_plan_comm pc = {0};
    if (s->zero)
        add_hsdp_allreduce(&pc, s, shard_of(hpt_plan_stage_params(s, stage), zshard(s), 0));
    return pc;
}

static hpt_plan_comm comm_of(const hpt_plan_setup *s, int stage, int d, hpt_plan_group g)
{
    hpt_plan_comm pc = {0};
    const hpt_config *c = &s->cfg;
    int M = micro_batches(s), first = stage == 0, last = stage == s->pp - 1;
    int nl = hpt_plan_stage_nlayers(s, stage);
    /* bytes per element of what travels: the residual stream, partial sums
     * and gradients (r; hpt keeps them fp32 in bf16 mode too, docs/
     * ARCHITECTURE.md "bf16 activations (stage 2)"), the norm outputs that
     * sequence parallelism all-gathers in forward (a: the activation dtype),
     * weight gradients (gb) and the weights ZeRO-1 all-gathers (wb: hpt's
     * fp32 weights) */
    double a = s->cl.exact ? 4 : act_elem_bytes(s), r = 4, gb = 4, wb = 4;
    double N = (double)s->micro_batch * s->seq_len, NC = N * c->hidden_size;
    double P = hpt_plan_stage_params(s, stage);
    switch (g) {
    case HPT_PLAN_TP: /* Megatron f/g all-reduces; vocab-parallel embedding, head, loss */
        if (s->tp == 1)
            break;
        if (s->sequence_parallel) { /* lib/model.c: sp_gather, sp_gather_grad, tp_reduce */
            double rs = 4 + 2 * (s->recompute == 1), ag = rs + 2 * (s->recompute == 2);
            add_op(&pc, s, g, HPT_COLL_REDUCE_SCATTER, s->tp, (double)M * (first + rs * nl + last),
                   NC * r, NC * r);
            if (a == r) {
                add_op(&pc, s, g, HPT_COLL_ALLGATHER, s->tp, (double)M * (first + ag * nl + last),
                       NC * a, NC * a / s->tp);
            } else { /* forward (sp_gather: ln1, ln2, again when recomputed; lnf) in the
                      * activation dtype, backward (sp_gather_grad) in fp32 */
                add_op(&pc, s, g, HPT_COLL_ALLGATHER, s->tp, (double)M * ((ag - 2) * nl + last),
                       NC * a, NC * a / s->tp);
                add_op(&pc, s, g, HPT_COLL_ALLGATHER, s->tp, (double)M * (2 * nl + first),
                       NC * r, NC * r / s->tp);
            }
            add_op(&pc, s, g, HPT_COLL_ALLREDUCE, s->tp, 1, gb * (2.0 * nl + last) * c->hidden_size,
                   gb * (2.0 * nl + last) * c->hidden_size); /* norm weight gradients */
        } else
            add_op(&pc, s, g, HPT_COLL_ALLREDUCE, s->tp,
                   (double)M * (first + (4 + 2 * (s->recompute == 1)) * nl + last), NC * r, NC * r);
        if (last) { /* cross-entropy: row max (N), then sum-exp and target logit (2N) */
            add_op(&pc, s, g, HPT_COLL_ALLREDUCE, s->tp, M, 4 * N, 4 * N);
            add_op(&pc, s, g, HPT_COLL_ALLREDUCE, s->tp, M, 8 * N, 8 * N);
        }
        break;
    case HPT_PLAN_PP: { /* sends counted with their payload, receives as calls */
        if (s->pp == 1)
            break;
        /* sends per micro-batch: each chunk's output forward unless it is
         * the last virtual stage, its input gradient back unless it is
         * the first (V chunks: 2V - first - last; 1F1B/GPipe V = 1) */
        int ends = 2 * vchunks(s) - first - last;
        double sh = s->sequence_parallel && s->tp > 1 ? NC / s->tp : NC; /* the local shard */
        add_op(&pc, s, g, HPT_COLL_P2P, 2, (double)M * ends, sh * r, sh * r);
        pc.calls += (double)M * ends; /* the matching receives */
        add_op(&pc, s, g, HPT_COLL_ALLREDUCE, s->pp, 1, 8, 8); /* loss (f64) */
        break;
    }
    case HPT_PLAN_DP:
        if (s->dp == 1)
            break;
        if (s->zero) { /* ZeRO-2 and 3: one reduce-scatter per bucket */
            /* over the shard group (N ranks, stride TP: all of DP unless
             * HSDP); HSDP adds the all-reduce of the own shard over the
             * DP/N replicas (stride N x TP) */
            int N = zshard(s), R = s->dp / N;
            long TP = s->tp;
            int zi = spans_nodes(s, N, TP), zn = worst_span(s, N, TP, 1, TP, TP * N, (long)R * s->pp);
            double own = shard_of(P, N, d % N), nb = s->zero >= 2 ? dp_buckets(nl, first, last) : 1;
#define ZOP(op, calls, bytes, counted) add_op_on(&pc, s, zi, zn, op, N, calls, bytes, counted)
            if (s->zero >= 2) { /* each micro-batch's, the deferred buckets once */
                double nd, Pd = zero2_deferred(s, P, nl, first, last, &nd);
                if (nb > nd)
                    ZOP(HPT_COLL_REDUCE_SCATTER, M * (nb - nd), gb * (P - Pd) / (nb - nd),
                        gb * (P - Pd) / (nb - nd));
                if (nd > 0)
                    ZOP(HPT_COLL_REDUCE_SCATTER, nd, gb * Pd / nd, gb * Pd / nd);
            } else {
                ZOP(HPT_COLL_REDUCE_SCATTER, nb, gb * P / nb, gb * P / nb);
            }
            add_hsdp_allreduce(&pc, s, own);
            ZOP(HPT_COLL_ALLREDUCE, 1, 8, 8); /* norm^2 (f64) */
            if (s->zero < 3) {
                ZOP(HPT_COLL_ALLGATHER, 1, wb * P, wb * own);
            } else {
                /* ZeRO-3: every unit gathered before each micro-batch's
                 * forward, all but the embedding before its backward
                 * (Rajbhandari et al. 2020, section 7.2.2: 1.5x the DP
                 * volume of an all-reduce at M = 1) */
                double Pe = first ? tensor_elems(s, vocab_local(s) * c->hidden_size) : 0;
                double lo = fmin((d % N) * ceil(P / N), P), own_e = fmax(0, fmin(lo + own, Pe) - lo);
                ZOP(HPT_COLL_ALLGATHER, (double)M * nb, wb * P / nb, wb * own / nb);
                if (nb > first) /* counted: this rank's block outside the embedding */
                    ZOP(HPT_COLL_ALLGATHER, (double)M * (nb - first), wb * (P - Pe) / (nb - first),
                        wb * (own - own_e) / (nb - first));
            }
#undef ZOP
        } else {
            double nb = dp_buckets(nl, first, last);
            add_op(&pc, s, g, HPT_COLL_ALLREDUCE, s->dp, nb, gb * P / nb, gb * P / nb);
        }
        add_op(&pc, s, g, HPT_COLL_ALLREDUCE, s->dp, 1, 8, 8); /* loss (f64) */
        break;
    case HPT_PLAN_MP:
        if (s->tp * s->pp > 1)
            add_op(&pc, s, g, HPT_COLL_ALLREDUCE, s->tp * s->pp, 1, 8, 8);
        break;
    case HPT_PLAN_CP: { /* lib/attention_ring.c: per layer and micro-batch */
        if (cpn(s) == 1)
            break;
        int cp = cpn(s), fw = 1 + (s->recompute != 0); /* forward again when recomputed */
        double n = N * (c->num_key_value_heads / s->tp) * hpt_config_head_dim(c);
        double kv = s->cl.exact ? 4 : act_elem_bytes(s); /* K/V: activation dtype */
        double kvs = (double)M * nl * (fw * 2.0 * (cp - 1) + 2.0 * (cp - 1));
        double dkv = (double)M * nl * 2.0 * cp; /* dK/dV accumulators: fp32 */
        add_op(&pc, s, g, HPT_COLL_P2P, 2, kvs, kv * n, kv * n);
        add_op(&pc, s, g, HPT_COLL_P2P, 2, dkv, 4 * n, 4 * n);
        pc.calls += kvs + dkv; /* the matching receives (irecv_f32: a call, no bytes) */
        break;
    }
    case HPT_PLAN_EMBED:
        if (s->pp > 1 && c->tie_word_embeddings && (first || last))
            add_op(&pc, s, g, HPT_COLL_ALLREDUCE, 2, 1, gb * vocab_local(s) * c->hidden_size,
                   gb * vocab_local(s) * c->hidden_size);
        break;
    default: break;
    }
    return pc;
}

hpt_plan_comm hpt_plan_rank_comm(const hpt_plan_setup *s, int rank, hpt_plan_group g)
{
    int d = (rank / s->tp) % s->dp, stage = rank / (s->tp * s->dp);
    return comm_of(s, stage, d, g);
}

/* ------------------------------------------------------------ FLOPs */

double hpt_plan_flops_per_seq(const hpt_config *c, int T, int recompute)
{
    double C = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    double hd = hpt_config_head_dim(c), H = c->num_attention_heads, KV = c->num_key_value_heads;
    double L = c->num_hidden_layers;
    double layer = C * H * hd + 2 * C * KV * hd + H * hd * C + 3 * C * I;
    double per_tok = 6 * (L * layer + V * C) + 6 * L * T * C; /* causal attention: half */
    if (recompute == 1) /* full: the layer's forward again */
        per_tok += 2 * L * layer + 2 * L * T * C;
    else if (recompute == 2) /* selective: the attention core's forward (QK^T, PV; causal half) */
        per_tok += 2 * L * T * C;
    return per_tok * T;
}

/* FLOPs of one micro-batch through `stage`, one TP rank. */
static double stage_flops(const hpt_plan_setup *s, int stage)
{
    const hpt_config *c = &s->cfg;
    double C = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, T = s->seq_len;
    double hd = hpt_config_head_dim(c), H = c->num_attention_heads, KV = c->num_key_value_heads;
    double layer = C * H * hd + 2 * C * KV * hd + H * hd * C + 3 * C * I;
    double Ta = T * cpn(s); /* CP: each chunk attends its whole causal prefix */
    double per_layer = 6 * layer + 6 * Ta * C +
                       (s->recompute == 1 ? 2 * layer + 2 * Ta * C : s->recompute == 2 ? 2 * Ta * C : 0);
    double per_tok = hpt_plan_stage_nlayers(s, stage) * per_layer + (stage == s->pp - 1 ? 6 * V * C : 0);
    return per_tok * T * s->micro_batch / s->tp;
}

/* The attention core's share of stage_flops (QK^T and PV, causal half, and
 * their recomputation). */
static double stage_attention_flops(const hpt_plan_setup *s, int stage)
{
    const hpt_config *c = &s->cfg;
    double C = c->hidden_size, T = s->seq_len, Ta = T * cpn(s); /* see stage_flops */
    double per_layer = 6 * Ta * C + (s->recompute ? 2 * Ta * C : 0);
    return hpt_plan_stage_nlayers(s, stage) * per_layer * T * s->micro_batch / s->tp;
}

/* ------------------------------------------------------------ memory-bound kernels */

const char *hpt_plan_kclass_name(hpt_plan_kclass k)
{
    static const char *const names[HPT_PLAN_KCLASSES] = {
        "norm", "rope", "swiglu", "cast", "attention", "cross_entropy", "embedding"};
    return k >= 0 && k < HPT_PLAN_KCLASSES ? names[k] : "?";
}

/* 1 when the run's attention goes through cuBLAS in query chunks with its
 * scores in device memory (lib/attention_cuda.cu att_use_blas: bf16 or tf32
 * with a head row a multiple of 16 bytes), 0 on the flash kernels. */
static int attention_via_blas(const hpt_plan_setup *s)
{
    double hd = hpt_config_head_dim(&s->cfg);
    return !(s->fp32 && !s->tf32) && !attention_via_mma(s) && s->attention != 'f' &&
           fmod(hd * (s->tf32 ? 4.0 : 2.0), 16.0) == 0;
}

/* Device-memory bytes of one micro-batch through `stage`, one TP rank, per
 * kernel class, as hpt's CUDA backend moves them (lib/kernels_cuda.cu,
 * attention_cuda.cu; docs/PLAN.md "Memory-bound kernels" derives each
 * term): a = activation element bytes (2 bf16, 4 fp32), f = 4 (fp32), N =
 * b s tokens, N_l the rows of the residual stream (N/t with sequence
 * parallelism), per layer:
 *  - norm: two forwards fused with the residual add, N_l C (3f + a) each
 *    (read x and delta, write the sum and the normalised row); two
 *    backwards, N_l C 6f each (din: read dout, x, din, write din; dw: read
 *    dout, x); full recomputation the forwards again, selective the norms
 *    alone, N_l C (f + a) each; the last stage's final-norm backward N_l C
 *    7f (memset of dx too);
 *  - rope: q and k in place, N (QD + KD) 2a, their gradients 2f, full
 *    recomputation the forward again;
 *  - swiglu: forward N I/t 3a, backward N I/t (3f + 2a) — in bf16 N I/t
 *    (f + 4a): dgate, dup written in bf16 (swiglu_backward_act) —,
 *    recomputed (full or selective) forward again;
 *  - cast (bf16): each matmul_backward reads its fp32 gradient operand and
 *    writes it in bf16, N O (f + 2) for O = QD, KD, KD, C, C (gate and up's
 *    come in bf16: matmul_backward_act), the attention's dO N QD (f + 2)
 *    (cuBLAS path), the LM head's N V/t (f + 2);
 *  - attention (cuBLAS path): the causal half of the scores, b H/t s^2 / 2
 *    per layer, 12 bytes each forward (S written and read in fp32, P
 *    written and read in bf16) and 26 backward (S, dP written and read in
 *    fp32, P and dS written in bf16, P read once, dS twice); tf32: P and dS
 *    in fp32 over S and dP, 16 and 36; recomputation the forward again;
 *    tensor-core kernels (bf16, attention_mma.cu): no scores, only their
 *    operands once per kernel — forward q, k, v read, out written, N (2 QD
 *    + 2 KD) a; backward the row dot (out a, dout f), the dK/dV and dQ
 *    kernels each reading q, k, v (a) and dout (f), writing dq, dk, dv
 *    (f): N (QD (3a + 3f) + 4 KD a + (QD + 2 KD) f), + 4 N KD d f when
 *    the dK/dV kernel splits each GQA group into d > 1 parts (partial sums
 *    written and read, hpt_cuda_mma_kv_split); recomputation the
 *    forward again; the key/value tiles each query tile re-reads (and the
 *    query tiles each key tile re-reads) are taken to hit the L2 cache;
 *  - cross-entropy (last stage): N V/t f x 5 (the fused kernel reads the
 *    logits three times and writes them twice), x 4 vocab-parallel;
 *  - embedding (first stage): N C 5f (forward reads rows, writes x;
 *    backward reads dout, reads and writes the table's rows).
 * QD = H/t hd, KD = KV/t hd. The GEMMs' own operand traffic is not counted
 * (their arithmetic intensity is far above the ridge point). */
static void stage_kernel_bytes(const hpt_plan_setup *s, int stage, double k[HPT_PLAN_KCLASSES])
{
    const hpt_config *c = &s->cfg;
    double a = act_elem_bytes(s), f = 4, t = s->tp, b = s->micro_batch, T = s->seq_len;
    double N = b * T, Nl = local_tokens(s), C = c->hidden_size, hd = hpt_config_head_dim(c);
    double QD = c->num_attention_heads / t * hd, KD = c->num_key_value_heads / t * hd;
    double Il = c->intermediate_size / t, Vl = vocab_local(s), L = hpt_plan_stage_nlayers(s, stage);
    int full = s->recompute == 1, sel = s->recompute == 2, bf = !s->fp32;
    int first = stage == 0, last = stage == s->pp - 1, blas = attention_via_blas(s);
    double norm_f = 2 * Nl * C * (3 * f + a), rope_f = N * (QD + KD) * 2 * a, sw_f = 3 * N * Il * a;
    k[HPT_PLAN_K_NORM] = L * (norm_f + 2 * Nl * C * 6 * f +
                              (full ? norm_f : sel ? 2 * Nl * C * (f + a) : 0)) +
                         (last ? Nl * C * 7 * f : 0);
    k[HPT_PLAN_K_ROPE] = L * (rope_f + N * (QD + KD) * 2 * f + (full ? rope_f : 0));
    /* bf16: swiglu_backward_act writes dgate, dup in bf16 (2a, not 2f),
     * and they reach the GEMMs with no cast */
    k[HPT_PLAN_K_SWIGLU] =
        L * (sw_f + N * Il * (bf ? f + 4 * a : 3 * f + 2 * a) + (full || sel ? sw_f : 0));
    k[HPT_PLAN_K_CAST] = bf ? L * N * (QD + 2 * KD + 2 * C + (blas ? QD : 0)) * (f + 2) +
                                  (last ? N * Vl * (f + 2) : 0)
                            : 0;
    double scores = b * (c->num_attention_heads / t) * T * T / 2;
    double fw = bf ? 12 : 16, bw = bf ? 26 : 36;
    double mma_f = N * (2 * QD + 2 * KD) * a;
    int ns = attention_via_mma(s) ? mma_kv_split(s) : 1;
    double mma_b = N * (QD * (3 * a + 3 * f) + 4 * KD * a + (QD + 2 * KD) * f) +
                   (ns > 1 ? 4 * N * KD * ns * f : 0); /* the partials written, read */
    k[HPT_PLAN_K_ATTENTION] = blas ? L * scores * (fw + bw + (s->recompute ? fw : 0))
                              : attention_via_mma(s)
                                  ? L * (mma_f + mma_b + (s->recompute ? mma_f : 0))
                                  : 0;
    k[HPT_PLAN_K_XENT] = last ? N * Vl * f * (s->tp > 1 ? 4 : 5) : 0;
    k[HPT_PLAN_K_EMBED] = first ? N * C * 5 * f : 0;
}

/* Device-memory bytes of one optimizer step on `stage`'s rank (DP rank 0):
 * zero_grad writes the gradients (4 per parameter), the gradient norm reads
 * them (the ZeRO-2/3 shard), AdamW reads p, g, m, v and writes p, m, v (28
 * per parameter of the ZeRO shard), bf16 mode refreshes the weights'
 * working copy (read 4, write 2 per parameter). */
static double stage_optim_bytes(const hpt_plan_setup *s, int stage)
{
    double P = hpt_plan_stage_params(s, stage), z = s->zero ? zshard(s) : 1;
    return 4 * P + 4 * (s->zero >= 2 ? P / z : P) + 28 * P / z + (s->fp32 ? 0 : 6 * P);
}

/* The bandwidth the memory-bound kernels reach, bytes/s. */
static double hbm_rate(const hpt_plan_setup *s) { return s->cl.hbm_bw * HPT_PLAN_HBM_EFF; }

/* ------------------------------------------------------------ evaluation */

static double device_peak(const hpt_plan_setup *s)
{
    /* cpu-local: the ranks of a node share its cores */
    return s->cl.exact ? s->cl.peak_flops / s->gpus_per_node : s->cl.peak_flops;
}

/* The attention core's FLOP/s peak: the matrix products' where hpt runs it
 * on the tensor cores (bf16: its mma kernels, or through cuBLAS — bf16 and
 * tf32 with 16-byte head rows: att_use_mma, att_use_blas in
 * lib/attention_cuda.cu) or in fp32 anyway; the CUDA cores' fp32 peak
 * where its own flash kernels run instead (bf16 and tf32 with a head row
 * not a multiple of 16 bytes, e.g. hd 12 in bf16, or
 * HPT_CUDA_ATTENTION=flash). */
double hpt_plan_attention_peak(const hpt_plan_setup *s)
{
    int flash = !(s->fp32 && !s->tf32) && !attention_via_mma(s) && !attention_via_blas(s);
    if (!flash || s->cl.exact || s->cl.peak_fp32 <= 0)
        return device_peak(s);
    return s->cl.peak_fp32;
}

/* Memory capacity a rank may use: the device's, or on cpu-local the
 * machine's shared by the ranks on it. */
/* bytes as "74.5 GiB", or below 1 GiB as "0.5 MiB" (a tiny model's, which
 * "0.0 GiB" hid) into buf (32 bytes). */
static void size_words(double bytes, char *buf)
{
    if (bytes >= GIB)
        snprintf(buf, 32, "%.1f GiB", bytes / GIB);
    else
        snprintf(buf, 32, "%.1f MiB", bytes / 1048576.0);
}

static double capacity(const hpt_plan_setup *s)
{
    return s->cl.exact ? s->cl.mem_bytes / s->gpus_per_node : s->cl.mem_bytes;
}

/* The CP ring of stage sg (cp > 1) into r's cp_* fields: each of the CP
 * - 1 hops of a layer's forward moves a K/V block pair (activation dtype:
 * bf16 halves it), overlapped with one ring step's attention (a 1/CP share
 * of the layer's, att: the stage's attention FLOPs per micro-batch); the
 * backward's hops move the K/V pair and the dK/dV pair (fp32) over 3x the
 * compute. Returns the seconds per micro-batch that do not hide (the
 * excess of each hop over its step's compute, every hop of every layer). */
static double cp_exposed(const hpt_plan_setup *s, hpt_plan_result *r, const hpt_plan_stage *sg,
                         double att)
{
    int cp = cpn(s), nl = sg->nlayers;
    if (cp == 1 || nl == 0)
        return 0;
    const hpt_config *c = &s->cfg;
    double n = (double)s->micro_batch * s->seq_len * (c->num_key_value_heads / s->tp) *
               hpt_config_head_dim(c);
    double kv = 2 * n * (s->cl.exact ? 4 : act_elem_bytes(s)), dkv = 2 * n * 4.0; /* pairs */
    hpt_plan_comm hk = {0}, hd = {0}; /* one pair's two sends, as comm_of counts them */
    add_op(&hk, s, HPT_PLAN_CP, HPT_COLL_P2P, 2, 2, kv / 2, kv / 2);
    add_op(&hd, s, HPT_PLAN_CP, HPT_COLL_P2P, 2, 2, dkv / 2, dkv / 2);
    double layer_att = att / nl / (1 + (s->recompute != 0) / 3.0) / 3; /* a layer's forward */
    double blk = layer_att / cp / (hpt_plan_attention_peak(s) * s->cl.efficiency);
    r->cp_fwd_bytes = kv * (cp - 1);
    r->cp_bwd_bytes = kv * (cp - 1) + dkv * cp;
    r->cp_hop_s = hk.seconds;
    r->cp_block_s = blk;
    /* forward: cp - 1 K/V hops against blk; backward: cp - 1 K/V hops and
     * cp dK/dV hops against 2 blk each (the backward's two products) */
    double fw = 1 + (s->recompute != 0);
    double ex = nl * (fw * (cp - 1) * fmax(0, hk.seconds - blk) +
                      (cp - 1) * fmax(0, hk.seconds - 2 * blk) + cp * fmax(0, hd.seconds - 2 * blk));
    r->cp_exposed_s = fmax(r->cp_exposed_s, ex);
    return ex;
}

hpt_status hpt_plan_eval(const hpt_plan_setup *s, hpt_plan_result *r)
{
    hpt_status st = hpt_plan_validate(s);
    if (st)
        return st;
    memset(r, 0, sizeof *r);
    int M = micro_batches(s), P = s->pp;
    r->micro_batches = M;
    r->nstages = P;
    double rate = device_peak(s) * s->cl.efficiency, t_mb = 0, exposed = 0, ratio = 0;
    double comp_mb = 0, mem_mb = 0, optim_s = 0;
    for (int st_ = 0; st_ < P; st_++) {
        hpt_plan_stage *sg = &r->stage[st_];
        hpt_plan_chunk_layers(s->cfg.num_hidden_layers, P, vchunks(s), st_, 0, &sg->l0, &sg->l1);
        sg->nlayers = hpt_plan_stage_nlayers(s, st_);
        sg->in_flight = hpt_plan_in_flight(s, st_);
        sg->in_flight_mb = (double)sg->in_flight / vchunks(s);
        sg->params = hpt_plan_stage_params(s, st_);
        sg->mem = mem_of(s, st_, 0);
        sg->flops_per_mb = stage_flops(s, st_);
        double att = stage_attention_flops(s, st_);
        double att_s = att / (hpt_plan_attention_peak(s) * s->cl.efficiency);
        sg->compute_s = (sg->flops_per_mb - att) / rate + att_s;
        /* roofline per kernel class, classes one after another on the
         * stream: the GEMMs at their FLOP time, the element-wise classes at
         * bytes / bandwidth, the attention at the larger of its FLOP and
         * byte times; memory_s is what that adds to compute_s */
        stage_kernel_bytes(s, st_, sg->kbytes);
        sg->optim_bytes = stage_optim_bytes(s, st_);
        sg->memory_s = 0;
        for (int k = 0; k < HPT_PLAN_KCLASSES; k++)
            if (k != HPT_PLAN_K_ATTENTION)
                sg->memory_s += sg->kbytes[k] / hbm_rate(s);
        sg->memory_s += fmax(0, sg->kbytes[HPT_PLAN_K_ATTENTION] / hbm_rate(s) - att_s);
        double opt = sg->optim_bytes / hbm_rate(s);
        if (s->cl.exact) /* cpu-local: the measured efficiency covers it */
            sg->memory_s = opt = 0;
        double busy = sg->compute_s + sg->memory_s;
        double all = 0;
        for (int g = 0; g < HPT_PLAN_GROUPS; g++) {
            sg->comm[g] = comm_of(s, st_, 0, (hpt_plan_group)g);
            hpt_plan_comm *w = &r->comm[g];
            w->calls = fmax(w->calls, sg->comm[g].calls);
            w->bytes = fmax(w->bytes, sg->comm[g].bytes);
            w->wire_bytes = fmax(w->wire_bytes, sg->comm[g].wire_bytes);
            w->seconds = fmax(w->seconds, sg->comm[g].seconds);
            all += sg->comm[g].seconds;
        }
        /* per micro-batch on the critical path: compute (FLOPs or memory, per
         * kernel class), TP all-reduces, p2p, and the CP ring's time not
         * hidden behind its blocks' compute */
        double mb = busy + (sg->comm[HPT_PLAN_TP].seconds + sg->comm[HPT_PLAN_PP].seconds) / M +
                    cp_exposed(s, r, sg, att);
        t_mb = fmax(t_mb, mb);
        if (busy > comp_mb)
            comp_mb = busy, mem_mb = sg->memory_s;
        optim_s = fmax(optim_s, opt);
        /* DP all-reduce buckets overlap the last backward (2/3 of a
         * micro-batch); ZeRO-1, the tied embedding and the norm do not;
         * ZeRO-2's bucket reduce-scatters (about half of its DP time, the
         * same volume as the parameter all-gather) do. HSDP's all-reduce
         * across the replicas runs after backward (rep: exposed); dp is
         * the shard group's part */
        double rep = hsdp_allreduce(s, st_).seconds, dp = sg->comm[HPT_PLAN_DP].seconds - rep;
        /* ZeRO-3's gathers (2M of the 2M + 1 equal parts of its DP time):
         * with NCCL (its own stream) the prefetched ones hide behind the M
         * forwards and backwards, but each pass waits for its first unit
         * (one of the stage's units); MPI moves a nonblocking collective
         * only inside MPI calls (no progress thread), so none hides. The
         * reduce-scatters as ZeRO-2's */
        double rs3 = dp / (2.0 * M + 1), ag3 = dp - rs3;
        double units = dp_buckets(sg->nlayers, st_ == 0, st_ == s->pp - 1); /* one per unit */
        double ag3_ex = s->comm_lib == HPT_PLAN_COMM_NCCL
                            ? ag3 / units + fmax(0, ag3 * (1 - 1 / units) - (double)M * busy)
                            : ag3;
        double ex = (s->zero == 1   ? dp
                     : s->zero == 2 ? dp / 2 + fmax(0, dp / 2 - 2.0 / 3.0 * busy)
                     : s->zero == 3 ? fmax(0, rs3 - 2.0 / 3.0 * busy) + ag3_ex
                                    : fmax(0, dp - 2.0 / 3.0 * busy)) +
                    rep + sg->comm[HPT_PLAN_EMBED].seconds + sg->comm[HPT_PLAN_MP].seconds;
        exposed = fmax(exposed, ex);
        ratio = fmax(ratio, all / (M * busy));
        if (sg->mem.total > r->worst.total) {
            r->worst = sg->mem;
            r->worst_stage = st_;
        }
    }
    for (int g = 0; g < HPT_PLAN_GROUPS; g++)
        r->link_inter[g] = group_inter(s, (hpt_plan_group)g);
    r->fits = r->worst.total <= capacity(s);
    r->model_flops_per_step = (double)real_gb(s) * hpt_plan_flops_per_seq(&s->cfg, real_seq(s), 0);
    r->flops_per_step = (double)real_gb(s) * hpt_plan_flops_per_seq(&s->cfg, real_seq(s),
                                                                    s->recompute);
    /* the step in micro-batch slots of the slowest stage: m, and the
     * bubble's (p - 1)/V (hpt_plan_bubble); interleaving's extra sends are
     * in t_mb (comm_of: 2V - first - last per micro-batch) */
    double slots = (double)M + (P - 1.0) / vchunks(s) * hpt_plan_zb_factor(s);
    r->bubble = hpt_plan_bubble(s);
    r->boundaries = P * vchunks(s) - 1;
    r->p2p_bytes = 2.0 * M * r->boundaries * local_tokens(s) * s->cfg.hidden_size * 4;
    r->compute_s = M * comp_mb;
    r->optim_s = optim_s;
    r->memory_bound_s = M * mem_mb + optim_s;
    /* the optimizer step after the last backward and its reductions */
    r->step_time_s = slots * t_mb + exposed + optim_s;
    r->comm_s = slots * (t_mb - comp_mb) + exposed;
    r->comm_compute_ratio = ratio;
    r->tokens_per_s = (double)s->global_batch * s->seq_len / r->step_time_s;
    r->mfu = r->model_flops_per_step /
             (r->step_time_s * device_peak(s) * (double)s->tp * s->pp * s->dp);
    return HPT_OK;
}

/* ------------------------------------------------------------ output */

/* "mpi" or "nccl ring|tree|auto": the collectives' cost model. */
static const char *comm_model_name(const hpt_plan_setup *s)
{
    static const char *const algo[] = {"nccl, all-reduce ring or tree (auto)", "nccl, ring",
                                       "nccl, all-reduce tree"};
    if (s->comm_lib != HPT_PLAN_COMM_NCCL)
        return "mpi, ring";
    return algo[s->nccl_algo >= 0 && s->nccl_algo <= HPT_NCCL_TREE ? s->nccl_algo : 0];
}

static const char *link_name(const hpt_plan_setup *s, int inter)
{
    if (s->cl.exact)
        return "shm";
    return inter ? "infiniband" : "nvlink";
}

/* A JSON number: %.17g (integral: %.0f), or null when not finite (JSON
 * has no NaN or infinity). Returns b->s. */
typedef struct {
    char s[40];
} jbuf;

/* fmt: "%.17g", or "%.0f" for integral values. */
static const char *json_num(jbuf *b, const char *fmt, double v)
{
    if (isfinite(v))
        snprintf(b->s, sizeof b->s, fmt, v);
    else
        snprintf(b->s, sizeof b->s, "null");
    return b->s;
}

static const char *json_g(jbuf *b, double v) { return json_num(b, "%.17g", v); }
static const char *json_z(jbuf *b, double v) { return json_num(b, "%.0f", v); }

static void json_mem(FILE *f, const hpt_plan_mem *m)
{
    jbuf b[9];
    fprintf(f, "{\"weights\": %s, \"grads\": %s, \"optimizer\": %s, \"activations\": %s, "
            "\"logits\": %s, \"comm_buffers\": %s, \"baseline\": %s, \"total\": %s",
            json_z(&b[0], m->weights), json_z(&b[1], m->grads), json_z(&b[2], m->optimizer),
            json_z(&b[3], m->activations), json_z(&b[4], m->logits), json_z(&b[5], m->comm_buffers),
            json_z(&b[6], m->baseline), json_z(&b[7], m->total));
    if (m->staging > 0) /* --async-save only */
        fprintf(f, ", \"staging\": %s", json_z(&b[8], m->staging));
    fputc('}', f);
}

/* A JSON string literal of s (the sources' words: no control characters). */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++)
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", (unsigned)*s);
        else
            fputc(*s, f);
    fputc('"', f);
}

/* ",\n  "checkpoint_interval": {...}" (docs/PLAN.md). */
static void json_ckpt(const hpt_plan_ckpt *c, FILE *f)
{
    jbuf b[10];
    fprintf(f, ",\n  \"checkpoint_interval\": {\"mtbf_s\": %s, \"save_stall_s\": %s, "
            "\"restart_s\": %s, \"checkpoint_bytes\": %s, \"young_s\": %s, \"daly_s\": %s, "
            "\"save_every\": %d, \"goodput_young\": %s, \"goodput_daly\": %s, "
            "\"goodput_save_every\": %s, \"save_stall_from\": ",
            json_g(&b[0], c->mtbf_s), json_g(&b[1], c->save_s), json_g(&b[2], c->restart_s),
            json_g(&b[3], c->ckpt_bytes), json_g(&b[4], c->young_s), json_g(&b[5], c->daly_s),
            c->save_every, json_g(&b[6], c->goodput_young), json_g(&b[7], c->goodput_daly),
            json_g(&b[8], c->goodput_every));
    json_str(f, c->save_from);
    fprintf(f, ", \"restart_from\": ");
    json_str(f, c->restart_from);
    fprintf(f, "}");
}

/* A stage's layers: "layers": [l0, l1] where they are one range, else
 * (interleaved, V > 1) "chunks": [[l0, l1], ...], chunk c = virtual stage
 * c x p + stage. */
static void json_stage_layers(FILE *f, const hpt_plan_setup *s, int stage)
{
    int V = vchunks(s), l0, l1;
    fprintf(f, V == 1 ? "\"layers\": " : "\"chunks\": [");
    for (int c = 0; c < V; c++) {
        hpt_plan_chunk_layers(s->cfg.num_hidden_layers, s->pp, V, stage, c, &l0, &l1);
        fprintf(f, "%s[%d, %d]", c ? ", " : "", l0, l1);
    }
    if (V > 1)
        fputc(']', f);
}

void hpt_plan_write_json(const hpt_plan_setup *s, const hpt_plan_result *r, FILE *f)
{
    const hpt_config *c = &s->cfg;
    jbuf b[8];
    fprintf(f, "{\n  \"model\": {\"hidden_size\": %d, \"intermediate_size\": %d, "
            "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, "
            "\"vocab_size\": %d, \"tie_word_embeddings\": %s, \"params\": %lld},\n",
            c->hidden_size, c->intermediate_size, c->num_hidden_layers, c->num_attention_heads,
            c->num_key_value_heads, c->vocab_size, c->tie_word_embeddings ? "true" : "false",
            (long long)hpt_config_num_params(c));
    fprintf(f, "  \"cluster\": {\"name\": \"%s\", \"peak_flops\": %s, \"mem_bytes\": %s, "
            "\"intra_bw\": %s, \"inter_bw\": %s, \"intra_lat\": %s, \"inter_lat\": %s, "
            "\"efficiency\": %s, \"baseline_bytes\": %s, ",
            s->cl.name, json_g(&b[0], device_peak(s)), json_g(&b[1], capacity(s)), json_g(&b[2], s->cl.intra_bw),
            json_g(&b[3], s->cl.inter_bw), json_g(&b[4], s->cl.intra_lat), json_g(&b[5], s->cl.inter_lat),
            json_g(&b[6], s->cl.efficiency), json_g(&b[7], s->cl.baseline_bytes));
    fprintf(f, "\"hbm_bw\": %s, \"hbm_efficiency\": %s},\n", json_g(&b[0], s->cl.hbm_bw),
            json_g(&b[1], HPT_PLAN_HBM_EFF));
    char cpk[24] = ""; /* "cp" only with context parallelism */
    if (cpn(s) > 1)
        snprintf(cpk, sizeof cpk, "\"cp\": %d, ", cpn(s));
    fprintf(f, "  \"layout\": {\"tp\": %d, %s\"pp\": %d, \"dp\": %d, \"nodes\": %d, "
            "\"gpus_per_node\": %d, \"gpus\": %ld},\n",
            s->tp, cpk, s->pp, real_dp(s), s->nodes, s->gpus_per_node,
            (long)s->tp * s->pp * s->dp);
    fprintf(f, "  \"training\": {\"seq_len\": %d, \"global_batch\": %d, \"micro_batch\": %d, "
            "\"micro_batches\": %d, \"recompute\": %s, \"recompute_mode\": \"%s\", \"zero1\": %s, "
            "\"zero\": %d, \"zero_requested\": %d, \"zero_shard_group\": %d, \"hsdp\": %s, "
            "\"sequence_parallel\": %s, \"pp_schedule\": \"%s\", \"pp_virtual\": %d, "
            "\"precision\": \"%s\", \"tokens_per_step\": %s},\n",
            real_seq(s), real_gb(s), s->micro_batch, r->micro_batches,
            s->recompute ? "true" : "false", rc_mode(s->recompute),
            s->zero ? "true" : "false", s->zero, s->zero_requested ? s->zero_requested : s->zero,
            shard_group(s), zshard(s) < s->dp ? "true" : "false", sp_on(s) ? "true" : "false",
            hpt_plan_schedule_name(s), vchunks(s), hpt_plan_precision_name(s),
            json_z(&b[0], (double)s->global_batch * s->seq_len));
    if (cpn(s) > 1) /* the ring, per layer and micro-batch on one rank */
        fprintf(f, "  \"context_parallel\": {\"cp\": %d, \"chunk_tokens\": %d, "
                "\"ring_forward_bytes_per_layer\": %s, \"ring_backward_bytes_per_layer\": %s, "
                "\"hop_s\": %s, \"block_compute_s\": %s, \"hidden\": %s, "
                "\"exposed_s_per_micro_batch\": %s, \"ring_buffer_bytes\": %s},\n", cpn(s),
                s->seq_len / 2, json_z(&b[0], r->cp_fwd_bytes), json_z(&b[1], r->cp_bwd_bytes),
                json_g(&b[2], r->cp_hop_s), json_g(&b[3], r->cp_block_s),
                r->cp_exposed_s > 0 ? "false" : "true", json_g(&b[4], r->cp_exposed_s),
                json_z(&b[5], cp_ring_bytes(s)));
    fprintf(f, "  \"memory\": {\"worst_stage\": %d, \"worst\": ", r->worst_stage);
    json_mem(f, &r->worst);
    fprintf(f, ",\n    \"stages\": [");
    for (int i = 0; i < r->nstages; i++) {
        const hpt_plan_stage *sg = &r->stage[i];
        fprintf(f, "%s\n      {\"stage\": %d, ", i ? "," : "", i);
        json_stage_layers(f, s, i);
        fprintf(f, ", \"num_layers\": %d, \"in_flight\": %d, \"in_flight_micro_batches\": %s, "
                "\"params\": %s, \"memory\": ", sg->nlayers, sg->in_flight,
                json_g(&b[1], sg->in_flight_mb), json_z(&b[0], sg->params));
        json_mem(f, &sg->mem);
        fprintf(f, ", \"compute_s_per_micro_batch\": %s, \"memory_s_per_micro_batch\": %s, "
                "\"kernel_bytes_per_micro_batch\": {", json_g(&b[0], sg->compute_s),
                json_g(&b[1], sg->memory_s));
        for (int k = 0; k < HPT_PLAN_KCLASSES; k++)
            fprintf(f, "%s\"%s\": %s", k ? ", " : "", hpt_plan_kclass_name((hpt_plan_kclass)k),
                    json_z(&b[0], sg->kbytes[k]));
        fprintf(f, "}, \"optimizer_bytes_per_step\": %s}", json_z(&b[0], sg->optim_bytes));
    }
    fprintf(f, "]},\n  \"mem_capacity\": %s,\n  \"fits\": %s,\n", json_z(&b[0], capacity(s)),
            r->fits ? "true" : "false");
    fprintf(f, "  \"flops_per_step\": %s,\n  \"model_flops_per_step\": %s,\n",
            json_g(&b[0], r->flops_per_step), json_g(&b[1], r->model_flops_per_step));
    fprintf(f, "  \"comm_library\": \"%s\",\n", s->comm_lib == HPT_PLAN_COMM_NCCL ? "nccl" : "mpi");
    if (s->comm_lib == HPT_PLAN_COMM_NCCL) /* the all-reduce algorithm; absent for MPI */
        fprintf(f, "  \"nccl_algo\": \"%s\",\n", s->nccl_algo == HPT_NCCL_RING   ? "ring"
                                                   : s->nccl_algo == HPT_NCCL_TREE ? "tree"
                                                                                   : "auto");
    fprintf(f, "  \"comm\": {");
    for (int g = 0; g < HPT_PLAN_GROUPS; g++)
        fprintf(f, "%s\n    \"%s\": {\"calls\": %s, \"bytes\": %s, \"wire_bytes\": %s, "
                "\"seconds\": %s, \"link\": \"%s\"}", g ? "," : "",
                hpt_plan_group_name((hpt_plan_group)g), json_z(&b[0], r->comm[g].calls),
                json_z(&b[1], r->comm[g].bytes), json_z(&b[2], r->comm[g].wire_bytes),
                json_g(&b[3], r->comm[g].seconds), link_name(s, r->link_inter[g]));
    fprintf(f, "},\n  \"bytes_per_step\": {");
    for (int g = 0; g < HPT_PLAN_GROUPS; g++)
        fprintf(f, "%s\"%s\": %s", g ? ", " : "", hpt_plan_group_name((hpt_plan_group)g),
                json_z(&b[0], r->comm[g].bytes));
    fprintf(f, "},\n  \"comm_seconds_per_step\": {");
    for (int g = 0; g < HPT_PLAN_GROUPS; g++)
        fprintf(f, "%s\"%s\": %s", g ? ", " : "", hpt_plan_group_name((hpt_plan_group)g),
                json_g(&b[0], r->comm[g].seconds));
    fprintf(f, "},\n  \"pipeline\": {\"schedule\": \"%s\", \"virtual\": %d, \"virtual_stages\": %d, "
            "\"boundaries\": %d, \"p2p_bytes_per_step\": %s, \"bubble_fraction\": %s}",
            hpt_plan_schedule_name(s), vchunks(s), s->pp * vchunks(s), r->boundaries,
            json_z(&b[0], r->p2p_bytes), json_g(&b[1], r->bubble));
    fprintf(f, ",\n  \"bubble_fraction\": %s,\n  \"compute_s\": %s,\n  \"comm_s\": %s,\n"
            "  \"comm_compute_ratio\": %s,\n  \"step_time_s\": %s,\n  \"tokens_per_s\": %s,\n"
            "  \"mfu\": %s",
            json_g(&b[0], r->bubble), json_g(&b[1], r->compute_s), json_g(&b[2], r->comm_s),
            json_g(&b[3], r->comm_compute_ratio), json_g(&b[4], r->step_time_s),
            json_g(&b[5], r->tokens_per_s), json_g(&b[6], r->mfu));
    fprintf(f, ",\n  \"memory_bound_s\": %s,\n  \"optimizer_s\": %s",
            json_g(&b[0], r->memory_bound_s), json_g(&b[1], r->optim_s));
    if (r->ckpt.mtbf_s > 0)
        json_ckpt(&r->ckpt, f);
    fprintf(f, "\n}\n");
}

/* Memory in GiB, or MiB for small (cpu-local) budgets. */
static double mem_unit(const hpt_plan_setup *s) { return s->cl.exact ? 1048576.0 : GIB; }

static void text_mem_row(FILE *f, const char *label, const hpt_plan_mem *m, double u)
{
    fprintf(f, "  %-10s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", label, m->weights / u,
            m->grads / u, m->optimizer / u, m->activations / u, m->logits / u,
            m->comm_buffers / u, m->baseline / u, m->total / u);
}

/* The checkpoint interval section (docs/PLAN.md, "Checkpoint interval"). */
static void text_ckpt(const hpt_plan_ckpt *c, double step_s, FILE *f)
{
    fprintf(f, "\ncheckpoint interval against failures: MTBF %.4g h, save stall %.4g s (%s), "
            "restart %.4g s (%s)\n", c->mtbf_s / 3600, c->save_s, c->save_from, c->restart_s,
            c->restart_from);
    fprintf(f, "  Young 1974: every %.4g s of training (%.4g steps): expected goodput %.2f %%\n",
            c->young_s, c->young_s / step_s, 100 * c->goodput_young);
    fprintf(f, "  Daly 2006:  every %.4g s of training (%.4g steps): expected goodput %.2f %%\n",
            c->daly_s, c->daly_s / step_s, 100 * c->goodput_daly);
    fprintf(f, "  hpt-train --save-every %d (every %.4g s): expected goodput %.2f %%\n",
            c->save_every, c->save_every * step_s, 100 * c->goodput_every);
}

/* The pipeline line (PP > 1): activation slots in flight per stage (the
 * first two and last two of more than 8), the boundaries a micro-batch
 * crosses and one pipeline's point-to-point bytes per step. */
static void text_pipeline(const hpt_plan_setup *s, const hpt_plan_result *r, FILE *f)
{
    int V = vchunks(s), n = r->nstages;
    fprintf(f, "pipeline, %s: in flight per stage", sched_title(s));
    for (int i = 0; i < n; i++)
        if (n <= 8 || i < 2 || i >= n - 2)
            fprintf(f, "%s%d", i ? (n > 8 && i == n - 2 ? ", ..., " : ", ") : " ",
                    r->stage[i].in_flight);
    if (s->pp_schedule == HPT_PLAN_SCHEDULE_INTERLEAVED) {
        fprintf(f, " chunk forwards (1/%d of the stage's layers each) =", V);
        for (int i = 0; i < n; i++)
            if (n <= 8 || i < 2 || i >= n - 2)
                fprintf(f, "%s%.4g", i ? (n > 8 && i == n - 2 ? ", ..., " : ", ") : " ",
                        r->stage[i].in_flight_mb);
    }
    fprintf(f, " micro-batches; %d %s boundaries per micro-batch each way, %.4g GB "
            "point-to-point per step and pipeline\n", r->boundaries, V > 1 ? "chunk" : "stage",
            r->p2p_bytes / 1e9);
}

/* The memory-bound kernels' lines: the slowest stage's bytes per class
 * for one micro-batch, and their time in the step. */
static void text_memory_bound(const hpt_plan_setup *s, const hpt_plan_result *r, FILE *f)
{
    int w = 0; /* the stage of the largest micro-batch time */
    for (int i = 1; i < r->nstages; i++)
        if (r->stage[i].compute_s + r->stage[i].memory_s >
            r->stage[w].compute_s + r->stage[w].memory_s)
            w = i;
    const hpt_plan_stage *sg = &r->stage[w];
    fprintf(f, "memory-bound kernels, stage %d, GB per micro-batch:", w);
    for (int k = 0; k < HPT_PLAN_KCLASSES; k++)
        fprintf(f, "%s %s %.4g", k ? "," : "", hpt_plan_kclass_name((hpt_plan_kclass)k),
                sg->kbytes[k] / 1e9);
    fprintf(f, "; optimizer %.4g GB per step\n", sg->optim_bytes / 1e9);
    if (s->cl.exact)
        fprintf(f, "memory-bound time: not added (cpu-local's efficiency was measured on whole "
                "steps; memory %.4g GB/s)\n", s->cl.hbm_bw / 1e9);
    else
        fprintf(f, "memory-bound time %.4g s per step (%.4g s per micro-batch beyond the FLOPs, "
                "optimizer %.4g s) at %.4g GB/s x %.2f (roofline per kernel class, summed)\n",
                r->memory_bound_s, sg->memory_s, r->optim_s, s->cl.hbm_bw / 1e9, HPT_PLAN_HBM_EFF);
}

void hpt_plan_write_text(const hpt_plan_setup *s, const hpt_plan_result *r, FILE *f)
{
    const hpt_config *c = &s->cfg;
    double u = mem_unit(s), np = (double)hpt_config_num_params(c);
    const char *un = s->cl.exact ? "MiB" : "GiB";
    fprintf(f, "model: %.2f %s parameters, %d layers, hidden %d, heads %d/%d kv, vocab %d%s\n",
            np >= 1e9 ? np / 1e9 : np / 1e6, np >= 1e9 ? "B" : "M", c->num_hidden_layers,
            c->hidden_size, c->num_attention_heads, c->num_key_value_heads, c->vocab_size,
            c->tie_word_embeddings ? ", tied" : "");
    fprintf(f, "cluster: %s, %d node%s x %d GPU%s, %.4g GFLOP/s (%s) x %.2f efficiency, %.1f %s "
            "per GPU\n", s->cl.name, s->nodes, s->nodes == 1 ? "" : "s", s->gpus_per_node,
            s->gpus_per_node == 1 ? "" : "s", device_peak(s) / 1e9,
            s->cl.exact ? "measured SGEMM" : hpt_plan_precision_name(s), s->cl.efficiency,
            capacity(s) / u, un);
    char cpl[24] = "";
    if (cpn(s) > 1)
        snprintf(cpl, sizeof cpl, "CP %d x ", cpn(s));
    fprintf(f, "layout: TP %d x %sPP %d x DP %d; seq %d, global batch %d = micro-batch %d x %d "
            "micro-batches x DP %d; %s%s%s%s%s%s\n",
            s->tp, cpl, s->pp, real_dp(s), real_seq(s), real_gb(s), s->micro_batch,
            r->micro_batches, real_dp(s), s->fp32 ? hpt_plan_precision_name(s) : "bf16 mixed precision", rc_label(s->recompute),
            sp_label(s), zero_label(s->zero), hsdp_label(s), sched_label(s));
    if (cpn(s) > 1)
        fprintf(f, "context parallel: CP %d, chunks of %d tokens (zigzag: 2 per rank); ring per "
                "layer and micro-batch: forward %.4g MB, backward %.4g MB; a K/V hop %.3g s "
                "against %.3g s of attention per ring step: %s; ring buffers %.4g MiB per rank\n",
                cpn(s), s->seq_len / 2, r->cp_fwd_bytes / 1e6, r->cp_bwd_bytes / 1e6, r->cp_hop_s,
                r->cp_block_s, r->cp_exposed_s > 0 ? "not hidden" : "hidden",
                cp_ring_bytes(s) / 1048576.0);
    if (s->zero_requested) /* hpt-train's note, lib/train.c */
        fprintf(f, "note: --zero %d with DP 1 shards nothing: planned as --zero 0, as hpt-train "
                "runs it\n", s->zero_requested);
    fputc('\n', f);
    fprintf(f, "memory per rank (%s)  weights     grads optimizer      acts    logits      comm  "
            "baseline     total\n", un);
    for (int i = 0; i < r->nstages; i++) {
        char label[32];
        snprintf(label, sizeof label, "stage %d", i);
        if (r->nstages <= 8 || i < 2 || i >= r->nstages - 2 || i == r->worst_stage)
            text_mem_row(f, label, &r->stage[i].mem, u);
    }
    if (r->worst.staging > 0)
        fprintf(f, "async-save staging buffer (host memory): %.2f %s per rank at the worst stage, "
                "%s\n", r->worst.staging / u, un,
                s->cl.exact ? "included in total" : "beside the GPU's memory");
    fprintf(f, "worst: stage %d, %.2f %s of %.2f %s: %s\n\n", r->worst_stage, r->worst.total / u,
            un, capacity(s) / u, un, r->fits ? "FITS" : "DOES NOT FIT");
    fprintf(f, "communication per step (worst rank; %s)\n", comm_model_name(s));
    fprintf(f, "                                      calls        bytes   wire bytes   seconds  link\n");
    for (int g = 0; g < HPT_PLAN_GROUPS - (cpn(s) == 1); g++) /* cp: with CP only */
        fprintf(f, "  %-34s %7.0f %12.4g %12.4g %9.4g  %s\n", hpt_plan_group_name((hpt_plan_group)g),
                r->comm[g].calls, r->comm[g].bytes, r->comm[g].wire_bytes, r->comm[g].seconds,
                link_name(s, r->link_inter[g]));
    fprintf(f, "\nFLOPs per step: %.4g executed, %.4g model\n", r->flops_per_step,
            r->model_flops_per_step);
    if (s->pp > 1)
        text_pipeline(s, r, f);
    text_memory_bound(s, r, f);
    fprintf(f, "%s bubble: %.3f; compute %.4g s, communication on the critical path %.4g s; "
            "communication/compute %.3f\n",
            sched_title(s), r->bubble, r->compute_s, r->comm_s, r->comm_compute_ratio);
    fprintf(f, "step time %.4g s, %.4g tokens/s, MFU %.1f %%\n", r->step_time_s, r->tokens_per_s,
            100 * r->mfu);
    if (r->ckpt.mtbf_s > 0)
        text_ckpt(&r->ckpt, r->step_time_s, f);
}

void hpt_plan_write_ranks_tsv(const hpt_plan_setup *s, FILE *f)
{
    fprintf(f, "rank\tgroup\tcalls_per_step\tbytes_per_step\tseconds_per_step\tpeak_rss_mib\n");
    long W = (long)s->tp * s->pp * s->dp;
    for (long w = 0; w < W; w++) {
        hpt_plan_mem m = hpt_plan_rank_mem(s, (int)w);
        for (int g = 0; g < HPT_PLAN_GROUPS; g++) {
            hpt_plan_comm pc = hpt_plan_rank_comm(s, (int)w, (hpt_plan_group)g);
            fprintf(f, "%ld\t%s\t%.17g\t%.17g\t%.6g\t%.1f\n", w,
                    hpt_plan_group_name((hpt_plan_group)g), pc.calls, pc.bytes, pc.seconds,
                    m.total / 1048576.0);
        }
    }
}

/* ------------------------------------------------------------ search */

#define FLAGS_MAX 400 /* train_flags' buffer: every option at its longest */

typedef struct {
    hpt_plan_setup s;
    double tokens_per_s, mem, step, mfu, bubble, ratio;
    int fits;
} candidate;

static int by_speed(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->fits != y->fits)
        return y->fits - x->fits;
    if (x->tokens_per_s != y->tokens_per_s)
        return (x->tokens_per_s < y->tokens_per_s) - (x->tokens_per_s > y->tokens_per_s);
    return (x->mem > y->mem) - (x->mem < y->mem); /* equally fast: less memory first */
}

/* The hpt-train options of layout s (what to paste on its command line
 * beside --model and --data), with what the plan modelled: --async-save, and
 * on a GPU preset the backend, the precision and --comm mpi when planned
 * with MPI (hpt-train's auto would pick NCCL). */
static void train_flags(const hpt_plan_setup *s, char *buf, size_t len)
{
    int gpu = !s->cl.exact;
    char hsdp[48] = "", sched[64] = "";
    if (zshard(s) < s->dp)
        snprintf(hsdp, sizeof hsdp, " --zero-shard-group %d", zshard(s));
    if (s->pp > 1 && s->pp_schedule != HPT_PLAN_SCHEDULE_1F1B)
        snprintf(sched, sizeof sched, " --pp-schedule %s", hpt_plan_schedule_name(s));
    if (s->pp > 1 && s->pp_schedule == HPT_PLAN_SCHEDULE_INTERLEAVED)
        snprintf(sched + strlen(sched), sizeof sched - strlen(sched), " --pp-virtual %d",
                 vchunks(s));
    char cp[24] = "";
    if (cpn(s) > 1)
        snprintf(cp, sizeof cp, "--cp %d ", cpn(s));
    snprintf(buf, len, "--tp %d %s--pp %d --dp %d --seq-len %d --batch %d --grad-accum %d "
             "--recompute %s%s%s%s%s%s%s%s%s", s->tp, cp, s->pp, real_dp(s), real_seq(s),
             s->micro_batch,
             micro_batches(s), rc_mode(s->recompute), sp_on(s) ? " --sequence-parallel" : "",
             s->zero == 3 ? " --zero 3" : s->zero == 2 ? " --zero 2" : s->zero ? " --zero1" : "",
             hsdp, sched,
             s->async_save ? " --async-save" : "", gpu ? " --backend cuda --precision " : "",
             gpu ? hpt_plan_precision_name(s) : "",
             gpu && s->comm_lib == HPT_PLAN_COMM_MPI ? " --comm mpi" : "");
}

/* explain's DP line: the collectives, their bytes, seconds and link; with
 * HSDP split into the shard group's part and the all-reduce across the
 * replicas (of the stage with the most DP time). */
static void explain_dp(FILE *f, const hpt_plan_setup *s, const hpt_plan_result *r)
{
    const char *what = s->zero == 3   ? "bucket reduce-scatters + per-layer parameter all-gathers"
                       : s->zero == 2 ? "bucket reduce-scatters + parameter all-gather"
                       : s->zero      ? "reduce-scatter + parameter all-gather"
                                      : "all-reduce";
    int N = zshard(s), R = s->dp / N, w = 0;
    if (R == 1) {
        char cpl[48] = ""; /* the CP view's DP is CP x DP: the gradient reduces over both */
        if (cpn(s) > 1)
            snprintf(cpl, sizeof cpl, " x CP %d (the weight replicas)", cpn(s));
        fprintf(f, "  - DP %d%s: gradient %s of %.3g GB per rank (%.3g s, %s)\n", real_dp(s), cpl, what,
                r->comm[HPT_PLAN_DP].bytes / 1e9, r->comm[HPT_PLAN_DP].seconds,
                link_name(s, r->link_inter[HPT_PLAN_DP]));
        return;
    }
    for (int i = 1; i < r->nstages; i++)
        if (r->stage[i].comm[HPT_PLAN_DP].seconds > r->stage[w].comm[HPT_PLAN_DP].seconds)
            w = i;
    hpt_plan_comm all = r->stage[w].comm[HPT_PLAN_DP], rep = hsdp_allreduce(s, w);
    fprintf(f, "  - DP %d as HSDP, %d shard groups of %d: gradient %s of %.3g GB per rank inside "
            "each group (%.3g s, %s); the %.3g GB gradient shard all-reduced across %d replicas "
            "(%.3g s, %s)\n", s->dp, R, N, what, (all.bytes - rep.bytes) / 1e9,
            all.seconds - rep.seconds, link_name(s, spans_nodes(s, N, s->tp)), rep.bytes / 1e9, R,
            rep.seconds, link_name(s, spans_nodes(s, R, (long)s->tp * N)));
}

/* explain's PP line: layers per stage (per chunk when interleaved), the
 * bubble (and 1F1B's beside an interleaved one), the in-flight activations
 * and point-to-point volume interleaving adds. */
static void explain_pp(FILE *f, const hpt_plan_setup *s, const hpt_plan_result *r)
{
    int L = s->cfg.num_hidden_layers, p = s->pp, V = vchunks(s), M = r->micro_batches;
    if (s->pp_schedule == HPT_PLAN_SCHEDULE_ZBH1) {
        fprintf(f, "  - PP %d: %d-%d layers per stage, %s bubble %.3f with %d micro-batches "
                "(1F1B: %.3f; W passes deferred into it, (t_F + t_B - t_W)/(t_F + t_B + t_W) = "
                "%.3f of its idle time); every stage holds %d micro-batches' activations (1F1B: "
                "%d on stage 0, 1 on the last) and the last stage %.3g GB of deferred weight-"
                "gradient operands\n", p, L / p, (L + p - 1) / p, sched_title(s), r->bubble, M,
                (p - 1.0) / (M + p - 1.0), hpt_plan_zb_factor(s), r->stage[0].in_flight,
                p < M ? p : M, hpt_plan_wstash_bytes(s, p - 1, 0) / 1e9);
        return;
    }
    if (s->pp_schedule != HPT_PLAN_SCHEDULE_INTERLEAVED) {
        fprintf(f, "  - PP %d: %d-%d layers per stage, %s bubble %.3f with %d micro-batches\n", p,
                L / p, (L + p - 1) / p, sched_title(s), r->bubble, M);
        return;
    }
    fprintf(f, "  - PP %d, %s: %d chunks of %d-%d layers per stage, bubble %.3f with %d "
            "micro-batches (1F1B: %.3f); stage 0 holds %.4g micro-batches' activations (1F1B: %d); "
            "%d chunk boundaries per micro-batch instead of %d: %.3g x the point-to-point bytes\n",
            p, sched_title(s), V, L / (p * V), (L + p * V - 1) / (p * V), r->bubble, M,
            (p - 1.0) / (M + p - 1.0), r->stage[0].in_flight_mb, p < M ? p : M, r->boundaries,
            p - 1, r->boundaries / (p - 1.0));
}

/* Why the first layout wins, in words, from its numbers. */
static void explain(FILE *f, const candidate *best, const candidate *all, int n)
{
    const hpt_plan_setup *s = &best->s;
    hpt_plan_result *r = malloc(sizeof *r);
    if (!r || hpt_plan_eval(s, r)) {
        free(r);
        return;
    }
    char flags[FLAGS_MAX];
    train_flags(s, flags, sizeof flags);
    char cpl[24] = "";
    if (cpn(s) > 1)
        snprintf(cpl, sizeof cpl, "CP %d x ", cpn(s));
    fprintf(f, "why TP %d x %sPP %d x DP %d, micro-batch %d%s%s%s%s%s:\n", s->tp, cpl, s->pp,
            real_dp(s), s->micro_batch, rc_label(s->recompute), sp_label(s), zero_label(s->zero), hsdp_label(s),
            sched_label(s));
    if (sp_on(s)) /* lib/model.c: reduce-scatter after, all-gather before the GEMMs */
        fprintf(f, "  - TP %d with sequence parallelism %s: its %.0f collectives per step "
                "(reduce-scatters and all-gathers in place of the all-reduces, %.3g s) run on "
                "%s; norms and residual stream hold 1/%d of the tokens\n", s->tp,
                r->link_inter[HPT_PLAN_TP] ? "spans nodes" : "stays inside a node",
                r->comm[HPT_PLAN_TP].calls, r->comm[HPT_PLAN_TP].seconds,
                link_name(s, r->link_inter[HPT_PLAN_TP]), s->tp);
    else if (s->tp > 1)
        fprintf(f, "  - TP %d %s: its %.0f all-reduces per step (%.3g s) run on %s\n", s->tp,
                r->link_inter[HPT_PLAN_TP] ? "spans nodes" : "stays inside a node",
                r->comm[HPT_PLAN_TP].calls, r->comm[HPT_PLAN_TP].seconds,
                link_name(s, r->link_inter[HPT_PLAN_TP]));
    else
        fprintf(f, "  - no tensor parallelism: no per-layer all-reduces on the critical path\n");
    if (s->pp > 1)
        explain_pp(f, s, r);
    explain_dp(f, s, r);
    fprintf(f, "  - memory: %.1f of %.1f GiB on stage %d (weights %.1f, optimizer %.1f, "
            "activations %.1f)\n", r->worst.total / GIB, capacity(s) / GIB, r->worst_stage,
            r->worst.weights / GIB, r->worst.optimizer / GIB, r->worst.activations / GIB);
    if (s->recompute)
        fprintf(f, "  - %s recomputation: %s\n", rc_mode(s->recompute),
                s->recompute == 2 ? "keeps the GEMM outputs, recomputes the attention core and "
                "the norms/SwiGLU in backward" : "keeps each layer's input only, recomputes the "
                "layer in backward");
    fprintf(f, "  - %.4g tokens/s, MFU %.1f %%, communication/compute %.3f\n", r->tokens_per_s,
            100 * r->mfu, r->comm_compute_ratio);
    for (int i = 0; i < n; i++)
        if (!all[i].fits && all[i].tokens_per_s > best->tokens_per_s) {
            char cpa[24] = "";
            if (cpn(&all[i].s) > 1)
                snprintf(cpa, sizeof cpa, "CP %d x ", cpn(&all[i].s));
            fprintf(f, "  - faster but does not fit: TP %d x %sPP %d x DP %d, micro-batch %d%s%s%s%s%s "
                    "(%.4g tokens/s, needs %.1f GiB)\n", all[i].s.tp, cpa, all[i].s.pp, real_dp(&all[i].s),
                    all[i].s.micro_batch, rc_label(all[i].s.recompute), sp_label(&all[i].s),
                    zero_label(all[i].s.zero), hsdp_label(&all[i].s), sched_label(&all[i].s),
                    all[i].tokens_per_s, all[i].mem / GIB);
            break;
        }
    fprintf(f, "hpt-train options: %s\n", flags);
    free(r);
}

static int add_candidate(candidate **v, int *n, int *cap, const hpt_plan_setup *s,
                         hpt_plan_result *r)
{
    if (hpt_plan_eval(s, r))
        return 0; /* invalid for this model: skip */
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 256;
        candidate *p = realloc(*v, sizeof **v * (size_t)nc);
        if (!p)
            return -1;
        *v = p;
        *cap = nc;
    }
    (*v)[(*n)++] = (candidate){*s, r->tokens_per_s, r->worst.total, r->step_time_s, r->mfu,
                               r->bubble, r->comm_compute_ratio, r->fits};
    return 0;
}

static int gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

int hpt_plan_hsdp_groups(const hpt_plan_setup *s, int *out, int max)
{
    int gpn = s->gpus_per_node, dp = s->dp, n = 0;
    if (s->tp <= 0 || gpn % s->tp || (long)s->tp * dp <= gpn)
        return 0; /* a DP group inside one node */
    int b = gcd(gpn / s->tp, dp), q = dp / b, hi[64], nh = 0;
    /* N = b*j for the divisors j < q of q, ascending: the small ones up to
     * sqrt(q), then the cofactors of those below it (at most 2 sqrt(q) steps) */
    for (int j = 1; (long)j * j <= q; j++) {
        if (q % j)
            continue;
        if (j < q && (long)b * j > 1 && n < max)
            out[n++] = b * j;
        if ((long)j * j < q && j > 1 && nh < 64)
            hi[nh++] = b * (q / j);
    }
    while (nh > 0 && n < max)
        out[n++] = hi[--nh];
    return n;
}

/* Add layout s (everything but the shard group set) once per shard group
 * the search tries: all of DP; with ZeRO 1-3 also HSDP's groups
 * (hpt_plan_hsdp_groups); a fixed --zero-shard-group N (`shard`) only N,
 * and only where DP is a multiple of N and ZeRO is on (DP > 1). Returns -1
 * out of memory, else 0. */
static int add_shard_groups(candidate **v, int *n, int *cap, hpt_plan_setup *s, int fixed,
                            int shard, hpt_plan_result *r)
{
    int groups[64], ng = 0;
    if (fixed) {
        if (s->dp % shard || (!s->zero && s->dp > 1) || cpn(s) > 1)
            return 0;
        groups[ng++] = shard < s->dp ? shard : 0;
    } else {
        groups[ng++] = 0;
        if (s->zero && cpn(s) == 1) /* CP: no HSDP (hpt-train refuses it) */
            ng += hpt_plan_hsdp_groups(s, groups + 1, 63);
    }
    for (int i = 0; i < ng; i++) {
        s->zero_shard = groups[i];
        if (add_candidate(v, n, cap, s, r))
            return -1;
    }
    return 0;
}

/* Add layout s once per pipeline schedule the search tries: with PP > 1
 * base's when fixed, else 1F1B, interleaved with V = 2 and 4, and zb-h1
 * (skipped with ZeRO-2/3, which it cannot run); with PP 1
 * (no pipeline) 1F1B. A schedule the layout cannot run (PP x V above the
 * layers, m not a multiple of PP) fails hpt_plan_validate in
 * add_candidate and is skipped. Returns -1 out of memory, else 0. */
static int add_schedules(candidate **v, int *n, int *cap, hpt_plan_setup *s,
                         const hpt_plan_setup *base, const hpt_plan_fixed *fx, hpt_plan_result *r)
{
    static const int virt[] = {1, 2, 4, 1};
    int one = s->pp == 1 || fx->pp_schedule;
    for (int i = 0; i < (one ? 1 : 4); i++) {
        s->pp_schedule = s->pp == 1 ? HPT_PLAN_SCHEDULE_1F1B
                         : one      ? base->pp_schedule
                         : i == 3   ? HPT_PLAN_SCHEDULE_ZBH1
                         : i        ? HPT_PLAN_SCHEDULE_INTERLEAVED
                                    : HPT_PLAN_SCHEDULE_1F1B;
        s->pp_virtual = s->pp == 1 ? 1 : one ? base->pp_virtual : virt[i];
        if (add_shard_groups(v, n, cap, s, fx->zero_shard, base->zero_shard, r))
            return -1;
    }
    return 0;
}

/* The ranked table's `sched` column: "-" without a pipeline, "1f1b",
 * "gpipe", "zbh1", or "int" and V ("int2"). */
static const char *sched_column(const hpt_plan_setup *s)
{
    static char buf[16];
    if (s->pp == 1)
        return "-";
    if (s->pp_schedule == HPT_PLAN_SCHEDULE_ZBH1)
        return "zbh1";
    if (s->pp_schedule != HPT_PLAN_SCHEDULE_INTERLEAVED)
        return hpt_plan_schedule_name(s);
    snprintf(buf, sizeof buf, "int%d", vchunks(s));
    return buf;
}

hpt_status hpt_plan_search(const hpt_plan_setup *base, const hpt_plan_fixed *fx, int gpus, int top,
                           int json, FILE *f)
{
    if (gpus <= 0)
        return hpt_error_set(HPT_ERR_USAGE, "--gpus %d: must be > 0", gpus);
    int gpn = base->gpus_per_node;
    if (gpus > gpn && gpus % gpn)
        return hpt_error_set(HPT_ERR_USAGE, "--gpus %d is not a whole number of %d-GPU nodes "
                             "(--gpus-per-node)", gpus, gpn);
    /* no layout can change this: say so instead of "no valid layout" */
    if (base->seq_len > base->cfg.max_position_embeddings)
        return hpt_error_set(HPT_ERR_USAGE, "--seq-len %d exceeds the model's "
                             "max_position_embeddings = %d", base->seq_len,
                             base->cfg.max_position_embeddings);
    hpt_plan_result *r = malloc(sizeof *r);
    candidate *v = NULL;
    int n = 0, cap = 0, bad = !r;
    for (int tp = 1; !bad && tp <= gpus && tp <= gpn; tp++) {
        if (gpus % tp || gpn % tp || (fx->tp && tp != base->tp))
            continue;
        for (int pc = 0; !bad && pc < (gpus / tp) * 4; pc++) {
            int pp = pc / 4 + 1, cp = 1 << (pc % 4); /* CP 1, 2, 4, 8 */
            /* CP on GPU presets only where --cp was given: hpt-train's
             * CUDA ring (bf16, NCCL edges) is compiled and emulated but
             * not yet measured on a GPU */
            if ((gpus / tp) % pp || (fx->pp && pp != base->pp) || (gpus / tp / pp) % cp ||
                (fx->cp ? cp != cpn(base)
                        : cp > 1 && (base->seq_len % (2 * cp) || !base->cl.exact)))
                continue;
            int dp = gpus / tp / pp / cp;
            if (fx->dp && dp != base->dp)
                continue;
            for (int mb = 1; !bad && mb <= base->global_batch && mb <= 1 << 20; mb *= 2) {
                if (fx->micro_batch && mb != base->micro_batch)
                    continue;
                for (int k = 0; !bad && k < 24; k++) {
                    /* k enumerates (recompute none/full/selective, ZeRO
                     * 0/1/2/3, sequence parallelism off/on); a fixed or
                     * meaningless choice takes its first branch only */
                    int rc = k % 3, z = (k / 3) % 4, sp = k / 12;
                    if ((fx->recompute && rc) || ((fx->zero || dp * cp == 1) && z) ||
                        ((fx->sequence_parallel || tp == 1) && sp) || (cp > 1 && z >= 2) ||
                        (cp > 1 && fx->zero && base->zero >= 2))
                        continue;
                    hpt_plan_setup s = *base;
                    s.tp = tp, s.pp = pp, s.dp = dp, s.micro_batch = mb;
                    s.recompute = fx->recompute ? base->recompute : rc;
                    s.zero = dp > 1 ? (fx->zero ? base->zero : z) : 0;
                    s.sequence_parallel = (fx->sequence_parallel ? base->sequence_parallel : sp) &&
                                          tp > 1;
                    s.gpus_per_node = gpus < gpn ? gpus : gpn;
                    s.nodes = gpus / s.gpus_per_node;
                    s.cp = 1;
                    if (cp > 1) { /* ZeRO over the CP x DP replicas */
                        s.zero = fx->zero ? base->zero : z;
                        if (hpt_plan_cp_view(&s, cp))
                            continue;
                    }
                    bad = add_schedules(&v, &n, &cap, &s, base, fx, r) != 0;
                }
            }
        }
    }
    free(r);
    if (bad) {
        free(v);
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory in the layout search");
    }
    if (!n)
        return hpt_error_set(HPT_ERR_USAGE, "no valid layout for %d GPUs: TP must divide the "
                             "node and the heads, PP at most the layers, DP x micro-batch the "
                             "global batch %d%s", gpus, base->global_batch,
                             fx->zero_shard ? ", and --zero-shard-group DP" : "");
    qsort(v, (size_t)n, sizeof *v, by_speed);
    int fitting = 0;
    for (int i = 0; i < n; i++)
        fitting += v[i].fits;
    int shown = fitting < top ? fitting : top, anycp = 0;
    for (int i = 0; i < shown; i++)
        anycp |= cpn(&v[i].s) > 1;
    if (json) {
        fprintf(f, "{\"gpus\": %d, \"candidates\": %d, \"fitting\": %d, \"ranked\": [", gpus, n,
                fitting);
        for (int i = 0; i < shown; i++) {
            jbuf b[5];
            char flags[FLAGS_MAX];
            train_flags(&v[i].s, flags, sizeof flags);
            fprintf(f, "%s\n  {\"tp\": %d, \"cp\": %d, \"pp\": %d, \"dp\": %d, \"micro_batch\": %d, "
                    "\"recompute\": %s, \"recompute_mode\": \"%s\", \"sequence_parallel\": %s, "
                    "\"zero1\": %s, \"zero\": %d, \"zero_shard_group\": %d, \"hsdp\": %s, "
                    "\"pp_schedule\": \"%s\", \"pp_virtual\": %d, "
                    "\"train_options\": \"%s\", \"mem_bytes\": %s, "
                    "\"step_time_s\": %s, \"tokens_per_s\": %s, \"mfu\": %s, "
                    "\"bubble_fraction\": %s}",
                    i ? "," : "", v[i].s.tp, cpn(&v[i].s), v[i].s.pp, real_dp(&v[i].s),
                    v[i].s.micro_batch,
                    v[i].s.recompute ? "true" : "false", rc_mode(v[i].s.recompute),
                    sp_on(&v[i].s) ? "true" : "false", v[i].s.zero ? "true" : "false", v[i].s.zero,
                    shard_group(&v[i].s), zshard(&v[i].s) < v[i].s.dp ? "true" : "false",
                    hpt_plan_schedule_name(&v[i].s), vchunks(&v[i].s), flags,
                    json_z(&b[0], v[i].mem), json_g(&b[1], v[i].step), json_g(&b[2], v[i].tokens_per_s),
                    json_g(&b[3], v[i].mfu), json_g(&b[4], v[i].bubble));
        }
        fprintf(f, "],\n\"best\": ");
        if (fitting) {
            hpt_plan_result *b = malloc(sizeof *b);
            if (b && !hpt_plan_eval(&v[0].s, b))
                hpt_plan_write_json(&v[0].s, b, f);
            free(b);
        } else {
            fprintf(f, "null\n");
        }
        fprintf(f, "}\n");
    } else {
        char cap[32];
        size_words(capacity(&v[0].s), cap);
        if (fitting) {
            fprintf(f, "%d layouts for %d GPUs, %d fit in %s; fastest first:\n", n, gpus,
                    fitting, cap);
            fprintf(f, "   TP   PP     DP  mb  recompute  sp  zero  shard    mem GiB   step s     "
                    "tokens/s   MFU %%  bubble  sched%s\n", anycp ? "  CP" : "");
        } else {
            fprintf(f, "%d layouts for %d GPUs, none fits in %s\n", n, gpus, cap);
        }
        for (int i = 0; i < shown; i++) {
            char shard[16] = "-", cpc[16] = ""; /* the ZeRO shard group: DP, or HSDP's N */
            if (anycp) /* the CP column, where a shown layout has CP */
                snprintf(cpc, sizeof cpc, "  %*s%d", (int)strlen(sched_column(&v[i].s)) < 5
                         ? 5 - (int)strlen(sched_column(&v[i].s)) : 0, "", cpn(&v[i].s));
            if (v[i].s.zero)
                snprintf(shard, sizeof shard, "%d", zshard(&v[i].s));
            fprintf(f, "  %3d %4d %6d %3d  %-9s  %-3s %-4s %6s %9.2f %8.4g %12.5g %6.1f  %6.3f  %s%s\n",
                    v[i].s.tp, v[i].s.pp, real_dp(&v[i].s), v[i].s.micro_batch,
                    rc_mode(v[i].s.recompute), sp_on(&v[i].s) ? "yes" : "no",
                    v[i].s.zero == 3 ? "3" : v[i].s.zero == 2 ? "2" : v[i].s.zero ? "1" : "no",
                    shard, v[i].mem / GIB, v[i].step, v[i].tokens_per_s, 100 * v[i].mfu,
                    v[i].bubble, sched_column(&v[i].s), cpc);
        }
        if (fitting)
            explain(f, &v[0], v, n);
        else {
            double least = v[0].mem;
            char need[32];
            for (int i = 1; i < n; i++)
                least = fmin(least, v[i].mem);
            size_words(least, need);
            fprintf(f, "no layout fits: the smallest needs %s per GPU\n", need);
        }
    }
    free(v);
    return HPT_OK;
}
