/* train_export.h — --export and the replica checks
 * (lib/train_export.c). */
#ifndef HPT_TRAIN_EXPORT_H
#define HPT_TRAIN_EXPORT_H

#include <stdio.h>

#include "train_state.h"

/* Write the final weights with Hugging Face names to HDF5 `path` (rank 0
 * writes). Collective. Errors: HPT_ERR_IO. */
hpt_status export_weights(run_state *r, const char *path);
/* Tied-embedding copies and TP-replicated tensors bitwise identical.
 * Collective. Errors: HPT_ERR_INTERNAL naming the tensor. */
hpt_status check_replicas(run_state *r);
#endif
