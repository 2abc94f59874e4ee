/* Scalar f16 (IEEE binary16) and bf16 (bfloat16) conversions.
 *
 * These are the public, one-value conversions; they are written for
 * clarity, one case per branch.  The reduction fast path in reduce.c has its
 * own branch-free block conversions so that loops vectorise, and the unit
 * tests check the two against each other on every f16/bf16 value.
 *
 * Both narrowings round to nearest, ties to even, whatever the FPU rounding
 * mode, since they use integer arithmetic only.  NaNs keep their sign and
 * the top bits of their payload; a NaN whose kept payload would be zero gets
 * the quiet bit so that it does not turn into an infinity.  Widening keeps
 * every bit, so f16 -> f32 -> f16 and bf16 -> f32 -> bf16 are identities on
 * all 65536 values, signalling NaNs included. */
#include <string.h>

#include "kernels/reduce.h"

static float bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint32_t f32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

float braid_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp  = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f) /* inf or NaN: payload moves to the top of f32's */
        return bits_to_f32(sign | 0x7f800000u | (mant << 13));
    if (exp != 0) /* normal: rebias 15 -> 127 */
        return bits_to_f32(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0)
        return bits_to_f32(sign);
    /* Subnormal, mant * 2^-24: every f16 subnormal is an f32 normal, so
     * shift until the implicit bit (0x400) appears and lower the exponent
     * once per shift. */
    uint32_t e = 113; /* biased f32 exponent of 2^-14, the f16 normal floor */
    while ((mant & 0x400u) == 0) {
        mant <<= 1;
        e--;
    }
    return bits_to_f32(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

uint16_t braid_f32_to_f16(float f)
{
    uint32_t u    = f32_to_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a    = u & 0x7fffffffu;

    if (a > 0x7f800000u) { /* NaN */
        uint32_t m = (a >> 13) & 0x3ffu;
        return (uint16_t)(sign | 0x7c00u | (m != 0 ? m : 0x200u));
    }
    /* 65520 is halfway between 65504 (largest finite, odd mantissa) and
     * 2^16; ties-to-even rounds it, and all above, to infinity. */
    if (a >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* f16 normal range, >= 2^-14 */
        /* Add just under half an f16 ulp, plus one when the kept lsb is
         * odd; the carry may ripple into the exponent, which is correct. */
        uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
        return (uint16_t)(sign | ((r >> 13) - (112u << 10)));
    }
    /* 2^-25 is halfway between 0 and the smallest subnormal: ties to 0. */
    if (a <= 0x33000000u)
        return (uint16_t)sign;
    /* f16 subnormal: the result is |f| / 2^-24 rounded to an integer. With
     * the implicit bit, |f| = m * 2^(e - 150), so shift m right by 126 - e
     * (14..24 here) and round the dropped bits by hand.  A result of 0x400
     * is the smallest normal, which is also the right encoding. */
    uint32_t e     = a >> 23;
    uint32_t m     = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;
    uint32_t q     = m >> shift;
    uint32_t rem   = m & ((1u << shift) - 1);
    uint32_t half  = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint16_t)(sign | q);
}

float braid_bf16_to_f32(uint16_t h)
{
    /* bf16 is the top half of an f32. */
    return bits_to_f32((uint32_t)h << 16);
}

uint16_t braid_f32_to_bf16(float f)
{
    uint32_t u = f32_to_bits(f);

    if ((u & 0x7fffffffu) > 0x7f800000u) { /* NaN: truncate, stay a NaN */
        uint32_t t = u >> 16;
        return (uint16_t)((t & 0x7fu) != 0 ? t : (t | 0x40u));
    }
    /* Same exponent range as f32, so one integer rounding covers normals,
     * subnormals and overflow to infinity (0x7f7f + carry = 0x7f80). */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
