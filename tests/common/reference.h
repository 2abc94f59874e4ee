/* Element access for every braid dtype, shared by braid-bench and the
 * multi-process tests.
 *
 * The checkers compute reference results themselves, so they need to read and
 * write each dtype without going through libbraid: a bug in the library's own
 * conversions must not hide a bug in its collectives.  Floating types are
 * handled as double, integer types as int64_t; the half-precision conversions
 * round to nearest even like the hardware does. */
#ifndef BRAID_BENCH_NUMERIC_H
#define BRAID_BENCH_NUMERIC_H

#include <stddef.h>
#include <stdint.h>

#include <braid/braid.h>

/* Bytes per element, from this file's own table; 0 for an invalid dtype. */
size_t nm_size(braid_dtype_t dtype);
/* Short name ("f32", ...), from this file's own table; "?" if invalid. */
const char *nm_name(braid_dtype_t dtype);
/* Parses a name as nm_name prints it; returns 0 on success. */
int nm_parse_dtype(const char *s, braid_dtype_t *dtype);
int nm_parse_op(const char *s, braid_op_t *op);
const char *nm_op_name(braid_op_t op);

/* 1 for f32/f64/f16/bf16. */
int nm_is_float(braid_dtype_t dtype);

float    nm_f16_to_f32(uint16_t h);
uint16_t nm_f32_to_f16(float f);
float    nm_bf16_to_f32(uint16_t h);
uint16_t nm_f32_to_bf16(float f);

/* Element i of buf.  load_f/store_f are for float dtypes, load_i/store_i for
 * integer dtypes; store_i truncates to the dtype's width (u8 wraps). */
double  nm_load_f(braid_dtype_t dtype, const void *buf, size_t i);
void    nm_store_f(braid_dtype_t dtype, void *buf, size_t i, double v);
int64_t nm_load_i(braid_dtype_t dtype, const void *buf, size_t i);
void    nm_store_i(braid_dtype_t dtype, void *buf, size_t i, int64_t v);

/* Value of one element rounded as the dtype would store it. */
double nm_round_f(braid_dtype_t dtype, double v);
int64_t nm_wrap_i(braid_dtype_t dtype, int64_t v);

/* 64-bit mixer (splitmix64 finaliser): cheap, deterministic random bits. */
static inline uint64_t nm_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* FNV-1a over len bytes, folded into h (start with NM_HASH_INIT). */
#define NM_HASH_INIT 0xcbf29ce484222325ull
uint64_t nm_hash(uint64_t h, const void *buf, size_t len);

#endif
