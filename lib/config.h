/* config.h — Llama model architecture: Hugging Face config.json and presets.
 *
 * Field names follow Hugging Face's LlamaConfig so a config.json from the
 * Hub (or written by `hpt-train --print-config`) loads unchanged.
 */
#ifndef HPT_CONFIG_H
#define HPT_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "error.h"

#define HPT_CONFIG_TOKEN_IDS 3 /* bos_token_id, eos_token_id, pad_token_id */

typedef struct {
    int hidden_size;             /* C: model width                         */
    int intermediate_size;       /* I: SwiGLU hidden width                 */
    int num_hidden_layers;       /* L                                      */
    int num_attention_heads;     /* H: query heads                          */
    int num_key_value_heads;     /* KV: key/value heads (GQA), divides H   */
    int vocab_size;              /* V                                      */
    int max_position_embeddings; /* longest sequence T the model accepts   */
    float rms_norm_eps;          /* RMSNorm epsilon                        */
    float rope_theta;            /* RoPE base                              */
    int tie_word_embeddings;     /* 1: LM head shares embed_tokens         */
    /* the tokenizer's special ids, carried to config.json when given (the
     * model does not use them; transformers' generate does) */
    int token_id[HPT_CONFIG_TOKEN_IDS]; /* bos, eos, pad                    */
    unsigned token_id_given;            /* bit k: token_id[k] was given     */
} hpt_config;

/* Head dimension hd = C / H (elements). */
static inline int hpt_config_head_dim(const hpt_config *c)
{
    return c->hidden_size / c->num_attention_heads;
}

/* Load `path` (a JSON object with the Llama fields above) into *cfg.
 * Required: hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads, vocab_size, max_position_embeddings. Optional with
 * Hugging Face's defaults: num_key_value_heads (= H), rms_norm_eps (1e-6),
 * rope_theta (10000), tie_word_embeddings (false); bos_token_id,
 * eos_token_id, pad_token_id (integers >= 0, or null: not given), written
 * back by hpt_config_write only when given. Unknown fields are ignored. The file must be a regular file (a FIFO is refused, not waited
 * on) of at most 64 KiB (65,536 bytes) of strict JSON (RFC 8259, as Hugging
 * Face writes it): comments, single quotes, trailing commas, NaN/Infinity
 * and NUL bytes are refused. Errors: HPT_ERR_USAGE naming the file and
 * field for a missing or unreadable file, malformed JSON, a missing or
 * wrong-typed field, a number out of float range, or a config that fails
 * hpt_config_validate. */
hpt_status hpt_config_load(const char *path, hpt_config *cfg);

/* As hpt_config_load, from the NUL-terminated JSON text `json`; `origin`
 * names it in messages. */
hpt_status hpt_config_parse(const char *json, const char *origin, hpt_config *cfg);

/* Compare two configs; on the first differing field, write
 * "name = a but b" into msg and return 1; 0 when equal. */
int hpt_config_diff(const hpt_config *a, const hpt_config *b, char *msg, size_t n);

/* Fill *cfg from a built-in preset: tiny, small, llama2-7b, llama2-13b,
 * llama2-70b, llama3-8b, llama3-70b, llama3-405b. Errors: HPT_ERR_USAGE listing the
 * presets when `name` is unknown. */
hpt_status hpt_config_preset(const char *name, hpt_config *cfg);

/* `spec` is a preset name or a path to a config.json (anything containing
 * '/' or ending in ".json" is a path). */
hpt_status hpt_config_resolve(const char *spec, hpt_config *cfg);

/* NULL-terminated list of preset names. */
const char *const *hpt_config_preset_names(void);

/* Check the architecture rules: all sizes > 0, H divides C, KV divides H,
 * head_dim even (RoPE pairs), eps > 0, theta > 0, each size <= 2^24 and
 * the parameter count (untied) < HPT_CONFIG_MAX_PARAMS. `origin` names the
 * source in the message. Errors: HPT_ERR_USAGE. */
hpt_status hpt_config_validate(const hpt_config *cfg, const char *origin);

/* Write *cfg as a Hugging Face-style config.json (with "architectures":
 * ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "float32").
 * Errors: HPT_ERR_IO when the stream fails. */
hpt_status hpt_config_write(const hpt_config *cfg, FILE *f);

/* hpt_config_write with "torch_dtype" set to torch_dtype ("float32",
 * "bfloat16": the dtype of the weights beside it, as transformers reads
 * it). */
hpt_status hpt_config_write_dtype(const hpt_config *cfg, const char *torch_dtype, FILE *f);

/* hpt_config_write_dtype into buf[n] (NUL-terminated). Errors:
 * HPT_ERR_INTERNAL when it does not fit. */
hpt_status hpt_config_format(const hpt_config *cfg, const char *torch_dtype, char *buf, size_t n);

/* Tensor parallelism over tp ranks splits the attention heads, the
 * key/value heads and the SwiGLU width: each must be divisible by tp.
 * Errors: HPT_ERR_USAGE naming --tp and the field. */
hpt_status hpt_config_check_tp(const hpt_config *cfg, int tp);

/* Most parameters (elements, an untied head counted) hpt_config_validate
 * accepts: 2^50, so the count and its bytes (x 16 for weights, gradients
 * and AdamW moments) fit in int64 — the sizes alone, each <= 2^24, would
 * allow about 2^75. */
#define HPT_CONFIG_MAX_PARAMS 1125899906842624.0

/* Number of parameters (elements), counting a tied head once; exact for a
 * config that passes hpt_config_validate, INT64_MAX for one over
 * HPT_CONFIG_MAX_PARAMS. */
int64_t hpt_config_num_params(const hpt_config *cfg);

#endif
