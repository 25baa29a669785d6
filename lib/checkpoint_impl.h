/* checkpoint_impl.h — helpers shared by checkpoint.c (save) and
 * checkpoint_load.c (load); not part of the checkpoint API (checkpoint.h). */
#ifndef HPT_CHECKPOINT_IMPL_H
#define HPT_CHECKPOINT_IMPL_H

#include <hdf5.h>
#include <mpi.h>
#include <stdint.h>

#include "durable.h"
#include "error.h"
#include "model.h"

/* Longest Hugging Face tensor name hpt writes, in bytes. */
#define HPT_CKPT_NAME_MAX 160

/* HDF5 rank of a (rows, cols) tensor's dataset: vectors (cols == 1) are
 * 1-D. */
static inline int hpt_checkpoint_rank_of(int64_t cols) { return cols > 1 ? 2 : 1; }

/* Open (create != 0: create, truncating) checkpoint file `path` with the
 * MPI-IO driver over comm, collectively (every rank of comm calls it):
 * collective metadata, two-phase collective buffering for writes, 1 MiB
 * metadata blocks, HDF5 1.8+ object headers when creating. Returns the
 * file or -1 (HDF5's error stack says why). */
hid_t hpt_checkpoint_open_parallel(const char *path, MPI_Comm comm, int create);

/* HDF5's innermost message for the last failed hpt_checkpoint_open_parallel
 * on this thread ("truncated file: eof = ...", "file signature not found";
 * MPI-IO's system error for a create), or "HDF5 error". Thread-local
 * buffer, valid until the next failed open. */
const char *hpt_checkpoint_open_cause(void);



#endif
