/* h5out.h — output files committed atomically: written under a temporary
 * name in the same directory, then fsync, rename over the final name,
 * fsync of the directory (redis rdbSave). Until the rename the final name
 * keeps its previous content (or stays absent); a failure (full disk, an
 * HDF5 error) removes the temporary file. Used by hpt-train --export and
 * hpt-ckpt export. Serial: one process writes.
 */
#ifndef HPT_H5OUT_H
#define HPT_H5OUT_H

#include <hdf5.h>

#include "durable.h"
#include "error.h"
#include "h5util.h"

#define HPT_H5OUT_PATH_MAX 4096

/* An HDF5 file being written under tmp, to become path. */
typedef struct {
    hid_t file;                     /* open for writing; -1 when closed   */
    char path[HPT_H5OUT_PATH_MAX];  /* final name                         */
    char tmp[HPT_H5OUT_PATH_MAX];   /* path + ".tmp", same directory       */
} hpt_h5_out;


/* Write the scalar fixed-length string attribute NAME = s (NUL included,
 * as io/ckpt.c writes them) on obj. 0 ok, -1 on an HDF5 error (the cause in
 * hpt_h5_cause()). Used for config_json on exports. */
int hpt_h5_put_str_attr(hid_t obj, const char *name, const char *s);

/* Create PATH.tmp (truncating a stale one) as a new HDF5 file with the
 * default serial driver and HDF5's error printing off; o->file is the
 * handle to write into. Errors: HPT_ERR_USAGE (path too long), HPT_ERR_IO
 * naming PATH.tmp and the cause: strerror of the create (permissions,
 * missing directory) or HDF5's innermost message (e.g. "unable to lock
 * file" on a file system without locks); no file is left behind. */
hpt_status hpt_h5_out_create(const char *path, hpt_h5_out *o);

/* End a write started by hpt_h5_out_create. st is the status of the
 * writes: when HPT_OK, close the file and commit it to o->path
 * (hpt_file_commit); otherwise, or when that fails, close and remove
 * o->tmp and leave o->path untouched. Returns the first error (its message
 * then also says that o->path is unchanged), or HPT_OK. */
hpt_status hpt_h5_out_finish(hpt_h5_out *o, hpt_status st);

#endif
