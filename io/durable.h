/* durable.h — the one durable-commit helper of every writer (checkpoints,
 * exports, shards, prep files, hang reports, trimmed logs): write PATH.tmp,
 * fsync it, rename it over PATH, fsync the directory (redis rdbSave; POSIX
 * rename is atomic within a directory, and the directory's fsync makes the
 * new name itself durable). After a crash a reader finds either the old
 * PATH or the whole new one, never half a file. */
#ifndef HPT_DURABLE_H
#define HPT_DURABLE_H

#include <stddef.h>

#include "error.h"

/* fsync the file or directory `path` (opened read-only). Errors:
 * HPT_ERR_IO, "PATH: cannot open for fsync: E" or "PATH: fsync failed: E". */
hpt_status hpt_fsync_path(const char *path);

/* Commit `tmp` (a file or a directory, already fully written and closed)
 * as `path` in the same directory: fsync tmp, rename it to path, fsync the
 * directory. Errors: HPT_ERR_IO naming the step that failed (fsync of tmp,
 * the rename, fsync of the directory), the file and strerror; tmp is left
 * for the caller to remove (after a failed directory fsync the rename has
 * happened: path is new). */
hpt_status hpt_file_commit(const char *tmp, const char *path);

/* Create PATH.tmp (mode 0644, truncating a stale one) for writing: its name
 * into tmp[n], the descriptor in *fd. Errors: HPT_ERR_USAGE (path too long),
 * HPT_ERR_IO "PATH.tmp: cannot create: E". */
hpt_status hpt_tmp_create(const char *path, char *tmp, size_t n, int *fd);

/* Finish a file begun with hpt_tmp_create: fsync and close fd, then
 * hpt_file_commit(tmp, path). `st` is the writer's status so far: when it
 * is an error, or any step fails, fd is closed, tmp removed and path left
 * as it was. Returns st, or the first failure: HPT_ERR_IO "TMP: write
 * failed: E" (fsync/close) or hpt_file_commit's. */
hpt_status hpt_tmp_commit(int fd, const char *tmp, const char *path, hpt_status st);

/* Write n bytes of buf as `path`, durably (hpt_tmp_create, a write loop
 * that retries EINTR, hpt_tmp_commit). Errors: HPT_ERR_IO naming PATH.tmp
 * ("write failed: E") or a commit step; PATH is then unchanged and no
 * PATH.tmp is left. */
hpt_status hpt_file_write_durable(const char *path, const void *buf, size_t n);

/* The same without the two fsyncs: a reader still sees the old PATH or the
 * whole new one, but after a crash PATH may be the old one. For files
 * rewritten every few seconds whose loss in a crash is harmless (the
 * watchdog's heartbeats), where a sync per rewrite would load a shared
 * file system and delay the heartbeat itself. Errors: as
 * hpt_file_write_durable ("cannot rename TMP to PATH: E" for the rename). */
hpt_status hpt_file_write_atomic(const char *path, const void *buf, size_t n);

#endif
