/* model.h — the Llama model: parameter table, initialisation, forward and
 * backward over one micro-batch.
 *
 * Architecture (Touvron et al. 2023, "Llama 2", section 2.2): token
 * embedding; per layer x += o_proj(attn(rope(q,k), v)) of RMSNorm(x), then
 * x += down(silu(gate(RMSNorm(x))) * up(RMSNorm(x))); final RMSNorm; LM head
 * (untied, or tied to the embedding). Tensor names are Hugging Face's, so
 * exported weights load into transformers' LlamaForCausalLM unchanged.
 *
 * Memory: one backend allocation per lifetime class — parameters, gradients
 * (same layout as parameters), activations (sized for a micro-batch B x T).
 * Optimizer state lives in optim.h, also one allocation.
 */
#ifndef HPT_MODEL_H
#define HPT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "config.h"

typedef enum {
    HPT_TENSOR_EMBED,      /* model.embed_tokens.weight          (V, C)     */
    HPT_TENSOR_ATTN_NORM,  /* layers.l.input_layernorm.weight    (C)        */
    HPT_TENSOR_Q,          /* layers.l.self_attn.q_proj.weight   (H*hd, C)  */
    HPT_TENSOR_K,          /* layers.l.self_attn.k_proj.weight   (KV*hd, C) */
    HPT_TENSOR_V,          /* layers.l.self_attn.v_proj.weight   (KV*hd, C) */
    HPT_TENSOR_O,          /* layers.l.self_attn.o_proj.weight   (C, H*hd)  */
    HPT_TENSOR_MLP_NORM,   /* layers.l.post_attention_layernorm.weight (C)  */
    HPT_TENSOR_GATE,       /* layers.l.mlp.gate_proj.weight      (I, C)     */
    HPT_TENSOR_UP,         /* layers.l.mlp.up_proj.weight        (I, C)     */
    HPT_TENSOR_DOWN,       /* layers.l.mlp.down_proj.weight      (C, I)     */
    HPT_TENSOR_FINAL_NORM, /* model.norm.weight                  (C)        */
    HPT_TENSOR_LM_HEAD,    /* lm_head.weight (V, C); absent when tied        */
    HPT_TENSOR_KIND_COUNT
} hpt_tensor_kind;

/* One logical tensor: where it lives in the parameter (and gradient)
 * block and how it is initialised. */
typedef struct {
    hpt_tensor_kind kind;
    int layer;          /* global layer index, -1 for non-layer tensors   */
    char name[96];      /* full Hugging Face name                          */
    int64_t rows, cols; /* local shape on this rank; cols == 1 for vectors */
    int64_t g_rows, g_cols; /* global (logical, unsharded) shape            */
    int64_t row0, col0; /* local (i, j) is global (row0 + i, col0 + j);
                         * global rows >= g_rows are vocabulary padding     */
    int split;          /* 0 replicated, 1 rows split over TP, 2 columns   */
    int dup;            /* 1: the last stage's copy of a tied embedding —
                         * not counted in the norm, not exported           */
    size_t offset;      /* element offset in the parameter block           */
    float init_std;     /* 0 for norm weights (initialised to 1)           */
    int is_matrix;      /* 2-D: receives weight decay                      */
} hpt_tensor;

/* Activations saved for backward, for one layer (pointers into the
 * activation block). N = B*T. Storage: `void *` members are in the model's
 * activation dtype (m->act, the backend's act_dtype: bf16 under the CUDA
 * backend's --precision bf16, else float; m->act_elem bytes each); the
 * model only carves and passes them, never reads them. The residual
 * stream (x, xmid) and the statistics (rstd, att_saved) stay float. */
typedef struct {
    float *x;           /* (N,C)   layer input (residual stream)          */
    void *ln1;          /* (N,C)   act                                    */
    float *rstd1;       /* (N)                                            */
    void *q, *k, *v;    /* (N,H*hd), (N,KV*hd), (N,KV*hd) after RoPE; act */
    float *att_saved;   /* attention state for backward, backend-private:
                         * attention_saved_floats(B,T,Hl) floats (CPU and
                         * CUDA: the (B,H,T) row log-sum-exp)            */
    void *atty;         /* (N,H*hd) attention output before o_proj; act   */
    float *xmid;        /* (N,C)   residual after attention               */
    void *ln2;          /* (N,C)   act                                    */
    float *rstd2;       /* (N)                                            */
    void *gate, *up;    /* (N,I)   act                                    */
    void *h;            /* (N,I)   silu(gate) * up; act                   */
} hpt_layer_acts;

struct hpt_comm;

/* What one layer's deferred weight-gradient pass W reads (zero-bubble
 * pipelines): the output gradients of its seven projections, written by
 * its input-gradient pass B, all float and (N, out) with N = B*T — under
 * sequence parallelism the all-gathered rows — and, when the layer's
 * activations are recomputed (their buffers then shared and overwritten
 * by the next layer's recomputation), copies of the four GEMM inputs
 * (act dtype; NULL without recomputation: W reads the slot's own). */
typedef struct {
    float *d_down, *d_o;      /* (N,C) dL/d(down_proj out), dL/d(o_proj out) */
    float *dgate, *dup;       /* (N,I)                                      */
    float *dq, *dk, *dv;      /* (N,H*hd), (N,KV*hd), (N,KV*hd), before RoPE
                               * (the inverse rotation applied)            */
    void *ln1, *atty, *ln2, *h; /* recomputation only; act                  */
} hpt_wgrad_layer;

/* The activations of one micro-batch in flight (pipeline parallelism keeps
 * several: 1F1B up to PP - stage, GPipe all of them). */
typedef struct {
    hpt_layer_acts *layers;   /* the stage's layers, local index           */
    hpt_layer_acts *pool;     /* interleaved: the carved sets, bound to a
                               * chunk's entries of layers by
                               * hpt_model_bind_slot                        */
    float *x_final, *rstdf, *logits;
    void *lnf;                /* act                                       */
    int32_t *tokens, *targets;
    float *ce_mx, *ce_sum, *ce_tgt;
} hpt_slot;

/* Activation recomputation (Korthikanti et al. 2022, "Reducing Activation
 * Recomputation in Large Transformer Models", sections 4.3 and 5). */
typedef enum {
    HPT_RECOMPUTE_NONE = 0,      /* every layer keeps all its activations  */
    HPT_RECOMPUTE_FULL = 1,      /* keep layer inputs; rerun the layer     */
    HPT_RECOMPUTE_SELECTIVE = 2, /* keep GEMM outputs; rerun attention core,
                                  * RMSNorms and SwiGLU (element-wise)     */
} hpt_recompute;

/* --recompute's value: NULL (the option without a value) or "full" ->
 * HPT_RECOMPUTE_FULL, "selective", "none". Errors: HPT_ERR_USAGE
 * "--recompute 'X': expected full, selective or none". */
hpt_status hpt_recompute_parse(const char *arg, int *out);

/* How a model is split; zero/NULL fields mean "not split". */
typedef struct {
    struct hpt_comm *comm; /* TP and PP coordinates; NULL: one rank        */
    int recompute;         /* hpt_recompute                                */
    int sequence_parallel; /* split norms and residual stream over TP      */
    int nslots;            /* micro-batches in flight (>= 1)               */
    int l0, l1;            /* this stage's layers [l0, l1); 0,0 = all      */
    /* Interleaved pipeline (Narayanan et al. 2021, section 2.2): this rank
     * holds nchunks > 1 model chunks (virtual stages), chunk c the global
     * layers [chunk_l0[c], chunk_l1[c]), ascending and disjoint (l0/l1 are
     * then ignored); the embedding goes with chunk 0 of the first stage,
     * the final norm and head with the last chunk of the last stage. The
     * slots are then a pool the caller binds to a chunk before each use
     * (hpt_model_bind_slot): each holds activations for the largest
     * chunk's layer count; the last head_slots of them (the last stage)
     * also the head's (final norm, logits) and serve its last chunk only.
     * 0 or 1: one chunk, [l0, l1), every slot for it. */
    int nchunks, head_slots;
    const int *chunk_l0, *chunk_l1;
    int skip_init;         /* parameters left zero: a checkpoint will be   */
                           /* loaded over them (saves the random draws)    */
    /* Zero-bubble pipelines (Qi et al. 2024, "Zero Bubble Pipeline
     * Parallelism", section 2): sets of the operands a deferred weight-
     * gradient pass W needs after its input-gradient pass B
     * (hpt_model_stage_backward_input / _weight); 0: none (every backward
     * is whole). */
    int wstash;
    /* 1: the parameter block from the backend's alloc_virtual (where it
     * has one), so that parts of it can be given back and backed again
     * (ZeRO-3, lib/train_zero3.c; backend.h commit/decommit); 0: alloc. */
    int params_virtual;
} hpt_model_opts;

typedef struct {
    hpt_config cfg;
    const hpt_backend *be;
    int B, T;                 /* micro-batch shape the activations fit   */

    /* Tensor parallelism (Megatron-LM, Shoeybi et al. 2019): this rank
     * holds heads [tp_rank*Hl, ...), SwiGLU columns [tp_rank*Il, ...) and
     * vocabulary rows [v0, v0+Vl) of which nvalid are real (Vl = V padded
     * to a multiple of TP, divided by TP). tp = 1 without a comm. */
    struct hpt_comm *comm;
    int tp, tp_rank;
    int Hl, KVl, Il, Vl, v0, nvalid;
    int recompute;            /* hpt_recompute                            */
    /* Sequence parallelism (Korthikanti et al. 2022, section 4.2.2), on
     * when sp = 1 (TP > 1 only): the residual stream x, xmid, x_final, the
     * norms' rstd and dx hold this rank's Nl = N/TP tokens [n0, n0 + Nl)
     * of the micro-batch's N = B*T (row-major (B,T): contiguous); the norm
     * outputs ln1, ln2, lnf are all-gathered to (N,C) before the
     * column-parallel GEMMs; the row-parallel GEMMs' partial sums are
     * reduce-scattered. Without it Nl = N, n0 = 0. */
    int sp, Nl, n0;
    /* Context parallelism (issue 31, lib/attention_ring.h): with cp > 1
     * this rank holds CP rank cp_rank's zigzag rows of every sequence,
     * T = T_seq / cp of them (local rows; everything per token runs on
     * them), and attention goes around the CP ring (ring). cp = 1: T_seq
     * = T, ring NULL. */
    int cp, cp_rank, T_seq;
    struct hpt_ring *ring;
    int *sp_counts;           /* host, tp entries: Nl*C each              */
    float *sp_tmp;            /* (Nl,C) reduce-scatter result              */
    float *dfull;             /* (N,C) all-gathered residual gradient      */
    float *sp_norm_grads;     /* device, packed replicated-tensor grads    */
    size_t sp_norm_count;     /* its floats                               */
    /* Pipeline parallelism: this stage holds layers [l0, l1) (nl of them),
     * the embedding when first, the final norm and head when last. */
    int pp, pp_rank, first, last, l0, l1, nl;
    int nslots;
    /* Model chunks (interleaved pipeline; 1 otherwise): chunk c is local
     * layers [chunk_i0[c], chunk_i0[c + 1]); local layer i is global layer
     * layer_global[i]; slot k serves chunk slot_chunk[k]. cur_i0, cur_i1,
     * cur_first, cur_last: the chunk of the slot in use (its first and
     * end local layer; whether it embeds and whether it has the head). */
    int nchunks;
    int *chunk_i0;            /* host, nchunks + 1 entries                 */
    int *layer_global;        /* host, nl entries                          */
    int *slot_chunk;          /* host, nslots entries                      */
    int head_slots;           /* interleaved: the last slots, the head's    */
    int cur_i0, cur_i1, cur_first, cur_last;
    hpt_slot *slots;          /* host array; the fields below point at the
                               * slot selected by hpt_model_use_slot       */
    float *recompute_out;     /* (N,C) discarded output of a recomputed layer
                               * (full recomputation only)                 */
    int nwstash;              /* zero-bubble: W operand sets, each nl layers */
    hpt_wgrad_layer **wstash; /* host, nwstash arrays of nl entries         */

    int ntensors;
    hpt_tensor *tensors;      /* host array, ntensors entries             */
    size_t nparams;           /* elements in the parameter block          */
    float *params;            /* device, nparams                          */
    float *grads;             /* device, nparams, same layout             */

    /* Activations: one device block. act: the backend's activation dtype
     * (hpt_backend_act_dtype at init), act_elem its bytes; the `void *`
     * activations (hpt_layer_acts, lnf) are carved with act_elem bytes per
     * element, everything else with 4. Under sequence parallelism the norm
     * outputs are all-gathered as act_elem bytes per element
     * (sp_act_counts). */
    hpt_dtype act;
    size_t act_elem;
    int mlp_grad_act;         /* 1: SwiGLU's output gradients dgate, dup
                               * are written in act (bf16) by
                               * swiglu_backward_act and read so by
                               * matmul_backward_act (no cast pass; their
                               * buffers keep the fp32 size); 0: fp32 */
    int *sp_act_counts;       /* host, tp entries: Nl*C*act_elem/4 floats  */
    void *act_block;
    size_t act_bytes;
    hpt_layer_acts *layers;   /* nl pointer sets (current slot)           */
    float *x_final;           /* (N,C) residual after the last layer      */
    void *lnf;                /* (N,C) act                                */
    float *rstdf;             /* (N)                                      */
    float *logits;            /* (N,V); holds dlogits after forward(train)*/
    int32_t *tokens, *targets;/* (N) device copies of the micro-batch     */
    /* backward scratch */
    float *dx, *dtmp;         /* (N,C)                                    */
    float *dq, *dk, *dv;      /* (N,H*hd), (N,KV*hd), (N,KV*hd)           */
    float *datty;             /* (N,H*hd)                                 */
    float *dh, *dgate, *dup;  /* (N,I)                                    */
    float *dscores;           /* attention scratch, attention_scratch_floats */
    float *ce_mx, *ce_sum, *ce_tgt; /* (N) vocab-parallel softmax stats   */

    /* Optional: called by hpt_model_backward as soon as the gradients of a
     * contiguous range of the gradient block are final for this backward
     * (the LM head and final norm, then each layer from the last, then the
     * embedding), so data-parallel reductions can start while backward
     * goes on. offset, count: elements. NULL = no callback. */
    void (*grad_ready)(void *ctx, size_t offset, size_t count);
    void *grad_ready_ctx;

    /* Optional (ZeRO-3, lib/train_zero3.h): the parameters of a unit of
     * the block — one of hpt_model_param_units' ranges [lo, hi) — are
     * read only between param_need(ctx, lo, hi, backward) and
     * param_done(ctx, lo, hi): need returns once params[lo, hi) hold the
     * current values (backward: 1 in a stage backward, 0 in a forward,
     * the order its prefetch follows); done says the model will not read
     * them again before the next need. The forward sweep also needs the
     * next unit (its first norm weight, or the final norm) inside a
     * layer, and the head of a tied model on one stage needs the
     * embedding. NULL = the whole block is always there. */
    void (*param_need)(void *ctx, size_t lo, size_t hi, int backward);
    void (*param_done)(void *ctx, size_t lo, size_t hi);
    void *param_ctx;
} hpt_model;

/* The units of m's parameter block in forward order, as [lo, hi) element
 * ranges that tile it: the embedding (first stage), each layer of the
 * stage, then the final norm with the head (last stage: the LM head, or
 * the last stage's copy of a tied embedding; nothing more on one stage
 * with tied embeddings, whose head is the embedding unit). Writes at most
 * nl + 2 entries to units (NULL: count only); returns their number. */
int hpt_model_param_units(const hpt_model *m, size_t (*units)[2]);

/* Build the tensor table for cfg, allocate parameters, gradients and
 * activations for micro-batches of B sequences of T tokens on backend `be`,
 * and initialise parameters from `seed` (see hpt_model_init_params).
 * Errors: HPT_ERR_USAGE if T > max_position_embeddings or B, T <= 0;
 * HPT_ERR_INTERNAL on allocation failure (message gives the bytes). */
hpt_status hpt_model_init(hpt_model *m, const hpt_config *cfg, const hpt_backend *be, int B,
                          int T, uint64_t seed);

/* As hpt_model_init, split as `mo` says: sharded for tensor parallelism
 * over the TP group of mo->comm (shapes in the activations are local: Hl =
 * H/TP heads, KVl, Il = I/TP, Vl), holding pipeline stage layers [l0, l1)
 * (with a copy of a tied embedding on the last stage), with mo->nslots
 * micro-batch activation slots. Errors: HPT_ERR_USAGE when TP does not
 * divide num_attention_heads, num_key_value_heads or intermediate_size
 * (naming them), or the layer range is empty or out of bounds.
 * recompute = HPT_RECOMPUTE_FULL: activation recomputation (Chen et al.
 * 2016; Korthikanti et al. 2022 "full" recomputation) — only each layer's
 * input (N,C) is kept; the other activations live in one shared
 * layer-sized set and backward recomputes the layer's forward first.
 * HPT_RECOMPUTE_SELECTIVE (Korthikanti et al. 2022, section 5): each layer
 * keeps its input x, the GEMM outputs q, k, v (after RoPE), gate, up and
 * the residual xmid; the RMSNorm outputs ln1, ln2 (and rstd), the attention
 * core (its output atty and the backend's saved state, recomputed through
 * be->attention_forward) and SwiGLU's h live in one shared set that
 * backward refills before each layer. Both are bitwise identical to no
 * recomputation (the same kernels on the same inputs).
 * sequence_parallel = 1 with TP > 1: sequence parallelism (see sp above);
 * HPT_ERR_USAGE when TP does not divide B*T (B*T/cp with CP).
 * Context parallelism when mo->comm's cp > 1: T is the sequence length;
 * the model holds T/cp rows of each sequence (m->T) and runs attention
 * over the CP ring (lib/attention_ring.h); HPT_ERR_USAGE when 2*cp does
 * not divide T or the backend has no ring ops.
 * skip_init = 1: parameters stay zero instead of drawn from `seed` (the
 * caller loads a checkpoint over all of them; the draws are counter-based,
 * so skipping them changes no other random number). */
hpt_status hpt_model_init_opts(hpt_model *m, const hpt_config *cfg, const hpt_backend *be,
                               const hpt_model_opts *mo, int B, int T, uint64_t seed);

/* Interleaved pipeline: slot k (free) serves model chunk c from now on,
 * until bound again: its activation sets are that chunk's layers. A head
 * slot (the last head_slots on the last stage) takes only the last chunk
 * there, the others any other chunk (fatal otherwise). */
void hpt_model_bind_slot(hpt_model *m, int k, int c);

/* Select micro-batch slot k (0 <= k < nslots) for the next forward or
 * backward. */
void hpt_model_use_slot(hpt_model *m, int k);

/* Pipeline stage forward of micro-batch slot k. First stage: embeds
 * `inputs` (B,T); other stages read their input (N,C) from
 * hpt_model_stage_input(m, k), which the caller filled. Last stage: final
 * norm, head and loss against `targets` (B,T), returning the summed loss
 * (train = 1: logits become gradients scaled by grad_scale); other stages
 * return 0 and leave their output in hpt_model_stage_output(m, k). */
double hpt_model_stage_forward(hpt_model *m, int k, const int32_t *inputs, const int32_t *targets,
                               float grad_scale, int train);

/* Pipeline stage backward of slot k (after its training forward). A
 * non-last stage first needs dL/d(its output) (N,C) in m->dx. On return a
 * non-first stage has dL/d(its input) in m->dx. Gradients accumulate. */
void hpt_model_stage_backward(hpt_model *m, int k);

/* The backward of slot k split in two for zero-bubble pipelines (Qi et
 * al. 2024, section 2): B, the input gradients (on the pipeline's critical
 * path), then later W, the weight gradients of the linear layers (the
 * GEMMs dW = dout^T in, a third of a layer's backward FLOPs), which may be
 * deferred past other micro-batches' forwards and B passes. B takes
 * hpt_model_stage_backward's input and leaves its output in m->dx, and
 * computes everything but those weight gradients (the RMSNorm weights',
 * and on the last stage the LM head's, whose operand is the logits
 * gradient: N x V/TP floats not worth holding); it saves the operands W
 * needs in W set w (0 <= w < wstash). W (slot k, set w, after B of the
 * same slot and set and before the slot's next forward) adds the weight
 * gradients and reports every range of the stage final through
 * grad_ready, in the order hpt_model_stage_backward does; it reads no
 * parameter and communicates nothing. B then W is bitwise
 * hpt_model_stage_backward (each GEMM's tiles are the same products), and
 * so is any order that runs the B passes in micro-batch order and the W
 * passes in micro-batch order (each gradient element sums its
 * micro-batches' terms in the same order). Ranges reported by W(j) may
 * already hold later micro-batches' norm (and head) terms from their B:
 * a caller that reduces at each W (ZeRO-2/3's per-micro-batch
 * reduce-scatters) would mix micro-batches; one that reduces at the last
 * micro-batch's W sees every term. */
void hpt_model_stage_backward_input(hpt_model *m, int k, int w);
void hpt_model_stage_backward_weight(hpt_model *m, int k, int w);

/* The stage's input (Nl,C) and output (Nl,C) activations of slot k (the
 * local sequence shard under sequence parallelism, else all N tokens). */
float *hpt_model_stage_input(hpt_model *m, int k);
float *hpt_model_stage_output(hpt_model *m, int k);

/* Elements of a stage's input, output and input gradient: Nl * C (what
 * one pipeline boundary sends per micro-batch). */
size_t hpt_model_stage_elems(const hpt_model *m);

/* Sequence parallelism: each TP rank's gradients of the replicated
 * tensors (the RMSNorm weights) cover only its own tokens; sum them over
 * the TP group (one all-reduce of the packed tensors) so every rank gets
 * the full gradient and the replicas stay bitwise identical (the trap of
 * Megatron-LM#1446 / TransformerEngine#441). Call once per optimizer step
 * after the last backward (the sum commutes with the DP reduction, so
 * before or after it). No-op without sequence parallelism. Collective
 * over TP. */
void hpt_model_sp_sum_grads(hpt_model *m);

/* Free everything; accepts a zeroed model and may be called twice. */
void hpt_model_free(hpt_model *m);

/* Initialise every parameter from (seed, tensor name, layer, element):
 * element i (row-major global index) of tensor t is
 *   t.init_std * hpt_philox_normal(seed, stream(t.kind, t.layer), i),
 * norm weights are 1. std 0.02; o_proj and down_proj (the residual output
 * projections) 0.02/sqrt(2L) (GPT-2, Radford et al. 2019, section 2.3).
 * A value depends only on the seed, the tensor, the layer and the global
 * element index, never on how the tensor is sharded. */
void hpt_model_init_params(hpt_model *m, uint64_t seed);

/* The same for the elements [lo, hi) of the parameter block only (the
 * others untouched): ZeRO-3's fresh start, each DP rank drawing its own
 * block (lib/train_zero3.h). The values equal hpt_model_init_params'. */
void hpt_model_init_params_range(hpt_model *m, uint64_t seed, size_t lo, size_t hi);

/* Hugging Face name of logical tensor (kind, layer) ("model.layers.3.mlp.up_proj.weight"). */
void hpt_tensor_name(hpt_tensor_kind kind, int layer, char *buf, size_t n);

/* Global (unsharded) shape of tensor kind for config c; cols = 1 for 1-D. */
void hpt_tensor_global_shape(const hpt_config *c, hpt_tensor_kind kind, int64_t *rows,
                             int64_t *cols);

/* The tensor (kind, layer), or NULL (e.g. LM_HEAD when tied). */
const hpt_tensor *hpt_model_tensor(const hpt_model *m, hpt_tensor_kind kind, int layer);

/* Rows of local tensor t (rows x cols elements, this rank's slice starting
 * at global row row0) that are real, not vocabulary padding past the global
 * row count g_rows: min(rows, max(0, g_rows - row0)). The rule every reader
 * and writer of a rank's slice uses (checkpoint save/load, --init-from). */
int64_t hpt_tensor_real_rows(const hpt_tensor *t);

/* Device pointer to tensor (kind, layer) in `block` (params or grads). For
 * LM_HEAD of a tied model this is the embedding. */
float *hpt_model_ptr(const hpt_model *m, float *block, hpt_tensor_kind kind, int layer);

/* Forward one micro-batch. inputs, targets: host int32 (B,T) (context
 * parallelism: (B,T/cp), the rank's rows from hpt_cp_take).
 * train=1: the logits buffer is turned into dloss/dlogits scaled by
 * grad_scale (normally 1 / target tokens in the optimizer step), ready for
 * hpt_model_backward. Returns the sum over the B*T targets of the
 * cross-entropy (nats), so the caller can average over any token count. */
double hpt_model_forward(hpt_model *m, const int32_t *inputs, const int32_t *targets,
                         float grad_scale, int train);

/* Backward of the last training forward: accumulates (+=) into m->grads. */
void hpt_model_backward(hpt_model *m);

/* Sum of squares of grads[x - lo] over parameters x in [lo, hi), each
 * logical parameter counted once across TP: a replicated tensor counts
 * only on TP rank 0, vocabulary padding never. Sum over TP (and DP shards)
 * to get the global norm squared. */
double hpt_model_grad_sumsq(const hpt_model *m, const float *grads, size_t lo, size_t hi);

/* The ranges hpt_model_grad_sumsq sums, in its order: x[i] (inside grads)
 * and n[i] > 0 elements, at most cap; returns their number, -1 when more
 * than cap. */
int hpt_model_grad_ranges(const hpt_model *m, const float *grads, size_t lo, size_t hi,
                          const float **x, size_t *n, int cap);

/* Zero the gradient block. */
void hpt_model_zero_grad(hpt_model *m);

/* Model FLOPs for one token of forward+backward (PaLM, Chowdhery et al.
 * 2022, appendix B, with the causal half of attention): 6 * N_matmul +
 * 6 * L * T * C, where N_matmul counts the weights used in matrix products
 * (all but the embedding lookup and the norms; the LM head counts even when
 * tied) and the second term is QK^T and PV over the causal triangle (T^2/2
 * query-key pairs per sequence): PaLM's 12 * L * T * C counts the full
 * square, which neither hpt backend computes (both skip the tiles above the
 * diagonal), so MFU would count FLOPs that are not needed. */
double hpt_model_flops_per_token(const hpt_config *cfg, int T);

#endif
