/* ckpt.h — hpt checkpoints: sharded HDF5 with atomic commit.
 *
 * Layout of one checkpoint (docs/CHECKPOINT.md):
 *   RUN/checkpoints/step_NNNNNNNN/checkpoint.h5      (NNNNNNNN = step, 8 digits)
 *   RUN/checkpoints/latest                            text: "step_NNNNNNNN\n"
 * checkpoint.h5:
 *   root attributes  format = "hpt-checkpoint", format_version = 2,
 *                    hpt_version, config_json (the model's config.json text),
 *                    step, samples (data cursor: samples consumed in the
 *                    global order), seed, adam_t, skipped_total,
 *                    consecutive_skips, global_batch (sequences), seq_len,
 *                    micro_batch, and the writing layout tp, pp, dp, zero1
 *                    (and, optional on reading, sequence_parallel, recompute,
 *                    cp: the writer's context parallelism, 1 when absent)
 *   /model/<name>               float32, the logical (unsharded) tensor with
 *                               its global shape, Hugging Face name
 *   /optim/exp_avg/<name>       AdamW first moments, same shape
 *   /optim/exp_avg_sq/<name>    AdamW second moments, same shape
 *   every dataset: contiguous, attributes "layer" (int32, global layer
 *   index or -1), "crc_tile" (int64[2]: rows, columns of a tile) and
 *   "crc32c" (uint32[tiles], row-major over the tile grid): the CRC32C of
 *   each tile's elements, row by row (hpt_ckpt_tiles)
 * Each rank writes only its hyperslab with parallel HDF5 collective I/O, so
 * the file reads in h5py/h5dump as ordinary full tensors and loads into any
 * TP/PP/DP layout. Version 1 (still read): chunked datasets with the
 * Fletcher32 filter instead of the crc attributes.
 */
#ifndef HPT_CKPT_H
#define HPT_CKPT_H

#include <hdf5.h>
#include <stdint.h>

#include "error.h"

#define HPT_CKPT_FORMAT "hpt-checkpoint"
#define HPT_CKPT_VERSION 2     /* written                              */
#define HPT_CKPT_VERSION_MIN 1 /* oldest read: Fletcher32 chunks        */
#define HPT_CKPT_FILE "checkpoint.h5"

typedef struct {
    int32_t format_version;
    char hpt_version[32];
    char config_json[8192];
    int64_t step, samples, adam_t, skipped_total, consecutive_skips, global_batch;
    int32_t seq_len, micro_batch, tp, pp, dp, zero1;
    uint64_t seed;
    /* the writing run's sequence parallelism (0/1) and --recompute (0 none,
     * 1 full, 2 selective); optional attributes: -1 when the checkpoint
     * does not record them (written before they existed) */
    int32_t sequence_parallel, recompute;
    /* the writing run's context parallelism (--cp): metadata only, the
     * tensors do not depend on it; optional attribute "cp", read as 1 when
     * absent (checkpoints written before it was recorded) */
    int32_t cp;
    /* the writing run's optimizer options as hpt-train options ("--lr 0.0006
     * --min-lr 6e-05 --warmup 100 --steps 1000 ..."); optional attribute
     * "optimizer": "" when not recorded */
    char optimizer[256];
} hpt_ckpt_meta;

/* Write the root attributes of an open checkpoint file (collective when the
 * file was opened with MPI-IO: every rank passes the same meta). Errors:
 * HPT_ERR_IO. */
hpt_status hpt_ckpt_write_meta(hid_t file, const hpt_ckpt_meta *meta);

/* Read and check the root attributes of an open file: format must be
 * "hpt-checkpoint" and format_version known. Errors: HPT_ERR_DATA naming
 * `path` and the attribute ("unknown format version 7 (this hpt reads 1)"). */
hpt_status hpt_ckpt_read_meta(hid_t file, const char *path, hpt_ckpt_meta *meta);

/* CRC32C (Castagnoli, iSCSI polynomial) of n bytes, continuing from crc
 * (start with 0): hpt_crc32c(hpt_crc32c(0, a, n), b, m) is the CRC of a
 * followed by b. Uses SSE4.2 when the CPU has it. */
uint32_t hpt_crc32c(uint32_t crc, const void *buf, size_t n);

/* The checksum grid of a (rows, cols) dataset (cols = 1 for vectors):
 * tiles of tr x tc elements from (0, 0), the last row/column of tiles
 * clipped; tile (i, j)'s CRC32C runs over its rows in order, tc (or fewer)
 * float32 little-endian each. A writer picks tiles inside its shards, so
 * every tile has one writer. */
typedef struct {
    int64_t rows, cols; /* dataset shape                           */
    int64_t tr, tc;     /* tile shape                              */
    int64_t nr, nc;     /* tiles down and across: ntiles = nr * nc */
} hpt_ckpt_tiles;

/* Fill t for a dataset and tile shape (tr, tc >= 1). */
void hpt_ckpt_tiles_init(hpt_ckpt_tiles *t, int64_t rows, int64_t cols, int64_t tr, int64_t tc);

/* CRC32C of every tile inside rows [r0, r0 + nrows) x cols [c0, c0 + ncols)
 * of the dataset, from buf holding that block row-major (row stride
 * ld >= ncols elements); the block must start on a tile boundary, and
 * tiles that reach past its end are skipped. crc[i * nc + j] receives tile
 * (i, j). */
void hpt_ckpt_tiles_crc(const hpt_ckpt_tiles *t, const float *buf, int64_t ld, int64_t r0,
                        int64_t nrows, int64_t c0, int64_t ncols, uint32_t *crc);

/* The tile-aligned block covering rows [*r0, *r1) x cols [*c0, *c1):
 * widened in place to tile boundaries (clipped to the dataset). */
void hpt_ckpt_tiles_cover(const hpt_ckpt_tiles *t, int64_t *r0, int64_t *r1, int64_t *c0,
                          int64_t *c1);

/* Write the checksum attributes ("crc_tile", "crc32c") of dataset ds
 * (collective when the file is open with MPI-IO: same values everywhere);
 * crc == NULL writes zeros, to be overwritten (same size, no new file
 * space) once the data is written. 0 ok, -1 HDF5 error. */
int hpt_ckpt_put_crc(hid_t ds, const hpt_ckpt_tiles *t, const uint32_t *crc);

/* Read the checksum attributes of a (rows, cols) dataset: fills t and a
 * malloc'd array *crc (ntiles). -1 when missing or inconsistent with the
 * shape (a damaged or not-hpt dataset). */
int hpt_ckpt_get_crc(hid_t ds, int64_t rows, int64_t cols, hpt_ckpt_tiles *t, uint32_t **crc);

/* Bytes per read of hpt_ckpt_read_checked (whole tile rows, at least one). */
#define HPT_CKPT_READ_BYTES ((int64_t)8 << 20)

/* Rows per read of a block ncols wide: a multiple of t->tr, about
 * HPT_CKPT_READ_BYTES of float32, at least one tile row. */
int64_t hpt_ckpt_band_rows(const hpt_ckpt_tiles *t, int64_t ncols);

/* Read rows [r0, r0 + nrows) x cols [c0, c0 + ncols) (a tile-aligned block,
 * hpt_ckpt_tiles_cover) of float32 dataset ds into buf (row-major,
 * nrows x ncols) with transfer list dxpl, and check every tile in it
 * against crc. 0 ok; -1 the read failed; -2 a tile's checksum differs
 * (*bad = its index). */
int hpt_ckpt_read_checked(hid_t ds, hid_t dxpl, const hpt_ckpt_tiles *t, const uint32_t *crc,
                          int64_t r0, int64_t nrows, int64_t c0, int64_t ncols, float *buf,
                          int64_t *bad);

/* Checkpoint directory name for a step: "step_NNNNNNNN". buf >= 32 bytes. */
void hpt_ckpt_dirname(int64_t step, char *buf);

/* Complete checkpoints under `dir` (names step_NNNNNNNN without .tmp),
 * newest first: fills up to `max` steps, returns how many. An empty
 * step_NNNNNNNN directory (a removal interrupted by a kill, as earlier hpt
 * versions pruned) is not listed; neither are the .step_NNNNNNNN.pruning
 * directories a removal renames checkpoints to first. */
int hpt_ckpt_list(const char *dir, int64_t *steps, int max);

#endif
