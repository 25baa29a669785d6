/* model.c — Llama forward/backward over one micro-batch; see model.h. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "philox.h"

/* ------------------------------------------------------- tensor table */

static const char *const kind_names[HPT_TENSOR_KIND_COUNT] = {
    [HPT_TENSOR_EMBED] = "model.embed_tokens.weight",
    [HPT_TENSOR_ATTN_NORM] = "input_layernorm.weight",
    [HPT_TENSOR_Q] = "self_attn.q_proj.weight",
    [HPT_TENSOR_K] = "self_attn.k_proj.weight",
    [HPT_TENSOR_V] = "self_attn.v_proj.weight",
    [HPT_TENSOR_O] = "self_attn.o_proj.weight",
    [HPT_TENSOR_MLP_NORM] = "post_attention_layernorm.weight",
    [HPT_TENSOR_GATE] = "mlp.gate_proj.weight",
    [HPT_TENSOR_UP] = "mlp.up_proj.weight",
    [HPT_TENSOR_DOWN] = "mlp.down_proj.weight",
    [HPT_TENSOR_FINAL_NORM] = "model.norm.weight",
    [HPT_TENSOR_LM_HEAD] = "lm_head.weight",
};

/* Add tensor (kind, layer) of global shape (g_rows, g_cols), split over TP
 * by rows (split 1), columns (split 2) or replicated (0). `local` is the
 * local extent of the split dimension (rows or columns); the vocabulary
 * dimension may be padded (local * TP >= g_rows). */
static void add_tensor(hpt_model *m, hpt_tensor_kind kind, int layer, int64_t g_rows,
                       int64_t g_cols, int split, int64_t local, float std)
{
    hpt_tensor *t = &m->tensors[m->ntensors++];
    t->kind = kind;
    t->layer = layer;
    if (layer >= 0)
        snprintf(t->name, sizeof t->name, "model.layers.%d.%s", layer, kind_names[kind]);
    else
        snprintf(t->name, sizeof t->name, "%s", kind_names[kind]);
    t->g_rows = g_rows;
    t->g_cols = g_cols;
    t->split = m->tp > 1 ? split : 0;
    t->rows = split == 1 ? local : g_rows;
    t->cols = split == 2 ? local : g_cols;
    t->row0 = split == 1 ? local * m->tp_rank : 0;
    t->col0 = split == 2 ? local * m->tp_rank : 0;
    t->offset = m->nparams;
    t->init_std = std;
    t->is_matrix = g_cols > 1;
    /* Keep every tensor 16-element (64-byte) aligned. */
    m->nparams += ((size_t)(t->rows * t->cols) + 15) & ~(size_t)15;
}

static void build_tensor_table(hpt_model *m)
{
    const hpt_config *c = &m->cfg;
    int64_t C = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    int64_t hd = hpt_config_head_dim(c), H = c->num_attention_heads, KV = c->num_key_value_heads;
    int L = c->num_hidden_layers;
    float std = 0.02f, std_out = 0.02f / sqrtf(2.0f * L);
    add_tensor(m, HPT_TENSOR_EMBED, -1, V, C, 1, m->Vl, std);
    for (int l = 0; l < L; l++) {
        add_tensor(m, HPT_TENSOR_ATTN_NORM, l, C, 1, 0, 0, 0.0f);
        add_tensor(m, HPT_TENSOR_Q, l, H * hd, C, 1, m->Hl * hd, std);
        add_tensor(m, HPT_TENSOR_K, l, KV * hd, C, 1, m->KVl * hd, std);
        add_tensor(m, HPT_TENSOR_V, l, KV * hd, C, 1, m->KVl * hd, std);
        add_tensor(m, HPT_TENSOR_O, l, C, H * hd, 2, m->Hl * hd, std_out);
        add_tensor(m, HPT_TENSOR_MLP_NORM, l, C, 1, 0, 0, 0.0f);
        add_tensor(m, HPT_TENSOR_GATE, l, I, C, 1, m->Il, std);
        add_tensor(m, HPT_TENSOR_UP, l, I, C, 1, m->Il, std);
        add_tensor(m, HPT_TENSOR_DOWN, l, C, I, 2, m->Il, std_out);
    }
    add_tensor(m, HPT_TENSOR_FINAL_NORM, -1, C, 1, 0, 0, 0.0f);
    if (!c->tie_word_embeddings)
        add_tensor(m, HPT_TENSOR_LM_HEAD, -1, V, C, 1, m->Vl, std);
}

const hpt_tensor *hpt_model_tensor(const hpt_model *m, hpt_tensor_kind kind, int layer)
{
    /* Layer tensors are laid out in a fixed pattern: index arithmetic. */
    if (kind == HPT_TENSOR_EMBED)
        return &m->tensors[0];
    int per_layer = HPT_TENSOR_DOWN - HPT_TENSOR_ATTN_NORM + 1;
    int after = 1 + m->cfg.num_hidden_layers * per_layer;
    if (kind == HPT_TENSOR_FINAL_NORM)
        return &m->tensors[after];
    if (kind == HPT_TENSOR_LM_HEAD)
        return m->cfg.tie_word_embeddings ? NULL : &m->tensors[after + 1];
    return &m->tensors[1 + layer * per_layer + (kind - HPT_TENSOR_ATTN_NORM)];
}

float *hpt_model_ptr(const hpt_model *m, float *block, hpt_tensor_kind kind, int layer)
{
    const hpt_tensor *t = hpt_model_tensor(m, kind, layer);
    if (!t)
        t = hpt_model_tensor(m, HPT_TENSOR_EMBED, -1);
    return block + t->offset;
}

/* --------------------------------------------------- initialisation */

static uint64_t tensor_stream(const hpt_tensor *t)
{
    return hpt_hash_str(kind_names[t->kind]) ^ ((uint64_t)(t->layer + 1) * 0x9E3779B97F4A7C15ull);
}

void hpt_model_init_params(hpt_model *m, uint64_t seed)
{
    float *host = malloc(sizeof(float) * m->nparams);
    if (!host)
        HPT_FATAL("out of memory: %zu bytes for parameter initialisation",
                  sizeof(float) * m->nparams);
    memset(host, 0, sizeof(float) * m->nparams);
    for (int i = 0; i < m->ntensors; i++) {
        const hpt_tensor *t = &m->tensors[i];
        float *p = host + t->offset;
        uint64_t stream = tensor_stream(t);
        float std = t->init_std;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < t->rows; r++) {
            int64_t gr = t->row0 + r;
            for (int64_t c = 0; c < t->cols; c++) {
                /* value of global element (gr, col0 + c); padding rows stay 0 */
                uint64_t e = (uint64_t)(gr * t->g_cols + t->col0 + c);
                p[r * t->cols + c] = gr >= t->g_rows ? 0.0f
                                     : std > 0  ? std * hpt_philox_normal(seed, stream, e)
                                                : 1.0f;
            }
        }
    }
    m->be->upload(m->params, host, sizeof(float) * m->nparams);
    free(host);
}

/* ---------------------------------------------------- activation block */

/* Carve `count` elements of `elem` bytes from the activation block, or just
 * count them when base is NULL. Every piece is 64-byte aligned. */
static void *carve(char *base, size_t *off, size_t count, size_t elem)
{
    void *p = base ? base + *off : NULL;
    *off += (count * elem + 63) & ~(size_t)63;
    return p;
}

static size_t layout_acts(hpt_model *m, char *base)
{
    const hpt_config *c = &m->cfg;
    size_t N = (size_t)m->B * m->T, C = c->hidden_size, I = m->Il;
    size_t QD = (size_t)m->Hl * hpt_config_head_dim(c);
    size_t KD = (size_t)m->KVl * hpt_config_head_dim(c);
    size_t P = (size_t)m->B * m->Hl * m->T * m->T, off = 0;
    hpt_layer_acts shared = {0};
    for (int l = 0; l < c->num_hidden_layers; l++) {
        hpt_layer_acts *a = &m->layers[l];
        if (m->recompute && l > 0) { /* one set of layer activations for all layers */
            *a = shared;
            a->x = carve(base, &off, N * C, 4);
            continue;
        }
        a->x = carve(base, &off, N * C, 4);
        a->ln1 = carve(base, &off, N * C, 4);
        a->rstd1 = carve(base, &off, N, 4);
        a->q = carve(base, &off, N * QD, 4);
        a->k = carve(base, &off, N * KD, 4);
        a->v = carve(base, &off, N * KD, 4);
        a->probs = carve(base, &off, P, 4);
        a->atty = carve(base, &off, N * QD, 4);
        a->xmid = carve(base, &off, N * C, 4);
        a->ln2 = carve(base, &off, N * C, 4);
        a->rstd2 = carve(base, &off, N, 4);
        a->gate = carve(base, &off, N * I, 4);
        a->up = carve(base, &off, N * I, 4);
        a->h = carve(base, &off, N * I, 4);
        shared = *a;
    }
    m->recompute_out = m->recompute ? carve(base, &off, N * C, 4) : NULL;
    m->x_final = carve(base, &off, N * C, 4);
    m->lnf = carve(base, &off, N * C, 4);
    m->rstdf = carve(base, &off, N, 4);
    m->logits = carve(base, &off, N * m->Vl, 4);
    m->tokens = carve(base, &off, N, 4);
    m->targets = carve(base, &off, N, 4);
    m->dx = carve(base, &off, N * C, 4);
    m->dtmp = carve(base, &off, N * C, 4);
    m->dq = carve(base, &off, N * QD, 4);
    m->dk = carve(base, &off, N * KD, 4);
    m->dv = carve(base, &off, N * KD, 4);
    m->datty = carve(base, &off, N * QD, 4);
    m->dh = carve(base, &off, N * I, 4);
    m->dgate = carve(base, &off, N * I, 4);
    m->dup = carve(base, &off, N * I, 4);
    m->dscores = carve(base, &off, P, 4);
    m->ce_mx = carve(base, &off, N, 4);
    m->ce_sum = carve(base, &off, 2 * N, 4); /* ce_sum, ce_tgt adjacent: one all-reduce */
    m->ce_tgt = m->ce_sum ? m->ce_sum + N : NULL;
    return off;
}

/* Local sizes for TP rank tp_rank of tp. */
static hpt_status set_tp(hpt_model *m, const hpt_config *cfg, hpt_comm *comm)
{
    m->comm = comm;
    m->tp = comm ? comm->tp : 1;
    m->tp_rank = comm ? comm->tp_rank : 0;
    int P = m->tp;
    const struct {
        const char *name;
        int v;
    } need[] = {{"num_attention_heads", cfg->num_attention_heads},
                {"num_key_value_heads", cfg->num_key_value_heads},
                {"intermediate_size", cfg->intermediate_size}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (need[i].v % P)
            return hpt_error_set(HPT_ERR_USAGE,
                                 "--tp %d must divide %s = %d (tensor parallelism splits it)", P,
                                 need[i].name, need[i].v);
    m->Hl = cfg->num_attention_heads / P;
    m->KVl = cfg->num_key_value_heads / P;
    m->Il = cfg->intermediate_size / P;
    m->Vl = (cfg->vocab_size + P - 1) / P; /* vocabulary padded to a multiple of TP */
    m->v0 = m->tp_rank * m->Vl;
    int valid = cfg->vocab_size - m->v0;
    m->nvalid = valid < 0 ? 0 : valid > m->Vl ? m->Vl : valid;
    return HPT_OK;
}

hpt_status hpt_model_init(hpt_model *m, const hpt_config *cfg, const hpt_backend *be, int B,
                          int T, uint64_t seed)
{
    return hpt_model_init_tp(m, cfg, be, NULL, B, T, seed, 0);
}

hpt_status hpt_model_init_tp(hpt_model *m, const hpt_config *cfg, const hpt_backend *be,
                             hpt_comm *comm, int B, int T, uint64_t seed, int recompute)
{
    memset(m, 0, sizeof *m);
    m->recompute = recompute;
    hpt_status st = set_tp(m, cfg, comm);
    if (st)
        return st;
    if (B <= 0 || T <= 0)
        return hpt_error_set(HPT_ERR_USAGE, "micro-batch %d x sequence length %d must be > 0", B, T);
    if (T > cfg->max_position_embeddings)
        return hpt_error_set(HPT_ERR_USAGE,
                             "--seq-len %d exceeds the model's max_position_embeddings = %d", T,
                             cfg->max_position_embeddings);
    m->cfg = *cfg;
    m->be = be;
    m->B = B;
    m->T = T;
    int per_layer = HPT_TENSOR_DOWN - HPT_TENSOR_ATTN_NORM + 1;
    m->tensors = calloc((size_t)(3 + cfg->num_hidden_layers * per_layer), sizeof(hpt_tensor));
    m->layers = calloc((size_t)cfg->num_hidden_layers, sizeof(hpt_layer_acts));
    if (!m->tensors || !m->layers) {
        hpt_model_free(m);
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory for the tensor table");
    }
    build_tensor_table(m);
    m->act_bytes = layout_acts(m, NULL);
    m->params = be->alloc(sizeof(float) * m->nparams);
    m->grads = be->alloc(sizeof(float) * m->nparams);
    m->act_block = be->alloc(m->act_bytes);
    if (!m->params || !m->grads || !m->act_block) {
        size_t want = 2 * sizeof(float) * m->nparams + m->act_bytes;
        hpt_model_free(m);
        return hpt_error_set(HPT_ERR_INTERNAL,
                             "out of memory: model needs %.1f MiB for parameters, gradients and "
                             "activations (micro-batch %d x %d)",
                             want / 1048576.0, B, T);
    }
    layout_acts(m, m->act_block);
    hpt_model_init_params(m, seed);
    return HPT_OK;
}

void hpt_model_free(hpt_model *m)
{
    if (!m)
        return;
    if (m->be) {
        m->be->free(m->params);
        m->be->free(m->grads);
        m->be->free(m->act_block);
    }
    free(m->tensors);
    free(m->layers);
    memset(m, 0, sizeof *m);
}

void hpt_model_zero_grad(hpt_model *m) { m->be->memset0(m->grads, sizeof(float) * m->nparams); }

/* -------------------------------------------------------------- forward */

#define W(kind, l) hpt_model_ptr(m, m->params, (kind), (l))
#define G(kind, l) hpt_model_ptr(m, m->grads, (kind), (l))

/* Sum a partial (N,C) result over the TP group (Megatron's g operator in
 * forward, f's backward); no-op without tensor parallelism. */
static void tp_sum(hpt_model *m, float *x, size_t n)
{
    if (m->tp > 1)
        m->comm->be->allreduce_sum_f32(m->comm, HPT_GROUP_TP, x, n);
}

/* x_out (N,C) = layer l applied to a->x (N,C). Local shapes: q (N,Hl*hd),
 * k/v (N,KVl*hd), gate/up/h (N,Il); o_proj and down_proj produce partial
 * sums that are all-reduced over TP. */
static void layer_forward(hpt_model *m, int l, float *x_out)
{
    const hpt_backend *be = m->be;
    const hpt_config *c = &m->cfg;
    hpt_layer_acts *a = &m->layers[l];
    int N = m->B * m->T, C = c->hidden_size, I = m->Il, hd = hpt_config_head_dim(c);
    int H = m->Hl, KV = m->KVl;
    be->rmsnorm_forward(a->ln1, a->rstd1, a->x, W(HPT_TENSOR_ATTN_NORM, l), N, C, c->rms_norm_eps);
    be->matmul_forward(a->q, a->ln1, W(HPT_TENSOR_Q, l), N, C, H * hd);
    be->matmul_forward(a->k, a->ln1, W(HPT_TENSOR_K, l), N, C, KV * hd);
    be->matmul_forward(a->v, a->ln1, W(HPT_TENSOR_V, l), N, C, KV * hd);
    be->rope(a->q, m->B, m->T, H, hd, c->rope_theta, 0);
    be->rope(a->k, m->B, m->T, KV, hd, c->rope_theta, 0);
    be->attention_forward(a->atty, a->probs, a->q, a->k, a->v, m->B, m->T, H, KV, hd);
    be->matmul_forward(m->dtmp, a->atty, W(HPT_TENSOR_O, l), N, H * hd, C);
    tp_sum(m, m->dtmp, (size_t)N * C);
    be->add(a->xmid, a->x, m->dtmp, (size_t)N * C);
    be->rmsnorm_forward(a->ln2, a->rstd2, a->xmid, W(HPT_TENSOR_MLP_NORM, l), N, C,
                        c->rms_norm_eps);
    be->matmul_forward(a->gate, a->ln2, W(HPT_TENSOR_GATE, l), N, C, I);
    be->matmul_forward(a->up, a->ln2, W(HPT_TENSOR_UP, l), N, C, I);
    be->swiglu_forward(a->h, a->gate, a->up, (size_t)N * I);
    be->matmul_forward(m->dtmp, a->h, W(HPT_TENSOR_DOWN, l), N, I, C);
    tp_sum(m, m->dtmp, (size_t)N * C);
    be->add(x_out, a->xmid, m->dtmp, (size_t)N * C);
}

/* Vocab-parallel cross-entropy over the local logits (N,Vl): MAX and SUM
 * all-reduces over TP, never the full logits. */
static double vocab_parallel_ce(hpt_model *m, float grad_scale)
{
    const hpt_backend *be = m->be;
    int N = m->B * m->T;
    be->vocab_max(m->ce_mx, m->logits, N, m->Vl, m->nvalid);
    m->comm->be->allreduce_max_f32(m->comm, HPT_GROUP_TP, m->ce_mx, (size_t)N);
    be->vocab_sumexp(m->ce_sum, m->ce_tgt, m->logits, m->targets, m->ce_mx, N, m->Vl, m->nvalid,
                     m->v0);
    /* ce_sum and ce_tgt are adjacent (N each): one all-reduce for both */
    m->comm->be->allreduce_sum_f32(m->comm, HPT_GROUP_TP, m->ce_sum, 2 * (size_t)N);
    return be->vocab_ce_finish(m->logits, m->targets, m->ce_mx, m->ce_sum, m->ce_tgt, N, m->Vl,
                               m->nvalid, m->v0, grad_scale);
}

double hpt_model_forward(hpt_model *m, const int32_t *inputs, const int32_t *targets,
                         float grad_scale, int train)
{
    const hpt_backend *be = m->be;
    const hpt_config *c = &m->cfg;
    int N = m->B * m->T, C = c->hidden_size, L = c->num_hidden_layers;
    be->upload(m->tokens, inputs, sizeof(int32_t) * N);
    be->upload(m->targets, targets, sizeof(int32_t) * N);
    be->embedding_forward(m->layers[0].x, m->tokens, W(HPT_TENSOR_EMBED, -1), N, C, m->v0,
                          m->Vl);
    tp_sum(m, m->layers[0].x, (size_t)N * C);
    for (int l = 0; l < L; l++)
        layer_forward(m, l, l + 1 < L ? m->layers[l + 1].x : m->x_final);
    be->rmsnorm_forward(m->lnf, m->rstdf, m->x_final, W(HPT_TENSOR_FINAL_NORM, -1), N, C,
                        c->rms_norm_eps);
    be->matmul_forward(m->logits, m->lnf, W(HPT_TENSOR_LM_HEAD, -1), N, C, m->Vl);
    if (m->tp > 1)
        return vocab_parallel_ce(m, train ? grad_scale : 0.0f);
    if (train)
        return be->crossentropy_fused(m->logits, m->targets, N, m->Vl, grad_scale);
    return be->crossentropy_loss(m->logits, m->targets, N, m->Vl);
}

/* ------------------------------------------------------------- backward */

/* On entry m->dx (N,C) holds dL/d(output of layer l); on exit dL/d(a->x).
 * The input gradients of the column-parallel projections are partial sums
 * over TP and are all-reduced before each norm's backward. */
static void layer_backward(hpt_model *m, int l)
{
    const hpt_backend *be = m->be;
    const hpt_config *c = &m->cfg;
    hpt_layer_acts *a = &m->layers[l];
    int N = m->B * m->T, C = c->hidden_size, I = m->Il, hd = hpt_config_head_dim(c);
    int H = m->Hl, KV = m->KVl;
    /* MLP: x_out = xmid + down(h) */
    be->matmul_backward(m->dh, G(HPT_TENSOR_DOWN, l), m->dx, a->h, W(HPT_TENSOR_DOWN, l), N, I, C,
                        0);
    be->swiglu_backward(m->dgate, m->dup, m->dh, a->gate, a->up, (size_t)N * I);
    be->matmul_backward(m->dtmp, G(HPT_TENSOR_GATE, l), m->dgate, a->ln2, W(HPT_TENSOR_GATE, l), N,
                        C, I, 0);
    be->matmul_backward(m->dtmp, G(HPT_TENSOR_UP, l), m->dup, a->ln2, W(HPT_TENSOR_UP, l), N, C, I,
                        1);
    tp_sum(m, m->dtmp, (size_t)N * C);
    be->rmsnorm_backward(m->dx, G(HPT_TENSOR_MLP_NORM, l), m->dtmp, a->xmid,
                         W(HPT_TENSOR_MLP_NORM, l), a->rstd2, N, C);
    /* Attention: xmid = x + o_proj(atty) */
    be->matmul_backward(m->datty, G(HPT_TENSOR_O, l), m->dx, a->atty, W(HPT_TENSOR_O, l), N,
                        H * hd, C, 0);
    be->attention_backward(m->dq, m->dk, m->dv, m->dscores, m->datty, a->probs, a->q, a->k, a->v,
                           m->B, m->T, H, KV, hd);
    be->rope(m->dq, m->B, m->T, H, hd, c->rope_theta, 1);
    be->rope(m->dk, m->B, m->T, KV, hd, c->rope_theta, 1);
    be->matmul_backward(m->dtmp, G(HPT_TENSOR_Q, l), m->dq, a->ln1, W(HPT_TENSOR_Q, l), N, C,
                        H * hd, 0);
    be->matmul_backward(m->dtmp, G(HPT_TENSOR_K, l), m->dk, a->ln1, W(HPT_TENSOR_K, l), N, C,
                        KV * hd, 1);
    be->matmul_backward(m->dtmp, G(HPT_TENSOR_V, l), m->dv, a->ln1, W(HPT_TENSOR_V, l), N, C,
                        KV * hd, 1);
    tp_sum(m, m->dtmp, (size_t)N * C);
    be->rmsnorm_backward(m->dx, G(HPT_TENSOR_ATTN_NORM, l), m->dtmp, a->x,
                         W(HPT_TENSOR_ATTN_NORM, l), a->rstd1, N, C);
}

/* Report [lo, hi) of the gradient block as final. */
static void ready(hpt_model *m, size_t lo, size_t hi)
{
    if (m->grad_ready && hi > lo)
        m->grad_ready(m->grad_ready_ctx, lo, hi - lo);
}

void hpt_model_backward(hpt_model *m)
{
    const hpt_backend *be = m->be;
    const hpt_config *c = &m->cfg;
    int N = m->B * m->T, C = c->hidden_size;
    /* m->logits holds dL/dlogits (N,Vl). */
    be->matmul_backward(m->dtmp, G(HPT_TENSOR_LM_HEAD, -1), m->logits, m->lnf,
                        W(HPT_TENSOR_LM_HEAD, -1), N, C, m->Vl, 0);
    tp_sum(m, m->dtmp, (size_t)N * C);
    be->memset0(m->dx, sizeof(float) * (size_t)N * C);
    be->rmsnorm_backward(m->dx, G(HPT_TENSOR_FINAL_NORM, -1), m->dtmp, m->x_final,
                         W(HPT_TENSOR_FINAL_NORM, -1), m->rstdf, N, C);
    size_t layer0 = hpt_model_tensor(m, HPT_TENSOR_ATTN_NORM, 0)->offset;
    size_t tail = hpt_model_tensor(m, HPT_TENSOR_FINAL_NORM, -1)->offset, end = tail;
    ready(m, tail, m->nparams); /* final norm (+ untied LM head) */
    for (int l = c->num_hidden_layers - 1; l >= 0; l--) {
        if (m->recompute) /* regenerate layer l's activations from its input */
            layer_forward(m, l, m->recompute_out);
        layer_backward(m, l);
        size_t lo = hpt_model_tensor(m, HPT_TENSOR_ATTN_NORM, l)->offset;
        ready(m, lo, end);
        end = lo;
    }
    be->embedding_backward(G(HPT_TENSOR_EMBED, -1), m->dx, m->tokens, N, C, m->v0, m->Vl);
    ready(m, 0, layer0);
}

double hpt_model_grad_sumsq(const hpt_model *m, const float *grads, size_t lo, size_t hi)
{
    double ss = 0.0;
    for (int i = 0; i < m->ntensors; i++) {
        const hpt_tensor *t = &m->tensors[i];
        if (t->split == 0 && m->tp_rank != 0)
            continue; /* replicated: counted on TP rank 0 only */
        size_t a = t->offset, b = t->offset + (size_t)(t->rows * t->cols);
        a = a > lo ? a : lo;
        b = b < hi ? b : hi;
        if (a < b)
            ss += m->be->sumsq(grads + (a - lo), b - a); /* padding rows have zero grads */
    }
    return ss;
}

double hpt_model_flops_per_token(const hpt_config *c, int T)
{
    double C = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    double hd = hpt_config_head_dim(c), H = c->num_attention_heads, KV = c->num_key_value_heads;
    double L = c->num_hidden_layers;
    double per_layer = C * H * hd + 2 * C * KV * hd + H * hd * C + 3 * C * I;
    double n_matmul = L * per_layer + V * C;
    return 6.0 * n_matmul + 12.0 * L * T * C;
}
