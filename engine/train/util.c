/* Helpers of braid-train (see util.h). */
#include "util.h"

#include <math.h>
#include <string.h>

float braid_train_normal(braid_eng_rng_t *rng)
{
    /* 1 - u keeps the logarithm's argument in (0, 1] */
    float u1 = 1.0f - braid_eng_rng_next(rng);
    float u2 = braid_eng_rng_next(rng);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853071795864f * u2);
}

uint64_t braid_train_hash(const void *p, size_t n, uint64_t seed)
{
    /* Four independent lanes keep the multiplier's latency out of the way:
     * this runs over every parameter and both optimizer moments. */
    const unsigned char *b    = p;
    uint64_t             h[4] = {
                    seed ^ 0x243f6a8885a308d3ull, seed ^ 0x13198a2e03707344ull,
                    seed ^ 0xa4093822299f31d0ull, seed ^ 0x082efa98ec4e6c89ull};
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int l = 0; l < 4; l++) {
            uint64_t w;
            memcpy(&w, b + i + 8 * l, 8);
            h[l] = (h[l] ^ w) * 0x9fb21c651e98df25ull;
            h[l] ^= h[l] >> 29;
        }
    }
    uint64_t x = h[0] ^ braid_eng_mix64(h[1]) ^ braid_eng_mix64(h[2] + 1) ^
                 braid_eng_mix64(h[3] + 2);
    for (; i < n; i++)
        x = (x ^ b[i]) * 0x100000001b3ull;
    return braid_eng_mix64(x ^ n);
}
