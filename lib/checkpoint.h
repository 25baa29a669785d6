/* checkpoint.h — save and load training state as sharded HDF5 checkpoints
 * (format: io/ckpt.h, docs/CHECKPOINT.md) with parallel HDF5 collective I/O
 * and an atomic commit. */
#ifndef HPT_CHECKPOINT_H
#define HPT_CHECKPOINT_H

#include "ckpt.h"
#include "comm.h"
#include "optim.h"

/* What a checkpoint reads and writes on this rank. */
typedef struct {
    hpt_comm *comm;
    hpt_model *model;
    hpt_optim *opt;
    const int *shard_counts; /* ZeRO-1 shard sizes per DP rank, or NULL   */
} hpt_ckpt_state;

/* Save step `meta->step` to DIR/step_NNNNNNNN (collective over the world):
 * write into DIR/step_NNNNNNNN.tmp/checkpoint.h5 (every rank its hyperslabs,
 * collective I/O), close, fsync, rename the directory, fsync DIR, then move
 * DIR/latest by write-temp + rename; finally remove all but the newest
 * `keep` checkpoints. A crash at any instant leaves the previous checkpoint
 * loadable and `latest` never names an incomplete one. Returns the same
 * status on every rank. Errors: HPT_ERR_IO naming the path. */
hpt_status hpt_checkpoint_save(const char *dir, const hpt_ckpt_state *s, const hpt_ckpt_meta *meta,
                               int keep, double *seconds, int64_t *bytes);

/* Remove stale DIR/step_*.tmp directories left by a crash (rank 0, agreed). */
hpt_status hpt_checkpoint_clean(const char *dir, MPI_Comm world);

/* Find the checkpoints to resume from: every complete step_* (the rename
 * is the commit point), newest first — so a crash between the rename and
 * the move of `latest` loses nothing, and a deleted `latest` is recovered.
 * Fills steps[] (at most max); returns how many (0: none). Same answer on
 * every rank (rank 0 looks, then broadcasts). */
int hpt_checkpoint_candidates(const char *dir, MPI_Comm world, int64_t *steps, int max);

/* At most this many candidates are considered (hpt_checkpoint_candidates'
 * max in hpt-train; prune lists as many). */
#define HPT_CKPT_MAX_CANDIDATES 65536

/* Rank 0, after a resume fell back past checkpoint `step` (newer than the
 * one loaded, and unloadable): rename DIR/step_NNNNNNNN to
 * step_NNNNNNNN.unloadable (then .unloadable.1, ...), kept for inspection
 * but no longer a candidate, nor counted by --keep. Errors: HPT_ERR_IO. */
hpt_status hpt_checkpoint_move_aside(const char *dir, int64_t step);

/* Read the metadata of DIR/step_NNNNNNNN (collective; same result
 * everywhere). Errors: HPT_ERR_DATA (not a checkpoint, unknown format). */
hpt_status hpt_checkpoint_meta(const char *dir, int64_t step, MPI_Comm world, hpt_ckpt_meta *meta);

/* Load the tensors of DIR/step_NNNNNNNN into the model and optimizer of
 * this rank (any layout: every rank reads its own hyperslabs). Collective.
 * Errors: HPT_ERR_DATA naming the damaged tensor (checksum failure), the
 * same status on every rank. */
hpt_status hpt_checkpoint_load(const char *dir, int64_t step, const hpt_ckpt_state *s);

#endif
