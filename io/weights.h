/* weights.h — write model tensors to an HDF5 file with Hugging Face names
 * (serial; used by export and by the PyTorch reference test). A whole
 * model is written by hpt_model_h5_write (lib/model_h5.h).
 *
 * Layout: one float32 dataset per logical tensor, named by its Hugging
 * Face name ("model.layers.0.self_attn.q_proj.weight"), shape (rows, cols)
 * or (rows) for vectors, under an optional group. A tied model has no
 * "lm_head.weight". Readable with h5py/h5dump as ordinary arrays.
 */
#ifndef HPT_WEIGHTS_H
#define HPT_WEIGHTS_H

#include <hdf5.h>

#include "error.h"

/* Create (truncate) an HDF5 file for writing with the default serial
 * driver, in place (for scratch files; outputs that must survive a failed
 * write go through hpt_h5_out_create, io/h5out.h). Errors: HPT_ERR_IO
 * naming the path and HDF5's innermost cause; a file that did not exist
 * before is not left behind. */
hpt_status hpt_h5_create(const char *path, hid_t *file);

/* Write an array dataset `name` of `type` (H5T_NATIVE_FLOAT, _INT32,
 * _DOUBLE) with `rank` dims. Errors: HPT_ERR_IO naming the file, the
 * dataset and HDF5's innermost cause (e.g. "No space left on device"). */
hpt_status hpt_h5_write_array(hid_t file, const char *name, hid_t type, int rank,
                              const hsize_t *dims, const void *data);

#endif
