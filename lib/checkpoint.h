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
    int fault_stop;          /* testing: 1 = a synchronous save stops this
                              * rank (SIGSTOP) after the CRC attributes,
                              * just before the file's collective close   */
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

/* HPT_CKPT_DIRECT, when set, must be 1 (data written with direct I/O, the
 * default) or 0 (through the page cache). Errors: HPT_ERR_USAGE naming the
 * value (checked at start-up, not at the first save). */
hpt_status hpt_ckpt_check_env(void);

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

/* ---- asynchronous saves (--async-save; docs/CHECKPOINT.md) ----
 * hpt_ckpt_async_start snapshots at a step boundary and returns; a writer
 * thread per rank writes the file in the background (POSIX I/O only);
 * hpt_ckpt_async_finish, at a later step boundary, joins it and does the
 * collective end (CRC attributes, close) and the same commit as
 * hpt_checkpoint_save. At most one save is in flight per handle. */
typedef struct hpt_ckpt_async hpt_ckpt_async;

/* Figures of one asynchronous save (seconds, bytes). */
typedef struct {
    int64_t step;      /* the step saved; -1: none was in flight          */
    double snapshot_s; /* training stall at the start (create; the copy
                        * too on a device backend)                        */
    double copy_s;     /* the writer's copy of host slabs into the staging
                        * buffer (overlapped with training)               */
    double copy_wait_s; /* training stalled waiting for that copy
                         * (hpt_ckpt_async_snapshot_wait)                 */
    double write_s;    /* the background writer's time (CRCs, writes, sync) */
    double wait_s;     /* finish waited this long for the writer            */
    double total_s;    /* start to commit                                   */
    int64_t bytes;     /* the committed file's size                         */
} hpt_ckpt_async_info;

/* A handle with no save in flight and no staging buffer yet (NULL: out of
 * memory). Free with hpt_ckpt_async_free (joins a writer still running,
 * commits nothing: the .tmp directory stays for the next start's
 * hpt_checkpoint_clean). */
hpt_ckpt_async *hpt_ckpt_async_new(void);
void hpt_ckpt_async_free(hpt_ckpt_async *a);

/* Bytes of this rank's staging buffer: the slabs of weights and AdamW
 * moments it writes or checksums (hpt-plan's estimate; the handle keeps
 * one such buffer, allocated at the first save). */
size_t hpt_ckpt_async_staging_bytes(const hpt_ckpt_state *s);

/* Allocate this rank's staging buffer now and fault its pages in (so the
 * first snapshot does not pay for it, and a lack of memory shows at the
 * start). Local. Errors: HPT_ERR_IO (out of memory). */
hpt_status hpt_ckpt_async_reserve(hpt_ckpt_async *a, const hpt_ckpt_state *s);

/* Start saving step meta->step to DIR (collective; none in flight): the
 * same checks, reservation and phase 1 (file and datasets, collective) as
 * hpt_checkpoint_save, then the writer thread is started; it first copies
 * this rank's slabs into the staging buffer (on a device backend they are
 * copied here, before it starts); returns at once. Until
 * hpt_ckpt_async_snapshot_wait has returned, the caller must not change
 * the weights or the optimizer state. Errors (agreed,
 * nothing in flight, .tmp removed): as hpt_checkpoint_save. */
hpt_status hpt_ckpt_async_start(hpt_ckpt_async *a, const char *dir, const hpt_ckpt_state *s,
                                const hpt_ckpt_meta *meta, int keep);

/* Before the weights or the optimizer state change (the optimizer step):
 * wait until the save in flight, if any, has its copy of them in the
 * staging buffer. On the CPU backend the writer thread copies them while
 * training goes on (forward and backward only read them); on a device
 * backend they were copied at the snapshot and this returns at once.
 * Returns the seconds waited (training stall; 0 when nothing was in
 * flight). Local, training thread only; may be called any number of
 * times per save. */
double hpt_ckpt_async_snapshot_wait(hpt_ckpt_async *a);

/* Step of the save in flight, or -1 (local, no communication). */
int64_t hpt_ckpt_async_inflight(const hpt_ckpt_async *a);

/* 1 when this rank's writer is done or nothing is in flight (local, no
 * communication; the caller agrees before finishing). */
int hpt_ckpt_async_written(hpt_ckpt_async *a);

/* Finish the save in flight (collective; waits for this rank's writer):
 * agree on the writers' outcome, write the CRCs, close, commit, prune.
 * Fills *info (step -1 and HPT_OK when none was in flight). Errors (the
 * same on every rank, .tmp removed, previous checkpoints untouched):
 * HPT_ERR_IO naming the file and the failed write. */
hpt_status hpt_ckpt_async_finish(hpt_ckpt_async *a, const hpt_ckpt_state *s,
                                 hpt_ckpt_async_info *info);

#endif
