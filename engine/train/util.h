/* Helpers of braid-train beyond engine/common's: a stream of normal
 * numbers for the initialisation, and fingerprints of parameter arrays. */
#ifndef BRAID_TRAIN_UTIL_H
#define BRAID_TRAIN_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/common/util.h"

/* N(0, 1) from engine/common's sequential generator (Box-Muller). */
float braid_train_normal(braid_eng_rng_t *rng);

/* 64-bit fingerprint of n bytes: every bit counts, so ranks whose arrays
 * differ anywhere get different values (with overwhelming probability). */
uint64_t braid_train_hash(const void *p, size_t n, uint64_t seed);

#endif
