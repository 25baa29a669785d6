/* fsutil.h — small file-system helpers shared by the writers of outputs
 * (export, metrics). */
#ifndef HPT_FSUTIL_H
#define HPT_FSUTIL_H

#include <stddef.h>

#include "error.h"

/* The directory holding `path` into dir[n]: "." for a bare name, "/" for a
 * name directly under the root. */
void hpt_path_dir(const char *path, char *dir, size_t n);

/* An output file must be an existing regular file we may write, or a new
 * name in an existing, writable directory. Errors: HPT_ERR_IO, the message
 * starting "LABEL PATH: " (e.g. label "--export") and naming the rule. */
hpt_status hpt_check_output_file(const char *label, const char *path);

/* An output directory must be an existing directory we can create entries
 * in, or a new one below the nearest existing directory, which must be
 * writable (probed by creating and removing a directory: access() says yes
 * to root on a read-only mount). Creates nothing that stays. Errors:
 * HPT_ERR_IO, the message starting "LABEL PATH: ". */
hpt_status hpt_check_output_dir(const char *label, const char *path);

/* An export must not overwrite a run's own files. Refused (HPT_ERR_USAGE,
 * "LABEL OUT: ..." naming the directory or file and the rule): OUT in a
 * checkpoints directory (one holding `latest`, or `run_ckpt`) or in a
 * checkpoint inside one (a directory holding checkpoint.h5, or any
 * directory of such a checkpoints directory: R/checkpoints/step_N/x); and
 * OUT named log.tsv, metrics.h5, config.json, latest or checkpoints in a
 * run directory (one holding checkpoints/ or log.tsv, or `run_dir`).
 * run_dir, run_ckpt: the run's directories when it may not have created
 * them yet (hpt-train), or NULL. Directories are compared by name and, when
 * both exist, by inode. */
hpt_status hpt_check_export_not_run_file(const char *label, const char *out, const char *run_dir,
                                         const char *run_ckpt);

#endif
