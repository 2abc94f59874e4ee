#include <math.h>
#include <string.h>

#include "scalar.h"

size_t ts_dtsize(braid_dtype_t dt)
{
    static const size_t sizes[BRAID_DTYPE_COUNT] = {4, 8, 2, 2, 4, 8, 1};
    return (unsigned)dt < BRAID_DTYPE_COUNT ? sizes[dt] : 0;
}

/* ------------------------------------------------------ half precision */

float ts_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp  = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    float    f;

    if (exp == 0) { /* zero or subnormal: mant * 2^-24 */
        f = ldexpf((float)mant, -24);
        return sign ? -f : f;
    }
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
    memcpy(&f, &bits, sizeof(f));
    return f;
}

uint16_t ts_f32_to_f16(float f)
{
    uint32_t x, sign, exp, mant, half, rest, mid;
    int      e, shift;

    memcpy(&x, &f, sizeof(x));
    sign = (x >> 16) & 0x8000u;
    exp  = (x >> 23) & 0xffu;
    mant = x & 0x7fffffu;
    if (exp == 0xff) {
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    }
    e = (int)exp - 127 + 15;
    if (e >= 0x1f) {
        return (uint16_t)(sign | 0x7c00u);
    }
    if (e <= 0) {
        if (e < -10) {
            return (uint16_t)sign;
        }
        mant |= 0x800000u;
        shift = 14 - e;
        half  = mant >> shift;
        rest  = mant & ((1u << shift) - 1);
        mid   = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1u))) {
            half++;
        }
        return (uint16_t)(sign | half);
    }
    half = ((uint32_t)e << 10) | (mant >> 13);
    rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) {
        half++; /* a carry into the exponent is the right rounding */
    }
    return (uint16_t)(sign | half);
}

float ts_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float    f;

    memcpy(&f, &bits, sizeof(f));
    return f;
}

uint16_t ts_f32_to_bf16(float f)
{
    uint32_t x;

    memcpy(&x, &f, sizeof(x));
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* ------------------------------------------------------------ elements */

double ts_get(const void *buf, size_t i, braid_dtype_t dt)
{
    switch (dt) {
    case BRAID_F32:
        return ((const float *)buf)[i];
    case BRAID_F64:
        return ((const double *)buf)[i];
    case BRAID_F16:
        return ts_f16_to_f32(((const uint16_t *)buf)[i]);
    case BRAID_BF16:
        return ts_bf16_to_f32(((const uint16_t *)buf)[i]);
    case BRAID_I32:
        return ((const int32_t *)buf)[i];
    case BRAID_I64:
        return (double)((const int64_t *)buf)[i];
    default:
        return ((const uint8_t *)buf)[i];
    }
}

void ts_set(void *buf, size_t i, braid_dtype_t dt, double v)
{
    switch (dt) {
    case BRAID_F32:
        ((float *)buf)[i] = (float)v;
        break;
    case BRAID_F64:
        ((double *)buf)[i] = v;
        break;
    case BRAID_F16:
        ((uint16_t *)buf)[i] = ts_f32_to_f16((float)v);
        break;
    case BRAID_BF16:
        ((uint16_t *)buf)[i] = ts_f32_to_bf16((float)v);
        break;
    case BRAID_I32:
        ((int32_t *)buf)[i] = (int32_t)(uint32_t)(uint64_t)(int64_t)v;
        break;
    case BRAID_I64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    default:
        ((uint8_t *)buf)[i] = (uint8_t)(uint64_t)(int64_t)v;
        break;
    }
}

/* ------------------------------------------------------------- reduce */

static double fop(double x, double y, braid_op_t op)
{
    switch (op) {
    case BRAID_PROD:
        return x * y;
    case BRAID_MIN:
        return x < y ? x : y;
    case BRAID_MAX:
        return x > y ? x : y;
    default: /* SUM, AVG */
        return x + y;
    }
}

static float fopf(float x, float y, braid_op_t op)
{
    switch (op) {
    case BRAID_PROD:
        return x * y;
    case BRAID_MIN:
        return x < y ? x : y;
    case BRAID_MAX:
        return x > y ? x : y;
    default:
        return x + y;
    }
}

/* Integers: sum and product wrap (done unsigned, so no overflow UB). */
static uint64_t iop(int64_t x, int64_t y, braid_op_t op)
{
    switch (op) {
    case BRAID_PROD:
        return (uint64_t)x * (uint64_t)y;
    case BRAID_MIN:
        return (uint64_t)(x < y ? x : y);
    case BRAID_MAX:
        return (uint64_t)(x > y ? x : y);
    default:
        return (uint64_t)x + (uint64_t)y;
    }
}

void ts_reduce2(void *dst, const void *a, const void *b, size_t count,
                braid_dtype_t dt, braid_op_t op)
{
    for (size_t i = 0; i < count; i++) {
        switch (dt) {
        case BRAID_F32:
            ((float *)dst)[i] = fopf(((const float *)a)[i],
                                     ((const float *)b)[i], op);
            break;
        case BRAID_F64:
            ((double *)dst)[i] = fop(((const double *)a)[i],
                                     ((const double *)b)[i], op);
            break;
        case BRAID_F16:
            ((uint16_t *)dst)[i] = ts_f32_to_f16(
                fopf(ts_f16_to_f32(((const uint16_t *)a)[i]),
                     ts_f16_to_f32(((const uint16_t *)b)[i]), op));
            break;
        case BRAID_BF16:
            ((uint16_t *)dst)[i] = ts_f32_to_bf16(
                fopf(ts_bf16_to_f32(((const uint16_t *)a)[i]),
                     ts_bf16_to_f32(((const uint16_t *)b)[i]), op));
            break;
        case BRAID_I32:
            ((int32_t *)dst)[i] = (int32_t)(uint32_t)iop(
                ((const int32_t *)a)[i], ((const int32_t *)b)[i], op);
            break;
        case BRAID_I64:
            ((int64_t *)dst)[i] = (int64_t)iop(((const int64_t *)a)[i],
                                               ((const int64_t *)b)[i], op);
            break;
        default:
            ((uint8_t *)dst)[i] = (uint8_t)iop(((const uint8_t *)a)[i],
                                               ((const uint8_t *)b)[i], op);
            break;
        }
    }
}

void ts_reduce(void *inout, const void *in, size_t count, braid_dtype_t dt,
               braid_op_t op)
{
    ts_reduce2(inout, inout, in, count, dt, op);
}

void ts_finish_avg(void *buf, size_t count, braid_dtype_t dt, braid_op_t op,
                   int n)
{
    if (op != BRAID_AVG) {
        return;
    }
    for (size_t i = 0; i < count; i++) {
        switch (dt) {
        case BRAID_F32:
            ((float *)buf)[i] /= (float)n;
            break;
        case BRAID_F64:
            ((double *)buf)[i] /= n;
            break;
        case BRAID_F16:
            ((uint16_t *)buf)[i] = ts_f32_to_f16(
                ts_f16_to_f32(((uint16_t *)buf)[i]) / (float)n);
            break;
        case BRAID_BF16:
            ((uint16_t *)buf)[i] = ts_f32_to_bf16(
                ts_bf16_to_f32(((uint16_t *)buf)[i]) / (float)n);
            break;
        case BRAID_I32:
            ((int32_t *)buf)[i] /= n;
            break;
        case BRAID_I64:
            ((int64_t *)buf)[i] /= n;
            break;
        default:
            ((uint8_t *)buf)[i] = (uint8_t)(((uint8_t *)buf)[i] / n);
            break;
        }
    }
}
