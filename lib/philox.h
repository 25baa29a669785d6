/* philox.h — counter-based random numbers (Philox-4x32-10).
 *
 * Salmon, Moraes, Dror, Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3",
 * SC 2011. A pure function of (key, counter): any element of any stream can
 * be computed independently, which makes parameter initialisation and the
 * data order independent of how work is split across ranks and threads.
 */
#ifndef HPT_PHILOX_H
#define HPT_PHILOX_H

#include <stdint.h>

typedef struct {
    uint32_t v[4];
} hpt_philox_ctr;

/* Philox-4x32 with 10 rounds: returns the 4x32-bit block for counter `ctr`
 * under the 64-bit key (k0, k1). */
hpt_philox_ctr hpt_philox4x32(hpt_philox_ctr ctr, uint32_t k0, uint32_t k1);

/* 64-bit FNV-1a hash of a string, used to key streams by tensor name. */
uint64_t hpt_hash_str(const char *s);

/* Standard normal sample for element `index` of the stream keyed by
 * (seed, stream): Box–Muller on the first two 32-bit words of
 * philox(counter = {index lo, index hi, stream lo, stream hi}, key = seed). */
float hpt_philox_normal(uint64_t seed, uint64_t stream, uint64_t index);

/* Uniform 64-bit word for (seed, stream, index). */
uint64_t hpt_philox_u64(uint64_t seed, uint64_t stream, uint64_t index);

#endif
