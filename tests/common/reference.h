/* The reference every checker of results uses: the tests (unit, mp, soak,
 * gpu) and braid-bench.  Element access for every braid dtype, and the
 * reductions themselves, written apart from libbraid -- one element at a
 * time, floats through double -- so that a bug in the library's kernels or
 * conversions cannot hide a bug in its collectives.
 *
 * Two ways to use it:
 *   - bitwise: ref_reduce2 is one step of a reduction as the library
 *     defines it (the result rounded to the dtype after every operation;
 *     f16/bf16 through f32; NaN rules of docs/architecture.md), so folding
 *     the ranks' inputs in some order with it gives exactly the bits of an
 *     algorithm that combines in that order (lowhop: rank order);
 *   - within a tolerance: ref_fold accumulates in double (integers wrap as
 *     the dtype does), for algorithms whose order differs per element
 *     (rings): ref_tolerance bounds how far a correctly rounded result of
 *     any order may be.
 * Floating types are handled as double, integer types as int64_t; the
 * half-precision conversions round to nearest even like the hardware does. */
#ifndef BRAID_TESTS_REFERENCE_H
#define BRAID_TESTS_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include <braid/braid.h>

/* Bytes per element, from this file's own table; 0 for an invalid dtype. */
size_t ref_size(braid_dtype_t dtype);
/* Short name ("f32", ...), from this file's own table; "?" if invalid. */
const char *ref_name(braid_dtype_t dtype);
/* Parses a name as ref_name prints it; returns 0 on success. */
int         ref_parse_dtype(const char *s, braid_dtype_t *dtype);
int         ref_parse_op(const char *s, braid_op_t *op);
const char *ref_op_name(braid_op_t op);

/* 1 for f32/f64/f16/bf16. */
int ref_is_float(braid_dtype_t dtype);

float    ref_f16_to_f32(uint16_t h);
uint16_t ref_f32_to_f16(float f);
float    ref_bf16_to_f32(uint16_t h);
uint16_t ref_f32_to_bf16(float f);

/* Element i of buf.  load_f/store_f are for float dtypes, load_i/store_i for
 * integer dtypes; store_i truncates to the dtype's width (u8 wraps). */
double  ref_load_f(braid_dtype_t dtype, const void *buf, size_t i);
void    ref_store_f(braid_dtype_t dtype, void *buf, size_t i, double v);
int64_t ref_load_i(braid_dtype_t dtype, const void *buf, size_t i);
void    ref_store_i(braid_dtype_t dtype, void *buf, size_t i, int64_t v);

/* Value of one element rounded as the dtype would store it. */
double  ref_round_f(braid_dtype_t dtype, double v);
int64_t ref_wrap_i(braid_dtype_t dtype, int64_t v);

/* 64-bit mixer (splitmix64 finaliser): cheap, deterministic random bits. */
static inline uint64_t ref_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* ----------------------------------------------------------- reductions */

/* dst[i] = a[i] op b[i] for i < count (dst may alias a or b), rounded to
 * the dtype: AVG adds (ref_finish_avg divides); integers wrap; sum, prod
 * and avg of a NaN give the canonical quiet NaN; min and max pick an input
 * (a NaN over a number, of two NaNs the larger bit pattern, +0 over -0 for
 * max and -0 for min) and copy its bits. */
void ref_reduce2(void *dst, const void *a, const void *b, size_t count,
                 braid_dtype_t dtype, braid_op_t op);
/* buf[i] /= n for BRAID_AVG (floats in the dtype's precision, f16/bf16
 * through f32; integers truncate toward zero); nothing for other ops. */
void ref_finish_avg(void *buf, size_t count, braid_dtype_t dtype,
                    braid_op_t op, int n);

/* One value, wide: floats as double, integers as int64_t. */
typedef struct ref_val {
    double  f;
    int64_t i;
} ref_val_t;

/* acc op v in wide arithmetic, unrounded (AVG adds; integer sum and
 * product wrap at 64 bits: ref_finish truncates to the dtype). */
ref_val_t ref_fold(braid_dtype_t dtype, braid_op_t op, ref_val_t acc,
                   ref_val_t v);
/* The end of a wide fold over n ranks: AVG's division, then the dtype's
 * rounding or wrap (integer AVG: the wrapped sum over n, toward zero). */
ref_val_t ref_finish(braid_dtype_t dtype, braid_op_t op, ref_val_t acc, int n);
/* The unit roundoff of a float dtype (2^-24 for f32), 0 for integers. */
double ref_unit_roundoff(braid_dtype_t dtype);
/* How far from the exact result a reduction over n ranks in any order may
 * land, for a result whose inputs' magnitudes sum to mag: each of the n-1
 * combining steps and the final division rounds once by at most a unit
 * roundoff of what it produced, so 2(n+1)u * mag bounds the error. */
double ref_tolerance(braid_dtype_t dtype, int n, double mag);

/* FNV-1a over len bytes, folded into h (start with REF_HASH_INIT). */
#define REF_HASH_INIT 0xcbf29ce484222325ull
uint64_t ref_hash(uint64_t h, const void *buf, size_t len);

/* ------------------------------------------- inputs and expected results */

/* Random bits of element idx of rank r's input (seed: the run's). */
uint64_t ref_bits(uint64_t seed, int r, size_t idx);
/* Input value of a reduction over n ranks, from random bits b.  Exact
 * inputs (inexact = 0) are small enough that every order of summation
 * gives the same float, so results compare bitwise; inexact float inputs
 * use every mantissa bit, so the result depends on the order of the
 * operations -- compared within a tolerance, and across ranks bitwise,
 * which every algorithm promises by combining in the same order on every
 * rank.  Products stay within range (beyond 8 ranks only +-1 when exact). */
ref_val_t ref_input(braid_dtype_t dt, braid_op_t op, int inexact, int n,
                    uint64_t b);
/* Expected element j of the reduction over n ranks of ref_input's values;
 * *tol receives the allowed absolute error, 0 where the result is exact. */
ref_val_t ref_expect(braid_dtype_t dt, braid_op_t op, int inexact,
                     uint64_t seed, int n, size_t j, double *tol);
/* Element i of got against exp (within tol for floats); on a mismatch,
 * both formatted into es and gs (len bytes each). */
int ref_value_ok(braid_dtype_t dt, const void *got, size_t i, ref_val_t exp,
                 double tol, char *es, char *gs, size_t len);

#endif
