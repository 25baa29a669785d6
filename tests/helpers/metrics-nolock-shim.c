/* metrics-nolock-shim.c — LD_PRELOAD library for tests/metrics/metrics-nolock.sh:
 * a file system without lock support (NFS mounted with nolock, Lustre
 * without flock): flock() and fcntl(F_SETLK, F_SETLKW, F_OFD_SETLK*) fail
 * with ENOLCK, as such mounts answer. Every other call goes to libc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/file.h>

int flock(int fd, int op)
{
    (void)fd;
    (void)op;
    errno = ENOLCK;
    return -1;
}

static int is_setlk(int cmd)
{
    return cmd == F_SETLK || cmd == F_SETLKW
#ifdef F_OFD_SETLK
           || cmd == F_OFD_SETLK || cmd == F_OFD_SETLKW
#endif
        ;
}

int fcntl(int fd, int cmd, ...)
{
    static int (*real)(int, int, ...);
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (is_setlk(cmd)) {
        errno = ENOLCK;
        return -1;
    }
    if (!real)
        real = (int (*)(int, int, ...))dlsym(RTLD_NEXT, "fcntl");
    return real(fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return fcntl(fd, cmd, arg);
}
