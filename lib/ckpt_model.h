/* ckpt_model.h — the Llama model as io/ckpt_inspect.h's hpt_ckpt_model
 * (lib/ckpt_model.c), for hpt-ckpt and anything else that inspects or exports
 * checkpoints without building a model. */
#ifndef HPT_CKPT_MODEL_H
#define HPT_CKPT_MODEL_H

#include "ckpt_inspect.h"

/* tensors: config_json's logical tensors in Hugging Face order (embedding,
 * layers, final norm, LM head unless tied; list malloc'd, the caller frees);
 * describe: sizes, positions, norms, tying, parameter count into buf[n];
 * hf_config: the Hugging Face config.json text of an export (torch_dtype as
 * given). Errors: those of hpt_config_parse (HPT_ERR_CONFIG naming origin). */
extern const hpt_ckpt_model hpt_ckpt_model_llama;

#endif
