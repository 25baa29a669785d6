/* metrics_h5.h — HDF5 settings shared by the metrics file's writer
 * (lib/metrics.c) and its readers (io/, src/hpt-metrics.c; the Python
 * reader analysis/hpt_metrics.py applies the same bound).
 *
 * Why a bound: in SWMR mode HDF5 1.10 takes a metadata checksum mismatch
 * for "the writer is in the middle of an update" and reads again, sleeping
 * 1, 2, 4, ... ns between attempts, 100 attempts by default — 2^100 ns, for
 * ever in practice. One flipped bit in metrics.h5 then hangs the trainer
 * and every reader. HPT_METRICS_READ_ATTEMPTS attempts sleep at most about
 * 2^30 ns = 1 s in all, ample for a live writer's update to land; after
 * that the read fails ("incorrect metadata checksum after all read
 * attempts") and hpt treats the file as damaged. */
#ifndef HPT_METRICS_H5_H
#define HPT_METRICS_H5_H

#include <hdf5.h>
#include <stdio.h>

#include "error.h"

#define HPT_METRICS_READ_ATTEMPTS 30

/* A new file access property list for a metrics file: serial sec2 driver,
 * libver bounds latest (SWMR needs them), HDF5's own file locking off (hpt
 * locks PATH.lock itself, and file systems without lock support must not
 * stop a reader or the writer), metadata read attempts bounded to
 * HPT_METRICS_READ_ATTEMPTS. The caller closes it (H5Pclose). Returns a
 * negative id when HDF5 cannot create the list. */
hid_t hpt_metrics_h5_fapl(void);

/* `hpt-metrics close FILE`: clear the "open for write" status flags that a
 * killed writer leaves in the superblock (as h5clear -s does), so that a
 * plain reader (h5py.File(FILE, "r"), h5dump) opens the file; a SWMR
 * reader does not need this. Refused while a live hpt-train holds
 * FILE.lock (the writer's lock, lib/metrics.c); the lock is held while
 * clearing so that no writer starts meanwhile. Where the file system has
 * no locks, a warning goes to `log` and the flags are cleared. *cleared:
 * 1 if flags were set and are now cleared, 0 if the file opened plainly
 * already (nothing done). Errors: HPT_ERR_DATA (missing file, not HDF5,
 * HDF5's cause named), HPT_ERR_IO (a live writer holds the lock). */
hpt_status hpt_metrics_h5_clear(const char *path, FILE *log, int *cleared);

#endif
