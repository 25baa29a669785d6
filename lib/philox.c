/* philox.c — Philox-4x32-10 (Salmon et al. SC'11), see philox.h. */
#include "philox.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t *hi)
{
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

hpt_philox_ctr hpt_philox4x32(hpt_philox_ctr c, uint32_t k0, uint32_t k1)
{
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = mulhilo(PHILOX_M0, c.v[0], &hi0);
        uint32_t lo1 = mulhilo(PHILOX_M1, c.v[2], &hi1);
        hpt_philox_ctr n = {{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
        c = n;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    return c;
}

uint64_t hpt_hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

static hpt_philox_ctr block(uint64_t seed, uint64_t stream, uint64_t index)
{
    hpt_philox_ctr c = {{(uint32_t)index, (uint32_t)(index >> 32), (uint32_t)stream,
                         (uint32_t)(stream >> 32)}};
    return hpt_philox4x32(c, (uint32_t)seed, (uint32_t)(seed >> 32));
}

float hpt_philox_normal(uint64_t seed, uint64_t stream, uint64_t index)
{
    hpt_philox_ctr r = block(seed, stream, index);
    /* u1 in (0, 1], u2 in [0, 1): 2^-32 steps, computed in double. */
    double u1 = ((double)r.v[0] + 1.0) * (1.0 / 4294967296.0);
    double u2 = (double)r.v[1] * (1.0 / 4294967296.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

uint64_t hpt_philox_u64(uint64_t seed, uint64_t stream, uint64_t index)
{
    hpt_philox_ctr r = block(seed, stream, index);
    return ((uint64_t)r.v[1] << 32) | r.v[0];
}
