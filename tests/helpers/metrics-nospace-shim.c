/* metrics-nospace-shim.c — LD_PRELOAD library for
 * tests/bad/metrics-empty-file.sh: every write()/pwrite() to the file whose
 * path ends with $HPT_TEST_NOSPACE (e.g. "/new.h5") fails with ENOSPC, as
 * on a full file system, after the file was created. Every other call goes
 * to libc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int is_target(int fd)
{
    const char *suffix = getenv("HPT_TEST_NOSPACE");
    char link[64], path[4096];
    if (!suffix || !suffix[0])
        return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < 0)
        return 0;
    path[n] = 0;
    size_t l = strlen(path), s = strlen(suffix);
    return l >= s && !strcmp(path + l - s, suffix);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (is_target(fd)) {
        errno = ENOSPC;
        return -1;
    }
    if (!real)
        real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    return real(fd, buf, n, off);
}

ssize_t write(int fd, const void *buf, size_t n)
{
    static ssize_t (*real)(int, const void *, size_t);
    if (is_target(fd)) {
        errno = ENOSPC;
        return -1;
    }
    if (!real)
        real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    return real(fd, buf, n);
}
