/* data.h — the training data loader: windows of T+1 tokens in a
 * deterministic shuffled global order.
 *
 * The shards are split into non-overlapping windows: sample j of a shard of
 * N tokens covers tokens [j*T, j*T + T] (T+1 tokens; inputs are the first
 * T, targets the last T), j < (N-1)/T. Samples of all shards are numbered
 * 0..S-1 in shard order. The global order visits epoch e = p / S as a
 * pseudo-random permutation of 0..S-1 keyed by (seed, e) — a Feistel
 * network with cycle walking, so position p maps to a sample in O(1) with
 * no table. The loader's whole state is one number, the global position
 * (samples consumed), so a run can resume and data-parallel ranks can split
 * the same order with no duplicate and no gap.
 */
#ifndef HPT_DATA_H
#define HPT_DATA_H

#include <stdint.h>

#include "error.h"

typedef struct hpt_loader hpt_loader;

/* Open the shards named by `spec`: a shard file, a glob pattern
 * ("dir/train_*.bin"), or a directory (all "*.bin" files in it whose name
 * starts with `prefix`, e.g. "train" or "val"; prefix may be NULL = all).
 * Shards are sorted by path. T: sequence length (tokens per sample input).
 * Every token is checked against vocab_size. shuffle: 0 = samples in file
 * order (validation), 1 = permuted per epoch from seed.
 * A shard shorter than T+1 tokens contributes no samples.
 * Errors: HPT_ERR_DATA naming the file (nothing matched, bad shard, no
 * sample of T+1 tokens in all the shards, token id >= vocab_size). */
hpt_status hpt_loader_open(hpt_loader **out, const char *spec, const char *prefix, int T,
                           int vocab_size, uint64_t seed, int shuffle);

/* Number of samples S in one epoch. */
int64_t hpt_loader_num_samples(const hpt_loader *ld);

/* Sample index (0..S-1) at global position p (p >= 0, any epoch). */
int64_t hpt_loader_sample_at(const hpt_loader *ld, int64_t p);

/* Fill a micro-batch with the B samples at global positions
 * first, first+1, ..., first+B-1.
 * inputs (B,T), targets (B,T): int32, caller-owned. */
void hpt_loader_batch(const hpt_loader *ld, int64_t first, int B, int32_t *inputs,
                      int32_t *targets);

/* Unmap and free; accepts NULL. */
void hpt_loader_close(hpt_loader *ld);

#endif
