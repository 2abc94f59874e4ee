#include "numeric.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    size_t      size;
    int         is_float;
} dtypes[BRAID_DTYPE_COUNT] = {
    [BRAID_F32]  = {"f32", 4, 1},
    [BRAID_F64]  = {"f64", 8, 1},
    [BRAID_F16]  = {"f16", 2, 1},
    [BRAID_BF16] = {"bf16", 2, 1},
    [BRAID_I32]  = {"i32", 4, 0},
    [BRAID_I64]  = {"i64", 8, 0},
    [BRAID_U8]   = {"u8", 1, 0},
};

static const char *op_names[BRAID_OP_COUNT] = {
    [BRAID_SUM] = "sum", [BRAID_PROD] = "prod", [BRAID_MIN] = "min",
    [BRAID_MAX] = "max", [BRAID_AVG] = "avg",
};

static int dtype_valid(braid_dtype_t dtype)
{
    return (int)dtype >= 0 && (int)dtype < BRAID_DTYPE_COUNT;
}

size_t nm_size(braid_dtype_t dtype)
{
    return dtype_valid(dtype) ? dtypes[dtype].size : 0;
}

const char *nm_name(braid_dtype_t dtype)
{
    return dtype_valid(dtype) ? dtypes[dtype].name : "?";
}

int nm_is_float(braid_dtype_t dtype)
{
    return dtype_valid(dtype) && dtypes[dtype].is_float;
}

const char *nm_op_name(braid_op_t op)
{
    return ((int)op >= 0 && (int)op < BRAID_OP_COUNT) ? op_names[op] : "?";
}

int nm_parse_dtype(const char *s, braid_dtype_t *dtype)
{
    for (int i = 0; i < BRAID_DTYPE_COUNT; i++) {
        if (strcmp(s, dtypes[i].name) == 0) {
            *dtype = (braid_dtype_t)i;
            return 0;
        }
    }
    return -1;
}

int nm_parse_op(const char *s, braid_op_t *op)
{
    for (int i = 0; i < BRAID_OP_COUNT; i++) {
        if (strcmp(s, op_names[i]) == 0) {
            *op = (braid_op_t)i;
            return 0;
        }
    }
    return -1;
}

/* ------------------------------------------------------------ half floats */

static uint32_t f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    return x;
}

static float bits_f32(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

/* Rounds the `shift` low bits of m away, to nearest, ties to even. */
static uint32_t round_shift(uint32_t m, unsigned shift)
{
    if (shift >= 32)
        return 0;
    uint32_t kept = m >> shift;
    uint32_t rest = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1u)))
        kept++;
    return kept;
}

uint16_t nm_f32_to_f16(float f)
{
    uint32_t x    = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp  = (x >> 23) & 0xffu;
    uint32_t man  = x & 0x7fffffu;

    if (exp == 0xffu) /* inf stays inf, NaN stays a (quiet) NaN */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        /* Subnormal half: value = m * 2^-24, m = man24 * 2^(e-14). */
        if (e < -10)
            return (uint16_t)sign;
        return (uint16_t)(sign | round_shift(man | 0x800000u,
                                             (unsigned)(14 - e)));
    }
    /* A carry out of the mantissa bumps the exponent, up to inf: correct. */
    uint32_t h = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rest = man & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

float nm_f16_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t exp  = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t man  = (uint32_t)h & 0x3ffu;

    if (exp == 0) {
        float v = ldexpf((float)man, -24);
        return sign ? -v : v;
    }
    if (exp == 31)
        return bits_f32(sign | 0x7f800000u | (man << 13));
    return bits_f32(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

uint16_t nm_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu))
        return (uint16_t)((x >> 16) | 0x40u); /* keep NaN a NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float nm_bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

/* ------------------------------------------------------------- elements */

double nm_load_f(braid_dtype_t dtype, const void *buf, size_t i)
{
    const unsigned char *p = (const unsigned char *)buf + i * nm_size(dtype);
    switch (dtype) {
    case BRAID_F32: {
        float v;
        memcpy(&v, p, sizeof(v));
        return v;
    }
    case BRAID_F64: {
        double v;
        memcpy(&v, p, sizeof(v));
        return v;
    }
    case BRAID_F16:
    case BRAID_BF16: {
        uint16_t v;
        memcpy(&v, p, sizeof(v));
        return dtype == BRAID_F16 ? nm_f16_to_f32(v) : nm_bf16_to_f32(v);
    }
    default:
        return (double)nm_load_i(dtype, buf, i);
    }
}

void nm_store_f(braid_dtype_t dtype, void *buf, size_t i, double v)
{
    unsigned char *p = (unsigned char *)buf + i * nm_size(dtype);
    switch (dtype) {
    case BRAID_F32: {
        float f = (float)v;
        memcpy(p, &f, sizeof(f));
        break;
    }
    case BRAID_F64:
        memcpy(p, &v, sizeof(v));
        break;
    case BRAID_F16:
    case BRAID_BF16: {
        uint16_t h = dtype == BRAID_F16 ? nm_f32_to_f16((float)v)
                                        : nm_f32_to_bf16((float)v);
        memcpy(p, &h, sizeof(h));
        break;
    }
    default:
        nm_store_i(dtype, buf, i, (int64_t)v);
        break;
    }
}

int64_t nm_load_i(braid_dtype_t dtype, const void *buf, size_t i)
{
    const unsigned char *p = (const unsigned char *)buf + i * nm_size(dtype);
    switch (dtype) {
    case BRAID_I32: {
        int32_t v;
        memcpy(&v, p, sizeof(v));
        return v;
    }
    case BRAID_I64: {
        int64_t v;
        memcpy(&v, p, sizeof(v));
        return v;
    }
    case BRAID_U8:
        return *p;
    default:
        return (int64_t)nm_load_f(dtype, buf, i);
    }
}

void nm_store_i(braid_dtype_t dtype, void *buf, size_t i, int64_t v)
{
    unsigned char *p = (unsigned char *)buf + i * nm_size(dtype);
    switch (dtype) {
    case BRAID_I32: {
        int32_t w = (int32_t)(uint32_t)(uint64_t)v;
        memcpy(p, &w, sizeof(w));
        break;
    }
    case BRAID_I64:
        memcpy(p, &v, sizeof(v));
        break;
    case BRAID_U8:
        *p = (unsigned char)(uint64_t)v;
        break;
    default:
        nm_store_f(dtype, buf, i, (double)v);
        break;
    }
}

double nm_round_f(braid_dtype_t dtype, double v)
{
    switch (dtype) {
    case BRAID_F32:
        return (float)v;
    case BRAID_F16:
        return nm_f16_to_f32(nm_f32_to_f16((float)v));
    case BRAID_BF16:
        return nm_bf16_to_f32(nm_f32_to_bf16((float)v));
    default:
        return v;
    }
}

int64_t nm_wrap_i(braid_dtype_t dtype, int64_t v)
{
    switch (dtype) {
    case BRAID_I32:
        return (int32_t)(uint32_t)(uint64_t)v;
    case BRAID_U8:
        return (uint8_t)(uint64_t)v;
    default:
        return v;
    }
}

uint64_t nm_hash(uint64_t h, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
