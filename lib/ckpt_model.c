/* ckpt_model.c — what a Llama model config implies for the checkpoint tools
 * (io/ckpt_inspect.h's hpt_ckpt_model table): the logical tensors, a
 * one-paragraph description, the Hugging Face config.json of an export.
 * io/ reads and writes checkpoints without knowing the model; lib/ knows it. */
#include "ckpt_model.h"

#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "error.h"
#include "model.h"

/* hpt_ckpt_model.tensors: the logical tensors of config_json in Hugging
 * Face order (embedding, layers, final norm, LM head unless tied). */
static hpt_status model_tensors(const char *config_json, const char *origin,
                                hpt_ckpt_tensor **list, int *n)
{
    hpt_config c;
    hpt_status st = hpt_config_parse(config_json, origin, &c);
    if (st)
        return st;
    int L = c.num_hidden_layers, k = 0;
    hpt_ckpt_tensor *t = malloc(sizeof *t * ((size_t)L * HPT_TENSOR_KIND_COUNT + 3));
    if (!t)
        HPT_FATAL("out of memory listing the tensors of %s", origin);
    for (int g = -1; g <= L; g++) { /* -1: embedding, 0..L-1: layers, L: the tail */
        int first = g < 0 ? HPT_TENSOR_EMBED
                    : g == L ? HPT_TENSOR_FINAL_NORM : HPT_TENSOR_ATTN_NORM;
        int last = g < 0 ? HPT_TENSOR_EMBED
                   : g == L ? (c.tie_word_embeddings ? HPT_TENSOR_FINAL_NORM : HPT_TENSOR_LM_HEAD)
                            : HPT_TENSOR_DOWN;
        for (int kind = first; kind <= last; kind++, k++) {
            t[k].layer = g >= 0 && g < L ? g : -1;
            hpt_tensor_name((hpt_tensor_kind)kind, t[k].layer, t[k].name, sizeof t[k].name);
            hpt_tensor_global_shape(&c, (hpt_tensor_kind)kind, &t[k].rows, &t[k].cols);
        }
    }
    *list = t;
    *n = k;
    return HPT_OK;
}

/* hpt_ckpt_model.describe: sizes, positions, norms, tying, parameters. */
static hpt_status model_describe(const char *config_json, const char *origin, char *buf, size_t n)
{
    hpt_config c;
    hpt_status st = hpt_config_parse(config_json, origin, &c);
    if (st)
        return st;
    snprintf(buf, n,
             "hidden %d, intermediate %d, layers %d, heads %d (kv %d), vocab %d,\n"
             "               max positions %d, rms_norm_eps %g, rope_theta %g, %s embeddings;\n"
             "               %.2f M parameters",
             c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_attention_heads,
             c.num_key_value_heads, c.vocab_size, c.max_position_embeddings, c.rms_norm_eps,
             c.rope_theta, c.tie_word_embeddings ? "tied" : "untied",
             hpt_config_num_params(&c) / 1e6);
    return HPT_OK;
}

/* hpt_ckpt_model.hf_config: config.json for a safetensors export. */
static hpt_status model_hf_config(const char *config_json, const char *origin,
                                  const char *torch_dtype, char *buf, size_t n)
{
    hpt_config c;
    hpt_status st = hpt_config_parse(config_json, origin, &c);
    return st ? st : hpt_config_format(&c, torch_dtype, buf, n);
}

const hpt_ckpt_model hpt_ckpt_model_llama = {model_tensors, model_describe, model_hf_config};
