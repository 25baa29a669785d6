/* model.c — Llama forward/backward over one micro-batch; see model.h. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_ring.h"
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

void hpt_tensor_name(hpt_tensor_kind kind, int layer, char *buf, size_t n)
{
    if (layer >= 0)
        snprintf(buf, n, "model.layers.%d.%s", layer, kind_names[kind]);
    else
        snprintf(buf, n, "%s", kind_names[kind]);
}

void hpt_tensor_global_shape(const hpt_config *c, hpt_tensor_kind kind, int64_t *rows,
                             int64_t *cols)
{
    int64_t C = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    int64_t hd = hpt_config_head_dim(c), H = c->num_attention_heads, KV = c->num_key_value_heads;
    int64_t r = C, k = 1;
    switch (kind) {
    case HPT_TENSOR_EMBED: case HPT_TENSOR_LM_HEAD: r = V; k = C; break;
    case HPT_TENSOR_Q: r = H * hd; k = C; break;
    case HPT_TENSOR_K: case HPT_TENSOR_V: r = KV * hd; k = C; break;
    case HPT_TENSOR_O: r = C; k = H * hd; break;
    case HPT_TENSOR_GATE: case HPT_TENSOR_UP: r = I; k = C; break;
    case HPT_TENSOR_DOWN: r = C; k = I; break;
    default: break; /* norms: (C) */
    }
    *rows = r;
    *cols = k;
}

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
    hpt_tensor_name(kind, layer, t->name, sizeof t->name);
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
    if (m->first)
        add_tensor(m, HPT_TENSOR_EMBED, -1, V, C, 1, m->Vl, std);
    for (int i = 0; i < m->nl; i++) {
        int l = m->layer_global[i];
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
    if (!m->last)
        return;
    add_tensor(m, HPT_TENSOR_FINAL_NORM, -1, C, 1, 0, 0, 0.0f);
    if (!c->tie_word_embeddings)
        add_tensor(m, HPT_TENSOR_LM_HEAD, -1, V, C, 1, m->Vl, std);
    else if (!m->first) { /* the last stage's copy of the tied embedding (the head) */
        add_tensor(m, HPT_TENSOR_EMBED, -1, V, C, 1, m->Vl, std);
        m->tensors[m->ntensors - 1].dup = 1;
    }
}

const hpt_tensor *hpt_model_tensor(const hpt_model *m, hpt_tensor_kind kind, int layer)
{
    /* Layer tensors follow a fixed pattern after the optional embedding. */
    int per_layer = HPT_TENSOR_DOWN - HPT_TENSOR_ATTN_NORM + 1, base = m->first ? 1 : 0;
    if (kind >= HPT_TENSOR_ATTN_NORM && kind <= HPT_TENSOR_DOWN) {
        int i = -1; /* the local index of global `layer` */
        for (int c = 0; c < m->nchunks && i < 0; c++) {
            int i0 = m->chunk_i0[c], n = m->chunk_i0[c + 1] - i0, g0 = m->layer_global[i0];
            if (layer >= g0 && layer < g0 + n)
                i = i0 + (layer - g0);
        }
        if (i < 0)
            return NULL;
        return &m->tensors[base + i * per_layer + (kind - HPT_TENSOR_ATTN_NORM)];
    }
    for (int i = 0; i < m->ntensors; i++)
        if (m->tensors[i].kind == kind)
            return &m->tensors[i];
    return NULL;
}

float *hpt_model_ptr(const hpt_model *m, float *block, hpt_tensor_kind kind, int layer)
{
    const hpt_tensor *t = hpt_model_tensor(m, kind, layer);
    if (!t && kind == HPT_TENSOR_LM_HEAD) /* tied: the head is the embedding */
        t = hpt_model_tensor(m, HPT_TENSOR_EMBED, -1);
    HPT_CHECK(t);
    return block + t->offset;
}

/* ---------------------------------------------------- recomputation */

hpt_status hpt_recompute_parse(const char *arg, int *out)
{
    static const char *const names[] = {"none", "full", "selective"};
    if (!arg) {
        *out = HPT_RECOMPUTE_FULL;
        return HPT_OK;
    }
    for (int i = 0; i < 3; i++)
        if (!strcmp(arg, names[i])) {
            *out = i;
            return HPT_OK;
        }
    return hpt_error_set(HPT_ERR_USAGE, "--recompute '%s': expected full (keep only layer inputs), "
                         "selective (keep GEMM outputs) or none", arg);
}

/* --------------------------------------------------- initialisation */

static uint64_t tensor_stream(const hpt_tensor *t)
{
    return hpt_hash_str(kind_names[t->kind]) ^ ((uint64_t)(t->layer + 1) * 0x9E3779B97F4A7C15ull);
}

void hpt_model_init_params(hpt_model *m, uint64_t seed)
{
    hpt_model_init_params_range(m, seed, 0, m->nparams);
}

void hpt_model_init_params_range(hpt_model *m, uint64_t seed, size_t lo, size_t hi)
{
    if (hi <= lo)
        return;
    float *host = calloc(hi - lo, sizeof(float));
    if (!host)
        HPT_FATAL("out of memory: %zu bytes for parameter initialisation",
                  sizeof(float) * (hi - lo));
    for (int i = 0; i < m->ntensors; i++) {
        const hpt_tensor *t = &m->tensors[i];
        size_t a = t->offset, b = a + (size_t)(t->rows * t->cols);
        if (b <= lo || a >= hi)
            continue;
        uint64_t stream = tensor_stream(t);
        float std = t->init_std;
        /* the rows holding elements of [lo, hi) */
        int64_t r0 = a < lo ? (int64_t)((lo - a) / (size_t)t->cols) : 0;
        int64_t r1 = b > hi ? (int64_t)((hi - a + (size_t)t->cols - 1) / (size_t)t->cols) : t->rows;
#pragma omp parallel for schedule(static)
        for (int64_t r = r0; r < r1; r++) {
            int64_t gr = t->row0 + r;
            for (int64_t c = 0; c < t->cols; c++) {
                size_t x = a + (size_t)(r * t->cols + c);
                if (x < lo || x >= hi)
                    continue;
                /* value of global element (gr, col0 + c); padding rows stay 0 */
                uint64_t e = (uint64_t)(gr * t->g_cols + t->col0 + c);
                host[x - lo] = gr >= t->g_rows ? 0.0f
                               : std > 0  ? std * hpt_philox_normal(seed, stream, e)
                                          : 1.0f;
            }
        }
    }
    m->be->upload(m->params + lo, host, sizeof(float) * (hi - lo));
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

/* Element i of an activation (act dtype) buffer p: pointer arithmetic in
 * bytes, the values never read here. */
static void *act_at(const hpt_model *m, void *p, size_t i)
{
    return (char *)p + i * m->act_elem;
}

/* Which of a layer's activations carve_layer lays out: the GEMM outputs
 * and the residual (kept by selective recomputation), the element-wise
 * outputs (RMSNorm, attention core, SwiGLU: recomputed by it), or both. */
enum { ACTS_GEMM = 1, ACTS_ELEM = 2, ACTS_ALL = 3 };

/* One layer's activations (x excluded), the parts in `which`. */
static void carve_layer(hpt_model *m, char *base, size_t *off, hpt_layer_acts *a, int which)
{
    const hpt_config *c = &m->cfg;
    size_t N = (size_t)m->B * m->T, Nl = m->Nl, C = c->hidden_size, I = m->Il;
    size_t QD = (size_t)m->Hl * hpt_config_head_dim(c), KD = (size_t)m->KVl * hpt_config_head_dim(c);
    size_t ae = m->act_elem; /* the `void *` activations: act dtype */
    if (which & ACTS_ELEM) {
        a->ln1 = carve(base, off, N * C, ae);
        a->rstd1 = carve(base, off, Nl, 4);
    }
    if (which & ACTS_GEMM) {
        a->q = carve(base, off, N * QD, ae);
        a->k = carve(base, off, N * KD, ae);
        a->v = carve(base, off, N * KD, ae);
    }
    if (which & ACTS_ELEM) {
        a->att_saved = carve(base, off, m->be->attention_saved_floats(m->B, m->T, m->Hl), 4);
        a->atty = carve(base, off, N * QD, ae);
    }
    if (which & ACTS_GEMM)
        a->xmid = carve(base, off, Nl * C, 4);
    if (which & ACTS_ELEM) {
        a->ln2 = carve(base, off, N * C, ae);
        a->rstd2 = carve(base, off, Nl, 4);
    }
    if (which & ACTS_GEMM) {
        a->gate = carve(base, off, N * I, ae);
        a->up = carve(base, off, N * I, ae);
    }
    if (which & ACTS_ELEM)
        a->h = carve(base, off, N * I, ae);
}

/* Slot k's activations: per layer (all of them; only the layer inputs
 * when recomputing fully; inputs and GEMM outputs when recomputing
 * selectively, the rest shared from `shared`), and the stage-end buffers. */
static void carve_slot(hpt_model *m, char *base, size_t *off, hpt_slot *sl, hpt_layer_acts *shared,
                       int k)
{
    size_t N = (size_t)m->B * m->T, Nl = m->Nl, C = m->cfg.hidden_size;
    /* one chunk: every slot has all layers and (last stage) the head; a
     * pool (interleaved): the largest chunk's count of layer sets, the head
     * in the head slots only */
    int pool = m->nchunks > 1, n = pool ? 0 : m->nl;
    int last = m->last && (!pool || k >= m->nslots - m->head_slots);
    for (int c = 0; pool && c < m->nchunks; c++)
        n = m->chunk_i0[c + 1] - m->chunk_i0[c] > n ? m->chunk_i0[c + 1] - m->chunk_i0[c] : n;
    for (int i = 0; i < n; i++) {
        hpt_layer_acts *a = &(pool ? sl->pool : sl->layers)[i];
        *a = *shared;
        if (m->recompute == HPT_RECOMPUTE_NONE)
            carve_layer(m, base, off, a, ACTS_ALL);
        else if (m->recompute == HPT_RECOMPUTE_SELECTIVE)
            carve_layer(m, base, off, a, ACTS_GEMM);
        a->x = carve(base, off, Nl * C, 4);
    }
    sl->x_final = carve(base, off, Nl * C, 4);
    sl->lnf = carve(base, off, last ? N * C : 1, m->act_elem);
    sl->rstdf = carve(base, off, Nl, 4);
    sl->logits = carve(base, off, last ? N * m->Vl : 1, 4);
    sl->tokens = carve(base, off, N, 4);
    sl->targets = carve(base, off, N, 4);
    sl->ce_mx = carve(base, off, N, 4);
    sl->ce_sum = carve(base, off, 2 * N, 4); /* ce_sum, ce_tgt adjacent: one all-reduce */
    sl->ce_tgt = sl->ce_sum ? sl->ce_sum + N : NULL;
}

static size_t layout_acts(hpt_model *m, char *base)
{
    const hpt_config *c = &m->cfg;
    size_t N = (size_t)m->B * m->T, C = c->hidden_size, I = m->Il;
    size_t QD = (size_t)m->Hl * hpt_config_head_dim(c);
    size_t KD = (size_t)m->KVl * hpt_config_head_dim(c);
    size_t P = m->be->attention_scratch_floats(m->B, m->T, m->Hl), off = 0;
    hpt_layer_acts shared = {0};
    if (m->recompute == HPT_RECOMPUTE_FULL) { /* one set of layer activations for all */
        carve_layer(m, base, &off, &shared, ACTS_ALL);
        m->recompute_out = carve(base, &off, (size_t)m->Nl * C, 4);
    } else if (m->recompute == HPT_RECOMPUTE_SELECTIVE) { /* one set of the recomputed ones */
        carve_layer(m, base, &off, &shared, ACTS_ELEM);
    }
    for (int k = 0; k < m->nslots; k++)
        carve_slot(m, base, &off, &m->slots[k], &shared, k);
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
    for (int w = 0; w < m->nwstash; w++)
        for (int i = 0; i < m->nl; i++) {
            hpt_wgrad_layer *g = &m->wstash[w][i];
            size_t ae = m->act_elem;
            g->d_down = carve(base, &off, N * C, 4);
            g->d_o = carve(base, &off, N * C, 4);
            g->dgate = carve(base, &off, N * I, 4);
            g->dup = carve(base, &off, N * I, 4);
            g->dq = carve(base, &off, N * QD, 4);
            g->dk = carve(base, &off, N * KD, 4);
            g->dv = carve(base, &off, N * KD, 4);
            if (m->recompute != HPT_RECOMPUTE_NONE) {
                g->ln1 = carve(base, &off, N * C, ae);
                g->atty = carve(base, &off, N * QD, ae);
                g->ln2 = carve(base, &off, N * C, ae);
                g->h = carve(base, &off, N * I, ae);
            }
        }
    if (m->sp) {
        m->sp_tmp = carve(base, &off, (size_t)m->Nl * C, 4);
        m->dfull = carve(base, &off, N * C, 4);
        m->sp_norm_grads = carve(base, &off, m->sp_norm_count, 4);
    }
    return off;
}

void hpt_model_use_slot(hpt_model *m, int k)
{
    hpt_slot *sl = &m->slots[k];
    int c = m->slot_chunk[k];
    m->cur_i0 = m->chunk_i0[c];
    m->cur_i1 = m->chunk_i0[c + 1];
    m->cur_first = m->first && c == 0;
    m->cur_last = m->last && c == m->nchunks - 1;
    m->layers = sl->layers;
    m->x_final = sl->x_final;
    m->lnf = sl->lnf;
    m->rstdf = sl->rstdf;
    m->logits = sl->logits;
    m->tokens = sl->tokens;
    m->targets = sl->targets;
    m->ce_mx = sl->ce_mx;
    m->ce_sum = sl->ce_sum;
    m->ce_tgt = sl->ce_tgt;
}

void hpt_model_bind_slot(hpt_model *m, int k, int c)
{
    hpt_slot *sl = &m->slots[k];
    int head = m->last && c == m->nchunks - 1;
    HPT_CHECK(m->nchunks > 1 && c >= 0 && c < m->nchunks && head == (k >= m->nslots - m->head_slots));
    m->slot_chunk[k] = c;
    for (int i = m->chunk_i0[c]; i < m->chunk_i0[c + 1]; i++)
        sl->layers[i] = sl->pool[i - m->chunk_i0[c]];
}

float *hpt_model_stage_input(hpt_model *m, int k)
{
    return m->slots[k].layers[m->chunk_i0[m->slot_chunk[k]]].x;
}
float *hpt_model_stage_output(hpt_model *m, int k) { return m->slots[k].x_final; }
size_t hpt_model_stage_elems(const hpt_model *m) { return (size_t)m->Nl * m->cfg.hidden_size; }

/* Sequence parallelism's local token range, counts and the size of the
 * packed replicated-tensor gradients (after build_tensor_table). */
static hpt_status set_sp(hpt_model *m, const hpt_model_opts *mo)
{
    int N = m->B * m->T, C = m->cfg.hidden_size;
    m->sp = mo->sequence_parallel && m->tp > 1;
    m->Nl = m->sp ? N / m->tp : N;
    m->n0 = m->sp ? m->tp_rank * m->Nl : 0;
    if (!m->sp)
        return HPT_OK;
    if (N % m->tp)
        return hpt_error_set(HPT_ERR_USAGE, "--sequence-parallel: a micro-batch of %d x %d = %d "
                             "tokens does not split into --tp %d equal parts (choose --batch x "
                             "--seq-len divisible by TP)", m->B, m->T, N, m->tp);
    if ((size_t)m->Nl * C > 2147483647u)
        return hpt_error_set(HPT_ERR_USAGE, "--sequence-parallel: a shard of %d x %d floats "
                             "exceeds 2^31", m->Nl, C);
    /* The norm outputs (act dtype) are all-gathered as whole floats: C is
     * even (RoPE pairs head dims), so Nl*C*act_elem is a multiple of 4. */
    if ((size_t)m->Nl * C * m->act_elem % 4)
        return hpt_error_set(HPT_ERR_USAGE, "--sequence-parallel: a shard of %d x %d activations "
                             "of %zu bytes is not a whole number of floats", m->Nl, C,
                             m->act_elem);
    m->sp_counts = malloc(sizeof(int) * (size_t)m->tp);
    m->sp_act_counts = malloc(sizeof(int) * (size_t)m->tp);
    if (!m->sp_counts || !m->sp_act_counts)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    for (int r = 0; r < m->tp; r++) {
        m->sp_counts[r] = m->Nl * C;
        m->sp_act_counts[r] = (int)((size_t)m->Nl * C * m->act_elem / 4);
    }
    for (int i = 0; i < m->ntensors; i++)
        if (m->tensors[i].split == 0)
            m->sp_norm_count += (size_t)(m->tensors[i].rows * m->tensors[i].cols);
    return HPT_OK;
}

/* Local sizes for TP rank tp_rank of tp. */
static hpt_status set_tp(hpt_model *m, const hpt_config *cfg, hpt_comm *comm)
{
    m->comm = comm;
    m->tp = comm ? comm->tp : 1;
    m->tp_rank = comm ? comm->tp_rank : 0;
    int P = m->tp;
    hpt_status st = hpt_config_check_tp(cfg, P);
    if (st)
        return st;
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
    hpt_model_opts mo = {0};
    return hpt_model_init_opts(m, cfg, be, &mo, B, T, seed);
}

/* Stage coordinates and the layer range. */
static hpt_status set_pp(hpt_model *m, const hpt_config *cfg, const hpt_model_opts *mo)
{
    m->pp = mo->comm ? mo->comm->pp : 1;
    m->pp_rank = mo->comm ? mo->comm->pp_rank : 0;
    m->first = m->pp_rank == 0;
    m->last = m->pp_rank == m->pp - 1;
    int V = mo->nchunks > 1 ? mo->nchunks : 1, L = cfg->num_hidden_layers;
    int one_l0 = mo->l0, one_l1 = mo->l1 ? mo->l1 : L;
    m->nchunks = V;
    m->nslots = mo->nslots > 0 ? mo->nslots : 1;
    m->chunk_i0 = calloc((size_t)V + 1, sizeof(int));
    m->slot_chunk = calloc((size_t)m->nslots, sizeof(int));
    m->layer_global = calloc((size_t)L, sizeof(int));
    if (!m->chunk_i0 || !m->slot_chunk || !m->layer_global)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory for the layer map");
    m->nl = 0;
    for (int c = 0, prev = 0; c < V; c++) {
        int a = V > 1 ? mo->chunk_l0[c] : one_l0, b = V > 1 ? mo->chunk_l1[c] : one_l1;
        if (a < prev || b > L || a >= b)
            return hpt_error_set(HPT_ERR_USAGE, "pipeline stage %d%s: layer range [%d, %d) is "
                                 "empty, out of order or outside the model's %d layers",
                                 m->pp_rank, V > 1 ? " (a model chunk)" : "", a, b, L);
        m->chunk_i0[c] = m->nl;
        for (int l = a; l < b; l++)
            m->layer_global[m->nl++] = l;
        prev = b;
    }
    m->chunk_i0[V] = m->nl;
    m->l0 = m->layer_global[0];
    m->l1 = m->layer_global[m->nl - 1] + 1;
    m->head_slots = V > 1 && m->last ? mo->head_slots : 0;
    if (V > 1 && m->last && (m->head_slots < 1 || m->head_slots >= m->nslots))
        return hpt_error_set(HPT_ERR_INTERNAL, "%d head slots of %d", m->head_slots, m->nslots);
    for (int k = 0; k < m->nslots; k++) /* bound before use when interleaved */
        m->slot_chunk[k] = V > 1 && k >= m->nslots - m->head_slots ? V - 1 : 0;
    return HPT_OK;
}

hpt_status hpt_model_init_opts(hpt_model *m, const hpt_config *cfg, const hpt_backend *be,
                               const hpt_model_opts *mo, int B, int T, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    if (mo->recompute < HPT_RECOMPUTE_NONE || mo->recompute > HPT_RECOMPUTE_SELECTIVE)
        return hpt_error_set(HPT_ERR_USAGE, "recompute mode %d: expected none (0), full (1) or "
                             "selective (2)", mo->recompute);
    m->recompute = mo->recompute;
    hpt_status st = set_tp(m, cfg, mo->comm);
    if (!st)
        st = set_pp(m, cfg, mo);
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
    m->act = hpt_backend_act_dtype(be); /* after the backend's set_precision */
    m->act_elem = hpt_dtype_bytes(m->act);
    m->mlp_grad_act = m->act != HPT_DTYPE_F32 && be->swiglu_backward_act && be->matmul_backward_act;
    m->B = B;
    m->cp = mo->comm && mo->comm->cp > 1 ? mo->comm->cp : 1;
    m->cp_rank = m->cp > 1 ? mo->comm->cp_rank : 0;
    if ((st = hpt_cp_check(T, m->cp))) {
        hpt_model_free(m);
        return st;
    }
    m->T_seq = T;
    m->T = T / m->cp; /* the local rows */
    int per_layer = HPT_TENSOR_DOWN - HPT_TENSOR_ATTN_NORM + 1;
    m->tensors = calloc((size_t)(3 + m->nl * per_layer), sizeof(hpt_tensor));
    m->slots = calloc((size_t)m->nslots, sizeof(hpt_slot));
    m->nwstash = mo->wstash > 0 ? mo->wstash : 0;
    m->wstash = m->nwstash ? calloc((size_t)m->nwstash, sizeof *m->wstash) : NULL;
    int ok = m->tensors && m->slots && (!m->nwstash || m->wstash);
    for (int w = 0; ok && w < m->nwstash; w++)
        ok = (m->wstash[w] = calloc((size_t)(m->nl ? m->nl : 1), sizeof(hpt_wgrad_layer))) != NULL;
    for (int k = 0; ok && k < m->nslots; k++)
        ok = (m->slots[k].layers = calloc((size_t)m->nl, sizeof(hpt_layer_acts))) != NULL &&
             (m->slots[k].pool = calloc((size_t)m->nl, sizeof(hpt_layer_acts))) != NULL;
    if (!ok) {
        hpt_model_free(m);
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory for the tensor table");
    }
    build_tensor_table(m);
    if ((st = set_sp(m, mo))) {
        hpt_model_free(m);
        return st;
    }
    m->act_bytes = layout_acts(m, NULL);
    hpt_error_set(HPT_OK, "%s", ""); /* a failing alloc may leave its reason here */
    m->params = mo->params_virtual && be->alloc_virtual ? be->alloc_virtual(sizeof(float) * m->nparams)
                                                        : be->alloc(sizeof(float) * m->nparams);
    m->grads = m->params ? be->alloc(sizeof(float) * m->nparams) : NULL;
    m->act_block = m->grads ? be->alloc(m->act_bytes) : NULL;
    if (!m->params || !m->grads || !m->act_block) {
        size_t want = 2 * sizeof(float) * m->nparams + m->act_bytes;
        char why[512];
        snprintf(why, sizeof why, "%s", hpt_error_msg());
        hpt_model_free(m);
        /* a backend's reason (device memory) is a usage error: exit 2 */
        return hpt_error_set(why[0] ? HPT_ERR_USAGE : HPT_ERR_INTERNAL,
                             "out of memory: model needs %.1f MiB for parameters, gradients and "
                             "activations (micro-batch %d x %d)%s%s",
                             want / 1048576.0, B, T, why[0] ? ": " : "", why);
    }
    if (be->reserve) { /* the backend's scratch now: a shortage is a start-up error */
        int hd = hpt_config_head_dim(cfg);
        size_t widest = (size_t)cfg->hidden_size; /* o, down */
        /* q; k, v; gate, up (unless their gradients come in bf16:
         * matmul_backward_act rounds nothing); the LM head */
        size_t w[4] = {(size_t)m->Hl * hd, (size_t)m->KVl * hd, m->mlp_grad_act ? 0 : (size_t)m->Il,
                       m->last ? (size_t)m->Vl : 0};
        for (int i = 0; i < 4; i++)
            widest = w[i] > widest ? w[i] : widest;
        hpt_backend_shapes sh = {B, m->T, m->Hl, m->KVl, hd, cfg->hidden_size, widest,
                                 cfg->rope_theta, m->params, m->Vl};
        if ((st = be->reserve(&sh))) {
            char why[512];
            snprintf(why, sizeof why, "%s", hpt_error_msg());
            hpt_model_free(m);
            return hpt_error_set(st, "out of memory: %s", why);
        }
    }
    if (m->cp > 1 && (st = hpt_ring_init(&m->ring, be, mo->comm, B, T, m->KVl,
                                         hpt_config_head_dim(cfg)))) {
        hpt_model_free(m);
        return st;
    }
    layout_acts(m, m->act_block);
    hpt_model_use_slot(m, 0);
    if (!(mo && mo->skip_init))
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
    hpt_ring_free(m->ring);
    free(m->tensors);
    free(m->chunk_i0);
    free(m->layer_global);
    free(m->slot_chunk);
    free(m->sp_counts);
    free(m->sp_act_counts);
    for (int k = 0; m->slots && k < m->nslots; k++)
        free(m->slots[k].layers), free(m->slots[k].pool);
    free(m->slots);
    for (int w = 0; m->wstash && w < m->nwstash; w++)
        free(m->wstash[w]);
    free(m->wstash);
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

/* Sum a row-parallel GEMM's partial (N,C) result over TP and return this
 * rank's (Nl,C) rows of the sum: the all-reduced buffer itself, or under
 * sequence parallelism m->sp_tmp after a reduce-scatter (Korthikanti et
 * al. 2022, section 4.2.2: the g operator becomes g-bar). Also the
 * backward of an all-gather. */
static const float *tp_reduce(hpt_model *m, float *partial)
{
    if (!m->sp) {
        tp_sum(m, partial, (size_t)m->B * m->T * m->cfg.hidden_size);
        return partial;
    }
    m->comm->be->reduce_scatter_sum_f32(m->comm, HPT_GROUP_TP, partial, m->sp_tmp, m->sp_counts);
    return m->sp_tmp;
}

/* Sequence parallelism: `full` (N,C), an activation (act dtype), holds
 * this rank's rows [n0, n0+Nl); all-gather the others' in place (before a
 * column-parallel GEMM: the f operator becomes f-bar). An all-gather only
 * copies, so the act_elem-byte elements travel as Nl*C*act_elem/4 floats
 * per rank (sp_act_counts). No-op otherwise. */
static void sp_gather(hpt_model *m, void *full)
{
    if (m->sp)
        m->comm->be->allgather_inplace_f32(m->comm, HPT_GROUP_TP, full, m->sp_act_counts);
}

/* dL/d(this rank's residual rows) (Nl,C) -> dL/d(all N rows) (N,C) for
 * the backward of the GEMMs that read the gathered norm output (the
 * backward of a reduce-scatter); the input itself without SP. */
static const float *sp_gather_grad(hpt_model *m, const float *dx)
{
    if (!m->sp)
        return dx;
    m->comm->be->allgather_f32(m->comm, HPT_GROUP_TP, dx, m->dfull,
                               (size_t)m->Nl * m->cfg.hidden_size);
    return m->dfull;
}

void hpt_model_sp_sum_grads(hpt_model *m)
{
    if (!m->sp || !m->sp_norm_count)
        return;
    size_t off = 0;
    for (int pass = 0; pass < 2; pass++) { /* pack, all-reduce, unpack */
        off = 0;
        for (int i = 0; i < m->ntensors; i++) {
            const hpt_tensor *t = &m->tensors[i];
            if (t->split != 0)
                continue;
            size_t n = (size_t)(t->rows * t->cols);
            if (pass == 0)
                m->be->copy(m->sp_norm_grads + off, m->grads + t->offset, sizeof(float) * n);
            else
                m->be->copy(m->grads + t->offset, m->sp_norm_grads + off, sizeof(float) * n);
            off += n;
        }
        if (pass == 0)
            m->comm->be->allreduce_sum_f32(m->comm, HPT_GROUP_TP, m->sp_norm_grads, off);
    }
}

/* out (rows,C) = x + delta, the residual add (fp32), then, when norm_out is
 * not NULL, norm_out (rows,C, in the activation dtype) and rstd (rows) =
 * the RMSNorm with weight w of out: the backend's fused add_rmsnorm_forward
 * (one pass over the residual rows) when it has one, else add and
 * rmsnorm_forward (bitwise the same). */
static void residual_add_norm(hpt_model *m, float *out, const float *x, const float *delta,
                              void *norm_out, float *rstd, const float *w, int rows)
{
    const hpt_backend *be = m->be;
    int C = m->cfg.hidden_size;
    if (norm_out && be->add_rmsnorm_forward) {
        be->add_rmsnorm_forward(out, norm_out, rstd, x, delta, w, rows, C, m->cfg.rms_norm_eps);
        return;
    }
    be->add(out, x, delta, (size_t)rows * C);
    if (norm_out)
        be->rmsnorm_forward(norm_out, rstd, out, w, rows, C, m->cfg.rms_norm_eps);
}

/* ZeRO-3's units (hpt_model_param_units): where each one starts and
 * ends, and the hooks around their use (no-ops without them). */
static size_t head_lo(const hpt_model *m)
{
    return hpt_model_tensor(m, HPT_TENSOR_FINAL_NORM, -1)->offset;
}

static size_t layer_lo(const hpt_model *m, int i)
{
    return hpt_model_tensor(m, HPT_TENSOR_ATTN_NORM, m->layer_global[i])->offset;
}

static size_t layer_hi(const hpt_model *m, int i)
{
    return i + 1 < m->nl ? layer_lo(m, i + 1) : m->last ? head_lo(m) : m->nparams;
}

int hpt_model_param_units(const hpt_model *m, size_t (*units)[2])
{
    int n = 0;
#define UNIT(a, b)                                                                                 \
    do {                                                                                           \
        if (units) {                                                                               \
            units[n][0] = (a);                                                                     \
            units[n][1] = (b);                                                                     \
        }                                                                                          \
        n++;                                                                                       \
    } while (0)
    if (m->first)
        UNIT(0, m->nl ? layer_lo(m, 0) : m->last ? head_lo(m) : m->nparams);
    for (int i = 0; i < m->nl; i++)
        UNIT(layer_lo(m, i), layer_hi(m, i));
    if (m->last && head_lo(m) < m->nparams)
        UNIT(head_lo(m), m->nparams);
#undef UNIT
    return n;
}

static void need(hpt_model *m, size_t lo, size_t hi, int backward)
{
    if (m->param_need && hi > lo)
        m->param_need(m->param_ctx, lo, hi, backward);
}

static void done(hpt_model *m, size_t lo, size_t hi)
{
    if (m->param_done && hi > lo)
        m->param_done(m->param_ctx, lo, hi);
}

/* The head's parameters: the final norm and the head unit, and on one
 * stage with tied embeddings the embedding unit (the head is the
 * embedding). */
static void need_head(hpt_model *m, int backward)
{
    need(m, head_lo(m), m->nparams, backward);
    if (m->first && !hpt_model_tensor(m, HPT_TENSOR_LM_HEAD, -1))
        need(m, 0, layer_lo(m, 0), backward);
}

static void done_head(hpt_model *m)
{
    done(m, head_lo(m), m->nparams);
    if (m->first && !hpt_model_tensor(m, HPT_TENSOR_LM_HEAD, -1))
        done(m, 0, layer_lo(m, 0));
}

/* x_out (Nl,C) = layer l applied to a->x (Nl,C). Local shapes: q (N,Hl*hd),
 * k/v (N,KVl*hd), gate/up/h (N,Il); o_proj and down_proj produce partial
 * sums that are all-reduced over TP (reduce-scattered under sequence
 * parallelism, whose norms run on this rank's Nl tokens and are
 * all-gathered to N before q/k/v and gate/up). chain = 1 (the stage's
 * forward sweep): layer i > 0's ln1 was computed by layer i-1's last
 * residual add, and this layer's last add also computes the norm that
 * reads x_out (layer i+1's ln1, or the final norm's lnf on the last
 * stage). chain = 0 (full recomputation): this layer's norms only. */
/* RoPE of x (B,T,nh,hd): at the local rows' global positions under
 * context parallelism, else at 0 .. T-1. */
static void attn_rope(hpt_model *m, void *x, hpt_dtype dt, int nh, int inverse)
{
    int hd = hpt_config_head_dim(&m->cfg);
    if (m->ring)
        m->be->rope_pos(x, dt, m->B, m->T, nh, hd, m->cfg.rope_theta, inverse,
                        hpt_ring_positions(m->ring));
    else
        m->be->rope(x, dt, m->B, m->T, nh, hd, m->cfg.rope_theta, inverse);
}

/* RoPE of q (H heads) and k (KV heads): one launch where the backend has
 * rope_qk (bitwise two rope calls), else attn_rope on each. */
static void attn_rope_qk(hpt_model *m, void *q, void *k, hpt_dtype dt, int inverse)
{
    if (!m->ring && m->be->rope_qk) {
        m->be->rope_qk(q, k, dt, m->B, m->T, m->Hl, m->KVl, hpt_config_head_dim(&m->cfg),
                       m->cfg.rope_theta, inverse);
        return;
    }
    attn_rope(m, q, dt, m->Hl, inverse);
    attn_rope(m, k, dt, m->KVl, inverse);
}

/* The attention core of layer acts a: atty and att_saved from q, k, v
 * (after RoPE); over the CP ring under context parallelism (collective
 * over HPT_GROUP_CP). */
static void attn_core_forward(hpt_model *m, hpt_layer_acts *a)
{
    int hd = hpt_config_head_dim(&m->cfg);
    if (m->ring)
        hpt_ring_forward(m->ring, a->atty, a->att_saved, a->q, a->k, a->v, m->Hl);
    else
        m->be->attention_forward(a->atty, a->att_saved, a->q, a->k, a->v, m->B, m->T, m->Hl,
                                 m->KVl, hd);
}

/* Its backward from m->datty into m->dq, m->dk, m->dv, with RoPE undone
 * (the gradients of the projections' outputs). */
static void attn_core_backward(hpt_model *m, hpt_layer_acts *a, float *dq, float *dk, float *dv)
{
    int hd = hpt_config_head_dim(&m->cfg);
    if (m->ring)
        hpt_ring_backward(m->ring, dq, dk, dv, m->dscores, m->datty, a->atty, a->att_saved, a->q,
                          a->k, a->v, m->Hl);
    else
        m->be->attention_backward(dq, dk, dv, m->dscores, m->datty, a->atty, a->att_saved, a->q,
                                  a->k, a->v, m->B, m->T, m->Hl, m->KVl, hd);
    attn_rope_qk(m, dq, dk, HPT_DTYPE_F32, 1);
}

static void layer_forward(hpt_model *m, int i, float *x_out, int chain)
{
    const hpt_backend *be = m->be;
    const hpt_config *c = &m->cfg;
    hpt_layer_acts *a = &m->layers[i]; /* local index i, global layer l */
    int l = m->layer_global[i];
    int N = m->B * m->T, C = c->hidden_size, I = m->Il, hd = hpt_config_head_dim(c);
    int H = m->Hl, KV = m->KVl, Nl = m->Nl;
    size_t o = (size_t)m->n0 * C; /* this rank's rows of a gathered (N,C) */
    hpt_dtype act = m->act, f32 = HPT_DTYPE_F32;
    if (!chain || i == m->cur_i0)
        be->rmsnorm_forward(act_at(m, a->ln1, o), a->rstd1, a->x, W(HPT_TENSOR_ATTN_NORM, l), Nl,
                            C, c->rms_norm_eps);
    sp_gather(m, a->ln1);
    be->matmul_forward(a->q, act, a->ln1, W(HPT_TENSOR_Q, l), N, C, H * hd);
    be->matmul_forward(a->k, act, a->ln1, W(HPT_TENSOR_K, l), N, C, KV * hd);
    be->matmul_forward(a->v, act, a->ln1, W(HPT_TENSOR_V, l), N, C, KV * hd);
    attn_rope_qk(m, a->q, a->k, act, 0);
    attn_core_forward(m, a);
    be->matmul_forward(m->dtmp, f32, a->atty, W(HPT_TENSOR_O, l), N, H * hd, C);
    residual_add_norm(m, a->xmid, a->x, tp_reduce(m, m->dtmp), act_at(m, a->ln2, o), a->rstd2,
                      W(HPT_TENSOR_MLP_NORM, l), Nl);
    sp_gather(m, a->ln2);
    be->matmul_forward(a->gate, act, a->ln2, W(HPT_TENSOR_GATE, l), N, C, I);
    be->matmul_forward(a->up, act, a->ln2, W(HPT_TENSOR_UP, l), N, C, I);
    be->swiglu_forward(a->h, a->gate, a->up, (size_t)N * I);
    be->matmul_forward(m->dtmp, f32, a->h, W(HPT_TENSOR_DOWN, l), N, I, C);
    /* the norm that reads x_out: the next layer's ln1 or the final norm */
    void *ln = NULL;
    float *rstd = NULL;
    const float *w = NULL;
    if (chain && i + 1 < m->cur_i1) {
        need(m, layer_lo(m, i + 1), layer_hi(m, i + 1), 0); /* its norm weight */
        ln = act_at(m, m->layers[i + 1].ln1, o);
        rstd = m->layers[i + 1].rstd1;
        w = W(HPT_TENSOR_ATTN_NORM, l + 1);
    } else if (chain && m->cur_last) {
        need(m, head_lo(m), m->nparams, 0); /* the final norm's weight */
        ln = act_at(m, m->lnf, o);
        rstd = m->rstdf;
        w = W(HPT_TENSOR_FINAL_NORM, -1);
    }
    residual_add_norm(m, x_out, a->xmid, tp_reduce(m, m->dtmp), ln, rstd, w, Nl);
}

/* Selective recomputation: refill layer i's element-wise activations
 * (ln1, rstd1, the attention core's atty and saved state, ln2, rstd2, h)
 * from the kept ones (x, q, k, v, xmid, gate, up) with the kernels and
 * inputs of layer_forward, so they are bitwise what it computed. The
 * attention goes through be->attention_forward: its saved state is
 * whatever that backend's backward needs. No communication, except the
 * all-gathers of the norm outputs under sequence parallelism and the CP
 * ring under context parallelism. */
static void layer_recompute_selective(hpt_model *m, int i)
{
    const hpt_backend *be = m->be;
    const hpt_config *c = &m->cfg;
    hpt_layer_acts *a = &m->layers[i];
    int l = m->layer_global[i];
    int N = m->B * m->T, C = c->hidden_size;
    size_t o = (size_t)m->n0 * C;
    be->rmsnorm_forward(act_at(m, a->ln1, o), a->rstd1, a->x, W(HPT_TENSOR_ATTN_NORM, l), m->Nl,
                        C, c->rms_norm_eps);
    sp_gather(m, a->ln1);
    attn_core_forward(m, a);
    be->rmsnorm_forward(act_at(m, a->ln2, o), a->rstd2, a->xmid, W(HPT_TENSOR_MLP_NORM, l), m->Nl,
                        C, c->rms_norm_eps);
    sp_gather(m, a->ln2);
    be->swiglu_forward(a->h, a->gate, a->up, (size_t)N * m->Il);
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

double hpt_model_stage_forward(hpt_model *m, int k, const int32_t *inputs, const int32_t *targets,
                               float grad_scale, int train)
{
    const hpt_backend *be = m->be;
    const hpt_config *c = &m->cfg;
    int N = m->B * m->T, C = c->hidden_size;
    hpt_model_use_slot(m, k);
    if (m->cur_first) {
        need(m, 0, layer_lo(m, 0), 0);
        be->upload(m->tokens, inputs, sizeof(int32_t) * N);
        if (m->sp) { /* vocab-parallel partial rows, reduce-scattered to this rank's tokens */
            be->embedding_forward(m->dtmp, m->tokens, W(HPT_TENSOR_EMBED, -1), N, C, m->v0, m->Vl);
            m->comm->be->reduce_scatter_sum_f32(m->comm, HPT_GROUP_TP, m->dtmp, m->layers[0].x,
                                                m->sp_counts);
        } else {
            be->embedding_forward(m->layers[0].x, m->tokens, W(HPT_TENSOR_EMBED, -1), N, C, m->v0,
                                  m->Vl);
            tp_sum(m, m->layers[0].x, (size_t)N * C);
        }
        done(m, 0, layer_lo(m, 0));
    }
    for (int i = m->cur_i0; i < m->cur_i1; i++) {
        need(m, layer_lo(m, i), layer_hi(m, i), 0);
        layer_forward(m, i, i + 1 < m->cur_i1 ? m->layers[i + 1].x : m->x_final, 1);
        done(m, layer_lo(m, i), layer_hi(m, i));
    }
    if (!m->cur_last)
        return 0.0;
    be->upload(m->targets, targets, sizeof(int32_t) * N);
    /* the last layer's residual add computed the final norm (lnf, rstdf) */
    sp_gather(m, m->lnf); /* all N tokens before the vocab-parallel head */
    need_head(m, 0);
    be->matmul_forward(m->logits, HPT_DTYPE_F32, m->lnf, W(HPT_TENSOR_LM_HEAD, -1), N, C, m->Vl);
    done_head(m);
    if (m->tp > 1)
        return vocab_parallel_ce(m, train ? grad_scale : 0.0f);
    if (train)
        return be->crossentropy_fused(m->logits, m->targets, N, m->Vl, grad_scale);
    return be->crossentropy_loss(m->logits, m->targets, N, m->Vl);
}

double hpt_model_forward(hpt_model *m, const int32_t *inputs, const int32_t *targets,
                         float grad_scale, int train)
{
    HPT_CHECK(m->first && m->last);
    return hpt_model_stage_forward(m, 0, inputs, targets, grad_scale, train);
}

/* ------------------------------------------------------------- backward */

/* matmul_backward of the gate or up projection (w (I_l,C), in = ln2) for
 * its output gradient dout (N,I_l) as SwiGLU's backward wrote it: bf16
 * through matmul_backward_act when m->mlp_grad_act, else fp32. */
static void gate_up_backward(const hpt_model *m, float *din, float *dw, const float *dout,
                             const void *in, const float *w, int accum_din)
{
    int N = m->B * m->T, C = m->cfg.hidden_size, I = m->Il;
    if (m->mlp_grad_act)
        m->be->matmul_backward_act(din, dw, dout, in, w, N, C, I, accum_din);
    else
        m->be->matmul_backward(din, dw, dout, in, w, N, C, I, accum_din);
}

/* On entry m->dx (Nl,C) holds dL/d(output of layer l); on exit dL/d(a->x).
 * The input gradients of the column-parallel projections are partial sums
 * over TP and are all-reduced (reduce-scattered under sequence
 * parallelism, after dx was all-gathered for the GEMMs) before each
 * norm's backward. */
static void layer_backward(hpt_model *m, int i, hpt_wgrad_layer *ws)
{
    const hpt_backend *be = m->be;
    const hpt_config *c = &m->cfg;
    hpt_layer_acts *a = &m->layers[i]; /* local index i, global layer l */
    int l = m->layer_global[i];
    int N = m->B * m->T, C = c->hidden_size, I = m->Il, hd = hpt_config_head_dim(c);
    int H = m->Hl, KV = m->KVl, Nl = m->Nl;
    /* B alone (ws): the projections' output gradients go to the W set and
     * the weight gradients of the GEMMs are left for W (dw = NULL) */
    float *dgate = ws ? ws->dgate : m->dgate, *dup = ws ? ws->dup : m->dup;
    float *dq = ws ? ws->dq : m->dq, *dk = ws ? ws->dk : m->dk, *dv = ws ? ws->dv : m->dv;
#define GW(kind) (ws ? NULL : G((kind), l))
    /* MLP: x_out = xmid + down(h) */
    const float *dout = sp_gather_grad(m, m->dx);
    if (ws)
        be->copy(ws->d_down, dout, sizeof(float) * (size_t)N * C);
    be->matmul_backward(m->dh, GW(HPT_TENSOR_DOWN), dout, a->h, W(HPT_TENSOR_DOWN, l), N, I, C, 0);
    if (m->mlp_grad_act) /* dgate, dup in bf16 from the kernel: no cast pass (issue 28) */
        be->swiglu_backward_act(dgate, dup, m->dh, a->gate, a->up, (size_t)N * I);
    else
        be->swiglu_backward(dgate, dup, m->dh, a->gate, a->up, (size_t)N * I);
    gate_up_backward(m, m->dtmp, GW(HPT_TENSOR_GATE), dgate, a->ln2, W(HPT_TENSOR_GATE, l), 0);
    gate_up_backward(m, m->dtmp, GW(HPT_TENSOR_UP), dup, a->ln2, W(HPT_TENSOR_UP, l), 1);
    be->rmsnorm_backward(m->dx, G(HPT_TENSOR_MLP_NORM, l), tp_reduce(m, m->dtmp), a->xmid,
                         W(HPT_TENSOR_MLP_NORM, l), a->rstd2, Nl, C);
    /* Attention: xmid = x + o_proj(atty) */
    dout = sp_gather_grad(m, m->dx);
    if (ws)
        be->copy(ws->d_o, dout, sizeof(float) * (size_t)N * C);
    be->matmul_backward(m->datty, GW(HPT_TENSOR_O), dout, a->atty, W(HPT_TENSOR_O, l), N, H * hd,
                        C, 0);
    attn_core_backward(m, a, dq, dk, dv);
    be->matmul_backward(m->dtmp, GW(HPT_TENSOR_Q), dq, a->ln1, W(HPT_TENSOR_Q, l), N, C, H * hd,
                        0);
    be->matmul_backward(m->dtmp, GW(HPT_TENSOR_K), dk, a->ln1, W(HPT_TENSOR_K, l), N, C, KV * hd,
                        1);
    be->matmul_backward(m->dtmp, GW(HPT_TENSOR_V), dv, a->ln1, W(HPT_TENSOR_V, l), N, C, KV * hd,
                        1);
    be->rmsnorm_backward(m->dx, G(HPT_TENSOR_ATTN_NORM, l), tp_reduce(m, m->dtmp), a->x,
                         W(HPT_TENSOR_ATTN_NORM, l), a->rstd1, Nl, C);
#undef GW
    if (ws && ws->ln1) { /* recomputed activations: the next layer's overwrites them */
        size_t ae = m->act_elem, QD = (size_t)H * hd;
        be->copy(ws->ln1, a->ln1, ae * N * C);
        be->copy(ws->atty, a->atty, ae * N * QD);
        be->copy(ws->ln2, a->ln2, ae * N * C);
        be->copy(ws->h, a->h, ae * N * I);
    }
}

/* W of layer i: the seven projections' weight gradients dW += dout^T in
 * from W set ws and the layer's activations (or ws's copies of them). */
static void layer_weight_grads(hpt_model *m, int i, const hpt_wgrad_layer *ws)
{
    const hpt_backend *be = m->be;
    const hpt_layer_acts *a = &m->layers[i];
    int l = m->layer_global[i];
    int N = m->B * m->T, C = m->cfg.hidden_size, I = m->Il, hd = hpt_config_head_dim(&m->cfg);
    int QD = m->Hl * hd, KD = m->KVl * hd;
    const void *ln1 = ws->ln1 ? ws->ln1 : a->ln1, *atty = ws->atty ? ws->atty : a->atty;
    const void *ln2 = ws->ln2 ? ws->ln2 : a->ln2, *h = ws->h ? ws->h : a->h;
#define DW(kind, dout, in, Ic, O)                                                                  \
    be->matmul_backward(NULL, G((kind), l), (dout), (in), W((kind), l), N, (Ic), (O), 0)
    DW(HPT_TENSOR_DOWN, ws->d_down, h, I, C);
    /* (the W set holds dgate, dup as layer_backward wrote them) */
    gate_up_backward(m, NULL, G(HPT_TENSOR_GATE, l), ws->dgate, ln2, W(HPT_TENSOR_GATE, l), 0);
    gate_up_backward(m, NULL, G(HPT_TENSOR_UP, l), ws->dup, ln2, W(HPT_TENSOR_UP, l), 0);
    DW(HPT_TENSOR_O, ws->d_o, atty, QD, C);
    DW(HPT_TENSOR_Q, ws->dq, ln1, C, QD);
    DW(HPT_TENSOR_K, ws->dk, ln1, C, KD);
    DW(HPT_TENSOR_V, ws->dv, ln1, C, KD);
#undef DW
}

/* Report [lo, hi) of the gradient block as final. */
static void ready(hpt_model *m, size_t lo, size_t hi)
{
    if (m->grad_ready && hi > lo)
        m->grad_ready(m->grad_ready_ctx, lo, hi - lo);
}

/* Last stage: head and final norm backward from the loss gradients in
 * the logits; leaves dL/d(x_final) in m->dx. */
static void head_backward(hpt_model *m)
{
    const hpt_backend *be = m->be;
    int N = m->B * m->T, C = m->cfg.hidden_size;
    need_head(m, 1);
    be->matmul_backward(m->dtmp, G(HPT_TENSOR_LM_HEAD, -1), m->logits, m->lnf,
                        W(HPT_TENSOR_LM_HEAD, -1), N, C, m->Vl, 0);
    const float *dlnf = tp_reduce(m, m->dtmp);
    be->memset0(m->dx, sizeof(float) * (size_t)m->Nl * C);
    be->rmsnorm_backward(m->dx, G(HPT_TENSOR_FINAL_NORM, -1), dlnf, m->x_final,
                         W(HPT_TENSOR_FINAL_NORM, -1), m->rstdf, m->Nl, C);
    done_head(m);
}

/* The backward of the slot in use: whole (ws NULL: every gradient, each
 * range reported final as soon as it is), or zero-bubble's B (ws: W set
 * ws's layers; no weight gradient of a GEMM, no range reported). */
static void stage_backward(hpt_model *m, hpt_wgrad_layer *ws)
{
    if (m->cur_last) {
        head_backward(m);
        if (!ws)
            ready(m, head_lo(m), m->nparams);
    }
    size_t end = m->cur_last ? head_lo(m) : layer_hi(m, m->cur_i1 - 1);
    for (int i = m->cur_i1 - 1; i >= m->cur_i0; i--) {
        need(m, layer_lo(m, i), layer_hi(m, i), 1);
        if (m->recompute == HPT_RECOMPUTE_FULL) /* the layer's activations from its input */
            layer_forward(m, i, m->recompute_out, 0);
        else if (m->recompute == HPT_RECOMPUTE_SELECTIVE)
            layer_recompute_selective(m, i);
        layer_backward(m, i, ws ? &ws[i] : NULL);
        done(m, layer_lo(m, i), layer_hi(m, i));
        size_t lo = layer_lo(m, i);
        if (!ws)
            ready(m, lo, end);
        end = lo;
    }
    if (m->cur_first) {
        m->be->embedding_backward(G(HPT_TENSOR_EMBED, -1), sp_gather_grad(m, m->dx), m->tokens,
                                  m->B * m->T,
                                  m->cfg.hidden_size, m->v0, m->Vl);
        if (!ws)
            ready(m, 0, end);
    }
}

void hpt_model_stage_backward(hpt_model *m, int k)
{
    hpt_model_use_slot(m, k);
    stage_backward(m, NULL);
}

void hpt_model_stage_backward_input(hpt_model *m, int k, int w)
{
    HPT_CHECK(w >= 0 && w < m->nwstash);
    hpt_model_use_slot(m, k);
    stage_backward(m, m->wstash[w]);
}

void hpt_model_stage_backward_weight(hpt_model *m, int k, int w)
{
    HPT_CHECK(w >= 0 && w < m->nwstash);
    hpt_model_use_slot(m, k);
    if (m->cur_last) /* the head's and final norm's: from B */
        ready(m, head_lo(m), m->nparams);
    size_t end = m->cur_last ? head_lo(m) : layer_hi(m, m->cur_i1 - 1);
    for (int i = m->cur_i1 - 1; i >= m->cur_i0; i--) {
        layer_weight_grads(m, i, &m->wstash[w][i]);
        size_t lo = layer_lo(m, i);
        ready(m, lo, end);
        end = lo;
    }
    if (m->cur_first) /* the embedding's: from B */
        ready(m, 0, end);
}

void hpt_model_backward(hpt_model *m)
{
    HPT_CHECK(m->first && m->last);
    hpt_model_stage_backward(m, 0);
}

/* Tensor i's part [*a, *b) of [lo, hi) that the gradient norm counts; 0
 * when none (hpt_model_grad_sumsq, hpt_model_grad_ranges). */
static int grad_norm_part(const hpt_model *m, int i, size_t lo, size_t hi, size_t *a, size_t *b)
{
    const hpt_tensor *t = &m->tensors[i];
    if ((t->split == 0 && m->tp_rank != 0) || t->dup)
        return 0; /* replicated: counted on TP rank 0 only; tied copy once */
    *a = t->offset > lo ? t->offset : lo;
    *b = t->offset + (size_t)(t->rows * t->cols);
    *b = *b < hi ? *b : hi;
    return *a < *b;
}

int hpt_model_grad_ranges(const hpt_model *m, const float *grads, size_t lo, size_t hi,
                          const float **x, size_t *n, int cap)
{
    int k = 0;
    size_t a, b;
    for (int i = 0; i < m->ntensors; i++) {
        if (!grad_norm_part(m, i, lo, hi, &a, &b))
            continue;
        if (k == cap)
            return -1;
        x[k] = grads + (a - lo), n[k++] = b - a;
    }
    return k;
}

double hpt_model_grad_sumsq(const hpt_model *m, const float *grads, size_t lo, size_t hi)
{
    enum { LIST = 64 }; /* ranges per sumsq_list call */
    const float *x[LIST];
    size_t n[LIST], a, b;
    int k = 0;
    double ss = 0.0;
    for (int i = 0; i < m->ntensors; i++) {
        if (!grad_norm_part(m, i, lo, hi, &a, &b))
            continue;
        if (!m->be->sumsq_list) {
            ss += m->be->sumsq(grads + (a - lo), b - a); /* padding rows have zero grads */
            continue;
        }
        x[k] = grads + (a - lo), n[k++] = b - a;
        if (k == LIST)
            ss = m->be->sumsq_list(ss, x, n, k), k = 0;
    }
    return k ? m->be->sumsq_list(ss, x, n, k) : ss;
}

double hpt_model_flops_per_token(const hpt_config *c, int T)
{
    double C = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    double hd = hpt_config_head_dim(c), H = c->num_attention_heads, KV = c->num_key_value_heads;
    double L = c->num_hidden_layers;
    double per_layer = C * H * hd + 2 * C * KV * hd + H * hd * C + 3 * C * I;
    double n_matmul = L * per_layer + V * C;
    return 6.0 * n_matmul + 6.0 * L * T * C; /* causal half of 12*L*T*C */
}

int64_t hpt_tensor_real_rows(const hpt_tensor *t)
{
    int64_t v = t->g_rows - t->row0;
    return v < 0 ? 0 : v > t->rows ? t->rows : v;
}
