/* Small helpers of braid-train: error messages, random numbers, clocks. */
#ifndef BRAID_TRAIN_UTIL_H
#define BRAID_TRAIN_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <braid/braid.h>

/* Records a message for the caller to print (braid_train_last_error) and
 * returns st.  The engine's own errors use braid's status codes. */
braid_status_t braid_train_error(braid_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const char *braid_train_last_error(void);
/* The message of a failed braid call, prefixed with what was being done. */
braid_status_t braid_train_braid_error(braid_status_t st, const char *what);

/* SplitMix64: a stateless mix for seeds and data offsets, and a stream. */
uint64_t braid_train_mix64(uint64_t x);
typedef struct { uint64_t s; } braid_train_rng_t;
uint64_t braid_train_rng_u64(braid_train_rng_t *r);
float    braid_train_rng_uniform(braid_train_rng_t *r); /* [0, 1) */
float    braid_train_rng_normal(braid_train_rng_t *r);  /* N(0, 1) */

double braid_train_now_s(void); /* monotonic */

/* 64-bit hash of n bytes (parameter fingerprints across ranks). */
uint64_t braid_train_hash(const void *p, size_t n, uint64_t seed);

#endif
