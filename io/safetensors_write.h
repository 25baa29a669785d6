/* safetensors_write.h — write a model's weights as Hugging Face safetensors
 * (one file, or shards with model.safetensors.index.json) with its
 * config.json beside them: what `transformers` loads without a conversion
 * script. The reader is safetensors.h; the format is described there and in
 * docs/CHECKPOINT.md ("Exporting to safetensors").
 *
 * Each file: an 8-byte little-endian header length N (a multiple of 8); N
 * bytes of JSON, {"__metadata__": {"format": "pt"}, "<name>": {"dtype":
 * "F32"|"BF16", "shape": [...], "data_offsets": [begin, end]}, ...},
 * padded with spaces; the tensors' bytes, row-major little-endian, in the
 * order given, their data_offsets tiling the data region exactly.
 *
 * Sharding (as Hugging Face's save_pretrained): tensors are taken in order
 * and a new shard starts when the next tensor would take the current one
 * past `shard_bytes` (a tensor larger than that gets a shard of its own).
 * One shard: the file is OUT itself. Several: OUT "dir/model.safetensors"
 * gives "dir/model-00001-of-0000K.safetensors" ... and the index
 * "dir/model.safetensors.index.json" ({"metadata": {"total_size": bytes},
 * "weight_map": {name: shard file}}).
 *
 * Durability: every file is written as NAME.tmp, fsync'ed and renamed
 * (io/durable.h hpt_file_commit); a failure before the commit removes the
 * .tmp files and leaves an earlier export as it was. The commit removes an
 * earlier OUT.index.json durably first, then renames the shards, then
 * config.json, the new index last: a crash at any point leaves the earlier
 * export whole, the new one whole, or shards without an index (refused by
 * the reader), never old and new shards under one index; every shard's
 * __metadata__ and the index carry the export's id (HPT_ST_EXPORT_ID_KEY),
 * which the reader matches. After the commit the stale other form of OUT
 * (the single file when writing shards) and the earlier index's shards the
 * new set does not reuse (HF-pattern names only) are removed. Names are
 * JSON-escaped. Test hook: HPT_ST_TEST_ABORT_AFTER_RENAME=k aborts after
 * the k-th shard rename. Serial: one process.
 */
#ifndef HPT_SAFETENSORS_WRITE_H
#define HPT_SAFETENSORS_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define HPT_ST_SHARD_DEFAULT 5000000000ull /* 5 GB, Hugging Face's default */

typedef enum { HPT_ST_OUT_F32, HPT_ST_OUT_BF16 } hpt_st_out_dtype;

/* One tensor to write. */
typedef struct {
    char name[128]; /* Hugging Face name                          */
    int ndim;       /* 1 or 2                                      */
    int64_t rows;   /* shape[0], elements                          */
    int64_t cols;   /* shape[1] (1 for a 1-D tensor), elements     */
} hpt_st_out_tensor;

typedef struct hpt_st_writer hpt_st_writer;

/* The dtype called `name` ("f32", "bf16"; case-insensitive, "float32" and
 * "bfloat16" too) into *dt. Errors: HPT_ERR_USAGE naming the value and the
 * choices, with `label` (e.g. "--export-dtype") in front. */
hpt_status hpt_st_out_dtype_parse(const char *label, const char *name, hpt_st_out_dtype *dt);

/* Whether path ends in ".safetensors", in any case (the export format is chosen by the
 * extension). */
int hpt_st_out_is_safetensors(const char *path);

/* Plan and start writing `n` tensors t[] (copied) to OUT `path` in dtype
 * dt, shards of at most shard_bytes (> 0; see the top), with config_json
 * (the Hugging Face config text, written verbatim as config.json in OUT's
 * directory). Creates the first shard's .tmp at once. *w owns everything;
 * end it with hpt_st_writer_finish, also after an error here (*w may then
 * be NULL or hold a .tmp to remove). Errors: HPT_ERR_USAGE (path too long,
 * shard_bytes 0), HPT_ERR_IO naming the .tmp file and strerror. */
hpt_status hpt_st_writer_open(hpt_st_writer **w, const char *path, const hpt_st_out_tensor *t,
                              int n, hpt_st_out_dtype dt, uint64_t shard_bytes,
                              const char *config_json);

/* Append n float32 values (host memory) to the tensors' data: the
 * tensors are filled in order, row-major, and a call may span tensors and
 * shards. BF16 is rounded to nearest, ties to even (NaN stays a quiet NaN
 * of the same sign). Errors: HPT_ERR_IO (a failed write, naming the file),
 * HPT_ERR_INTERNAL (more values than the tensors hold). */
hpt_status hpt_st_writer_write(hpt_st_writer *w, const float *x, size_t n);

/* End the write and free w (NULL is accepted: returns st). st is the
 * caller's status so far: HPT_OK and every value written → commit every
 * file (see the top); otherwise, or when a commit fails, remove the .tmp
 * files. Returns the first error (HPT_ERR_INTERNAL when values are
 * missing) or HPT_OK; *nfiles (may be NULL) gets the number of shards. */
hpt_status hpt_st_writer_finish(hpt_st_writer *w, hpt_status st, int *nfiles);

/* float32 → bfloat16 bits, round to nearest even (NaN → quiet NaN). */
uint16_t hpt_st_f32_to_bf16(float x);

#endif
