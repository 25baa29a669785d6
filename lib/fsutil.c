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

/* Whether directories a and b (names; b may be NULL) are the same: equal
 * names without trailing slashes, or the same inode. */
static int same_dir(const char *a, const char *b)
{
    if (!b)
        return 0;
    char x[4096], y[4096];
    snprintf(x, sizeof x, "%s", a);
    snprintf(y, sizeof y, "%s", b);
    for (size_t n = strlen(x); n > 1 && x[n - 1] == '/'; n--)
        x[n - 1] = 0;
    for (size_t n = strlen(y); n > 1 && y[n - 1] == '/'; n--)
        y[n - 1] = 0;
    struct stat sa, sb;
    return !strcmp(x, y) ||
           (!stat(x, &sa) && !stat(y, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino);
}

/* Whether dir/name exists (not followed: a dangling `latest` counts). */
static int has_entry(const char *dir, const char *name)
{
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return !lstat(p, &sb);
}

static int is_ckpts_dir(const char *dir, const char *run_ckpt)
{
    return has_entry(dir, "latest") || same_dir(dir, run_ckpt);
}

hpt_status hpt_check_export_not_run_file(const char *label, const char *out, const char *run_dir,
                                         const char *run_ckpt)
{
    char dir[4096], parent[4096];
    hpt_path_dir(out, dir, sizeof dir);
    hpt_path_dir(dir, parent, sizeof parent);
    if (!strcmp(dir, ".") || !strcmp(dir, "/")) /* "x": its parent is the same "." */
        parent[0] = 0;
    int here = is_ckpts_dir(dir, run_ckpt) || has_entry(dir, "checkpoint.h5");
    if (here || (parent[0] && is_ckpts_dir(parent, run_ckpt)))
        return hpt_error_set(HPT_ERR_USAGE, "%s %s: in %s, %s (the run's own files); export "
                             "elsewhere", label, out, dir,
                             here && !has_entry(dir, "checkpoint.h5")
                                 ? "a checkpoints directory"
                                 : "a checkpoint of a run");
    const char *base = strrchr(out, '/');
    base = base ? base + 1 : out;
    static const char *const own[] = {"log.tsv", "metrics.h5", "config.json", "latest",
                                      "checkpoints"};
    int run = has_entry(dir, "checkpoints") || has_entry(dir, "log.tsv") || same_dir(dir, run_dir);
    for (size_t i = 0; run && i < sizeof own / sizeof own[0]; i++)
        if (!strcmp(base, own[i]))
            return hpt_error_set(HPT_ERR_USAGE, "%s %s: is the run directory %s's own %s; give "
                                 "another name", label, out, dir, own[i]);
    return HPT_OK;
}
