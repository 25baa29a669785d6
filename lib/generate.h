/* generate.h — text generation from trained weights: load a checkpoint or an
 * export, run the model one token at a time with a key/value cache, sample.
 *
 * Single process, fp32, any backend that fills the optional rope_at and
 * attention_cached slots (the CPU backend does). The forward pass reuses the
 * backend kernels of training (embedding, RMSNorm, matmul, SwiGLU, add); only
 * RoPE at an offset and attention against the cache are inference-only.
 *
 * Key/value cache (as in Hugging Face's past_key_values): for every layer the
 * keys (after RoPE) and values of every position seen so far, (ctx, KV*hd).
 * A step over n new tokens at positions pos .. pos+n-1 computes their
 * queries, keys and values, appends the keys and values to the cache and
 * attends each query to the cached positions up to its own. The prompt is
 * one step (prefill); every sampled token is one more step of n = 1.
 */
#ifndef HPT_GENERATE_H
#define HPT_GENERATE_H

#include <stdint.h>
#include <stdio.h>

#include "model.h"

/* What a weights path is. */
typedef enum {
    HPT_GEN_SOURCE_ANY = 0,    /* decide from the file (format attribute)     */
    HPT_GEN_SOURCE_CHECKPOINT, /* an hpt checkpoint (io/ckpt.h): /model/<name> */
    HPT_GEN_SOURCE_EXPORT,     /* hpt-train --export or hpt-ckpt export: /<name> */
} hpt_gen_source;

/* Load model weights for inference into *m (one rank, no parallelism,
 * activations for one token; the caller frees m with hpt_model_free).
 *
 * `path`: a checkpoint — a run directory, its checkpoints directory (the
 * newest complete step_NNNNNNNN), a step directory, or a checkpoint.h5 —
 * or an export HDF5 file. `kind` says which is expected (ANY: a file with
 * the checkpoint format attribute is a checkpoint, any other HDF5 file an
 * export). The config comes from the file's config_json attribute (every
 * checkpoint, hpt-ckpt exports); `model_spec` (a preset or config.json path,
 * as --model) is needed when the file has none (hpt-train --export) and,
 * when given with one, must agree with it. Checkpoint tensors are checked
 * against their CRC32C tiles. The resolved file name is written to
 * file (PATH_MAX bytes).
 * Errors: HPT_ERR_DATA — a missing path, not an HDF5 file, no checkpoint in
 * a directory, a missing tensor or one of the wrong shape, a checksum
 * failure; HPT_ERR_IO — an unreadable path; HPT_ERR_USAGE — no config
 * (give --model), one that disagrees with the file's, or a checkpoint where
 * kind is EXPORT. Messages name the
 * file and the dataset, with HDF5's innermost cause (hpt_h5_cause). */
hpt_status hpt_gen_load(const char *path, hpt_gen_source kind, const char *model_spec,
                        const hpt_backend *be, hpt_model *m, char *file);

/* Inference state for one sequence: the key/value cache and the scratch
 * activations of a step, one device allocation. */
typedef struct {
    const hpt_model *m;
    int ctx;                 /* positions the cache holds (<= max_position_embeddings) */
    int pos;                 /* positions filled                                        */
    void *block;             /* the one device allocation                               */
    /* act: the model's activation dtype (m->act_elem bytes an element) */
    void *kcache, *vcache;   /* (L, ctx, KV*hd) rotated keys, values; act               */
    void *ln, *q, *att, *gate, *up, *h; /* (ctx, width) of a step; act                  */
    float *x, *tmp, *xmid;   /* (ctx, width) of a step: residual stream, partial sums   */
    float *rstd;             /* (ctx)                                                   */
    float *logits;           /* (V) the last position's logits                          */
    int32_t *tokens;         /* (ctx)                                                   */
} hpt_gen_state;

/* Allocate the cache and scratch for up to ctx positions of model m (m must
 * outlive g). Errors: HPT_ERR_USAGE when ctx is not in
 * [1, max_position_embeddings] or the backend lacks rope_at or
 * attention_cached; HPT_ERR_INTERNAL when out of memory (bytes named). */
hpt_status hpt_gen_init(hpt_gen_state *g, const hpt_model *m, int ctx);

/* Free; accepts a zeroed state and may be called twice. */
void hpt_gen_free(hpt_gen_state *g);

/* Run tokens[0..n) (host int32, each in [0, V)) at positions pos .. pos+n-1,
 * append their keys and values to the cache, advance pos by n and copy the
 * logits of the last of them to logits (host, V floats). Maths: the model's
 * forward (model.h) restricted to these positions, attention over the cache.
 * Errors: HPT_ERR_USAGE when n < 1 or pos + n > ctx, HPT_ERR_DATA for a token
 * outside [0, V). */
hpt_status hpt_gen_step(hpt_gen_state *g, const int32_t *tokens, int n, float *logits);

/* Sampling of the next token from logits. */
typedef struct {
    float temperature; /* 0: greedy (argmax); > 0: softmax(logits / temperature) */
    int top_k;         /* keep the k most probable tokens; 0: all                 */
    float top_p;       /* nucleus (Holtzman et al. 2020, "The Curious Case of
                        * Neural Text Degeneration", section 3.1): keep the
                        * smallest set of most probable tokens whose mass is
                        * >= top_p; 1: all                                        */
    uint64_t seed;     /* draws are hpt_philox_u64(seed, stream, draw index)    */
} hpt_sample_opts;

/* Defaults: temperature 1, top_k 0, top_p 1, seed 1234. */
void hpt_sample_opts_default(hpt_sample_opts *o);

/* Errors: HPT_ERR_USAGE naming the option: temperature < 0 or not finite,
 * top_k < 0, top_p outside (0, 1]. */
hpt_status hpt_sample_opts_check(const hpt_sample_opts *o);

/* The token drawn from logits (V floats, host) for draw number `draw`:
 * greedy (lowest index among equal maxima) when temperature is 0, else
 * probabilities softmax(logits / temperature) in double, cut to top_k then
 * to top_p (in order of decreasing probability, ties by index), renormalised,
 * and the token whose cumulative interval holds u = (philox 53 bits) / 2^53.
 * A pure function of (logits, options, draw). Out of memory: HPT_FATAL. */
int32_t hpt_sample(const float *logits, int V, const hpt_sample_opts *o, uint64_t draw);

/* What hpt-generate does. */
typedef struct {
    const char *path;        /* weights (see hpt_gen_load)                      */
    hpt_gen_source kind;
    const char *model;       /* --model or NULL                                 */
    const char *tokenizer;   /* --tokenizer (a .model file or a directory holding
                              * tokenizer.model) or NULL: look next to the weights */
    const char *prompt;      /* UTF-8 text                                      */
    int max_new_tokens;      /* >= 0                                            */
    int ignore_eos;          /* 1: do not stop at the end-of-sentence token     */
    int print_ids;           /* 1: print the ids instead of the text            */
    hpt_sample_opts sample;
} hpt_generate_opts;

/* Load the weights and the tokenizer, encode [eos] + prompt (every line of
 * the training shards ends with eos, so eos makes the prompt start a line),
 * prefill, then sample up to max_new_tokens tokens, stopping after eos
 * (unless ignore_eos) or when the context (max_position_embeddings) is full
 * (a note on stderr). Writes the prompt and its continuation as text to out,
 * or with print_ids three lines: "prompt: ID..." (with the leading eos),
 * "generated: ID..." and "logprob: X..." (each generated token's
 * log-probability under the model, log softmax of the logits over the
 * tokenizer's ids, before temperature and cuts; natural log).
 * Errors: HPT_ERR_USAGE — bad sampling options, max_new_tokens < 0, a prompt
 * that encodes to no token or does not fit the context, no tokenizer found;
 * HPT_ERR_DATA — a missing or invalid tokenizer, one whose vocabulary is
 * larger than the model's, and hpt_gen_load's errors. */
hpt_status hpt_generate(const hpt_generate_opts *o, FILE *out);

#endif
