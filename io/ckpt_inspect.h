/* ckpt_inspect.h — list, verify, describe and export hpt checkpoints (the
 * library behind hpt-ckpt; format in ckpt.h and docs/CHECKPOINT.md).
 *
 * Serial HDF5 with the default driver, one process; call with HDF5's error
 * printing off (H5Eset_auto2(H5E_DEFAULT, NULL, NULL)): every problem is
 * reported once, naming the file and the dataset. Reports go to `out`;
 * the returned status carries the one-line error (hpt_error_msg()) for the
 * caller to print. Status codes: HPT_ERR_DATA (3) damaged, incomplete or
 * not a checkpoint (including an unknown format version), HPT_ERR_IO (5)
 * an unreadable path or an output that cannot be written, HPT_ERR_USAGE
 * (2) a path too long.
 *
 * io/ knows the file format, not the model: which tensors a config_json
 * implies (names, global shapes, layers) comes from the caller through
 * hpt_ckpt_model, which hpt-ckpt fills from lib/config.h and lib/model.h.
 *
 * Paths: DIR is a checkpoints directory (a run directory stands for its
 * checkpoints/ subdirectory); PATH is one checkpoint, a step_NNNNNNNN
 * directory or its checkpoint.h5; for info and export a DIR stands for its
 * newest complete checkpoint (the one a resume tries first). Directories
 * that are not checkpoints — step_NNNNNNNN.unloadable, .step_N.pruning, an
 * empty step_NNNNNNNN left by an interrupted removal — are not listed.
 */
#ifndef HPT_CKPT_INSPECT_H
#define HPT_CKPT_INSPECT_H

#include <stdint.h>
#include <stdio.h>

#include "error.h"

/* One tensor a model config implies. */
typedef struct {
    char name[128];     /* Hugging Face name ("model.norm.weight")               */
    int64_t rows, cols; /* global shape in elements; cols == 1 for vectors (1-D) */
    int layer;          /* global layer index, -1 outside the layers             */
} hpt_ckpt_tensor;

/* What the inspection needs to know about models. Both functions parse
 * config_json (`origin` starts their error messages, e.g. "config_json")
 * and fail with HPT_ERR_DATA or HPT_ERR_USAGE and a message when it is not
 * a valid config. */
typedef struct {
    /* The tensors in Hugging Face order: *list is malloc'd (caller frees),
     * *n its length. */
    hpt_status (*tensors)(const char *config_json, const char *origin, hpt_ckpt_tensor **list,
                          int *n);
    /* A summary for `info` into buf[n]: sizes, then continuation lines
     * indented by 15 spaces, no final newline. */
    hpt_status (*describe)(const char *config_json, const char *origin, char *buf, size_t n);
    /* The Hugging Face config.json text for config_json with "torch_dtype"
     * torch_dtype ("float32", "bfloat16") into buf[n] (safetensors
     * exports). */
    hpt_status (*hf_config)(const char *config_json, const char *origin, const char *torch_dtype,
                            char *buf, size_t n);
} hpt_ckpt_model;

/* How hpt-ckpt export writes an OUT ending in .safetensors (other names
 * are HDF5, float32, and take neither). */
typedef struct {
    int bf16;            /* BF16 (round to nearest even) instead of F32 */
    uint64_t shard_size; /* bytes per shard; 0: 5 GB                     */
} hpt_ckpt_export_opts;

/* One line per checkpoint under DIR, newest first: step, layout, ZeRO-1,
 * MiB, samples and a status (complete, incomplete, unreadable; with
 * `verify` also damaged, after reading every dataset); notes about
 * DIR/latest. A checkpoint HDF5 could not open for want of file locks is
 * "not read (no file locks)", never damaged. Errors: DIR unreadable; with
 * `verify`, HPT_ERR_DATA when a checkpoint is damaged or unreadable, else
 * HPT_ERR_IO when one was not read (no file locks). */
hpt_status hpt_ckpt_inspect_list(const char *path, int verify, const hpt_ckpt_model *mdl,
                                 FILE *out);

/* Read every dataset of PATH (or of each complete checkpoint in DIR) fully
 * — each CRC32C tile, or each Fletcher32 chunk in format 1 — and check the
 * root attributes, that the /model tensors are those config_json implies
 * and that both optimizer moments match them; print "FILE: ok" or one line
 * per problem ("FILE: /model/NAME: damaged: ..."). Errors: HPT_ERR_DATA
 * when anything is wrong, naming the file and the number of problems;
 * HPT_ERR_IO, naming the cause and HDF5_USE_FILE_LOCKING=FALSE, when a file
 * was not read because its file system has no file locks (counted apart,
 * not as damaged). */
hpt_status hpt_ckpt_inspect_verify(const char *path, const hpt_ckpt_model *mdl, FILE *out);

/* The root attributes, the model summary and a table of the /model
 * tensors (name, shape, dtype, layer) of PATH. Errors: the file cannot be
 * opened or is not a checkpoint; damaged tensors are shown, not errors. */
hpt_status hpt_ckpt_inspect_info(const char *path, const hpt_ckpt_model *mdl, FILE *out);

/* Consolidated weights: every /model/NAME of PATH as /NAME in OUT
 * (contiguous float32, Hugging Face names) with the root attribute
 * config_json; written to OUT.tmp, synced and renamed (io/h5out.h), so a
 * failure leaves an earlier OUT as it was and no OUT.tmp. An OUT ending in
 * .safetensors is written as Hugging Face safetensors instead, in the
 * model's tensor order, with config.json beside it, sharded above
 * o->shard_size (io/safetensors_write.h); an OUT in an hpt run directory
 * (one holding checkpoints/ or log.tsv) is refused there (HPT_ERR_USAGE:
 * its config.json would be replaced). o NULL: defaults. Errors:
 * HPT_ERR_DATA (damaged checkpoint, tensors not those config_json
 * implies), HPT_ERR_IO (OUT is a directory or another non-regular file,
 * its directory does not exist or it cannot be written, with the cause),
 * HPT_ERR_USAGE (OUT empty, or OUT an existing checkpoint: the input
 * itself or another, left untouched). */
hpt_status hpt_ckpt_inspect_export(const char *path, const char *out_path,
                                   const hpt_ckpt_export_opts *o, const hpt_ckpt_model *mdl,
                                   FILE *out);

#endif
