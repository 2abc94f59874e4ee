/* The reference reductions and element access (reference.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "reference.h"

static const struct {
    const char *name;
    size_t      size;
    int         is_float;
} dtypes[BRAID_DTYPE_COUNT] = {
    [BRAID_F32] = {"f32", 4, 1}, [BRAID_F64] = {"f64", 8, 1},
    [BRAID_F16] = {"f16", 2, 1}, [BRAID_BF16] = {"bf16", 2, 1},
    [BRAID_I32] = {"i32", 4, 0}, [BRAID_I64] = {"i64", 8, 0},
    [BRAID_U8] = {"u8", 1, 0},
};

static const char *op_names[BRAID_OP_COUNT] = {
    [BRAID_SUM] = "sum", [BRAID_PROD] = "prod", [BRAID_MIN] = "min",
    [BRAID_MAX] = "max", [BRAID_AVG] = "avg",
};

static int dtype_valid(braid_dtype_t dtype)
{
    return (int)dtype >= 0 && (int)dtype < BRAID_DTYPE_COUNT;
}

size_t ref_size(braid_dtype_t dtype)
{
    return dtype_valid(dtype) ? dtypes[dtype].size : 0;
}

const char *ref_name(braid_dtype_t dtype)
{
    return dtype_valid(dtype) ? dtypes[dtype].name : "?";
}

int ref_is_float(braid_dtype_t dtype)
{
    return dtype_valid(dtype) && dtypes[dtype].is_float;
}

const char *ref_op_name(braid_op_t op)
{
    return ((int)op >= 0 && (int)op < BRAID_OP_COUNT) ? op_names[op] : "?";
}

int ref_parse_dtype(const char *s, braid_dtype_t *dtype)
{
    for (int i = 0; i < BRAID_DTYPE_COUNT; i++) {
        if (strcmp(s, dtypes[i].name) == 0) {
            *dtype = (braid_dtype_t)i;
            return 0;
        }
    }
    return -1;
}

int ref_parse_op(const char *s, braid_op_t *op)
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

uint16_t ref_f32_to_f16(float f)
{
    uint32_t x    = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp  = (x >> 23) & 0xffu;
    uint32_t man  = x & 0x7fffffu;

    if (exp == 0xffu && man == 0)
        return (uint16_t)(sign | 0x7c00u); /* inf */
    if (exp == 0xffu) /* NaN: the payload's top bits, never an inf */
        return (uint16_t)(sign | 0x7c00u |
                          ((man >> 13) != 0 ? man >> 13 : 0x200u));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        /* Subnormal half: value = m * 2^-24, m = man24 * 2^(e-14). */
        if (e < -10)
            return (uint16_t)sign;
        return (uint16_t)(sign |
                          round_shift(man | 0x800000u, (unsigned)(14 - e)));
    }
    /* A carry out of the mantissa bumps the exponent, up to inf: correct. */
    uint32_t h    = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rest = man & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

float ref_f16_to_f32(uint16_t h)
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

uint16_t ref_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu)) {
        /* NaN: the payload's top bits, never an inf */
        uint16_t t = (uint16_t)(x >> 16);
        return (t & 0x7fu) != 0 ? t : (uint16_t)(t | 0x40u);
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float ref_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

/* ------------------------------------------------------------- elements */

double ref_load_f(braid_dtype_t dtype, const void *buf, size_t i)
{
    const unsigned char *p = (const unsigned char *)buf + i * ref_size(dtype);
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
        return dtype == BRAID_F16 ? ref_f16_to_f32(v) : ref_bf16_to_f32(v);
    }
    default: return (double)ref_load_i(dtype, buf, i);
    }
}

void ref_store_f(braid_dtype_t dtype, void *buf, size_t i, double v)
{
    unsigned char *p = (unsigned char *)buf + i * ref_size(dtype);
    switch (dtype) {
    case BRAID_F32: {
        float f = (float)v;
        memcpy(p, &f, sizeof(f));
        break;
    }
    case BRAID_F64: memcpy(p, &v, sizeof(v)); break;
    case BRAID_F16:
    case BRAID_BF16: {
        uint16_t h = dtype == BRAID_F16 ? ref_f32_to_f16((float)v)
                                        : ref_f32_to_bf16((float)v);
        memcpy(p, &h, sizeof(h));
        break;
    }
    default: ref_store_i(dtype, buf, i, (int64_t)v); break;
    }
}

int64_t ref_load_i(braid_dtype_t dtype, const void *buf, size_t i)
{
    const unsigned char *p = (const unsigned char *)buf + i * ref_size(dtype);
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
    case BRAID_U8: return *p;
    default: return (int64_t)ref_load_f(dtype, buf, i);
    }
}

void ref_store_i(braid_dtype_t dtype, void *buf, size_t i, int64_t v)
{
    unsigned char *p = (unsigned char *)buf + i * ref_size(dtype);
    switch (dtype) {
    case BRAID_I32: {
        int32_t w = (int32_t)(uint32_t)(uint64_t)v;
        memcpy(p, &w, sizeof(w));
        break;
    }
    case BRAID_I64: memcpy(p, &v, sizeof(v)); break;
    case BRAID_U8: *p = (unsigned char)(uint64_t)v; break;
    default: ref_store_f(dtype, buf, i, (double)v); break;
    }
}

double ref_round_f(braid_dtype_t dtype, double v)
{
    switch (dtype) {
    case BRAID_F32: return (float)v;
    case BRAID_F16: return ref_f16_to_f32(ref_f32_to_f16((float)v));
    case BRAID_BF16: return ref_bf16_to_f32(ref_f32_to_bf16((float)v));
    default: return v;
    }
}

int64_t ref_wrap_i(braid_dtype_t dtype, int64_t v)
{
    switch (dtype) {
    case BRAID_I32: return (int32_t)(uint32_t)(uint64_t)v;
    case BRAID_U8: return (uint8_t)(uint64_t)v;
    default: return v;
    }
}

uint64_t ref_hash(uint64_t h, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ----------------------------------------------------------- reductions */

static uint64_t f64_bits(double d)
{
    uint64_t x;
    memcpy(&x, &d, sizeof(x));
    return x;
}

/* Of x and y, which min/max keeps: 0 for x, 1 for y (reference.h). */
static int pick(double x, double y, uint64_t xb, uint64_t yb, int is_max)
{
    if (isnan(x) || isnan(y))
        return isnan(x) && isnan(y) ? yb > xb : isnan(y);
    if (x != y)
        return is_max ? y > x : y < x;
    return is_max ? signbit(x) != 0 : signbit(y) != 0; /* -0 and +0 */
}

/* The bits of element i, as wide as the dtype's widening (f16/bf16: the
 * f32 they widen to), to order NaNs. */
static uint64_t wide_bits(braid_dtype_t dt, const void *buf, size_t i)
{
    double v = ref_load_f(dt, buf, i);
    return dt == BRAID_F64 ? f64_bits(v) : f32_bits((float)v);
}

static void reduce_float(void *dst, const void *a, const void *b, size_t i,
                         braid_dtype_t dt, braid_op_t op)
{
    double x = ref_load_f(dt, a, i), y = ref_load_f(dt, b, i);
    size_t sz = ref_size(dt);

    if (op == BRAID_MIN || op == BRAID_MAX) {
        int py = pick(x, y, wide_bits(dt, a, i), wide_bits(dt, b, i),
                      op == BRAID_MAX);
        memmove((char *)dst + i * sz, (const char *)(py ? b : a) + i * sz, sz);
        return;
    }
    double z = op == BRAID_PROD ? x * y : x + y;
    if (isnan(z)) {
        z = fabs((double)NAN); /* canonical: quiet, positive, no payload */
    } else if (dt != BRAID_F64) {
        z = (float)z; /* f16/bf16 round to f32 first, as the library */
    }
    ref_store_f(dt, dst, i, z);
}

static void reduce_int(void *dst, const void *a, const void *b, size_t i,
                       braid_dtype_t dt, braid_op_t op)
{
    int64_t x = ref_load_i(dt, a, i), y = ref_load_i(dt, b, i), z;
    switch (op) {
    case BRAID_PROD: z = (int64_t)((uint64_t)x * (uint64_t)y); break;
    case BRAID_MIN: z = y < x ? y : x; break;
    case BRAID_MAX: z = y > x ? y : x; break;
    default: z = (int64_t)((uint64_t)x + (uint64_t)y); break;
    }
    ref_store_i(dt, dst, i, z);
}

void ref_reduce2(void *dst, const void *a, const void *b, size_t count,
                 braid_dtype_t dtype, braid_op_t op)
{
    for (size_t i = 0; i < count; i++) {
        if (ref_is_float(dtype))
            reduce_float(dst, a, b, i, dtype, op);
        else
            reduce_int(dst, a, b, i, dtype, op);
    }
}

void ref_finish_avg(void *buf, size_t count, braid_dtype_t dtype,
                    braid_op_t op, int n)
{
    if (op != BRAID_AVG || n <= 1)
        return;
    for (size_t i = 0; i < count; i++) {
        if (ref_is_float(dtype)) {
            double q = ref_load_f(dtype, buf, i) / n;
            if (isnan(q))
                q = fabs((double)NAN);
            else if (dtype != BRAID_F64)
                q = (float)q;
            ref_store_f(dtype, buf, i, q);
        } else {
            ref_store_i(dtype, buf, i, ref_load_i(dtype, buf, i) / n);
        }
    }
}

ref_val_t ref_fold(braid_dtype_t dtype, braid_op_t op, ref_val_t acc,
                   ref_val_t v)
{
    if (ref_is_float(dtype)) {
        switch (op) {
        case BRAID_PROD: acc.f *= v.f; break;
        case BRAID_MIN: acc.f = fmin(acc.f, v.f); break;
        case BRAID_MAX: acc.f = fmax(acc.f, v.f); break;
        default: acc.f += v.f; break; /* SUM, AVG */
        }
        return acc;
    }
    /* Computed unsigned: wrapping, without overflow's undefined behaviour. */
    switch (op) {
    case BRAID_PROD: acc.i = (int64_t)((uint64_t)acc.i * (uint64_t)v.i); break;
    case BRAID_MIN: acc.i = acc.i < v.i ? acc.i : v.i; break;
    case BRAID_MAX: acc.i = acc.i > v.i ? acc.i : v.i; break;
    default: acc.i = (int64_t)((uint64_t)acc.i + (uint64_t)v.i); break;
    }
    return acc;
}

ref_val_t ref_finish(braid_dtype_t dtype, braid_op_t op, ref_val_t acc, int n)
{
    if (ref_is_float(dtype)) {
        if (op == BRAID_AVG)
            acc.f /= n;
        acc.f = ref_round_f(dtype, acc.f);
    } else {
        acc.i = ref_wrap_i(dtype, acc.i);
        if (op == BRAID_AVG)
            acc.i /= n;
    }
    return acc;
}

double ref_unit_roundoff(braid_dtype_t dtype)
{
    switch (dtype) {
    case BRAID_F64: return 0x1p-53;
    case BRAID_F32: return 0x1p-24;
    case BRAID_F16: return 0x1p-11;
    case BRAID_BF16: return 0x1p-8;
    default: return 0.0;
    }
}

double ref_tolerance(braid_dtype_t dtype, int n, double mag)
{
    return 2.0 * (n + 1) * ref_unit_roundoff(dtype) * mag;
}

/* ---------------------------------------------- inputs and expectations */

/* Random bits of element `idx` of rank `r`'s input. */
uint64_t ref_bits(uint64_t seed, int r, size_t idx)
{
    return ref_mix(seed ^ ((uint64_t)(unsigned)r << 48) ^ (uint64_t)idx);
}

/* Half-range, in quarters, of float inputs for SUM/AVG/MIN/MAX: any sum of
 * up to 8 such values (and any partial sum) is exact in the dtype; more
 * ranks get proportionally smaller values. */
static int64_t float_quarters(braid_dtype_t dt, int n)
{
    int64_t q;
    switch (dt) {
    case BRAID_F64: q = (int64_t)1 << 32; break; /* |sum| < 2^35 quarters */
    case BRAID_F32: q = (int64_t)1 << 16; break; /* < 2^19, 24-bit mant. */
    case BRAID_F16: q = 128; break;              /* < 2^10, 11 bits */
    default: q = 32; break;                      /* bf16: < 2^8, 8 bits */
    }
    q = q * 8 / (n > 8 ? n : 8);
    return q > 0 ? q : 1;
}

/* Half-range of integer inputs for SUM/AVG: no overflow for 8 ranks (more
 * ranks wrap, as the dtype does, and the reference wraps the same way). */
static int64_t int_range(braid_dtype_t dt)
{
    return dt == BRAID_I64 ? (int64_t)1 << 59 : (int64_t)1 << 27;
}

/* Inexact float inputs use every mantissa bit, so the result depends on the
 * order of the operations: checked against a tolerance, and (through the
 * hashes) for bitwise equality across ranks, which every algorithm promises
 * by combining partial results in the same order on every rank. */
static ref_val_t gen_inexact(braid_dtype_t dt, braid_op_t op, uint64_t b)
{
    double    u = (double)(b >> 11) * 0x1p-53; /* [0, 1) */
    double    v = op == BRAID_PROD ? (b & 1 ? -1.0 : 1.0) * (0.5 + 1.5 * u)
                                   : 2.0 * u - 1.0;
    ref_val_t r = {ref_round_f(dt, v), 0};
    return r;
}

/* Input value of a reduction over n ranks, from random bits b. */
ref_val_t ref_input(braid_dtype_t dt, braid_op_t op, int inexact, int n,
                    uint64_t b)
{
    /* Beyond 8 ranks only ±1, so that no f16 product overflows. */
    static const double fprod[] = {-1.0, 1.0, -2.0, -0.5, 0.5, 2.0};
    static const int    iprod[] = {-2, -1, 1, 2};
    ref_val_t           v       = {0.0, 0};

    if (inexact && ref_is_float(dt))
        return gen_inexact(dt, op, b);
    if (ref_is_float(dt)) {
        if (op == BRAID_PROD) {
            v.f = fprod[b % (n > 8 ? 2 : 6)];
        } else {
            int64_t q = float_quarters(dt, n);
            v.f = (double)((int64_t)(b % (uint64_t)(2 * q + 1)) - q) / 4.0;
        }
        return v;
    }
    if (op == BRAID_PROD) {
        /* u8 products of {1, 2} wrap modulo 256 like the dtype does. */
        v.i = dt == BRAID_U8 ? (int64_t)(1 + (b & 1)) : iprod[b % 4];
    } else if (op == BRAID_MIN || op == BRAID_MAX) {
        v.i = dt == BRAID_I64   ? (int64_t)b
              : dt == BRAID_I32 ? (int64_t)(int32_t)(uint32_t)b
                                : (int64_t)(b & 0xff);
    } else if (dt == BRAID_U8) {
        v.i = (int64_t)(b % (uint64_t)(256 / (n > 8 ? n : 8))); /* no wrap */
    } else {
        int64_t r = int_range(dt);
        v.i       = (int64_t)(b % (uint64_t)(2 * r + 1)) - r;
    }
    return v;
}

/* Relative tolerance of float AVG: two units in the last place. */
static double avg_tolerance(braid_dtype_t dt)
{
    switch (dt) {
    case BRAID_F64: return 0x1p-51;
    case BRAID_F32: return 0x1p-22;
    case BRAID_F16: return 0x1p-9;
    default: return 0x1p-6;
    }
}

/* Expected element j of the reduction over n ranks.  *tol receives the
 * allowed absolute error: 0 where the result is exact. */
ref_val_t ref_expect(braid_dtype_t dt, braid_op_t op, int inexact,
                     uint64_t seed, int n, size_t j, double *tol)
{
    ref_val_t acc = ref_input(dt, op, inexact, n, ref_bits(seed, 0, j));
    double    mag = fabs(acc.f);
    for (int r = 1; r < n; r++) {
        ref_val_t v = ref_input(dt, op, inexact, n, ref_bits(seed, r, j));
        acc         = ref_fold(dt, op, acc, v);
        mag += fabs(v.f);
    }
    *tol = 0.0;
    if (ref_is_float(dt)) {
        if (op == BRAID_AVG)
            mag /= n;
        if (op == BRAID_PROD)
            mag = fabs(acc.f);
        if (inexact && op != BRAID_MIN && op != BRAID_MAX)
            *tol = ref_tolerance(dt, n, mag);
        else if (op == BRAID_AVG)
            *tol = avg_tolerance(dt) * fabs(acc.f / n);
    }
    return ref_finish(dt, op, acc, n);
}

/* Compares element i of got with exp (within tol for floats); formats
 * both on a mismatch. */
int ref_value_ok(braid_dtype_t dt, const void *got, size_t i, ref_val_t exp,
                 double tol, char *es, char *gs, size_t len)
{
    if (ref_is_float(dt)) {
        double v  = ref_load_f(dt, got, i);
        int    ok = tol > 0.0 ? fabs(v - exp.f) <= tol : v == exp.f;
        if (!ok) {
            snprintf(es, len, tol > 0.0 ? "%.9g(+-%.2g)" : "%.9g", exp.f, tol);
            snprintf(gs, len, "%.9g", v);
        }
        return ok;
    }
    int64_t v = ref_load_i(dt, got, i);
    if (v != exp.i) {
        snprintf(es, len, "%" PRId64, exp.i);
        snprintf(gs, len, "%" PRId64, v);
        return 0;
    }
    return 1;
}
