/* train_rundir.c — the run directory (--run-dir): created (mkdir -p) and
 * checked writable, config.json, log.tsv (appended on a resume; an earlier
 * run's log kept as log.tsv.N when this one starts afresh), and the helper
 * that opens its other files; see train_rundir.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_rundir.h"

/* ------------------------------------------------------------ helpers */

/* mkdir -p. Errors: HPT_ERR_IO naming the directory. */
hpt_status train_rundir_make(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return hpt_error_set(HPT_ERR_IO, "--run-dir: path too long");
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char save = *p;
            *p = 0;
            if (mkdir(buf, 0777) && errno != EEXIST)
                return hpt_error_set(HPT_ERR_IO, "--run-dir %s: cannot create %s: %s", path, buf,
                                     strerror(errno));
            *p = save;
            if (!save)
                break;
        }
    }
    struct stat st;
    if (stat(path, &st) || !S_ISDIR(st.st_mode))
        return hpt_error_set(HPT_ERR_IO, "--run-dir %s: not a directory", path);
    if (access(path, W_OK))
        return hpt_error_set(HPT_ERR_IO, "--run-dir %s: not writable: %s", path, strerror(errno));
    return HPT_OK;
}

/* Open RUN_DIR/name for writing. Errors: HPT_ERR_IO. */
hpt_status open_in_run_dir(const char *dir, const char *name, FILE **f)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *f = fopen(path, "w");
    if (!*f)
        return hpt_error_set(HPT_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    return HPT_OK;
}

/* A fresh start in a run directory whose log.tsv has rows (an earlier run
 * without a checkpoint to resume from, or --resume none): that log is kept
 * as log.tsv.N (the first free N), with a note saying `why` the run starts
 * afresh, not truncated. Errors: HPT_ERR_IO. */
static hpt_status keep_earlier_log(const char *path, const char *why)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return HPT_OK;
    long long rows = -1; /* the header is not a row */
    int c, last = '\n';
    while ((c = getc(f)) != EOF) {
        if (last == '\n')
            rows++;
        last = c;
    }
    fclose(f);
    if (rows <= 0)
        return HPT_OK;
    char kept[4200];
    for (int n = 1;; n++) {
        struct stat sb;
        snprintf(kept, sizeof kept, "%s.%d", path, n);
        if (lstat(kept, &sb) != 0 && errno == ENOENT)
            break;
        if (n == 9999)
            return hpt_error_set(HPT_ERR_IO, "%s: cannot keep the earlier log: %s.1 to .9999 "
                                 "exist", path, path);
    }
    if (rename(path, kept))
        return hpt_error_set(HPT_ERR_IO, "%s: cannot keep the earlier log as %s: %s", path, kept,
                             strerror(errno));
    fprintf(stderr, "hpt-train: note: %s held an earlier run's %lld step%s and this run starts "
            "at step 0 (%s): the earlier log is kept as %s\n", path, rows, rows == 1 ? "" : "s",
            why, kept);
    return HPT_OK;
}

hpt_status train_rundir_write(run_state *r, const hpt_train_opts *o)
{
    FILE *f;
    hpt_status st;
    if ((st = train_rundir_make(o->run_dir)) || (st = open_in_run_dir(o->run_dir, "config.json", &f)))
        return st;
    st = hpt_config_write(&r->cfg, f);
    if (fclose(f) && !st)
        st = hpt_error_set(HPT_ERR_IO, "%s/config.json: write failed", o->run_dir);
    if (st)
        return st;
    char path[4096];
    snprintf(path, sizeof path, "%s/log.tsv", o->run_dir);
    if (r->resume_from >= 0) { /* continued after the checkpoint's step (retrim_logs) */
        if (!(r->log = fopen(path, "a")))
            return hpt_error_set(HPT_ERR_IO, "%s: cannot append: %s", path, strerror(errno));
        if (ftell(r->log) == 0)
            fprintf(r->log, "step\tloss\tlr\tgrad_norm\tval_loss\tskipped\n");
        return HPT_OK;
    }
    if ((st = keep_earlier_log(path, o->resume == 0 ? "--resume none"
                                                    : "no checkpoint to resume from")) ||
        (st = open_in_run_dir(o->run_dir, "log.tsv", &r->log)))
        return st;
    fprintf(r->log, "step\tloss\tlr\tgrad_norm\tval_loss\tskipped\n");
    return HPT_OK;
}
