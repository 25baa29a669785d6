/* safetensors.h — read Hugging Face safetensors files, single or sharded.
 *
 * Format (https://huggingface.co/docs/safetensors, "Format"): an unsigned
 * 64-bit little-endian header length N; N bytes of JSON, an object mapping
 * each tensor name to {"dtype": "F32"|"BF16"|..., "shape": [d0, ...],
 * "data_offsets": [begin, end]} (plus an optional "__metadata__" object of
 * strings); then the data region: tensor bytes, row-major, little-endian,
 * at byte offsets [begin, end) from the start of the data region (8 + N).
 * The format limits N to 100,000,000 bytes.
 *
 * A sharded model is an index, model.safetensors.index.json:
 *   {"metadata": {...}, "weight_map": {"<tensor name>": "<shard file>", ...}}
 * with the shard files in the index's directory.
 *
 * Files are memory-mapped read-only; only the pages of the tensor slices
 * read are touched, and a shard of an index is opened only when one of its
 * tensors is asked for. Every malformed header is refused at open with an
 * HPT_ERR_DATA message naming the file and the tensor: header length beyond
 * the file, JSON that does not parse, a missing or mistyped field, an
 * unknown dtype, data_offsets outside the data region or not matching
 * shape x dtype size, and data_offsets that do not tile the data region
 * exactly (as the format requires): two tensors' bytes overlapping, a gap
 * before or between tensors, or bytes after the last one (a header length
 * a few bytes short of a space-padded header would otherwise load every
 * tensor shifted). Only regular files are opened (a FIFO or device is
 * refused without blocking in open()).
 */
#ifndef HPT_SAFETENSORS_H
#define HPT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define HPT_ST_MAX_DIMS 8
#define HPT_ST_MAX_HEADER 100000000ull /* the format's limit on N, bytes */

/* One tensor of a safetensors file. */
typedef struct {
    char *name;                      /* owned by the file                       */
    char dtype[12];                  /* as written: "F32", "BF16", "I32", ...   */
    int elsize;                      /* bytes per element of dtype              */
    int ndim;                        /* 0 (scalar) .. HPT_ST_MAX_DIMS           */
    int64_t shape[HPT_ST_MAX_DIMS];
    uint64_t begin, end;             /* bytes, relative to the data region      */
} hpt_st_tensor;

/* One open safetensors file. */
typedef struct {
    char path[4096];
    const unsigned char *map; /* whole file, read-only mmap (NULL: empty)     */
    size_t size;              /* file size, bytes                             */
    uint64_t data0;           /* start of the data region: 8 + header length  */
    int ntensors;
    hpt_st_tensor *tensors;   /* sorted by name                               */
    char export_id[64];       /* __metadata__'s HPT_ST_EXPORT_ID_KEY, or ""   */
} hpt_st_file;

/* Open and validate `path` (see the list at the top). On error *f is left
 * closed. Errors: HPT_ERR_DATA naming the file (and the tensor), e.g.
 * "w.safetensors: header length 999 exceeds the 120 bytes after the length
 * field (truncated file?)". */
hpt_status hpt_st_open(const char *path, hpt_st_file *f);

/* Unmap and free; accepts a zeroed or already-closed file. */
void hpt_st_close(hpt_st_file *f);

/* The tensor called `name`, or NULL. */
const hpt_st_tensor *hpt_st_find(const hpt_st_file *f, const char *name);

/* Read the block rows [r0, r0 + nr) x columns [c0, c0 + nc) of tensor t
 * viewed as a matrix (rows = shape[0], columns = the product of the other
 * dimensions; a 1-D tensor is one column) into dst (nr x nc float32,
 * row-major), converting F32, BF16 and F16 exactly to float32. The block
 * must lie inside the tensor (the caller checked the shape). Errors:
 * HPT_ERR_DATA naming the file, the tensor and its dtype when the dtype is
 * not one of F32, BF16, F16. */
hpt_status hpt_st_read_block(const hpt_st_file *f, const hpt_st_tensor *t, int64_t r0, int64_t nr,
                             int64_t c0, int64_t nc, float *dst);

/* The metadata key naming one export (hpt's writer puts it in every
 * shard's __metadata__ and in the index's "metadata"): an index that names
 * an id loads only shards carrying the same id, so a set whose shards come
 * from two exports (an interrupted export over an earlier one) is refused. */
#define HPT_ST_EXPORT_ID_KEY "hpt_export_id"

/* A model's weights: one safetensors file or the shards of an index. */
typedef struct {
    char path[4096];          /* what was opened (file or index)              */
    int nshards;              /* 1 for a single file                          */
    char **shard_paths;       /* nshards paths                                */
    int shard_cap;            /* allocated entries of shard_paths (index)     */
    hpt_st_file *shards;      /* nshards; opened on first use                 */
    char *opened;             /* nshards flags                                */
    int nnames;
    char **names;             /* every tensor name, sorted                    */
    int *shard_of;            /* nnames: the shard holding names[i]           */
    char export_id[64];       /* the index's metadata HPT_ST_EXPORT_ID_KEY    */
} hpt_st_set;

/* Open a single safetensors file (validated at once) or an index (`path`
 * ends in ".json": parsed and checked, its shards opened on demand; the
 * weight_map's names are sorted in O(n log n), its shard files found by
 * hashing, so hundreds of thousands of entries take well under a second). On
 * error *s is left closed. Errors: HPT_ERR_DATA naming the file (missing,
 * malformed header or index: not strict JSON (RFC 8259: no NaN, no
 * comments), a key given twice in one object, no "weight_map" object, a
 * value that is not a plain file name beside the index (no '/')). */
hpt_status hpt_st_set_open(const char *path, hpt_st_set *s);

/* Close every open shard and free; accepts a zeroed or closed set. */
void hpt_st_set_close(hpt_st_set *s);

/* Find tensor `name`: *file and *t point at it (opening its shard), or are
 * NULL when no file of the set has it. Errors: HPT_ERR_DATA when its shard
 * does not open or validate, the index names a shard without it, or the
 * index names an export id the shard does not carry (shards of two
 * exports). */
hpt_status hpt_st_set_find(hpt_st_set *s, const char *name, const hpt_st_file **file,
                           const hpt_st_tensor **t);

#endif
