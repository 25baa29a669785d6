/* model_h5.h — a model's tensors into an HDF5 file (io/weights.h layout:
 * one float32 dataset per tensor, Hugging Face names). Used by the PyTorch
 * reference test (tests/helpers/ref_dump.c) to dump parameters and gradients. */
#ifndef HPT_MODEL_H5_H
#define HPT_MODEL_H5_H

#include <hdf5.h>

#include "model.h"

/* Write every tensor of model m, taking values from `block` (a device
 * block with the parameter layout: m->params or m->grads), into group
 * `group` ("/" for the root; created when missing). Errors: HPT_ERR_IO. */
hpt_status hpt_model_h5_write(hid_t file, const char *group, const hpt_model *m,
                              const float *block);

#endif
