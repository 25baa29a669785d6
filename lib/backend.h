/* backend.h — the compute-backend seam.
 *
 * All tensor maths and device memory of the model and optimizer go through
 * one table of function pointers, selected by name at run time (CPU now;
 * CUDA fills the same table later). Model code never includes a backend's
 * headers and never #ifdefs on one. Pointers passed to the ops are device
 * pointers obtained from `alloc`; `upload`/`download` move bytes between
 * host and device. All sizes are in elements unless named *_bytes.
 *
 * Shapes: B batch, T sequence, N = B*T tokens, C hidden, H query heads,
 * KV key/value heads, hd head dim (C = H*hd), I SwiGLU width, V vocab.
 * Matrices follow PyTorch's nn.Linear: weight (out, in), y = x W^T.
 */
#ifndef HPT_BACKEND_H
#define HPT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#ifdef __cplusplus /* lib/backend_cuda.cu (nvcc) includes this header */
extern "C" {
#endif

/* Arithmetic of the matrix products (run option --precision). FP32: full
 * fp32 products (the exactness mode; a GPU run equals a CPU run to float
 * rounding). TF32: products on tensor cores with 10-bit-mantissa inputs and
 * fp32 accumulation (NVIDIA Ampere and later). BF16: Megatron-style mixed
 * precision (cuda backend): products of bf16 operands with fp32
 * accumulation; weights, gradients, AdamW state, the residual stream, logits
 * and the gradients of activations stay fp32; the other saved activations
 * are stored in bf16 (act_dtype below). The backend may keep bf16 working copies of
 * buffers used as matmul weights: it refreshes them after its own writes
 * (upload, copy, memset0, add, scale) and after any adamw call, so a write
 * into the weights by another path (the communication backend) must come
 * after an adamw of the same step, as the ZeRO-1 all-gather does. */
typedef enum {
    HPT_PRECISION_FP32 = 0,
    HPT_PRECISION_TF32 = 1,
    HPT_PRECISION_BF16 = 2,
} hpt_precision;

/* Storage type of the activations that an op reads or writes through a
 * `void *` (the "activation dtype", below). */
typedef enum {
    HPT_DTYPE_F32 = 0,  /* IEEE binary32, 4 bytes                         */
    HPT_DTYPE_BF16 = 1, /* bfloat16 (lib/bf16.h), 2 bytes                 */
} hpt_dtype;

/* Bytes of one element of dtype t (4 or 2). */
static inline size_t hpt_dtype_bytes(hpt_dtype t) { return t == HPT_DTYPE_BF16 ? 2 : 4; }

typedef struct hpt_backend hpt_backend;

/* A block of one attention for context parallelism (issue 31; Liu et al.
 * 2023, "Ring Attention"; Brandon et al. 2023 for the zigzag split):
 * queries are rows [q_off, q_off + nq) of each of the B sequences of q
 * (B,Tq,H,hd), at global positions q_pos0 ..; keys and values rows
 * [k_off, k_off + nk) of k, v (B,Tk,KV,hd) at global positions k_pos0 ..;
 * a query attends a key iff key position <= query position (any offsets:
 * no tile alignment needed). */
typedef struct {
    int Tq, Tk;         /* rows per sequence of q (and out, lse) and of k, v */
    int q_off, nq;      /* the block's query rows                           */
    int k_off, nk;      /* the block's key rows                             */
    int q_pos0, k_pos0; /* global positions of rows q_off and k_off         */
} hpt_attn_block;

/* Host synchronisations of a device backend since its init (the debug
 * counter of hpt_backend.host_syncs): every call that makes the host wait
 * for the device, by kind. A training step's expected count is the loss
 * read-back and the gradient norm's; anything more is a stall to find. */
typedef struct {
    uint64_t d2h;   /* device-to-host copies (download, a loss or sum returned
                     * to the host): each waits for all earlier device work */
    uint64_t h2d;   /* host-to-device copies (upload): from pageable memory
                     * CUDA synchronises the stream before the copy         */
    uint64_t sync;  /* explicit stream or device synchronisations
                     * (HPT_CUDA_SYNC=1 after every launch)                 */
    uint64_t alloc; /* device allocations and frees (cudaFree synchronises
                     * the device; a step should make none)                 */
} hpt_host_syncs;

/* Device memory committed to allocations from hpt_backend.alloc_virtual
 * (the committed slot): ZeRO-3's parameter block, of which a rank backs
 * only its own shard and the units in use (issue 29). */
typedef struct {
    size_t now;     /* bytes backed by physical memory now                 */
    size_t peak;    /* the most bytes backed at once since init or the last
                     * reset                                               */
    size_t granule; /* bytes of one unit of commit (CUDA: the allocation
                     * granularity, 2 MiB on current GPUs); 0 when the
                     * allocations are held whole (CUDA without virtual
                     * memory management: commit and decommit do nothing) */
} hpt_commit_stats;

/* The shapes one rank's model runs (hpt_backend.reserve). */
typedef struct {
    int B, T;         /* micro-batch (sequences), sequence length (tokens)     */
    int H, KV, hd;    /* this rank's query heads, kv heads; head size          */
    int C;            /* hidden size                                           */
    size_t widest;    /* widest output O of the stage's matrix products (q, k,
                       * v, o, gate, up, down; the LM head's vocabulary shard
                       * on the last stage): matmul_backward's gradient
                       * operand is (B*T, O)                                   */
    float theta;      /* RoPE base                                             */
    const float *weights; /* the parameter block (from alloc), whose bf16
                       * working copy a bf16 mode keeps; NULL: none            */
    int embed_rows;   /* rows of the embedding's vocabulary shard (Vl): the
                       * embedding backward's scratch; 0: none                  */
} hpt_backend_shapes;

struct hpt_backend {
    const char *name;
    /* Prepare the backend once per process (threads, device); called by
     * hpt_backend_get on every lookup, so it must be idempotent. Must be
     * called with MPI initialised (the CUDA backend picks its device from
     * the node-local rank). Errors: HPT_ERR_USAGE when the backend cannot
     * run here (e.g. no GPU visible), with a message naming the cause.
     * Optional (NULL). */
    hpt_status (*init)(void);
    /* Select the arithmetic of the matrix products. Errors: HPT_ERR_USAGE
     * naming the precision when the backend does not support it. Optional
     * (NULL: FP32 only, anything else refused by hpt_backend_set_precision). */
    hpt_status (*set_precision)(hpt_precision precision);
    /* What the banner adds after the backend's name, e.g. "avx512 kernels"
     * (the CPU's kernel table, HPT_CPU_KERNELS: results are bitwise
     * reproducible within one table); a static string. Optional (NULL:
     * nothing). */
    const char *(*describe)(void);
    /* Bytes of device memory held at the peak of this process (alloc minus
     * free, high-water mark). Optional (NULL: no device memory; the CPU). */
    size_t (*mem_peak)(void);
    /* Allocate now the scratch the ops will need for these shapes (and the
     * current precision), which would otherwise be allocated on first use,
     * inside a step: there an allocation failure could only abort, and
     * freeing and growing device memory synchronises the device, collectives
     * in flight included. Called by the model at initialisation, after its
     * own blocks; grow-only (a later call with smaller shapes keeps what it
     * has). Errors: HPT_ERR_USAGE with the bytes asked for and free when the
     * device memory is short. Optional (NULL: nothing to reserve; the CPU). */
    hpt_status (*reserve)(const hpt_backend_shapes *s);
    /* The activation dtype (bf16 activation storage, issue 12 stage 2):
     * the storage type of every pointer declared `void *` in the ops below
     * (marked "act"), which the caller carves with hpt_dtype_bytes of it
     * and never reads itself. It depends on the precision (the CUDA
     * backend: BF16 after set_precision(BF16), F32 otherwise), so a model
     * asks for it after set_precision. Which tensors are activations and
     * which stay float (the residual stream, the partial sums that are
     * all-reduced, logits, the gradients of activations, rstd, the
     * log-sum-exp, softmax statistics, weights, weight gradients, AdamW
     * state): see lib/model.h. Ops that write into either class take an
     * explicit hpt_dtype for that pointer. Optional (NULL: always F32, as
     * on the CPU). */
    hpt_dtype (*act_dtype)(void);

    /* ---- memory (bytes) ------------------------------------------------ */
    /* Allocate `bytes` of device memory, zero-filled; NULL on failure
     * (a backend may leave the reason, e.g. the bytes free on the device,
     * in hpt_error_msg()). */
    void *(*alloc)(size_t bytes);
    /* 1 when p points into device memory the host cannot dereference (from
     * alloc), else 0: which buffers the communication path must stage
     * through the host (lib/comm_stage.c). Optional (NULL: all of this
     * backend's memory is host memory, as on the CPU). */
    int (*is_device)(const void *p);
    /* Page-lock `bytes` of host memory at p (the caller's, e.g. from
     * posix_memalign) so that download/upload with it run at the DMA
     * engine's speed without the driver's bounce copy (CUDA:
     * cudaHostRegister; NVIDIA's "pinned memory"). Returns 0 when pinned,
     * -1 when not (the memory stays usable as pageable memory; the reason
     * is not an error). Optional (NULL: nothing to pin, as on the CPU). */
    int (*host_pin)(void *p, size_t bytes);
    /* Undo host_pin(p, ...) before p is freed. Optional with host_pin. */
    void (*host_unpin)(void *p);
    /* Free memory from alloc; accepts NULL. */
    void (*free)(void *p);
    void (*memset0)(void *dst, size_t bytes);
    void (*upload)(void *dst_dev, const void *src_host, size_t bytes);
    void (*download)(void *dst_host, const void *src_dev, size_t bytes);
    void (*copy)(void *dst_dev, const void *src_dev, size_t bytes);

    /* ---- memory given back in parts: ZeRO-3's parameter block (issue 29;
     * FSDP frees a unit's gathered storage after use; on a GPU that takes
     * CUDA's virtual memory management: an address range reserved once,
     * physical memory mapped into it and unmapped again). All optional. */
    /* Allocate `bytes` as alloc does (zero-filled, all of it backed and
     * usable; freed by free) but so that decommit can give parts of it back
     * and commit back them again. CUDA: an address range reserved
     * (cuMemAddressReserve) and backed granule by granule (cuMemCreate,
     * cuMemMap, cuMemSetAccess); where the device or driver has no virtual
     * memory management, a plain alloc, said once on stderr (commit and
     * decommit then do nothing on it). NULL on failure as alloc. Optional
     * (NULL: callers use alloc; the CPU, whose pages decommit gives back
     * from any allocation). */
    void *(*alloc_virtual)(size_t bytes);
    /* Back bytes [p, p + bytes) of an allocation from alloc_virtual with
     * memory before they are written (ZeRO-3: before a unit is gathered
     * into it): every granule that overlaps the range (p need not be
     * aligned) is mapped if it was not, and holds one more reference.
     * Contents of a granule newly backed are undefined until written. Pair
     * each commit with one decommit of the same range. Memory from plain
     * alloc: nothing to do. Errors: HPT_ERR_USAGE naming the bytes asked
     * for and free on the device when it is out of memory (the range then
     * stays as it was). Optional (NULL: memory is always usable; the CPU,
     * whose pages come back on first write). */
    hpt_status (*commit)(void *p, size_t bytes);
    /* The caller no longer needs bytes [p, p + bytes) (ZeRO-3: a unit
     * dropped after use): their memory may go back, their contents are
     * undefined from here. CPU (any allocation): the whole pages inside the
     * range go back to the OS (MADV_DONTNEED; they read as zero, take no
     * memory until written), a page the range only partly covers stays.
     * CUDA (alloc_virtual memory): every granule that overlaps the range
     * loses one reference; one left with none is unmapped and its physical
     * memory released (after the device has finished the work enqueued so
     * far: a host synchronisation), so a granule two ranges share stays
     * until both are decommitted; a granule never committed since the
     * allocation holds no reference and goes at the first decommit that
     * overlaps it. An access to an unmapped granule is a device fault. Not
     * an error to call on memory from plain alloc (nothing happens).
     * Optional (NULL: nothing given back). */
    void (*decommit)(void *p, size_t bytes);
    /* *out = the bytes backing alloc_virtual's allocations now and at the
     * peak (hpt_commit_stats); reset != 0: afterwards the peak restarts
     * from the bytes backed now (the trainer's peak of the steps, after
     * its set-up held the whole block). Optional (NULL: not counted; the
     * CPU, whose resident memory the OS counts). */
    void (*committed)(hpt_commit_stats *out, int reset);

    /* ---- linear layers --------------------------------------------------- */
    /* out (N,O) = in (N,Ic) @ w (O,Ic)^T. in: act; out: stored as
     * out_dtype (the activation dtype or F32; a backend without act_dtype
     * is only passed F32), products accumulated in fp32. */
    void (*matmul_forward)(void *out, hpt_dtype out_dtype, const void *in, const float *w, int N,
                           int Ic, int O);
    /* din (N,Ic) (+)= dout (N,O) @ w (O,Ic) — accumulated when accum_din;
     * dw (O,Ic) += dout^T @ in. din may be NULL (not needed), and dw
     * (zero-bubble's B pass: the weight gradient comes later, from a call
     * with din NULL; either product alone is bitwise what the call with
     * both computes). in: act; din, dout float. */
    void (*matmul_backward)(float *din, float *dw, const float *dout, const void *in,
                            const float *w, int N, int Ic, int O, int accum_din);
    /* Optional: matmul_backward with dout (N,O) in the activation dtype
     * (bf16 mode: bf16, as swiglu_backward_act writes it), bitwise the call
     * with the fp32 dout it was rounded from — so no cast pass precedes the
     * products. NULL where the backend has none (the CPU's: fp32 only). */
    void (*matmul_backward_act)(float *din, float *dw, const void *dout, const void *in,
                                const float *w, int N, int Ic, int O, int accum_din);

    /* ---- embedding ------------------------------------------------------ */
    /* Vocab-parallel lookup (Megatron-LM's VocabParallelEmbedding): wte
     * (Vl,C) holds rows v0..v0+Vl-1 of the table; out (N,C) = wte[tokens[n]
     * - v0] for tokens in that range, else 0 (the TP all-reduce adds the
     * rows of the other ranks). tokens (N) int32. One rank: v0=0, Vl=V. */
    void (*embedding_forward)(float *out, const int32_t *tokens, const float *wte, int N, int C,
                              int v0, int Vl);
    /* dwte (Vl,C) row tokens[n]-v0 += dout (N,C) row n, for tokens in range. */
    void (*embedding_backward)(float *dwte, const float *dout, const int32_t *tokens, int N, int C,
                               int v0, int Vl);

    /* ---- RMSNorm (Zhang & Sennrich 2019, eq. 4) ---------------------------
     * out = in * rstd * w, rstd = 1/sqrt(mean(in^2) + eps).
     * out (N,C) act, rstd (N), in (N,C), w (C) float. */
    void (*rmsnorm_forward)(void *out, float *rstd, const float *in, const float *w, int N, int C,
                            float eps);
    /* din (N,C) += d/din; dw (C) += d/dw. */
    void (*rmsnorm_backward)(float *din, float *dw, const float *dout, const float *in,
                             const float *w, const float *rstd, int N, int C);

    /* ---- RoPE (Su et al. 2021, eq. 34), Hugging Face's pairing ---------------
     * x (B,T,nh,hd) rotated in place; dims (i, i+hd/2) form a pair rotated
     * by angle t * theta^(-2i/hd), t = position in [0,T). inverse=1 applies
     * the transpose rotation (the backward pass). x stored as dtype (the
     * activation dtype for q, k; F32 for their gradients). */
    void (*rope)(void *x, hpt_dtype dtype, int B, int T, int nh, int hd, float theta, int inverse);

    /* ---- causal grouped-query attention (Vaswani et al. 2017, eq. 1;
     * Ainslie et al. 2023 for GQA: query head h reads kv head h/(H/KV)) ----
     * q (B,T,H,hd), k/v (B,T,KV,hd), out (B,T,H,hd) (overwritten).
     * `saved` holds what the backward pass needs, in a layout private to
     * the backend: attention_saved_floats(B,T,H) floats, written by the
     * forward and read back unchanged by attention_backward of the same
     * backend. CPU and CUDA: the per-row log-sum-exp (B,H,T) of the scaled
     * scores (FlashAttention, Dao et al. 2022, algorithm 1), from which the
     * backward recomputes P tile by tile; neither stores (B,H,T,T).
     * q, k, v, out: act; saved float. */
    void (*attention_forward)(void *out, float *saved, const void *q, const void *k,
                              const void *v, int B, int T, int H, int KV, int hd);
    /* Floats of `saved` for one call of attention_forward (H = local heads). */
    size_t (*attention_saved_floats)(int B, int T, int H);
    /* dq (B,T,H,hd) =, dk/dv (B,T,KV,hd) = (overwritten); dout (B,T,H,hd);
     * out (B,T,H,hd) the forward's output and `saved` its saved state (same
     * q, k, v); scratch: attention_scratch_floats(B,T,H) floats, contents
     * undefined on entry and exit. out, q, k, v: act; the gradients float. */
    void (*attention_backward)(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                               const void *out, const float *saved, const void *q,
                               const void *k, const void *v, int B, int T, int H, int KV,
                               int hd);
    /* Floats of attention_backward's scratch (CPU and CUDA: B*H*T for the
     * row sums D = rowsum(dout * out)). */
    size_t (*attention_scratch_floats)(int B, int T, int H);

    /* ---- ring attention for context parallelism (lib/attention_ring.c).
     * Optional: NULL when the backend has none (the CUDA backend today;
     * the trainer refuses --cp > 1 then). ---------------------------------- */
    /* rope with the position of every row given: x (B,T,nh,hd) row t of
     * each sequence rotated by the angles of position pos[t] (host, T
     * entries); bitwise rope's rotation of that position. x: dtype. */
    void (*rope_pos)(void *x, hpt_dtype dtype, int B, int T, int nh, int hd, float theta,
                     int inverse, const int *pos);
    /* Forward of one block (FlashAttention algorithm 1 with the causal rule
     * on global positions; GQA as attention_forward): for the block's
     * query rows, out (B,Tq,H,hd) and lse (B,H,Tq) receive the block's
     * normalised output and row log-sum-exp of the scaled scores (merge =
     * 0: overwritten; a row that sees no key of the block gets 0 and
     * -inf), or (merge = 1) the online-softmax merge into what they hold:
     * L = logaddexp(lse, lse_b), out = e^(lse - L) out + e^(lse_b - L)
     * out_b. Other rows untouched. out, q, k, v: act; lse float. */
    void (*attention_block_forward)(void *out, float *lse, const void *q, const void *k,
                                    const void *v, const hpt_attn_block *blk, int B, int H,
                                    int KV, int hd, int merge);
    /* Backward of one block (FlashAttention-2, Dao 2023, algorithm 2) with
     * the FINAL lse (after every merge) and D = rowsum(dout * out) of the
     * final out: dq (B,Tq,H,hd) += the block's part for its query rows;
     * dk, dv (B,Tk,KV,hd) += its part for its key rows (accumulated).
     * Fixed order: bitwise reproducible. q, k, v: act; the rest float. */
    void (*attention_block_backward)(float *dq, float *dk, float *dv, const float *D,
                                     const float *dout, const float *lse, const void *q,
                                     const void *k, const void *v, const hpt_attn_block *blk,
                                     int B, int H, int KV, int hd);
    /* D (B,H,T) = rowsum over hd of dout * out, both (B,T,H,hd); out act. */
    void (*attention_rowdot)(float *D, const float *dout, const void *out, int B, int T, int H,
                             int hd);

    /* ---- inference with a key/value cache (lib/generate.c). Optional: NULL
     * when the backend cannot generate (hpt_gen_init refuses it). ---------- */
    /* RoPE as `rope` (forward, same angles, Hugging Face pairing) for n
     * tokens of one sequence at positions pos0 .. pos0+n-1: x (n,nh,hd)
     * rotated in place. rope_at(x, T, nh, hd, theta, 0) equals
     * rope(x, act, 1, T, nh, hd, theta, 0). x: act. */
    void (*rope_at)(void *x, int n, int nh, int hd, float theta, int pos0);
    /* Causal grouped-query attention of n new queries against a cache
     * (Vaswani et al. 2017, eq. 1; GQA as attention_forward): q (n,H,hd) at
     * positions pos0 .. pos0+n-1, already rotated; kc, vc (pos0+n, KV, hd)
     * the keys (rotated) and values of positions 0 .. pos0+n-1, the n new
     * ones included; out (n,H,hd). Query i attends to positions [0, pos0+i]
     * with scale 1/sqrt(hd). With pos0 = 0 it equals attention_forward for
     * B = 1, T = n (up to rounding). All four: act. */
    void (*attention_cached)(void *out, const void *q, const void *kc, const void *vc, int n,
                             int pos0, int H, int KV, int hd);

    /* ---- SwiGLU (Shazeer 2020, eq. 6): out = silu(gate) * up, (N,I); all
     * three act ---- */
    void (*swiglu_forward)(void *out, const void *gate, const void *up, size_t n);
    /* dgate, dup (N,I) = (overwritten); dgate, dup, dout float; gate, up act. */
    void (*swiglu_backward)(float *dgate, float *dup, const float *dout, const void *gate,
                            const void *up, size_t n);
    /* Optional: swiglu_backward with dgate, dup written in the activation
     * dtype (bf16 mode: rounded to nearest even from the fp32 values
     * swiglu_backward computes) for matmul_backward_act — bf16 activation
     * gradients from the kernel that produces them (issue 28). */
    void (*swiglu_backward_act)(void *dgate, void *dup, const float *dout, const void *gate,
                                const void *up, size_t n);

    /* ---- elementwise ------------------------------------------------------ */
    /* out = a + b, n elements (out may alias a). */
    void (*add)(float *out, const float *a, const float *b, size_t n);
    /* x *= s. */
    void (*scale)(float *x, float s, size_t n);
    /* Sum of squares of x in double precision (gradient norm). */
    double (*sumsq)(const float *x, size_t n);
    /* Optional (NULL: the caller calls sumsq k times): acc + sumsq(x[0],
     * n[0]) + ... + sumsq(x[k-1], n[k-1]), the k sums added to acc in order
     * in double — the same value as the loop, in one round trip to a device
     * instead of k (the gradient norm visits every tensor). x, n: k entries,
     * read during the call only. */
    double (*sumsq_list)(double acc, const float *const *x, const size_t *n, int k);
    /* Optional (NULL: callers use sumsq_list, a round trip to the host):
     * out[i] = sumsq(x[i], n[i]) for i < k (every n[i] > 0), the values
     * sumsq_list adds, written to the device doubles out[0..k) (from
     * alloc) and not waited for — no host synchronisation, so a backward
     * hook can call it; read them later with download. */
    void (*sumsq_list_async)(double *out, const float *const *x, const size_t *n, int k);

    /* ---- cross-entropy over a full vocabulary ------------------------------
     * logits (N,V) are turned in place into dloss/dlogits scaled by
     * `grad_scale` (softmax - onehot) * grad_scale; returns the sum over the
     * N rows of -log softmax(logits)[target] (double). targets (N) int32. */
    double (*crossentropy_fused)(float *logits, const int32_t *targets, int N, int V,
                                 float grad_scale);
    /* Same loss without the gradient (evaluation); logits untouched. */
    double (*crossentropy_loss)(const float *logits, const int32_t *targets, int N, int V);

    /* ---- vocab-parallel cross-entropy (Megatron-LM, Shoeybi et al. 2019,
     * section 3): logits (N,Vl) are columns v0..v0+Vl-1 of the full
     * logits, of which the first `nvalid` are real vocabulary entries (the
     * rest is padding that never enters the softmax). Between the phases
     * the caller all-reduces over TP: MAX of mx, SUM of sumexp and tlogit.
     * Full logits are never gathered. */
    /* mx (N) = max over the valid local columns (-inf if none). */
    void (*vocab_max)(float *mx, const float *logits, int N, int Vl, int nvalid);
    /* sumexp (N) = sum exp(logit - mx) over valid local columns; tlogit (N)
     * = the target's logit if the target is local, else 0. */
    void (*vocab_sumexp)(float *sumexp, float *tlogit, const float *logits, const int32_t *targets,
                         const float *mx, int N, int Vl, int nvalid, int v0);
    /* Returns sum over rows of log(sumexp) + mx - tlogit (the loss); when
     * grad_scale != 0 also turns logits into (softmax - onehot)*grad_scale
     * for valid columns and 0 for padding. */
    double (*vocab_ce_finish)(float *logits, const int32_t *targets, const float *mx,
                              const float *sumexp, const float *tlogit, int N, int Vl, int nvalid,
                              int v0, float grad_scale);

    /* ---- AdamW (Loshchilov & Hutter 2019, algorithm 2) ----------------------
     * For n elements: g = grad*grad_scale; m = b1 m + (1-b1) g;
     * v = b2 v + (1-b2) g^2; p -= lr * (wd * p + (m/bc1) / (sqrt(v/bc2) + eps))
     * where bc1 = 1-b1^t, bc2 = 1-b2^t (t >= 1). Decoupled weight decay is
     * applied first, as in PyTorch's AdamW: p *= 1 - lr*wd. */
    void (*adamw)(float *p, const float *grad, float *m, float *v, size_t n, float lr, float b1,
                  float b2, float eps, float wd, float grad_scale, int t);

    /* ---- fused ops. Optional (NULL): the model then calls the unfused
     * slots named in each contract, which give bitwise the same result. -- */
    /* Residual add fused with the RMSNorm that reads its result, in one
     * pass over the residual stream: out (N,C, fp32) = x + delta, then
     * norm_out (N,C, activation dtype) = out * rstd * w and rstd (N)
     * exactly as rmsnorm_forward(norm_out, rstd, out, w, N, C, eps).
     * Bitwise equal to add(out, x, delta, N*C) followed by that
     * rmsnorm_forward. out may alias x or delta; norm_out and rstd alias
     * nothing. CPU: one sweep per row (lib/kernels_cpu.h add_rmsnorm_row);
     * CUDA: one block per row (lib/kernels_cuda.cu), bitwise its own add
     * and rmsnorm_forward. */
    void (*add_rmsnorm_forward)(float *out, void *norm_out, float *rstd, const float *x,
                                const float *delta, const float *w, int N, int C, float eps);
    /* RoPE of a layer's queries and keys in one pass (one launch on CUDA):
     * q (B,T,H,hd) and k (B,T,KV,hd), both stored as dtype, rotated in
     * place; bitwise equal to rope(q, dtype, B, T, H, hd, theta, inverse)
     * followed by rope(k, dtype, B, T, KV, hd, theta, inverse). q and k do
     * not overlap. CPU: NULL; CUDA: lib/kernels_cuda.cu. */
    void (*rope_qk)(void *q, void *k, hpt_dtype dtype, int B, int T, int H, int KV, int hd,
                    float theta, int inverse);

    /* ---- debugging. Optional (NULL: a host backend, nothing to count) -- */
    /* *out = the host synchronisations made since init (hpt_host_syncs),
     * counted always (an increment per call); a caller takes the
     * difference around a step. CUDA: the backend's own calls only (not
     * NCCL's, lib/comm_nccl.c). */
    void (*host_syncs)(hpt_host_syncs *out);
};

/* NULL-terminated registry of the backends compiled in ("cpu" first). */
const hpt_backend *const *hpt_backend_list(void);

/* 1 when a backend of this name is compiled in (without initialising it). */
int hpt_backend_compiled(const char *name);

/* Look up a backend by name and run its init. Errors: HPT_ERR_USAGE
 * listing the compiled-in backends when `name` is unknown; init's error
 * (e.g. "--backend cuda: no CUDA device visible (...)") when it fails. */
hpt_status hpt_backend_get(const char *name, const hpt_backend **out);

/* Parse a --precision value: "fp32", "tf32" or "bf16". Errors:
 * HPT_ERR_USAGE naming the value and the allowed ones. */
hpt_status hpt_precision_parse(const char *s, hpt_precision *out);

/* "fp32", "tf32" or "bf16". */
const char *hpt_precision_name(hpt_precision p);

/* The CUDA backend's attention path that HPT_CUDA_ATTENTION names, for a
 * run in precision p: *path = 0 (unset or empty: the precision's default),
 * 'm' (mma: the bf16 tensor-core kernels), 'b' (blas: cuBLAS chunks) or
 * 'f' (flash: the fp32 kernels). The one reading of the variable: the CUDA
 * backend's set_precision and attention calls and hpt-plan all use it.
 * Errors (HPT_ERR_USAGE, *path 0): another value, naming the variable and
 * the three; mma with fp32 or tf32, naming the precision. */
hpt_status hpt_cuda_attention_path(hpt_precision p, int *path);

/* The CUDA backend's tensor-core attention (lib/attention_mma.cu), as its
 * dispatch and hpt-plan both need it: 1 when it takes head dim hd (16,
 * 32, 64, 96, 128); and the parts its dK/dV kernel splits a GQA group of
 * H/KV query heads into for B sequences of T rows and KV kv heads (per
 * rank): the smallest divisor d of the group with ceil(T/64) B KV d >= 256
 * blocks (HPT_CUDA_MMA_BLOCKS=N: N, for tests), else the group (one head
 * per part); 1 without GQA. d > 1 costs partial dK, dV sums in scratch. */
int hpt_cuda_mma_head_dim_ok(int hd);
int hpt_cuda_mma_kv_split(int B, int T, int H, int KV);

/* be->set_precision(p), or for a backend without that slot accept FP32
 * only. Errors: HPT_ERR_USAGE from the backend, naming the precision. */
hpt_status hpt_backend_set_precision(const hpt_backend *be, hpt_precision p);

/* be->act_dtype(), or HPT_DTYPE_F32 for a backend without that slot. */
hpt_dtype hpt_backend_act_dtype(const hpt_backend *be);

/* The CPU backend (OpenBLAS + OpenMP), always present. */
extern const hpt_backend hpt_backend_cpu;

/* The CUDA backend (cuBLAS + own kernels: lib/backend_cuda.cu,
 * attention_cuda.cu, kernels_cuda.cu): defined
 * (and registered) only when configure found the CUDA toolkit (HAVE_CUDA). */
extern const hpt_backend hpt_backend_cuda;

#ifdef __cplusplus
}
#endif

#endif
