/* train_opts.h — the trainer's option checks beyond hpt_train_opts_validate
 * (train.h), defined in lib/train_opts.c with it and the defaults. */
#ifndef HPT_TRAIN_OPTS_H
#define HPT_TRAIN_OPTS_H

#include <mpi.h>

#include "train.h"

/* 1 when `step` is in the comma-separated list (--fault-nan-steps); NULL
 * list: 0. */
int train_opts_in_list(const char *list, int step);

/* --export FILE, checked before any step (hpt_check_output_file). Its
 * directory may be the --run-dir that this run has not created yet
 * (train_rundir_write creates it and checks that it is writable). Local.
 * Errors: HPT_ERR_IO naming FILE, HPT_ERR_USAGE (FILE is a checkpoint). */
hpt_status train_opts_check_export(const hpt_train_opts *o);

/* Every rank was given the same options: their canonical lines (every
 * option, in one order) are compared by hash before anything else is
 * collective; on a difference the lowest differing rank sends its lines
 * and rank 0 names the first option that differs. Collective over comm;
 * the same status everywhere. Errors: HPT_ERR_USAGE (HPT_ERR_INTERNAL:
 * out of memory, agreed). */
hpt_status train_opts_agree(MPI_Comm comm, const hpt_train_opts *o);

/* The layout (--tp, --pp, --dp) against comm's size, into *dp, and the
 * test faults naming a rank of the job. Local; every rank computes the
 * same answer. Errors: HPT_ERR_USAGE naming the option. */
hpt_status train_opts_check_layout(MPI_Comm comm, const hpt_train_opts *o, int *dp);

#endif
