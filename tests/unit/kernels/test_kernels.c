/* Unit tests of the CPU reduction kernels (kernels/reduce.h).
 *
 * - f16/bf16 conversions: all 65536 values widened and checked against the
 *   value formula, narrowed back (round trip), every halfway point between
 *   neighbours, and random f32 inputs against a slow nearest-value search.
 * - braid_kernel_reduce2 against braid_kernel_reduce2_ref, bitwise, for
 *   every dtype x op, several counts, random data with special values, and
 *   every aliasing the API allows; also argument-order symmetry.
 * - Hand-picked values whose results are known (wrap, ties, NaN, -0).
 * - braid_kernel_finish_avg against a plain division.
 *
 * - Every NaN that float SUM/PROD/AVG produce is the canonical quiet NaN,
 *   whatever the inputs' payloads, so a op b == b op a bitwise always.
 *
 * Prints a summary; exits 1 on any failure. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/reduce.h"

#define MAX_REPORTS 30

static long n_checks;
static long n_failed;

static void fail(const char *fmt, ...)
{
    n_failed++;
    if (n_failed > MAX_REPORTS)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        n_checks++;                                                           \
        if (!(cond))                                                          \
            fail(__VA_ARGS__);                                                \
    } while (0)

/* splitmix64: deterministic, so a failure reproduces. */
static uint64_t rng_state = 0x5eed0f3a17c0ffeeu;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z          = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static const char  *dt_name[BRAID_DTYPE_COUNT] = {"f32", "f64", "f16", "bf16",
                                                  "i32", "i64", "u8"};
static const char  *op_name[BRAID_OP_COUNT]    = {"sum", "prod", "min", "max",
                                                  "avg"};
static const size_t dt_size[BRAID_DTYPE_COUNT] = {4, 8, 2, 2, 4, 8, 1};

/* ---------------------------------------------------------------------
 * Conversions
 * ------------------------------------------------------------------ */

/* Value of a finite f16 from its fields, in double; 0x7c00 (the first
 * pattern past the largest finite) reads as 2^16, which is where IEEE
 * rounding puts the overflow threshold. */
static double f16_value(uint16_t h)
{
    int    e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Same for bf16; 0x7f80 reads as 2^128. */
static double bf16_value(uint16_t h)
{
    if ((h & 0x7fff) == 0x7f80)
        return (h & 0x8000) ? -ldexp(1, 128) : ldexp(1, 128);
    return (double)u2f((uint32_t)h << 16);
}

/* Nearest of two neighbours lo < x < hi (positive), ties to even. */
static uint16_t nearest(double x, uint16_t lo, double vlo, double vhi)
{
    double dlo = x - vlo, dhi = vhi - x; /* exact: a few bits apart */
    if (dlo < dhi)
        return lo;
    if (dhi < dlo)
        return (uint16_t)(lo + 1);
    return (lo & 1) ? (uint16_t)(lo + 1) : lo;
}

/* Slow f32 -> f16 for finite and infinite inputs: binary search for the
 * largest f16 not above |f|, then pick the nearer neighbour. */
static uint16_t slow_f32_to_f16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double   x    = fabs((double)f);
    if (x >= 65520.0)
        return sign | 0x7c00;
    unsigned lo = 0, hi = 0x7c00; /* value(lo) <= x < value(hi) */
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (f16_value((uint16_t)mid) <= x)
            lo = mid;
        else
            hi = mid;
    }
    return sign | nearest(x, (uint16_t)lo, f16_value((uint16_t)lo),
                          f16_value((uint16_t)(lo + 1)));
}

static uint16_t slow_f32_to_bf16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double   x    = fabs((double)f);
    uint16_t lo   = (uint16_t)((f2u(f) & 0x7fffffffu) >> 16); /* truncated */
    if (isinf(f))
        return sign | 0x7f80;
    return sign |
           nearest(x, lo, bf16_value(lo), bf16_value((uint16_t)(lo + 1)));
}

static void test_f16_widen_all(void)
{
    long bad = 0, bad_rt = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float    f = braid_f16_to_f32(h);
        uint32_t u = f2u(f);
        int      e = (h >> 10) & 0x1f, m = h & 0x3ff;
        int      ok;
        if (e == 0x1f) /* inf or NaN: same sign, payload on top */
            ok = u == (((uint32_t)(h & 0x8000) << 16) | 0x7f800000u |
                       ((uint32_t)m << 13));
        else
            ok = (double)f == f16_value(h) && !signbit(f) == !(h & 0x8000);
        if (!ok && bad++ == 0)
            fail("f16_to_f32(0x%04x) = 0x%08x", h, u);
        if (braid_f32_to_f16(f) != h && bad_rt++ == 0)
            fail("f16 0x%04x -> f32 -> f16 gives 0x%04x", h,
                 braid_f32_to_f16(f));
    }
    CHECK(bad == 0, "f16_to_f32: %ld of 65536 wrong", bad);
    CHECK(bad_rt == 0, "f16 round trip: %ld of 65536 wrong", bad_rt);
}

static void test_bf16_widen_all(void)
{
    long bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float    f = braid_bf16_to_f32(h);
        if ((f2u(f) != i << 16 || braid_f32_to_bf16(f) != h) && bad++ == 0)
            fail("bf16 0x%04x -> 0x%08x -> 0x%04x", h, f2u(f),
                 braid_f32_to_bf16(f));
    }
    CHECK(bad == 0, "bf16 widen/round trip: %ld of 65536 wrong", bad);
}

/* Every midpoint between neighbouring f16 values (both signs), and one
 * f32 ulp either side of it. */
static void test_f16_halfway(void)
{
    long bad = 0;
    for (uint32_t s = 0; s <= 0x8000; s += 0x8000) {
        for (uint32_t h = 0; h < 0x7c00; h++) {
            double lo      = f16_value((uint16_t)h),
                   hi      = f16_value((uint16_t)(h + 1));
            float    mid   = (float)((lo + hi) / 2); /* 12 bits: exact */
            uint16_t even  = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
            float    below = nextafterf(mid, 0),
                  above    = nextafterf(mid, INFINITY);
            if (s) {
                mid = -mid, below = -below, above = -above;
            }
            if (braid_f32_to_f16(mid) != (s | even) ||
                braid_f32_to_f16(below) != (s | h) ||
                braid_f32_to_f16(above) != (s | (h + 1))) {
                if (bad++ == 0)
                    fail("f32_to_f16 around midpoint of 0x%04x: got "
                         "0x%04x 0x%04x 0x%04x",
                         s | h, braid_f32_to_f16(below), braid_f32_to_f16(mid),
                         braid_f32_to_f16(above));
            }
        }
    }
    CHECK(bad == 0, "f16 halfway rounding: %ld midpoints wrong", bad);
}

static void test_bf16_halfway(void)
{
    long bad = 0;
    for (uint32_t s = 0; s <= 0x8000; s += 0x8000) {
        for (uint32_t h = 0; h < 0x7f80; h++) {
            uint32_t mid  = ((s | h) << 16) | 0x8000u;
            uint32_t even = (h & 1) ? h + 1 : h;
            if (braid_f32_to_bf16(u2f(mid)) != (s | even) ||
                braid_f32_to_bf16(u2f(mid - 1)) != (s | h) ||
                braid_f32_to_bf16(u2f(mid + 1)) != (s | (h + 1))) {
                if (bad++ == 0)
                    fail("f32_to_bf16 around midpoint of 0x%04x", s | h);
            }
        }
    }
    CHECK(bad == 0, "bf16 halfway rounding: %ld midpoints wrong", bad);
}

/* A random f32: half raw bit patterns, half with an exponent near the
 * given centre (f16's or bf16's interesting range). */
static float random_f32(int lo_exp, int hi_exp)
{
    uint64_t r = rnd();
    if (r & 1)
        return u2f((uint32_t)(r >> 32));
    uint32_t e =
        (uint32_t)(lo_exp + (int)((r >> 8) % (uint64_t)(hi_exp - lo_exp + 1)));
    return u2f((uint32_t)(r >> 32 & 0x807fffffu) | (e << 23));
}

static int nan_kept(uint32_t f, uint16_t h, int bf16)
{
    uint32_t sign = (f >> 16) & 0x8000u;
    uint32_t inf  = bf16 ? 0x7f80u : 0x7c00u;
    int      drop = bf16 ? 16 : 13;
    uint32_t keep = ((f & 0x7fffffu) >> drop);
    uint32_t mant = h & (inf ^ 0x7fffu);
    return (h & 0x8000u) == sign && (h & inf) == inf && mant != 0 &&
           (keep == 0 || mant == keep);
}

static void test_narrow_random(void)
{
    long bad16 = 0, bad_b = 0;
    for (int i = 0; i < 1000000; i++) {
        float    f   = random_f32(100, 145);
        uint16_t got = braid_f32_to_f16(f);
        int      ok =
            isnan(f) ? nan_kept(f2u(f), got, 0) : got == slow_f32_to_f16(f);
        if (!ok && bad16++ == 0)
            fail("f32_to_f16(0x%08x) = 0x%04x, want 0x%04x", f2u(f), got,
                 slow_f32_to_f16(f));
        f   = random_f32(0, 254);
        got = braid_f32_to_bf16(f);
        ok  = isnan(f) ? nan_kept(f2u(f), got, 1) : got == slow_f32_to_bf16(f);
        if (!ok && bad_b++ == 0)
            fail("f32_to_bf16(0x%08x) = 0x%04x, want 0x%04x", f2u(f), got,
                 slow_f32_to_bf16(f));
    }
    CHECK(bad16 == 0, "f32_to_f16 random: %ld wrong", bad16);
    CHECK(bad_b == 0, "f32_to_bf16 random: %ld wrong", bad_b);
    /* NaNs whose payload lives only in the dropped bits stay NaN. */
    CHECK(braid_f32_to_f16(u2f(0x7f800001u)) == 0x7e00, "f16 of sNaN 1");
    CHECK(braid_f32_to_f16(u2f(0xff801fffu)) == 0xfe00, "f16 of -sNaN");
    CHECK(braid_f32_to_bf16(u2f(0x7f800001u)) == 0x7fc0, "bf16 of sNaN 1");
    CHECK(braid_f32_to_bf16(u2f(0xffc00000u)) == 0xffc0, "bf16 of -qNaN");
    CHECK(braid_f32_to_f16(65519.99f) == 0x7bff, "f16 just below 65520");
    CHECK(braid_f32_to_f16(65520.0f) == 0x7c00, "f16 of 65520");
    CHECK(braid_f32_to_f16(u2f(0x33000000u)) == 0x0000, "f16 of 2^-25");
    CHECK(braid_f32_to_f16(u2f(0x33000001u)) == 0x0001, "f16 above 2^-25");
    CHECK(braid_f32_to_bf16(u2f(0x7f7fffffu)) == 0x7f80, "bf16 of FLT_MAX");
}

/* ---------------------------------------------------------------------
 * Element helpers for the reduction tests
 * ------------------------------------------------------------------ */

static inline uint64_t get(const void *buf, size_t i, braid_dtype_t dt)
{
    const unsigned char *p = (const unsigned char *)buf + i * dt_size[dt];
    uint8_t              v8;
    uint16_t             v16;
    uint32_t             v32;
    uint64_t             v64;
    switch (dt_size[dt]) {
    case 1: memcpy(&v8, p, 1); return v8;
    case 2: memcpy(&v16, p, 2); return v16;
    case 4: memcpy(&v32, p, 4); return v32;
    default: memcpy(&v64, p, 8); return v64;
    }
}

static inline void put(void *buf, size_t i, braid_dtype_t dt, uint64_t v)
{
    unsigned char *p   = (unsigned char *)buf + i * dt_size[dt];
    uint8_t        v8  = (uint8_t)v;
    uint16_t       v16 = (uint16_t)v;
    uint32_t       v32 = (uint32_t)v;
    switch (dt_size[dt]) {
    case 1: memcpy(p, &v8, 1); break;
    case 2: memcpy(p, &v16, 2); break;
    case 4: memcpy(p, &v32, 4); break;
    default: memcpy(p, &v, 8); break;
    }
}

static int is_float(braid_dtype_t dt)
{
    return dt == BRAID_F32 || dt == BRAID_F64 || dt == BRAID_F16 ||
           dt == BRAID_BF16;
}

static int is_nan(braid_dtype_t dt, uint64_t v)
{
    switch (dt) {
    case BRAID_F32: return (v & 0x7fffffffu) > 0x7f800000u;
    case BRAID_F64: return (v & 0x7fffffffffffffffu) > 0x7ff0000000000000u;
    case BRAID_F16: return (v & 0x7fffu) > 0x7c00u;
    case BRAID_BF16: return (v & 0x7fffu) > 0x7f80u;
    default: return 0;
    }
}

/* The one NaN float SUM/PROD/AVG may produce. */
static uint64_t canonical_nan(braid_dtype_t dt)
{
    switch (dt) {
    case BRAID_F32: return 0x7fc00000u;
    case BRAID_F64: return 0x7ff8000000000000u;
    case BRAID_F16: return 0x7e00u;
    default: return 0x7fc0u;
    }
}

/* got must equal want bit for bit, and a NaN out of arithmetic must be the
 * canonical one (MIN/MAX return an input as it is). */
static int elem_ok(braid_dtype_t dt, braid_op_t op, uint64_t x, uint64_t y,
                   uint64_t got, uint64_t want)
{
    (void)x, (void)y;
    if (got != want)
        return 0;
    if (is_float(dt) && op != BRAID_MIN && op != BRAID_MAX && is_nan(dt, got))
        return got == canonical_nan(dt);
    return 1;
}

/* Compare got[] with want[] for inputs a[], b[]; one failure report per
 * call, naming the first bad element. */
static void compare(const char *what, braid_dtype_t dt, braid_op_t op,
                    size_t n, const void *a, const void *b, const void *got,
                    const void *want)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t x = get(a, i, dt), y = get(b, i, dt);
        if (!elem_ok(dt, op, x, y, get(got, i, dt), get(want, i, dt))) {
            if (bad++ == 0)
                first = i;
        }
    }
    CHECK(bad == 0,
          "%s %s %s n=%zu: %zu wrong, first [%zu]: a=0x%llx b=0x%llx "
          "got=0x%llx want=0x%llx",
          what, dt_name[dt], op_name[op], n, bad, first,
          (unsigned long long)get(a, first, dt),
          (unsigned long long)get(b, first, dt),
          (unsigned long long)get(got, first, dt),
          (unsigned long long)get(want, first, dt));
}

static const uint64_t special_f32[] = {
    0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000,
    0xffc00000, 0x7f800001, 0xff812345, 0x7fd23456, 0x00000001,
    0x007fffff, 0x00800000, 0x7f7fffff, 0xff7fffff, 0x3f800000,
    0xbf800000, 0x40000000, 0x3f000000, 0x80000001,
};
static const uint64_t special_f64[] = {
    0x0,
    0x8000000000000000,
    0x7ff0000000000000,
    0xfff0000000000000,
    0x7ff8000000000000,
    0xfff8000000000000,
    0x7ff0000000000001,
    0xfff0000012345678,
    0x7ff8123456789abc,
    0x1,
    0x000fffffffffffff,
    0x0010000000000000,
    0x7fefffffffffffff,
    0xffefffffffffffff,
    0x3ff0000000000000,
    0xbff0000000000000,
    0x4000000000000000,
    0x3fe0000000000000,
    0x8000000000000001,
};
static const uint64_t special_f16[] = {
    0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01,
    0xfd23, 0x7e55, 0x0001, 0x03ff, 0x0400, 0x7bff, 0xfbff,
    0x3c00, 0xbc00, 0x4000, 0x3800, 0x8001,
};
static const uint64_t special_bf16[] = {
    0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81,
    0xff85, 0x7fd5, 0x0001, 0x007f, 0x0080, 0x7f7f, 0xff7f,
    0x3f80, 0xbf80, 0x4000, 0x3f00, 0x8001,
};
static const uint64_t special_i32[] = {
    0,          1,          0xffffffff, 0x7fffffff, 0x80000000,
    0x7ffffffe, 0x80000001, 2,          0xfffffffe, 65536,
};
static const uint64_t special_i64[] = {
    0,
    1,
    0xffffffffffffffff,
    0x7fffffffffffffff,
    0x8000000000000000,
    0x7ffffffffffffffe,
    0x8000000000000001,
    2,
    0xfffffffffffffffe,
    0x100000000,
};
static const uint64_t special_u8[] = {0, 1, 2, 127, 128, 255, 254, 16};

#define ARRAY_LEN(x) (sizeof(x) / sizeof((x)[0]))

/* One random element: a quarter special values, the rest a mix of raw
 * bits and values of moderate size, so that sums and products both
 * cancel, round and overflow. */
static uint64_t random_elem(braid_dtype_t dt)
{
    uint64_t r = rnd(), s = rnd();
    int      pick_special = (r & 3) == 0, raw = (r & 4) != 0;
    uint64_t sign = s >> 63;
    switch (dt) {
    case BRAID_F32:
        if (pick_special)
            return special_f32[s % ARRAY_LEN(special_f32)];
        if (raw)
            return s >> 32;
        return (sign << 31) | ((uint64_t)(117 + (s >> 40) % 21) << 23) |
               (s & 0x7fffff);
    case BRAID_F64:
        if (pick_special)
            return special_f64[s % ARRAY_LEN(special_f64)];
        if (raw)
            return s;
        return (sign << 63) | ((uint64_t)(1013 + (s >> 52) % 21) << 52) |
               (s & 0xfffffffffffffu);
    case BRAID_F16:
        if (pick_special)
            return special_f16[s % ARRAY_LEN(special_f16)];
        return s >> 48; /* raw bits cover f16's range well */
    case BRAID_BF16:
        if (pick_special)
            return special_bf16[s % ARRAY_LEN(special_bf16)];
        if (raw)
            return s >> 48;
        return (sign << 15) | ((uint64_t)(117 + (s >> 40) % 21) << 7) |
               (s & 0x7f);
    case BRAID_I32:
        if (pick_special)
            return special_i32[s % ARRAY_LEN(special_i32)];
        return raw ? s >> 32 : (uint32_t)((int32_t)(s % 2001) - 1000);
    case BRAID_I64:
        if (pick_special)
            return special_i64[s % ARRAY_LEN(special_i64)];
        return raw ? s : (uint64_t)((int64_t)(s % 2001) - 1000);
    default:
        if (pick_special)
            return special_u8[s % ARRAY_LEN(special_u8)];
        return s >> 56;
    }
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "test_kernels: out of memory\n");
        exit(1);
    }
    return p;
}

static void fill_random(void *buf, size_t n, braid_dtype_t dt)
{
    for (size_t i = 0; i < n; i++)
        put(buf, i, dt, random_elem(dt));
}

/* ---------------------------------------------------------------------
 * Reductions: fast path against the reference
 * ------------------------------------------------------------------ */

/* Inputs and scratch space for one (dtype, count); exact-size buffers so
 * that AddressSanitizer catches any overrun. */
struct bufs {
    void *a, *b, *a0, *b0, *want, *got, *got2;
};

/* One (dtype, op, count) case: the fast path in every aliasing form the
 * API allows, against the reference. */
static void test_reduce_case(braid_dtype_t dt, braid_op_t op, size_t n,
                             const struct bufs *m)
{
    size_t      bytes = n * dt_size[dt];
    const void *a = m->a, *b = m->b;
    void       *want = m->want, *got = m->got;

    braid_kernel_reduce2_ref(want, a, b, n, dt, op);
    braid_kernel_reduce2(got, a, b, n, dt, op);
    compare("reduce2", dt, op, n, a, b, got, want);
    CHECK(memcmp(a, m->a0, bytes) == 0 && memcmp(b, m->b0, bytes) == 0,
          "reduce2 %s %s n=%zu modified an input", dt_name[dt], op_name[op],
          n);

    /* Argument order: the same bits, NaN + NaN included. */
    braid_kernel_reduce2(m->got2, b, a, n, dt, op);
    compare("reduce2(b,a)", dt, op, n, a, b, m->got2, got);

    memcpy(got, a, bytes); /* dst == a */
    braid_kernel_reduce2(got, got, b, n, dt, op);
    compare("reduce2 dst==a", dt, op, n, a, b, got, want);

    memcpy(got, b, bytes); /* dst == b */
    braid_kernel_reduce2(got, a, got, n, dt, op);
    compare("reduce2 dst==b", dt, op, n, a, b, got, want);

    memcpy(got, a, bytes); /* in place */
    braid_kernel_reduce(got, b, n, dt, op);
    compare("reduce", dt, op, n, a, b, got, want);

    memcpy(got, a, bytes); /* the reference aliases too */
    braid_kernel_reduce2_ref(got, got, b, n, dt, op);
    compare("ref dst==a", dt, op, n, a, b, got, want);

    braid_kernel_reduce2_ref(want, a, a, n, dt, op); /* a == b */
    braid_kernel_reduce2(got, a, a, n, dt, op);
    compare("reduce2 a==b", dt, op, n, a, a, got, want);

    memcpy(got, a, bytes); /* dst == a == b */
    braid_kernel_reduce2(got, got, got, n, dt, op);
    compare("reduce2 dst==a==b", dt, op, n, a, a, got, want);
}

static void test_reduce_all(void)
{
    static const size_t counts[] = {0, 1, 7, 1000, 1000003};
    for (int d = 0; d < BRAID_DTYPE_COUNT; d++) {
        braid_dtype_t dt = (braid_dtype_t)d;
        for (size_t c = 0; c < ARRAY_LEN(counts); c++) {
            size_t      n = counts[c], bytes = n * dt_size[dt];
            struct bufs m = {xmalloc(bytes), xmalloc(bytes), xmalloc(bytes),
                             xmalloc(bytes), xmalloc(bytes), xmalloc(bytes),
                             xmalloc(bytes)};
            fill_random(m.a, n, dt);
            fill_random(m.b, n, dt);
            memcpy(m.a0, m.a, bytes);
            memcpy(m.b0, m.b, bytes);
            for (int op = 0; op < BRAID_OP_COUNT; op++)
                test_reduce_case(dt, (braid_op_t)op, n, &m);
            free(m.a), free(m.b), free(m.a0), free(m.b0);
            free(m.want), free(m.got), free(m.got2);
        }
    }
}

/* Every f16/bf16 value against many partners, so that the block
 * conversions of the fast path meet every input and a wide spread of
 * rounded results, including every value paired with -0 (x + -0 = x). */
static void test_half_all_pairs(void)
{
    const size_t  n = 65536;
    uint16_t     *a = xmalloc(n * 2), *b = xmalloc(n * 2);
    uint16_t     *want = xmalloc(n * 2), *got = xmalloc(n * 2);
    braid_dtype_t dts[2] = {BRAID_F16, BRAID_BF16};

    for (int d = 0; d < 2; d++) {
        for (int round = 0; round < 12; round++) {
            size_t shift = round == 0 ? 0 : (size_t)(rnd() % n);
            for (size_t i = 0; i < n; i++) {
                a[i] = (uint16_t)i;
                b[i] = round == 0 ? 0x8000 : (uint16_t)((i + shift) % n);
            }
            for (int op = 0; op < BRAID_OP_COUNT; op++) {
                braid_kernel_reduce2_ref(want, a, b, n, dts[d],
                                         (braid_op_t)op);
                braid_kernel_reduce2(got, a, b, n, dts[d], (braid_op_t)op);
                compare("all pairs", dts[d], (braid_op_t)op, n, a, b, got,
                        want);
            }
        }
    }
    free(a), free(b), free(want), free(got);
}

/* ---------------------------------------------------------------------
 * Known answers, on both the fast path and the reference
 * ------------------------------------------------------------------ */

static void expect(braid_dtype_t dt, braid_op_t op, uint64_t x, uint64_t y,
                   uint64_t want)
{
    unsigned char a[8], b[8], r[8];
    put(a, 0, dt, x);
    put(b, 0, dt, y);
    for (int order = 0; order < 2; order++) {
        braid_kernel_reduce2(r, order ? b : a, order ? a : b, 1, dt, op);
        CHECK(get(r, 0, dt) == want,
              "%s %s(0x%llx, 0x%llx) = 0x%llx, want "
              "0x%llx",
              dt_name[dt], op_name[op], (unsigned long long)(order ? y : x),
              (unsigned long long)(order ? x : y),
              (unsigned long long)get(r, 0, dt), (unsigned long long)want);
        braid_kernel_reduce2_ref(r, order ? b : a, order ? a : b, 1, dt, op);
        CHECK(get(r, 0, dt) == want, "ref %s %s(0x%llx, 0x%llx) = 0x%llx",
              dt_name[dt], op_name[op], (unsigned long long)(order ? y : x),
              (unsigned long long)(order ? x : y),
              (unsigned long long)get(r, 0, dt));
    }
}

static void test_known_answers(void)
{
    /* Integer wrap. */
    expect(BRAID_I32, BRAID_SUM, 0x7fffffff, 1, 0x80000000);
    expect(BRAID_I32, BRAID_PROD, 65536, 65536, 0);
    expect(BRAID_I32, BRAID_PROD, 0x80000000, 0xffffffff, 0x80000000);
    expect(BRAID_I32, BRAID_MIN, 0xffffffff, 1, 0xffffffff);
    expect(BRAID_I32, BRAID_AVG, 0x7fffffff, 1, 0x80000000);
    expect(BRAID_I64, BRAID_SUM, 0x7fffffffffffffff, 1, 0x8000000000000000);
    expect(BRAID_I64, BRAID_PROD, 0x8000000000000000, 0xffffffffffffffff,
           0x8000000000000000);
    expect(BRAID_I64, BRAID_MAX, 0xffffffffffffffff, 1, 1);
    expect(BRAID_U8, BRAID_SUM, 200, 100, 44);
    expect(BRAID_U8, BRAID_PROD, 16, 16, 0);
    expect(BRAID_U8, BRAID_MAX, 200, 100, 200);

    /* Signed zeros and NaN for MIN/MAX: the same in either order. */
    expect(BRAID_F32, BRAID_MIN, 0x80000000, 0x00000000, 0x80000000);
    expect(BRAID_F32, BRAID_MAX, 0x80000000, 0x00000000, 0x00000000);
    expect(BRAID_F32, BRAID_MIN, 0x3f800000, 0x7fc00001, 0x7fc00001);
    expect(BRAID_F32, BRAID_MAX, 0x3f800000, 0x7fc00001, 0x7fc00001);
    expect(BRAID_F32, BRAID_MIN, 0x7f800001, 0xff800000,
           0x7f800001); /* sNaN kept */
    expect(BRAID_F32, BRAID_MIN, 0x7fc00001, 0xffc00000, 0xffc00000);
    expect(BRAID_F32, BRAID_MAX, 0x7fc00001, 0x7fc00002, 0x7fc00002);
    expect(BRAID_F32, BRAID_MIN, 0xff800000, 0x7f7fffff, 0xff800000);
    expect(BRAID_F64, BRAID_MIN, 0x8000000000000000, 0, 0x8000000000000000);
    expect(BRAID_F64, BRAID_MAX, 0x8000000000000000, 0, 0);
    expect(BRAID_F64, BRAID_MAX, 0x7ff8000000000001, 0x4000000000000000,
           0x7ff8000000000001);
    expect(BRAID_F16, BRAID_MIN, 0x8000, 0x0000, 0x8000);
    expect(BRAID_F16, BRAID_MAX, 0x7c01, 0x3c00, 0x7c01);
    expect(BRAID_BF16, BRAID_MAX, 0x8000, 0x0000, 0x0000);
    expect(BRAID_BF16, BRAID_MIN, 0xff81, 0x7fc0, 0xff81);

    /* NaN payloads and signs do not survive arithmetic: the result is the
     * canonical NaN in either order (x86 would keep the first operand's). */
    expect(BRAID_F32, BRAID_SUM, 0x7fc00001, 0xffc00002, 0x7fc00000);
    expect(BRAID_F32, BRAID_PROD, 0xff800001, 0x3f800000, 0x7fc00000);
    expect(BRAID_F32, BRAID_SUM, 0x7f800000, 0xff800000, 0x7fc00000);
    expect(BRAID_F64, BRAID_SUM, 0x7ff8000000000001, 0xfff8000000000002,
           0x7ff8000000000000);
    expect(BRAID_F64, BRAID_PROD, 0, 0x7ff0000000000000, 0x7ff8000000000000);
    expect(BRAID_F16, BRAID_SUM, 0x7e01, 0xfe02, 0x7e00);
    expect(BRAID_F16, BRAID_AVG, 0xfc01, 0x3c00, 0x7e00);
    expect(BRAID_BF16, BRAID_PROD, 0x7fc1, 0xffc2, 0x7fc0);

    /* Sums of opposite values give +0; -0 + -0 stays -0. */
    expect(BRAID_F32, BRAID_SUM, 0x3f800000, 0xbf800000, 0x00000000);
    expect(BRAID_F32, BRAID_SUM, 0x80000000, 0x80000000, 0x80000000);
    expect(BRAID_F32, BRAID_SUM, 0x7f800000, 0x3f800000, 0x7f800000);

    /* f16/bf16 round to nearest even through f32. */
    expect(BRAID_F16, BRAID_SUM, 0x3c00, 0x1000, 0x3c00); /* 1 + 2^-11 */
    expect(BRAID_F16, BRAID_SUM, 0x3c01, 0x1000, 0x3c02);
    expect(BRAID_F16, BRAID_SUM, 0x7bff, 0x4800, 0x7bff);  /* 65504 + 8 */
    expect(BRAID_F16, BRAID_SUM, 0x7bff, 0x4c00, 0x7c00);  /* + 16: inf */
    expect(BRAID_F16, BRAID_PROD, 0x0001, 0x3800, 0x0000); /* 2^-25: tie */
    expect(BRAID_F16, BRAID_PROD, 0x0003, 0x3800, 0x0002); /* 1.5: even */
    expect(BRAID_F16, BRAID_SUM, 0x0001, 0x8001, 0x0000);
    expect(BRAID_F16, BRAID_AVG, 0x3c00, 0x3c00, 0x4000);
    expect(BRAID_BF16, BRAID_SUM, 0x3f80, 0x3b80, 0x3f80); /* 1 + 2^-8 */
    expect(BRAID_BF16, BRAID_SUM, 0x3f81, 0x3b80, 0x3f82);
    expect(BRAID_BF16, BRAID_PROD, 0x7f7f, 0x4000, 0x7f80);
}

/* Invalid dtype/op and count 0 do nothing, whatever the pointers. */
static void test_noop_calls(void)
{
    float x[2] = {1, 2}, y[2] = {3, 4};
    braid_kernel_reduce2(x, x, y, 2, BRAID_DTYPE_COUNT, BRAID_SUM);
    braid_kernel_reduce2(x, x, y, 2, BRAID_F32, BRAID_OP_COUNT);
    braid_kernel_reduce2(x, x, y, 2, (braid_dtype_t)-1, BRAID_SUM);
    braid_kernel_reduce(x, y, 2, BRAID_F32, (braid_op_t)99);
    braid_kernel_reduce2_ref(x, x, y, 2, BRAID_DTYPE_COUNT, BRAID_SUM);
    CHECK(x[0] == 1 && x[1] == 2, "invalid dtype/op changed the buffer");
    braid_kernel_reduce2(NULL, NULL, NULL, 0, BRAID_F16, BRAID_SUM);
    braid_kernel_reduce(NULL, NULL, 0, BRAID_I64, BRAID_MIN);
    braid_kernel_reduce2_ref(NULL, NULL, NULL, 0, BRAID_F32, BRAID_SUM);
    braid_kernel_finish_avg(NULL, 0, BRAID_F32, BRAID_AVG, 4);
    CHECK(1, "count 0 with NULL pointers");
}

/* ---------------------------------------------------------------------
 * finish_avg
 * ------------------------------------------------------------------ */

/* n == 1 is the identity: the buffer is not touched, so even signalling
 * NaNs stay as they are. */
static uint64_t avg_expected(braid_dtype_t dt, uint64_t v, int n)
{
    if (n == 1)
        return v;
    if (is_nan(dt, v))
        return canonical_nan(dt);
    switch (dt) {
    case BRAID_F32: return f2u(u2f((uint32_t)v) / (float)n);
    case BRAID_F64: {
        double   d;
        uint64_t r;
        memcpy(&d, &v, 8);
        d /= n;
        memcpy(&r, &d, 8);
        return r;
    }
    case BRAID_F16:
        return braid_f32_to_f16(braid_f16_to_f32((uint16_t)v) / (float)n);
    case BRAID_BF16:
        return braid_f32_to_bf16(braid_bf16_to_f32((uint16_t)v) / (float)n);
    case BRAID_I32: return (uint32_t)((int32_t)(uint32_t)v / n);
    case BRAID_I64: return (uint64_t)((int64_t)v / n);
    default: return (uint8_t)v / (unsigned)n;
    }
}

static void test_finish_avg(void)
{
    static const size_t counts[] = {0, 1, 7, 1000, 1000003};
    static const int    ns[]     = {1, 2, 3, 7, 8};
    for (int dt = 0; dt < BRAID_DTYPE_COUNT; dt++) {
        for (size_t c = 0; c < ARRAY_LEN(counts); c++) {
            size_t n = counts[c], bytes = n * dt_size[dt];
            void  *buf = xmalloc(bytes), *orig = xmalloc(bytes);
            fill_random(orig, n, (braid_dtype_t)dt);
            for (size_t k = 0; k < ARRAY_LEN(ns); k++) {
                memcpy(buf, orig, bytes);
                braid_kernel_finish_avg(buf, n, (braid_dtype_t)dt, BRAID_AVG,
                                        ns[k]);
                size_t bad = 0, first = 0;
                for (size_t i = 0; i < n; i++) {
                    uint64_t want =
                        avg_expected((braid_dtype_t)dt,
                                     get(orig, i, (braid_dtype_t)dt), ns[k]);
                    if (get(buf, i, (braid_dtype_t)dt) != want && bad++ == 0)
                        first = i;
                }
                CHECK(bad == 0,
                      "finish_avg %s n=%zu by %d: %zu wrong, first "
                      "[%zu] 0x%llx -> 0x%llx",
                      dt_name[dt], n, ns[k], bad, first,
                      (unsigned long long)get(orig, first, (braid_dtype_t)dt),
                      (unsigned long long)get(buf, first, (braid_dtype_t)dt));
            }
            /* Other ops, and a meaningless n, leave the buffer alone. */
            memcpy(buf, orig, bytes);
            braid_kernel_finish_avg(buf, n, (braid_dtype_t)dt, BRAID_SUM, 4);
            braid_kernel_finish_avg(buf, n, (braid_dtype_t)dt, BRAID_MAX, 4);
            braid_kernel_finish_avg(buf, n, (braid_dtype_t)dt, BRAID_AVG, 0);
            braid_kernel_finish_avg(buf, n, (braid_dtype_t)dt, BRAID_AVG, -3);
            CHECK(memcmp(buf, orig, bytes) == 0,
                  "finish_avg %s n=%zu changed "
                  "the buffer for a non-AVG op or n <= 0",
                  dt_name[dt], n);
            free(buf), free(orig);
        }
    }
    /* Integers truncate toward zero. */
    int32_t i32[3] = {-7, 7, INT32_MIN};
    braid_kernel_finish_avg(i32, 3, BRAID_I32, BRAID_AVG, 2);
    CHECK(i32[0] == -3 && i32[1] == 3 && i32[2] == INT32_MIN / 2,
          "i32 avg: %d %d %d", i32[0], i32[1], i32[2]);
    int64_t i64[2] = {-9, INT64_MIN};
    braid_kernel_finish_avg(i64, 2, BRAID_I64, BRAID_AVG, 4);
    CHECK(i64[0] == -2 && i64[1] == INT64_MIN / 4, "i64 avg");
    uint8_t u8[2] = {255, 3};
    braid_kernel_finish_avg(u8, 2, BRAID_U8, BRAID_AVG, 2);
    CHECK(u8[0] == 127 && u8[1] == 1, "u8 avg: %u %u", u8[0], u8[1]);
    float f[2] = {1.0f, -3.0f};
    braid_kernel_finish_avg(f, 2, BRAID_F32, BRAID_AVG, 3);
    CHECK(f[0] == 1.0f / 3.0f && f[1] == -1.0f, "f32 avg: %a %a", f[0], f[1]);
}

static void run(const char *name, void (*fn)(void))
{
    clock_t t0     = clock();
    long    failed = n_failed;
    fn();
    printf("  %-22s %s (%.2f s)\n", name, n_failed == failed ? "ok" : "FAILED",
           (double)(clock() - t0) / CLOCKS_PER_SEC);
}

int main(void)
{
    clock_t t0 = clock();

#ifdef TEST_KERNELS_NEEDS_AVX2 /* this build's kernels use AVX2 throughout */
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2")) {
        printf("kernels: skipped, this CPU has no AVX2\n");
        return 77;
    }
#endif

    run("f16 widen, all", test_f16_widen_all);
    run("bf16 widen, all", test_bf16_widen_all);
    run("f16 halfway", test_f16_halfway);
    run("bf16 halfway", test_bf16_halfway);
    run("narrow random", test_narrow_random);
    run("known answers", test_known_answers);
    run("no-op calls", test_noop_calls);
    run("f16/bf16 all pairs", test_half_all_pairs);
    run("reduce vs ref", test_reduce_all);
    run("finish_avg", test_finish_avg);

    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("kernels: %ld checks, %ld failed (%.2f s CPU)\n", n_checks,
           n_failed, secs);
    if (n_failed > MAX_REPORTS)
        printf("kernels: only the first %d failures were printed\n",
               MAX_REPORTS);
    return n_failed == 0 ? 0 : 1;
}
