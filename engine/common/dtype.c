/* Conversions between f32, bf16 and f16 (see dtype.h).
 *
 * The bulk conversion is written as plain loops over whole arrays so that
 * the compiler vectorises them; the per-value functions are the definition
 * the loops must agree with (tests/engine/test_common.c checks every 16-bit
 * value both ways). */
#include "engine/common/dtype.h"
#include "engine/common/hot.h"

/* Element types that may sit at any address (a safetensors data section
 * need not be aligned). */
typedef uint16_t u16_any __attribute__((aligned(1), may_alias));
typedef float    f32_any __attribute__((aligned(1), may_alias));

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

uint16_t braid_eng_f32_to_bf16(float f)
{
    uint32_t u = bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it one, quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    /* Add half an ulp of bf16, plus one when the kept part is odd (ties to
     * even), then truncate; a carry into the exponent rounds up correctly,
     * and the largest finite values round to infinity as they should. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float braid_eng_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t rest = h & 0x7fffu;
    if (rest >= 0x7c00u) /* inf, NaN: all-ones exponent */
        return float_of(sign | 0x7f800000u | ((rest & 0x3ffu) << 13));
    if (rest >= 0x0400u) /* normal: rebias the exponent by 127 - 15 */
        return float_of(sign | ((rest << 13) + (112u << 23)));
    /* zero or subnormal: rest * 2^-24 is exact in f32 */
    float mag = (float)rest * 0x1p-24f;
    return float_of(sign | bits_of(mag));
}

uint16_t braid_eng_f32_to_f16(float f)
{
    uint32_t u    = bits_of(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a    = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: quiet, top payload bits kept */
        return sign | 0x7e00u | (uint16_t)((a >> 13) & 0x3ffu);
    if (a >= 0x477ff000u) /* rounds to >= 65520: infinity */
        return sign | 0x7c00u;
    if (a >= 0x38800000u) { /* normal in f16 (>= 2^-14) */
        /* rebias, then round the 13 dropped bits to nearest even */
        uint32_t r = a - (112u << 23);
        r += 0x0fffu + ((r >> 13) & 1u);
        return sign | (uint16_t)(r >> 13);
    }
    /* Subnormal or zero in f16: value / 2^-24, rounded to nearest even.
     * Adding 0.5 (2^-1) in f32 puts the integer part's bits at the bottom
     * of the mantissa with f32's own rounding doing ties-to-even: a
     * float add, but one whose result does not depend on anything but the
     * default rounding mode. */
    float scaled = float_of(a) * 0x1p24f; /* exact: power of two */
    float r      = scaled + 0x1p23f;      /* integer part -> low bits */
    return sign | (uint16_t)(bits_of(r) - 0x4b000000u);
}

int braid_eng_dtype_is_weight(braid_dtype_t dtype)
{
    return dtype == BRAID_F32 || dtype == BRAID_BF16 || dtype == BRAID_F16;
}

ENG_HOT static void widen_bf16(f32_any *d, const u16_any *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)s[i] << 16;
        float    f;
        memcpy(&f, &u, sizeof(f));
        d[i] = f;
    }
}

ENG_HOT static void widen_f16(f32_any *d, const u16_any *s, size_t n)
{
#if defined(__FLT16_MAX__)
    for (size_t i = 0; i < n; i++) {
        _Float16 h;
        uint16_t b = s[i];
        memcpy(&h, &b, sizeof(h));
        d[i] = (float)h; /* exact, like braid_eng_f16_to_f32 */
    }
#else
    for (size_t i = 0; i < n; i++)
        d[i] = braid_eng_f16_to_f32(s[i]);
#endif
}

/* braid_eng_f32_to_bf16 without branches, so that it vectorises. */
ENG_HOT static void narrow_bf16(u16_any *d, const f32_any *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float    f = s[i];
        uint32_t u;
        memcpy(&u, &f, sizeof(u));
        uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
        uint32_t nan     = (u >> 16) | 0x0040u;
        d[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
    }
}

void braid_eng_convert(void *dst, braid_dtype_t dst_type, const void *src,
                       braid_dtype_t src_type, size_t n)
{
    if (dst_type == src_type) {
        memcpy(dst, src, n * braid_dtype_size(dst_type));
        return;
    }
    if (dst_type == BRAID_F32 && src_type == BRAID_BF16) {
        widen_bf16(dst, src, n);
        return;
    }
    if (dst_type == BRAID_F32 && src_type == BRAID_F16) {
        widen_f16(dst, src, n);
        return;
    }
    if (dst_type == BRAID_BF16 && src_type == BRAID_F32) {
        narrow_bf16(dst, src, n);
        return;
    }
    /* The rest (to f16, or between bf16 and f16) through f32, one value at
     * a time: only writers of test files use them. */
    unsigned char       *d = dst;
    const unsigned char *s = src;
    for (size_t i = 0; i < n; i++) {
        float    v;
        uint16_t h;
        if (src_type == BRAID_F32) {
            memcpy(&v, s + 4 * i, 4);
        } else {
            memcpy(&h, s + 2 * i, 2);
            v = src_type == BRAID_BF16 ? braid_eng_bf16_to_f32(h)
                                       : braid_eng_f16_to_f32(h);
        }
        h = dst_type == BRAID_BF16 ? braid_eng_f32_to_bf16(v)
                                   : braid_eng_f32_to_f16(v);
        memcpy(d + 2 * i, &h, 2);
    }
}

int braid_eng_dtype_parse(const char *s, braid_dtype_t *dtype)
{
    static const braid_dtype_t types[] = {BRAID_F32, BRAID_BF16, BRAID_F16};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strcmp(s, braid_dtype_name(types[i])) == 0) {
            *dtype = types[i];
            return 0;
        }
    return -1;
}
