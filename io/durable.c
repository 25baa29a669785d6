/* durable.c — temp + fsync + rename + fsync(dir); see durable.h. */
#include "durable.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* fsync `path`: 0, or the errno of the failure; *opened 0 when the open
 * failed. */
static int fsync_errno(const char *path, int *opened)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    *opened = fd >= 0;
    if (fd < 0)
        return errno;
    int e = fsync(fd) ? errno : 0;
    close(fd);
    return e;
}

hpt_status hpt_fsync_path(const char *path)
{
    int opened, e = fsync_errno(path, &opened);
    if (e)
        return hpt_error_set(HPT_ERR_IO, "%s: %s: %s", path,
                             opened ? "fsync failed" : "cannot open for fsync", strerror(e));
    return HPT_OK;
}

/* The directory holding `path`: "." for a bare name, "/" directly under
 * the root. */
static void parent_dir(const char *path, char *dir, size_t n)
{
    const char *slash = strrchr(path, '/');
    snprintf(dir, n, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1, slash ? path : ".");
}

hpt_status hpt_file_commit(const char *tmp, const char *path)
{
    char dir[PATH_MAX];
    parent_dir(path, dir, sizeof dir);
    hpt_status st = hpt_fsync_path(tmp);
    if (st)
        return st;
    if (rename(tmp, path))
        return hpt_error_set(HPT_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    int opened, e = fsync_errno(dir, &opened);
    if (e)
        return hpt_error_set(HPT_ERR_IO, "%s: fsync of the directory failed: %s", dir,
                             strerror(e));
    return HPT_OK;
}

hpt_status hpt_tmp_create(const char *path, char *tmp, size_t n, int *fd)
{
    *fd = -1;
    if (snprintf(tmp, n, "%s.tmp", path) >= (int)n)
        return hpt_error_set(HPT_ERR_USAGE, "%s: path too long", path);
    *fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (*fd < 0)
        return hpt_error_set(HPT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    return HPT_OK;
}

hpt_status hpt_tmp_commit(int fd, const char *tmp, const char *path, hpt_status st)
{
    if (!st && fsync(fd))
        st = hpt_error_set(HPT_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
    if (close(fd) && !st)
        st = hpt_error_set(HPT_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
    if (!st)
        st = hpt_file_commit(tmp, path);
    if (st)
        unlink(tmp); /* after a failed directory fsync tmp is gone already */
    return st;
}

/* PATH.tmp written with buf and renamed over PATH; durable: synced first
 * (hpt_tmp_commit), else only closed and renamed. */
static hpt_status write_via_tmp(const char *path, const void *buf, size_t n, int durable)
{
    char tmp[PATH_MAX + 8];
    int fd;
    hpt_status st = hpt_tmp_create(path, tmp, sizeof tmp, &fd);
    if (st)
        return st;
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            st = hpt_error_set(HPT_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
            break;
        }
        p += w;
        n -= (size_t)w;
    }
    if (durable)
        return hpt_tmp_commit(fd, tmp, path, st);
    if (close(fd) && !st)
        st = hpt_error_set(HPT_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
    if (!st && rename(tmp, path))
        st = hpt_error_set(HPT_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (st)
        unlink(tmp);
    return st;
}

hpt_status hpt_file_write_durable(const char *path, const void *buf, size_t n)
{
    return write_via_tmp(path, buf, n, 1);
}

hpt_status hpt_file_write_atomic(const char *path, const void *buf, size_t n)
{
    return write_via_tmp(path, buf, n, 0);
}
