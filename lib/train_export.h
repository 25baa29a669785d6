/* train_export.h — --export and the replica checks
 * (lib/train_export.c). */
#ifndef HPT_TRAIN_EXPORT_H
#define HPT_TRAIN_EXPORT_H

#include <stdio.h>

#include "train_state.h"

/* Write the final weights with Hugging Face names to o->export_path (rank
 * 0 writes): HDF5, or safetensors (io/safetensors_write.h; o's
 * export_bf16 and export_shard_size) when the name ends in .safetensors.
 * Collective. Errors: HPT_ERR_IO. */
hpt_status export_weights(run_state *r, const hpt_train_opts *o);

/* --export-dtype / --export-shard-size need --export FILE.safetensors.
 * Errors: HPT_ERR_USAGE naming the option. */
hpt_status export_check_opts(const hpt_train_opts *o);

/* A safetensors --export writes config.json beside it: that must not be
 * the run directory's own (run_dir: --run-dir or NULL), and must be a
 * file that can be written. Errors: HPT_ERR_USAGE, HPT_ERR_IO naming it.
 * HDF5 exports: HPT_OK. */
hpt_status export_check_st_path(const hpt_train_opts *o, const char *run_dir);
/* Tied-embedding copies and TP-replicated tensors bitwise identical.
 * Collective. Errors: HPT_ERR_INTERNAL naming the tensor. */
hpt_status check_replicas(run_state *r);
#endif
