/* ckpt.h — hpt checkpoints: sharded HDF5 with atomic commit.
 *
 * Layout of one checkpoint (docs/CHECKPOINT.md):
 *   RUN/checkpoints/step_NNNNNNNN/checkpoint.h5      (NNNNNNNN = step, 8 digits)
 *   RUN/checkpoints/latest                            text: "step_NNNNNNNN\n"
 * checkpoint.h5:
 *   root attributes  format = "hpt-checkpoint", format_version = 1,
 *                    hpt_version, config_json (the model's config.json text),
 *                    step, samples (data cursor: samples consumed in the
 *                    global order), seed, adam_t, skipped_total,
 *                    consecutive_skips, global_batch (sequences), seq_len,
 *                    micro_batch, and the writing layout tp, pp, dp, zero1
 *   /model/<name>               float32, the logical (unsharded) tensor with
 *                               its global shape, Hugging Face name
 *   /optim/exp_avg/<name>       AdamW first moments, same shape
 *   /optim/exp_avg_sq/<name>    AdamW second moments, same shape
 *   every dataset: chunked, Fletcher32 checksums, attribute "layer" (int32,
 *   global layer index or -1)
 * Each rank writes only its hyperslab with parallel HDF5 collective I/O, so
 * the file reads in h5py/h5dump as ordinary full tensors and loads into any
 * TP/PP/DP layout.
 */
#ifndef HPT_CKPT_H
#define HPT_CKPT_H

#include <hdf5.h>
#include <stdint.h>

#include "error.h"

#define HPT_CKPT_FORMAT "hpt-checkpoint"
#define HPT_CKPT_VERSION 1
#define HPT_CKPT_FILE "checkpoint.h5"

typedef struct {
    int32_t format_version;
    char hpt_version[32];
    char config_json[8192];
    int64_t step, samples, adam_t, skipped_total, consecutive_skips, global_batch;
    int32_t seq_len, micro_batch, tp, pp, dp, zero1;
    uint64_t seed;
} hpt_ckpt_meta;

/* Write the root attributes of an open checkpoint file (collective when the
 * file was opened with MPI-IO: every rank passes the same meta). Errors:
 * HPT_ERR_IO. */
hpt_status hpt_ckpt_write_meta(hid_t file, const hpt_ckpt_meta *meta);

/* Read and check the root attributes of an open file: format must be
 * "hpt-checkpoint" and format_version known. Errors: HPT_ERR_DATA naming
 * `path` and the attribute ("unknown format version 7 (this hpt reads 1)"). */
hpt_status hpt_ckpt_read_meta(hid_t file, const char *path, hpt_ckpt_meta *meta);

/* Checkpoint directory name for a step: "step_NNNNNNNN". buf >= 32 bytes. */
void hpt_ckpt_dirname(int64_t step, char *buf);

/* Complete checkpoints under `dir` (names step_NNNNNNNN without .tmp),
 * newest first: fills up to `max` steps, returns how many. */
int hpt_ckpt_list(const char *dir, int64_t *steps, int max);

#endif
