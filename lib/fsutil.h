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

#endif
