/* test_bf16.c — lib/bf16.h: bfloat16 conversion on the host.
 *
 *   test_bf16            exhaustive and special-case checks (exit 0 / 1)
 *   test_bf16 FILE N     also writes N float32 bit patterns (specials, ties,
 *                        subnormals, random) and their bf16 conversions to
 *                        FILE as little-endian uint32 / uint16 arrays, for
 *                        tests/model/bf16-torch.sh to compare with PyTorch.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "../helpers/expect.h"

static float f_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t bf(uint32_t u) { return hpt_bf16_from_f32(f_of(u)); }

int main(int argc, char **argv)
{
    /* Every bf16 value converts to float32 and back unchanged (NaNs stay
     * NaNs with their sign; quiet NaNs unchanged). */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = hpt_bf16_to_f32((hpt_bf16)h);
        uint16_t back = hpt_bf16_from_f32(f);
        int nan = (h & 0x7fffu) > 0x7f80u;
        if (nan)
            EXPECT(isnan(f) && (back & 0x8000u) == (h & 0x8000u) && (back & 0x7fffu) > 0x7f80u &&
                       ((h & 0x40u) == 0 || back == h),
                   "NaN bf16 0x%04x -> 0x%04x", (unsigned)h, (unsigned)back);
        else
            EXPECT(back == h, "bf16 0x%04x -> %a -> 0x%04x", (unsigned)h, (double)f, (unsigned)back);
    }
    /* Round to nearest, ties to even. 1 = 0x3f80; its ulp is 2^-7. */
    EXPECT(bf(0x3f808000u) == 0x3f80, "1 + half ulp ties to even (down): 0x%04x", bf(0x3f808000u));
    EXPECT(bf(0x3f818000u) == 0x3f82, "1 + 3 half ulps ties to even (up): 0x%04x", bf(0x3f818000u));
    EXPECT(bf(0x3f808001u) == 0x3f81, "just above a tie rounds up: 0x%04x", bf(0x3f808001u));
    EXPECT(bf(0x3f807fffu) == 0x3f80, "just below a tie rounds down: 0x%04x", bf(0x3f807fffu));
    EXPECT(bf(0xbf818000u) == 0xbf82, "negative ties to even: 0x%04x", bf(0xbf818000u));
    EXPECT(bf(0x3fffffffu) == 0x4000, "carry into the exponent: 0x%04x", bf(0x3fffffffu));
    /* Overflow, infinities, NaN, zeros, subnormals. */
    EXPECT(bf(0x7f7fffffu) == 0x7f80, "FLT_MAX rounds to +inf: 0x%04x", bf(0x7f7fffffu));
    EXPECT(bf(0x7f7f7fffu) == 0x7f7f, "just below the bf16 max stays finite: 0x%04x",
           bf(0x7f7f7fffu));
    EXPECT(bf(0x7f800000u) == 0x7f80 && bf(0xff800000u) == 0xff80, "infinities kept");
    EXPECT(bf(0x7f800001u) == 0x7fc0, "signalling NaN whose payload is in the low half stays NaN "
                                      "(not inf): 0x%04x", bf(0x7f800001u));
    EXPECT(bf(0xffc00000u) == 0xffc0, "negative quiet NaN: 0x%04x", bf(0xffc00000u));
    EXPECT(bf(0x00000000u) == 0x0000 && bf(0x80000000u) == 0x8000, "signed zeros");
    EXPECT(bf(0x00008000u) == 0x0000, "smallest subnormal tie rounds to even zero: 0x%04x",
           bf(0x00008000u));
    EXPECT(bf(0x00018000u) == 0x0002, "subnormal tie to even (up): 0x%04x", bf(0x00018000u));
    EXPECT(bf(0x007fffffu) == 0x0080, "largest subnormal rounds to the smallest normal: 0x%04x",
           bf(0x007fffffu));
    /* Relative error of a normal value is at most 2^-8 (half an ulp). */
    for (int i = 0; i < 100000; i++) {
        float x = (float)((rand() / (double)RAND_MAX - 0.5) * 1e3);
        float y = hpt_bf16_to_f32(hpt_bf16_from_f32(x));
        if (x != 0.0f)
            EXPECT(fabsf(y - x) <= fabsf(x) * 0x1p-8f, "%g -> %g: error over half an ulp",
                   (double)x, (double)y);
    }
    float v[4] = {1.0f, f_of(0x3f818000u), -2.5f, 1e-3f};
    hpt_bf16 h[4];
    float back[4];
    hpt_bf16_from_f32_n(h, v, 4);
    hpt_bf16_to_f32_n(back, h, 4);
    hpt_bf16_round(v, 4);
    EXPECT(memcmp(v, back, sizeof v) == 0 && back[1] == hpt_bf16_to_f32(0x3f82),
           "array conversions agree with the scalar ones");

    if (argc == 3) {
        size_t n = strtoul(argv[2], NULL, 10);
        uint32_t *u = malloc(n * sizeof *u);
        uint16_t *o = malloc(n * sizeof *o);
        const uint32_t special[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x00008000u,
                                    0x00018000u, 0x007fffffu, 0x00800000u, 0x3f808000u,
                                    0x3f818000u, 0x3f807fffu, 0x3f808001u, 0x7f7f7fffu,
                                    0x7f7f8000u, 0x7f7fffffu, 0x7f800000u, 0xff800000u,
                                    0xbf818000u, 0x3fffffffu};
        size_t ns = sizeof special / sizeof special[0];
        uint64_t s = 0x9e3779b97f4a7c15ull;
        for (size_t i = 0; i < n; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17; /* xorshift64 */
            uint32_t r = (uint32_t)(s >> 32);
            if (i < ns)
                u[i] = special[i];
            else if (i % 4 == 0) /* exact ties */
                u[i] = (r & 0xffff0000u) | 0x8000u;
            else if (i % 4 == 1) /* subnormals and small values */
                u[i] = r & 0x80ffffffu;
            else
                u[i] = r;
            if ((u[i] & 0x7fffffffu) > 0x7f800000u) /* NaN payload conventions differ: skip */
                u[i] &= 0xff7fffffu;
            o[i] = hpt_bf16_from_f32(f_of(u[i]));
        }
        FILE *f = fopen(argv[1], "wb");
        if (!f || fwrite(u, sizeof *u, n, f) != n || fwrite(o, sizeof *o, n, f) != n || fclose(f)) {
            fprintf(stderr, "test_bf16: cannot write %s\n", argv[1]);
            return 1;
        }
        free(u);
        free(o);
    }
    if (failures)
        fprintf(stderr, "test_bf16: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
