/* train_ckpt.h — the training run's checkpoints: directory, resume
 * with fallback, save (synchronous and --async-save), log trimming
 * (lib/train_ckpt.c). */
#ifndef HPT_TRAIN_CKPT_H
#define HPT_TRAIN_CKPT_H

#include <stdio.h>

#include "checkpoint.h"
#include "train_state.h"

/* r->ckpt_dir from --checkpoint-dir or RUN_DIR/checkpoints ("" = none).
 * Errors: HPT_ERR_USAGE (--save-every without a directory). */
hpt_status checkpoint_dir(run_state *r, const hpt_train_opts *o);
/* Pick the checkpoint to resume (metadata only), check it fits, adapt
 * o->grad_accum; sets r->resume_from (-1: fresh start). Collective. */
hpt_status probe_resume(run_state *r, hpt_train_opts *o, hpt_ckpt_meta *meta);
/* Load the probed checkpoint (falling back with --resume auto), restore
 * the training state, cut the logs back to it. Collective. */
hpt_status load_resume(run_state *r, const hpt_train_opts *o, hpt_ckpt_meta *meta);
/* Save step `step` (collective); prints the save line on rank 0. */
hpt_status save_checkpoint(run_state *r, const hpt_train_opts *o, int step, FILE *out);
/* --async-save with a checkpoint directory and --save-every: the handle of the background
 * saves and its staging buffer, allocated now. The writer thread makes no
 * MPI call, but MPI must know other threads exist: hpt-train asks for
 * MPI_THREAD_FUNNELED; under a lower level (a caller's MPI_Init) saves
 * stay synchronous, with a warning. Local. Errors: HPT_ERR_INTERNAL,
 * HPT_ERR_IO (out of memory). */
hpt_status setup_async_save(run_state *r, const hpt_train_opts *o);
/* --async-save: snapshot step `step` and start writing it in the
 * background (collective); a failure is reported and training goes on
 * (HPT_OK). */
hpt_status start_async_save(run_state *r, const hpt_train_opts *o, int step, FILE *out);
/* --async-save: commit the save in flight, if any (collective, after step
 * `at`); prints and records it; a failure is reported and training goes
 * on. Returns its start-to-commit seconds (0: none). */
double finish_async_save(run_state *r, int at, FILE *out);
/* Rank 0: cut back (upto >= 0) or remove (upto < 0) the samples.<d>.tsv
 * files no rank of this run writes. */
void tidy_samples(run_state *r, const hpt_train_opts *o, int64_t upto);
#endif
