/* Element types of weights: f32, bf16 and f16, and conversions between them.
 *
 * Weights stay in the checkpoint's type in memory (a bf16 weight costs 2
 * bytes a parameter, so decode reads half of what f32 would) and are widened
 * to f32 where they are used; activations are always f32.  The types are
 * braid's own (braid_dtype_t from braid.h), so a buffer can go straight into
 * a braid collective.
 *
 * Widening (bf16/f16 -> f32) is exact.  Narrowing (f32 -> bf16/f16) rounds to
 * nearest, ties to even, in integer arithmetic (independent of the FPU's
 * rounding mode); NaN stays NaN, overflow becomes infinity. */
#ifndef BRAID_ENG_DTYPE_H
#define BRAID_ENG_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <braid/braid.h>

static inline float braid_eng_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16; /* bf16 is the top half of an f32 */
    float    f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

uint16_t braid_eng_f32_to_bf16(float f);
float    braid_eng_f16_to_f32(uint16_t h);
uint16_t braid_eng_f32_to_f16(float f);

/* 1 for the types weights may have here: BRAID_F32, BRAID_BF16, BRAID_F16. */
int braid_eng_dtype_is_weight(braid_dtype_t dtype);

/* dst[n] (type dst_type) = src[n] (type src_type), both among f32/bf16/f16;
 * the same type copies.  Buffers may be unaligned; they must not overlap. */
void braid_eng_convert(void *dst, braid_dtype_t dst_type, const void *src,
                       braid_dtype_t src_type, size_t n);

/* Parses "f32", "bf16", "f16" (as braid_dtype_name prints them); returns 0
 * on success, -1 for anything else. */
int braid_eng_dtype_parse(const char *s, braid_dtype_t *dtype);

#endif
