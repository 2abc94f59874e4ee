/* SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
 * 2012): a keyed 64-bit MAC for short messages.  The bootstrap uses it to
 * prove knowledge of the 16-byte job key without sending the key. */
#ifndef BRAID_CORE_SIPHASH_H
#define BRAID_CORE_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-2-4 of data[0..len) under key (two little-endian 64-bit words). */
uint64_t braid_siphash24(const uint8_t key[16], const void *data, size_t len);

#endif
