/* train_rundir.h — the trainer's run directory (lib/train_rundir.c). */
#ifndef HPT_TRAIN_RUNDIR_H
#define HPT_TRAIN_RUNDIR_H

#include <stdio.h>

#include "train_state.h"

/* mkdir -p path, then check it is a writable directory. Errors:
 * HPT_ERR_IO naming --run-dir, the directory and the cause. */
hpt_status train_rundir_make(const char *path);

/* Open RUN_DIR/name for writing (*f; the caller closes it). Errors:
 * HPT_ERR_IO naming the path. */
hpt_status open_in_run_dir(const char *dir, const char *name, FILE **f);

/* Rank 0: create o->run_dir, write config.json (r->cfg) and open log.tsv
 * into r->log — appended after the checkpoint's step on a resume
 * (r->resume_from >= 0), else new, an earlier run's log with rows kept as
 * log.tsv.N with a note on stderr. Errors: HPT_ERR_IO naming the file. */
hpt_status train_rundir_write(run_state *r, const hpt_train_opts *o);

#endif
