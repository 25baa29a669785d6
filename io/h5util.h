/* h5util.h — small HDF5 helpers shared by every file format in io/.
 *
 * HDF5 reports failures on its own error stack; hpt's messages name the file
 * and the innermost (most specific) HDF5 cause instead of printing the stack.
 */
#ifndef HPT_H5UTIL_H
#define HPT_H5UTIL_H

#include <hdf5.h>

#include "error.h"

/* The most specific message on HDF5's error stack of this thread ("data error
 * detected by Fletcher32 checksum", "truncated file: eof = ...", "unable to
 * lock file, errno = 37 ..."), or "HDF5 error" when the stack is empty.
 * Call right after the failing HDF5 call: the next HDF5 call clears the
 * stack. Returns a thread-local buffer owned by io/, valid until the next
 * call on this thread. Never fails. */
const char *hpt_h5_cause(void);

/* hpt_h5_cause(), shortened for messages on one line: when HDF5's
 * innermost message reports a failed system call ("file write failed:
 * time = ..., errno = 28, error message = 'No space left on device', buf
 * = ...") the result is "No space left on device (file write failed)";
 * otherwise hpt_h5_cause() with line breaks turned into spaces. Same
 * lifetime rules as hpt_h5_cause(). */
const char *hpt_h5_cause_line(void);

/* For a failed H5Fopen of `path` (cause = hpt_h5_cause() right after it):
 * when the cause is HDF5's "unable to lock file" (HDF5 1.10+ locks a file
 * on open, and NFS without lockd or Lustre without flock answer ENOLCK),
 * set the message "<what><path>: not read: its file system does not
 * support file locks, which HDF5 takes on open (HDF5: <cause>); set
 * HDF5_USE_FILE_LOCKING=FALSE ..." (`what` is a prefix such as "weights ",
 * may be "") and return HPT_ERR_IO: the file was not read, so nothing may
 * call it damaged. Otherwise HPT_OK and no message. */
hpt_status hpt_h5_lock_error(const char *what, const char *path, const char *cause);
#define HPT_H5_NOLOCK_TEXT "its file system does not support file locks"

/* String attribute `name` of HDF5 object obj (scalar; variable- or
 * fixed-length, either character set) as a NUL-terminated malloc'd string
 * the caller frees. NULL when absent, not a scalar string, unreadable or
 * out of memory. */
char *hpt_h5_read_str_attr(hid_t obj, const char *name);

/* 1 when the file at path starts with HDF5's 8-byte format signature (HDF5
 * file format spec, "Format Signature"; hpt's files have no user block, so
 * it is at byte 0), else 0 (also when it cannot be read). */
int hpt_h5_has_signature(const char *path);

#endif
