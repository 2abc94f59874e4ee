/* CPU reduction kernels: a vectorised fast path and a scalar reference.
 *
 * Fast path: one small loop per (dtype, op), written so that GCC and clang
 * auto-vectorise it (built with -O3, see meson.build); braid_kernel_reduce2
 * picks the loop from a table once per call.  On x86-64 the hot loops are
 * also cloned for AVX-512 and AVX2 and the best clone is chosen at load
 * time.  f16/bf16 SUM/PROD go through f32 in blocks that stay in L1, with
 * branch-free conversions so that those loops vectorise too.
 *
 * Results must be bitwise identical on every rank, so everything here is
 * deterministic for a given input and CPU architecture:
 *
 * - SUM, PROD (and AVG, which combines as SUM): IEEE arithmetic in the
 *   element type; f16/bf16 in f32, rounded back to nearest even.  Every
 *   NaN result is the canonical quiet NaN (f32 0x7fc00000, f64
 *   0x7ff8000000000000, f16 0x7e00, bf16 0x7fc0): IEEE lets a NaN result
 *   carry either input's payload, and which one x86 keeps depends on the
 *   operand order, so ranks combining in different orders would disagree
 *   in the bits.  With that, a op b equals b op a bitwise for every input,
 *   and the canonical NaN is also what Arm produces in default-NaN mode.
 *   Integers wrap (two's complement), computed in unsigned arithmetic so
 *   there is no undefined behaviour.
 * - MIN, MAX on floats: NaN propagates.  If one input is NaN the result is
 *   that NaN; if both are, the one whose bit pattern is larger as an
 *   unsigned integer.  -0 orders below +0, so min(-0, +0) = -0 and
 *   max(-0, +0) = +0 in either argument order.  The result is always one
 *   of the inputs bit for bit (signalling NaNs are not quieted), so MIN/MAX
 *   commute bitwise in every case, and f16/bf16 are compared as they are,
 *   with no conversion: widening to f32 is exact and order-preserving, so
 *   this equals converting, comparing and rounding back.
 *
 * The float paths assume the default FP environment (round to nearest
 * even); flush-to-zero would change SUM/PROD results on subnormals on every
 * rank alike.  The f16/bf16 conversions do not depend on FTZ/DAZ. */
#include <math.h>
#include <string.h>

#include "kernels/reduce.h"

/* Hot loops get one clone per ISA level; the dynamic loader picks one
 * through an ifunc, so callers pay one indirect call per loop, not per
 * element.  Only where the toolchain supports it (ELF, x86-64); tests
 * define BRAID_KERNELS_NO_CLONES to build one level at a time.  GCC gets
 * the x86-64-v4 level (AVX-512 with BW/VL), which lets the 16-bit f16
 * conversions use 512-bit and masked ops, faster than plain avx512f
 * (docs/performance.md).  Clang 14 mis-dispatches "arch=" clones (and GCC
 * before 12 cannot dispatch on ISA levels), so they get single-feature
 * ones. */
#if defined(__x86_64__) && defined(__ELF__) && defined(__has_attribute) &&    \
    !defined(BRAID_KERNELS_NO_CLONES)
#if __has_attribute(target_clones) && !defined(__clang__) && __GNUC__ >= 12
#define BRAID_HOT                                                             \
    __attribute__((                                                           \
        target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#elif __has_attribute(target_clones)
#define BRAID_HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef BRAID_HOT
#define BRAID_HOT
#endif

/* Up to this many elements a loop runs right in its dispatcher, without
 * the call through the ifunc to a clone whose vector set-up costs more than
 * a decode step's few elements: the same OP element by element, so the
 * same bits.  Element i is read before it is written, so in place is fine
 * (d equal to a, b or both). */
#define BRAID_FEW 8

/* f16/bf16 elements per block: 2 KiB of f32, comfortably in L1. */
#define BRAID_BLOCK 512

typedef void (*braid_loop_fn)(void *dst, const void *a, const void *b,
                              size_t n);

/* ---------------------------------------------------------------------
 * Element operations
 * ------------------------------------------------------------------ */

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static inline uint64_t f64_bits(double f)
{
    uint64_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline double bits_f64(uint64_t u)
{
    double f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

#define OP_ADD(x, y) ((x) + (y))
#define OP_MUL(x, y) ((x) * (y))

/* Float SUM/PROD: any NaN result becomes the canonical one (file comment).
 * A compare and a select per element, which vectorise to two instructions
 * beside the arithmetic. */
#define F32_QNAN 0x7fc00000u
#define F64_QNAN 0x7ff8000000000000ull

static inline float f32_canon(float r)
{
    return r == r ? r : bits_f32(F32_QNAN);
}

static inline double f64_canon(double r)
{
    return r == r ? r : bits_f64(F64_QNAN);
}

#define F32_ADD(x, y) f32_canon((x) + (y))
#define F32_MUL(x, y) f32_canon((x) * (y))
#define F64_ADD(x, y) f64_canon((x) + (y))
#define F64_MUL(x, y) f64_canon((x) * (y))
#define OP_MIN(x, y)  ((x) < (y) ? (x) : (y))
#define OP_MAX(x, y)  ((x) > (y) ? (x) : (y))

/* Float MIN/MAX work on bit patterns.  Flipping the magnitude bits of
 * negatives and setting the sign bit of positives maps sign-magnitude to
 * an unsigned key whose order is the IEEE total order (-NaN < -inf < -0 <
 * +0 < +inf < +NaN) and which is one-to-one, so picking by key never
 * depends on argument order.  NaNs are then handled first: the larger NaN
 * bit pattern wins, and 0 stands for "not a NaN" since no NaN is 0. */
static inline uint32_t key32(uint32_t u)
{
    return u ^ ((0u - (u >> 31)) | 0x80000000u);
}

static inline uint64_t key64(uint64_t u)
{
    return u ^ ((0u - (u >> 63)) | 0x8000000000000000u);
}

static inline uint32_t key16(uint32_t u)
{
    return u ^ (((0u - (u >> 15)) & 0xffffu) | 0x8000u);
}

static inline uint32_t minmax32(uint32_t a, uint32_t b, int want_max)
{
    uint32_t na   = (a & 0x7fffffffu) > 0x7f800000u ? a : 0;
    uint32_t nb   = (b & 0x7fffffffu) > 0x7f800000u ? b : 0;
    uint32_t nan  = na > nb ? na : nb;
    int      a_lt = key32(a) < key32(b);
    uint32_t r    = (want_max ? !a_lt : a_lt) ? a : b;
    return nan != 0 ? nan : r;
}

static inline uint64_t minmax64(uint64_t a, uint64_t b, int want_max)
{
    const uint64_t inf = 0x7ff0000000000000u, mag = 0x7fffffffffffffffu;
    uint64_t       na   = (a & mag) > inf ? a : 0;
    uint64_t       nb   = (b & mag) > inf ? b : 0;
    uint64_t       nan  = na > nb ? na : nb;
    int            a_lt = key64(a) < key64(b);
    uint64_t       r    = (want_max ? !a_lt : a_lt) ? a : b;
    return nan != 0 ? nan : r;
}

/* inf is the format's infinity: 0x7c00 for f16, 0x7f80 for bf16. */
static inline uint16_t minmax16(uint16_t a, uint16_t b, uint32_t inf,
                                int want_max)
{
    uint32_t na   = (a & 0x7fffu) > inf ? a : 0;
    uint32_t nb   = (b & 0x7fffu) > inf ? b : 0;
    uint32_t nan  = na > nb ? na : nb;
    int      a_lt = key16(a) < key16(b);
    uint32_t r    = (want_max ? !a_lt : a_lt) ? a : b;
    return (uint16_t)(nan != 0 ? nan : r);
}

static inline float f32_min(float a, float b)
{
    return bits_f32(minmax32(f32_bits(a), f32_bits(b), 0));
}
static inline float f32_max(float a, float b)
{
    return bits_f32(minmax32(f32_bits(a), f32_bits(b), 1));
}
static inline double f64_min(double a, double b)
{
    return bits_f64(minmax64(f64_bits(a), f64_bits(b), 0));
}
static inline double f64_max(double a, double b)
{
    return bits_f64(minmax64(f64_bits(a), f64_bits(b), 1));
}
static inline uint16_t f16_min(uint16_t a, uint16_t b)
{
    return minmax16(a, b, 0x7c00u, 0);
}
static inline uint16_t f16_max(uint16_t a, uint16_t b)
{
    return minmax16(a, b, 0x7c00u, 1);
}
static inline uint16_t bf16_min(uint16_t a, uint16_t b)
{
    return minmax16(a, b, 0x7f80u, 0);
}
static inline uint16_t bf16_max(uint16_t a, uint16_t b)
{
    return minmax16(a, b, 0x7f80u, 1);
}

/* ---------------------------------------------------------------------
 * Branch-free f16/bf16 conversions for the block loops.  Every case is
 * computed and the right one selected, which compiles to vector blends.
 * half.c has the plain scalar versions, which keep NaN payloads where
 * these narrowings make every NaN canonical; the tests check that both
 * agree on everything else.
 * ------------------------------------------------------------------ */

/* c1 ? v1 : c2 ? v2 : v3 with masks rather than ?: so that the compiler
 * cannot sink the computation of a case into a branch: under the default
 * -ftrapping-math it then refuses to turn that branch back into a vector
 * blend, because it would have to speculate an FP operation. */
static inline uint32_t pick3(int c1, uint32_t v1, int c2, uint32_t v2,
                             uint32_t v3)
{
    uint32_t m1 = 0u - (uint32_t)(c1 != 0);
    uint32_t m2 = ~m1 & (0u - (uint32_t)(c2 != 0));
    return (m1 & v1) | (m2 & v2) | (~(m1 | m2) & v3);
}

static inline float f16_load(uint16_t h)
{
    uint32_t em   = h & 0x7fffu;
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t norm = (em << 13) + (112u << 23); /* rebias 15 -> 127 */
    uint32_t spec = (em << 13) | 0x7f800000u;  /* inf, NaN + payload */
    /* Subnormal mant * 2^-24: an exact int -> float product. */
    uint32_t sub = f32_bits((float)(int32_t)em * 0x1p-24f);
    return bits_f32(sign |
                    pick3(em >= 0x7c00u, spec, em >= 0x400u, norm, sub));
}

/* A NaN becomes the canonical f16 NaN (file comment): the SUM/PROD/AVG
 * loops need no compare of their own, and a constant is cheaper than
 * keeping the payload. */
static inline uint16_t f16_store(float f)
{
    uint32_t u    = f32_bits(f);
    uint32_t a    = u & 0x7fffffffu;
    uint32_t sign = a > 0x7f800000u ? 0 : (u >> 16) & 0x8000u;
    uint32_t nan  = 0x7e00u;
    /* Round to nearest even on the dropped 13 bits; a carry into the
     * exponent is the correct result. */
    uint32_t norm = ((a + 0xfffu + ((a >> 13) & 1u)) >> 13) - (112u << 10);
    /* Below 2^-14, adding 0.5 (whose ulp is 2^-24, the f16 subnormal step)
     * makes the FPU round |f| to that grid with ties to even; the sum's low
     * bits are then the f16 subnormal encoding, 0x400 being the smallest
     * normal. */
    uint32_t sub = f32_bits(bits_f32(a) + 0.5f) - 0x3f000000u;
    /* 65520 and above round to infinity. */
    uint32_t big = a > 0x7f800000u ? nan : 0x7c00u;
    return (uint16_t)(sign | pick3(a >= 0x477ff000u, big, a >= 0x38800000u,
                                   norm, sub));
}

static inline float bf16_load(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

/* A NaN becomes the canonical bf16 NaN, as in f16_store. */
static inline uint16_t bf16_store(float f)
{
    uint32_t u = f32_bits(f);
    uint32_t t = u >> 16;
    /* Ties to even; the carry handles subnormals and overflow to inf. */
    uint32_t rnd = (u + 0x7fffu + (t & 1u)) >> 16;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? 0x7fc0u : rnd);
}

/* ---------------------------------------------------------------------
 * Loops
 * ------------------------------------------------------------------ */

/* Three forms per (type, op) so that every pointer can be restrict without
 * lying to the compiler: dst distinct from both inputs, dst equal to one
 * input (in place), and all three equal.  Inputs may equal each other,
 * since restrict only constrains objects that are written.  Partial
 * overlap is not supported.  When dst == b the in-place form computes
 * dst op a, which is the same as a op dst (see the file comment). */
#define BRAID_LOOPS(name, T, OP)                                              \
    BRAID_HOT static void name##_3(T *restrict d, const T *restrict a,        \
                                   const T *restrict b, size_t n)             \
    {                                                                         \
        for (size_t i = 0; i < n; i++)                                        \
            d[i] = OP(a[i], b[i]);                                            \
    }                                                                         \
    BRAID_HOT static void name##_2(T *restrict io, const T *restrict in,      \
                                   size_t n)                                  \
    {                                                                         \
        for (size_t i = 0; i < n; i++)                                        \
            io[i] = OP(io[i], in[i]);                                         \
    }                                                                         \
    static void name##_1(T *p, size_t n)                                      \
    {                                                                         \
        for (size_t i = 0; i < n; i++)                                        \
            p[i] = OP(p[i], p[i]);                                            \
    }                                                                         \
    static void name(void *d, const void *a, const void *b, size_t n)         \
    {                                                                         \
        if (n <= BRAID_FEW) {                                                 \
            T       *pd = d;                                                  \
            const T *pa = a, *pb = b;                                         \
            for (size_t i = 0; i < n; i++)                                    \
                pd[i] = OP(pa[i], pb[i]);                                     \
            return;                                                           \
        }                                                                     \
        if (d == a && d == b)                                                 \
            name##_1(d, n);                                                   \
        else if (d == a)                                                      \
            name##_2(d, b, n);                                                \
        else if (d == b)                                                      \
            name##_2(d, a, n);                                                \
        else                                                                  \
            name##_3(d, a, b, n);                                             \
    }

/* f16/bf16 SUM/PROD: widen a block of both inputs, combine in f32 and
 * narrow it back.  Both inputs are read before dst is written, so dst may
 * equal either input without restrict. */
#define BRAID_HALF_LOOP(name, LOAD, STORE, OP)                                \
    BRAID_HOT static void name(void *dst, const void *a, const void *b,       \
                               size_t n)                                      \
    {                                                                         \
        uint16_t       *pd = dst;                                             \
        const uint16_t *pa = a, *pb = b;                                      \
        float           t[BRAID_BLOCK];                                       \
        for (size_t i = 0; i < n; i += BRAID_BLOCK) {                         \
            size_t m = n - i < BRAID_BLOCK ? n - i : BRAID_BLOCK;             \
            for (size_t j = 0; j < m; j++)                                    \
                t[j] = OP(LOAD(pa[i + j]), LOAD(pb[i + j]));                  \
            for (size_t j = 0; j < m; j++)                                    \
                pd[i + j] = STORE(t[j]);                                      \
        }                                                                     \
    }

BRAID_LOOPS(loop_f32_sum, float, F32_ADD)
BRAID_LOOPS(loop_f32_prod, float, F32_MUL)
BRAID_LOOPS(loop_f32_min, float, f32_min)
BRAID_LOOPS(loop_f32_max, float, f32_max)

BRAID_LOOPS(loop_f64_sum, double, F64_ADD)
BRAID_LOOPS(loop_f64_prod, double, F64_MUL)
BRAID_LOOPS(loop_f64_min, double, f64_min)
BRAID_LOOPS(loop_f64_max, double, f64_max)

BRAID_HALF_LOOP(loop_f16_sum, f16_load, f16_store, OP_ADD)
BRAID_HALF_LOOP(loop_f16_prod, f16_load, f16_store, OP_MUL)
BRAID_LOOPS(loop_f16_min, uint16_t, f16_min)
BRAID_LOOPS(loop_f16_max, uint16_t, f16_max)

BRAID_HALF_LOOP(loop_bf16_sum, bf16_load, bf16_store, OP_ADD)
BRAID_HALF_LOOP(loop_bf16_prod, bf16_load, bf16_store, OP_MUL)
BRAID_LOOPS(loop_bf16_min, uint16_t, bf16_min)
BRAID_LOOPS(loop_bf16_max, uint16_t, bf16_max)

/* Signed and unsigned variants of a type may alias, so wrapping SUM/PROD
 * read the signed buffers through unsigned pointers.  u8 operands promote
 * to int (no overflow) and the store truncates modulo 256. */
BRAID_LOOPS(loop_i32_sum, uint32_t, OP_ADD)
BRAID_LOOPS(loop_i32_prod, uint32_t, OP_MUL)
BRAID_LOOPS(loop_i32_min, int32_t, OP_MIN)
BRAID_LOOPS(loop_i32_max, int32_t, OP_MAX)

BRAID_LOOPS(loop_i64_sum, uint64_t, OP_ADD)
BRAID_LOOPS(loop_i64_prod, uint64_t, OP_MUL)
BRAID_LOOPS(loop_i64_min, int64_t, OP_MIN)
BRAID_LOOPS(loop_i64_max, int64_t, OP_MAX)

BRAID_LOOPS(loop_u8_sum, uint8_t, OP_ADD)
BRAID_LOOPS(loop_u8_prod, uint8_t, OP_MUL)
BRAID_LOOPS(loop_u8_min, uint8_t, OP_MIN)
BRAID_LOOPS(loop_u8_max, uint8_t, OP_MAX)

#define BRAID_ROW(t)                                                          \
    [BRAID_SUM] = loop_##t##_sum, [BRAID_PROD] = loop_##t##_prod,             \
    [BRAID_MIN] = loop_##t##_min, [BRAID_MAX] = loop_##t##_max,               \
    [BRAID_AVG] = loop_##t##_sum

static const braid_loop_fn loops[BRAID_DTYPE_COUNT][BRAID_OP_COUNT] = {
    [BRAID_F32] = {BRAID_ROW(f32)}, [BRAID_F64] = {BRAID_ROW(f64)},
    [BRAID_F16] = {BRAID_ROW(f16)}, [BRAID_BF16] = {BRAID_ROW(bf16)},
    [BRAID_I32] = {BRAID_ROW(i32)}, [BRAID_I64] = {BRAID_ROW(i64)},
    [BRAID_U8] = {BRAID_ROW(u8)},
};

static int valid(braid_dtype_t dtype, braid_op_t op)
{
    return (unsigned)dtype < (unsigned)BRAID_DTYPE_COUNT &&
           (unsigned)op < (unsigned)BRAID_OP_COUNT;
}

/* Invalid dtype/op: nothing to report through a void function, and the
 * core validates arguments before it gets here, so do nothing. */
void braid_kernel_reduce2(void *dst, const void *a, const void *b,
                          size_t count, braid_dtype_t dtype, braid_op_t op)
{
    if (count == 0 || !valid(dtype, op))
        return;
    loops[dtype][op](dst, a, b, count);
}

void braid_kernel_reduce(void *inout, const void *in, size_t count,
                         braid_dtype_t dtype, braid_op_t op)
{
    braid_kernel_reduce2(inout, inout, in, count, dtype, op);
}

/* ---------------------------------------------------------------------
 * AVG: one division per element after the last combine.  Floats divide
 * (not multiply by 1/n, which is not exact), f16/bf16 in f32, and a NaN
 * comes out canonical; integers truncate toward zero as C division does
 * (the core hands integer AVG to the algorithms as a wider SUM, so these
 * see only what a plugin of its own asks for).
 * ------------------------------------------------------------------ */

BRAID_HOT static void avg_f32(float *p, size_t n, float d)
{
    for (size_t i = 0; i < n; i++)
        p[i] = f32_canon(p[i] / d);
}

BRAID_HOT static void avg_f64(double *p, size_t n, double d)
{
    for (size_t i = 0; i < n; i++)
        p[i] = f64_canon(p[i] / d);
}

BRAID_HOT static void avg_f16(uint16_t *p, size_t n, float d)
{
    for (size_t i = 0; i < n; i++)
        p[i] = f16_store(f16_load(p[i]) / d);
}

BRAID_HOT static void avg_bf16(uint16_t *p, size_t n, float d)
{
    for (size_t i = 0; i < n; i++)
        p[i] = bf16_store(bf16_load(p[i]) / d);
}

static void avg_i32(int32_t *p, size_t n, int32_t d)
{
    for (size_t i = 0; i < n; i++)
        p[i] = p[i] / d;
}

static void avg_i64(int64_t *p, size_t n, int64_t d)
{
    for (size_t i = 0; i < n; i++)
        p[i] = p[i] / d;
}

static void avg_u8(uint8_t *p, size_t n, unsigned d)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(p[i] / d);
}

/* n is the communicator size; n <= 0 is meaningless and leaves buf as is,
 * n == 1 is the identity. */
void braid_kernel_finish_avg(void *buf, size_t count, braid_dtype_t dtype,
                             braid_op_t op, int n)
{
    if (op != BRAID_AVG || n <= 1 || count == 0)
        return;
    switch (dtype) {
    case BRAID_F32: avg_f32(buf, count, (float)n); break;
    case BRAID_F64: avg_f64(buf, count, (double)n); break;
    case BRAID_F16: avg_f16(buf, count, (float)n); break;
    case BRAID_BF16: avg_bf16(buf, count, (float)n); break;
    case BRAID_I32: avg_i32(buf, count, n); break;
    case BRAID_I64: avg_i64(buf, count, n); break;
    case BRAID_U8: avg_u8(buf, count, (unsigned)n); break;
    default: break;
    }
}

/* ---------------------------------------------------------------------
 * Scalar reference, kept apart from the fast path on purpose: one element
 * at a time with a switch per element, floats computed in double and
 * rounded once to the element type, f16/bf16 through the public scalar
 * conversions of half.c, MIN/MAX from comparisons and signbit instead of
 * integer keys.  f32 through double gives the same bits as f32 arithmetic:
 * + and * of two f32 are rounded once more from a double, and double
 * rounding is harmless when 53 >= 2 * 24 + 2.  f16/bf16 results are
 * rounded to f32 first, as the fast path does.
 * ------------------------------------------------------------------ */

/* Which input MIN/MAX returns: 0 for x, 1 for y.  xb/yb are the inputs'
 * bit patterns, used only to choose between two NaNs. */
static int ref_pick(double x, double y, uint64_t xb, uint64_t yb, int is_max)
{
    if (isnan(x) || isnan(y)) {
        if (!isnan(y))
            return 0;
        if (!isnan(x))
            return 1;
        return yb > xb;
    }
    if (x != y)
        return is_max ? y > x : y < x;
    /* Equal values differ in bits only as -0 and +0. */
    return is_max ? signbit(x) != 0 : signbit(y) != 0;
}

static double ref_arith(double x, double y, braid_op_t op)
{
    return op == BRAID_PROD ? x * y : x + y; /* SUM and AVG */
}

/* The canonical NaN of the fast path, by a route of its own: isnan and a
 * constant NAN of the right sign, not a compare-and-select on bits. */
static float ref_canon32(float z) { return isnan(z) ? fabsf(NAN) : z; }

static double ref_canon64(double z)
{
    return isnan(z) ? fabs((double)NAN) : z;
}

static int ref_is_minmax(braid_op_t op)
{
    return op == BRAID_MIN || op == BRAID_MAX;
}

/* MIN/MAX copy the chosen input's bytes, so NaN payloads (even signalling
 * ones) go through untouched by any FP register move. */
static void ref_f32(void *r, const void *pa, const void *pb, braid_op_t op)
{
    float x, y, z;
    memcpy(&x, pa, sizeof(x));
    memcpy(&y, pb, sizeof(y));
    if (ref_is_minmax(op)) {
        int py = ref_pick(x, y, f32_bits(x), f32_bits(y), op == BRAID_MAX);
        memcpy(r, py ? pb : pa, sizeof(z));
        return;
    }
    z = ref_canon32((float)ref_arith(x, y, op));
    memcpy(r, &z, sizeof(z));
}

static void ref_f64(void *r, const void *pa, const void *pb, braid_op_t op)
{
    double x, y, z;
    memcpy(&x, pa, sizeof(x));
    memcpy(&y, pb, sizeof(y));
    if (ref_is_minmax(op)) {
        int py = ref_pick(x, y, f64_bits(x), f64_bits(y), op == BRAID_MAX);
        memcpy(r, py ? pb : pa, sizeof(z));
        return;
    }
    z = ref_canon64(op == BRAID_PROD ? x * y : x + y);
    memcpy(r, &z, sizeof(z));
}

/* bf16 != 0: the operands are bf16, else f16. */
static void ref_half(void *r, const void *pa, const void *pb, braid_op_t op,
                     int bf16)
{
    uint16_t hx, hy, hz;
    memcpy(&hx, pa, sizeof(hx));
    memcpy(&hy, pb, sizeof(hy));
    float x = bf16 ? braid_bf16_to_f32(hx) : braid_f16_to_f32(hx);
    float y = bf16 ? braid_bf16_to_f32(hy) : braid_f16_to_f32(hy);
    float z;
    if (ref_is_minmax(op))
        z = ref_pick(x, y, f32_bits(x), f32_bits(y), op == BRAID_MAX) ? y : x;
    else
        z = ref_canon32((float)ref_arith(x, y, op));
    hz = bf16 ? braid_f32_to_bf16(z) : braid_f32_to_f16(z);
    memcpy(r, &hz, sizeof(hz));
}

static void ref_i32(void *r, const void *pa, const void *pb, braid_op_t op)
{
    int32_t  x, y;
    uint32_t z;
    memcpy(&x, pa, sizeof(x));
    memcpy(&y, pb, sizeof(y));
    switch (op) {
    case BRAID_PROD: z = (uint32_t)((int64_t)x * y); break; /* fits */
    case BRAID_MIN: z = (uint32_t)(y < x ? y : x); break;
    case BRAID_MAX: z = (uint32_t)(y > x ? y : x); break;
    default: z = (uint32_t)((int64_t)x + y); break;
    }
    memcpy(r, &z, sizeof(z));
}

static void ref_i64(void *r, const void *pa, const void *pb, braid_op_t op)
{
    int64_t  x, y;
    uint64_t z;
    memcpy(&x, pa, sizeof(x));
    memcpy(&y, pb, sizeof(y));
    switch (op) {
    case BRAID_PROD: z = (uint64_t)x * (uint64_t)y; break;
    case BRAID_MIN: z = (uint64_t)(y < x ? y : x); break;
    case BRAID_MAX: z = (uint64_t)(y > x ? y : x); break;
    default: z = (uint64_t)x + (uint64_t)y; break;
    }
    memcpy(r, &z, sizeof(z));
}

static void ref_u8(void *r, const void *pa, const void *pb, braid_op_t op)
{
    unsigned x = *(const uint8_t *)pa, y = *(const uint8_t *)pb, z;
    switch (op) {
    case BRAID_PROD: z = x * y; break;
    case BRAID_MIN: z = y < x ? y : x; break;
    case BRAID_MAX: z = y > x ? y : x; break;
    default: z = x + y; break;
    }
    *(uint8_t *)r = (uint8_t)(z & 0xffu);
}

void braid_kernel_reduce2_ref(void *dst, const void *a, const void *b,
                              size_t count, braid_dtype_t dtype, braid_op_t op)
{
    static const size_t sizes[BRAID_DTYPE_COUNT] = {
        [BRAID_F32] = 4, [BRAID_F64] = 8, [BRAID_F16] = 2, [BRAID_BF16] = 2,
        [BRAID_I32] = 4, [BRAID_I64] = 8, [BRAID_U8] = 1,
    };
    unsigned char       *d  = dst;
    const unsigned char *pa = a, *pb = b;

    if (!valid(dtype, op))
        return;
    size_t size = sizes[dtype];
    for (size_t i = 0; i < count; i++) {
        /* Both inputs are read before dst is written: aliasing is fine. */
        void       *r = d + i * size;
        const void *x = pa + i * size, *y = pb + i * size;
        switch (dtype) {
        case BRAID_F32: ref_f32(r, x, y, op); break;
        case BRAID_F64: ref_f64(r, x, y, op); break;
        case BRAID_F16: ref_half(r, x, y, op, 0); break;
        case BRAID_BF16: ref_half(r, x, y, op, 1); break;
        case BRAID_I32: ref_i32(r, x, y, op); break;
        case BRAID_I64: ref_i64(r, x, y, op); break;
        case BRAID_U8: ref_u8(r, x, y, op); break;
        default: return;
        }
    }
}
