/* init_from.h — initialise a model's parameters from existing weights
 * (hpt-train --init-from).
 *
 * Sources, told apart by content and name:
 *   - hpt's --export file (io/weights.h): HDF5, one float dataset per
 *     tensor at the root, Hugging Face names, global shapes;
 *   - a Hugging Face safetensors file (io/safetensors.h), F32, BF16 or F16;
 *   - a sharded safetensors index, FILE.json ("model.safetensors.index.json");
 *   - a directory: its model.safetensors.index.json, else model.safetensors.
 * Every tensor of the model is looked up by its Hugging Face name (the
 * tensor table of model.h), its shape checked against the global shape the
 * config gives, and this rank's slice read: local element (i, j) of a
 * tensor is global (row0 + i, col0 + j) — the tensor table's mapping that
 * the checkpoint loader uses too — so every TP/PP/DP rank reads only what
 * it holds (a pipeline stage opens only the shards of its own tensors);
 * vocabulary padding rows (global row >= vocab_size) are zero.
 * A tied model takes model.embed_tokens.weight for both uses and ignores a
 * source's lm_head.weight (with a note); an untied one needs both.
 */
#ifndef HPT_INIT_FROM_H
#define HPT_INIT_FROM_H

#include <stdint.h>
#include <stdio.h>

#include "model.h"

/* Overwrite every parameter of m (this rank's slices) with the values of
 * `path`. Reads on this rank only, no communication (the caller agrees on
 * the status). resume_step >= 0: a checkpoint of that step is being
 * resumed instead — nothing is read, and a note saying so goes to `note`
 * (NULL: silent; pass it on one rank only). Errors: HPT_ERR_DATA naming
 * the file and, where one is at fault, the tensor: missing or unreadable
 * file, malformed safetensors header or index, a tensor missing, of
 * another shape ("model.layers.0.mlp.up_proj.weight has shape [176, 32],
 * the config needs [176, 64]"), of an unsupported dtype, of a layer
 * beyond the config's num_hidden_layers, a tensor the model does not have
 * ("model.layers.0.self_attn.q_proj.bias is not one of the model's"; a
 * rotary_emb.inv_freq buffer is skipped with a note), a non-finite value
 * (the tensor and the first bad element's global index). */
hpt_status hpt_init_from(hpt_model *m, const char *path, int64_t resume_step, FILE *note);

#endif
