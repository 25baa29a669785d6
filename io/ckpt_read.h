/* ckpt_read.h — serial reading of one hpt checkpoint (format: ckpt.h) for
 * inspection (ckpt_inspect.h): opening with the root attributes checked,
 * dataset shapes and attributes, group listings that survive damaged
 * metadata, and full reads that check every CRC32C tile (format 2) or
 * Fletcher32 chunk (format 1). Default (sec2) driver, one process; HDF5's
 * error printing is expected off (H5Eset_auto2): problems come back as
 * statuses or "why" strings naming the cause. Not thread-safe (one open
 * checkpoint at a time: hpt_ckpt_open sets whether tiles are required).
 */
#ifndef HPT_CKPT_READ_H
#define HPT_CKPT_READ_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "error.h"

/* The three groups that hold one dataset per tensor, in this order:
 * "/model", "/optim/exp_avg", "/optim/exp_avg_sq". */
extern const char *const hpt_ckpt_groups[3];

/* Join "a/b" into buf (PATH_MAX bytes). Errors: HPT_ERR_USAGE when too long. */
hpt_status hpt_ckpt_join(char *buf, const char *a, const char *b);

/* 1 when path is a directory (a regular file), following links; else 0. */
int hpt_ckpt_is_dir(const char *path);
int hpt_ckpt_is_file(const char *path);

/* Status for a path that stat/opendir refused with errno err: a missing
 * path is HPT_ERR_DATA ("no such file or directory"), anything else
 * (permissions, ...) HPT_ERR_IO with strerror. The message starts "PATH: ". */
hpt_status hpt_ckpt_path_error(const char *path, int err);

/* Open checkpoint file `path` read-only and read its root attributes into
 * *meta (hpt_ckpt_read_meta). On success the caller H5Fcloses *f. Errors:
 * HPT_ERR_DATA (missing, not a regular file, not HDF5 or truncated — with
 * HDF5's cause —, not an hpt checkpoint, unknown format version),
 * HPT_ERR_IO (not readable). */
hpt_status hpt_ckpt_open(const char *path, hid_t *f, hpt_ckpt_meta *meta);

/* The checkpoint a resume of checkpoints directory `dir` starts from, as
 * the tools (hpt-ckpt info/export DIR, hpt-generate RUN_DIR) take it: the
 * newest complete step_NNNNNNNN whose checkpoint.h5 opens and whose root
 * attributes read (hpt_ckpt_open; lib/resume.c probe_resume skips the same
 * ones). Sets *step and `file` (PATH_MAX bytes) to its checkpoint.h5, and
 * `skipped` (n bytes) to the note a tool prints when a newer one did not
 * open ("skipped the newer step_NNNNNNNN (why): using step_MMMMMMMM, the
 * checkpoint a resume starts from"; "" when none). Returns 1 found;
 * 0 none complete (message unset); -1 none opens (message: the newest
 * one's failure); -2 one of a newer format version comes first (message:
 * that; as a resume, the tools never go past a newer hpt's work); -3 one
 * was not read because its file system has no file locks (message: that,
 * from hpt_h5_lock_error; status HPT_ERR_IO: skipping to an older one
 * would fail alike, or worse, pass a healthy newer one by). Serial HDF5. */
int hpt_ckpt_newest_readable(const char *dir, int64_t *step, char *file, char *skipped,
                             size_t n);

/* 1 when path is an existing file that is a checkpoint: named
 * step_NNNNNNNN/checkpoint.h5 (damaged or not), or an HDF5 file whose root
 * attribute "format" is HPT_CKPT_FORMAT (a copy elsewhere), else 0. For the tools
 * that write weights-only files: never over a checkpoint. Serial HDF5, its
 * error printing off for the probe; sets no error. */
int hpt_ckpt_file_is_checkpoint(const char *path);

/* A dataset's shape: rank 1 or 2; dims[1] == 1 when rank is 1. */
typedef struct {
    int rank;
    hsize_t dims[2];
} hpt_ckpt_shape;

/* 1 when a and b have the same rank and dims. */
int hpt_ckpt_shape_eq(const hpt_ckpt_shape *a, const hpt_ckpt_shape *b);

/* "(8192, 64)" or "(64)" into buf[n]. Returns buf. */
const char *hpt_ckpt_shape_str(const hpt_ckpt_shape *s, char *buf, size_t n);

/* Shape of dataset ds. 0 ok; -1 unless a 1-D or 2-D simple dataspace
 * (s->rank then holds what HDF5 said). */
int hpt_ckpt_get_shape(hid_t ds, hpt_ckpt_shape *s);

/* "float32", "float64", "int32", "uint32", "string", "other": dataset ds's
 * element type, into buf[n]. Returns buf. */
const char *hpt_ckpt_dtype_str(hid_t ds, char *buf, size_t n);

/* The int32 scalar attribute "layer" of ds into *layer; 0 ok, -1 missing
 * or not one integer. */
int hpt_ckpt_get_layer(hid_t ds, int32_t *layer);

/* Open `path` if it is a hard link to a dataset (caller H5Dcloses it);
 * otherwise -1 with the reason in why[n] ("missing", "not a dataset",
 * "cannot open: <HDF5 cause>"). */
hid_t hpt_ckpt_open_dataset(hid_t file, const char *path, char *why, size_t n);

/* Names of the links in group `gpath` ("/model", ...), in natural order
 * ("layers.2." before "layers.10."): *names is a malloc'd array of
 * malloc'd strings (hpt_ckpt_names_free). Returns the count; -1 when the
 * group is missing or not a group; -2 when its links cannot be read
 * (damaged metadata, more than 100000 links: hpt_ckpt_names_why() says
 * why). Never lists by index: HDF5 1.10.8's H5Lget_name_by_idx frees
 * uninitialised pointers on damaged link metadata (HDFGroup/hdf5#581); this
 * walks the group's own index with H5Literate in native order. */
int hpt_ckpt_names(hid_t file, const char *gpath, char ***names);

/* Why the last hpt_ckpt_names returned -2 (static buffer). */
const char *hpt_ckpt_names_why(void);

/* Free what hpt_ckpt_names returned (n: its count; NULL and n < 0 ok). */
void hpt_ckpt_names_free(char **names, int n);

/* Index of `name` in names[0..n), or -1. */
int hpt_ckpt_names_find(char **names, int n, const char *name);

/* Called with each block read by hpt_ckpt_read_blocks: cnt[0] rows (cnt[1]
 * columns; rank 1 or 2) of float32 starting at row `row0`, in buf. Returns
 * 0 to go on, -1 to stop with the reason in why[n]. */
typedef int (*hpt_ckpt_block_sink)(void *ctx, hsize_t row0, const hsize_t *cnt, int rank,
                                   const float *buf, char *why, size_t n);

/* Read all of float32 dataset ds, 16 MiB (whole tile rows) at a time, and
 * check each block: the CRC32C of its tiles (format 2, required there) or,
 * by HDF5 on the way, each chunk's Fletcher32 (format 1); hand each block
 * to sink (may be NULL). 0 ok; -1 with the reason in why[n] ("CRC32C
 * mismatch in tile (i, j): rows a..b, columns c..d", "read failed in rows
 * a..b: <HDF5 cause>", "only X of Y bytes stored", the sink's reason). */
int hpt_ckpt_read_blocks(hid_t ds, hpt_ckpt_block_sink sink, void *ctx, char *why, size_t n);

#endif
