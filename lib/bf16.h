/* bf16.h — bfloat16 <-> float32 conversion on the host.
 *
 * bfloat16 (Kalamkar et al. 2019, "A Study of BFLOAT16 for Deep Learning
 * Training", section 2) is the upper 16 bits of an IEEE-754 binary32: sign,
 * the same 8-bit exponent, 7 stored mantissa bits. Conversion from float32
 * rounds to nearest, ties to even (what cuBLAS, CUDA's __float2bfloat16_rn
 * and PyTorch's .to(torch.bfloat16) do); a NaN stays a (quiet) NaN with its
 * sign; values that round past the largest finite bf16 (3.3895e38) become
 * infinity; subnormals are rounded, never flushed.
 *
 * Used by the bf16 mixed-precision mode (fp32 master weights, bf16 working
 * copies; docs/ARCHITECTURE.md), by host-side checks of the GPU backend, and
 * by the tests. Header-only: static inline, no allocation, no errors.
 */
#ifndef HPT_BF16_H
#define HPT_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint16_t hpt_bf16;

/* float32 -> bfloat16, round to nearest even. */
static inline hpt_bf16 hpt_bf16_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)         /* NaN: keep sign, force quiet */
        return (hpt_bf16)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);              /* ties to even; carries into the exponent */
    return (hpt_bf16)(u >> 16);
}

/* bfloat16 -> float32, exact. */
static inline float hpt_bf16_to_f32(hpt_bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* x (n) := float32 value of bf16(x): rounds each element to bfloat16
 * precision in place (emulates bf16 storage of a float buffer). */
static inline void hpt_bf16_round(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = hpt_bf16_to_f32(hpt_bf16_from_f32(x[i]));
}

/* dst (n) bf16 := src (n) float32, rounded to nearest even. */
static inline void hpt_bf16_from_f32_n(hpt_bf16 *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = hpt_bf16_from_f32(src[i]);
}

/* dst (n) float32 := src (n) bf16, exact. */
static inline void hpt_bf16_to_f32_n(float *dst, const hpt_bf16 *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = hpt_bf16_to_f32(src[i]);
}

#endif
