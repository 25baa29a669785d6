/* fsutil.c — see fsutil.h. */
#include "fsutil.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void hpt_path_dir(const char *path, char *dir, size_t n)
{
    snprintf(dir, n, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, n, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
}

hpt_status hpt_check_output_file(const char *label, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (!S_ISREG(sb.st_mode))
            return hpt_error_set(HPT_ERR_IO, "%s %s: not a regular file", label, path);
        if (access(path, W_OK) != 0)
            return hpt_error_set(HPT_ERR_IO, "%s %s: exists but is not writable (left untouched)",
                                 label, path);
        return HPT_OK;
    }
    if (lstat(path, &sb) == 0)
        return hpt_error_set(HPT_ERR_IO, "%s %s: a symbolic link to nothing (left untouched)",
                             label, path);
    char dir[4096];
    hpt_path_dir(path, dir, sizeof dir);
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return hpt_error_set(HPT_ERR_IO, "%s %s: directory %s does not exist", label, path, dir);
    if (access(dir, W_OK) != 0)
        return hpt_error_set(HPT_ERR_IO, "%s %s: directory %s is not writable: %s", label, path,
                             dir, strerror(errno));
    return HPT_OK;
}

hpt_status hpt_check_output_dir(const char *label, const char *path)
{
    char at[PATH_MAX], probe[PATH_MAX + 32];
    struct stat sb;
    if (snprintf(at, sizeof at, "%s", path) >= (int)sizeof at)
        return hpt_error_set(HPT_ERR_IO, "%s %s: path too long", label, path);
    if (lstat(at, &sb) == 0 && stat(at, &sb) != 0)
        return hpt_error_set(HPT_ERR_IO, "%s %s: a symbolic link to nothing", label, path);
    while (stat(at, &sb) != 0) { /* the nearest existing directory above */
        if (errno != ENOENT)
            return hpt_error_set(HPT_ERR_IO, "%s %s: %s: %s", label, path, at, strerror(errno));
        char up[PATH_MAX];
        hpt_path_dir(at, up, sizeof up);
        if (!strcmp(up, at))
            break;
        snprintf(at, sizeof at, "%s", up);
    }
    if (stat(at, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return hpt_error_set(HPT_ERR_IO, "%s %s: %s is not a directory", label, path, at);
    /* access() says yes to root on a read-only mount: create and remove */
    snprintf(probe, sizeof probe, "%s/.hpt-probe-XXXXXX", at);
    if (!mkdtemp(probe))
        return hpt_error_set(HPT_ERR_IO, "%s %s: cannot create anything in %s: %s", label, path,
                             at, strerror(errno));
    rmdir(probe);
    return HPT_OK;
}
