/* Small helpers of braid-train (see util.h). */
#include "util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static char last_error[1024];

braid_status_t braid_train_error(braid_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    return st;
}

const char *braid_train_last_error(void)
{
    return last_error;
}

braid_status_t braid_train_braid_error(braid_status_t st, const char *what)
{
    return braid_train_error(st, "%s: %s (%s)", what, braid_last_error(),
                             braid_status_str(st));
}

uint64_t braid_train_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t braid_train_rng_u64(braid_train_rng_t *r)
{
    r->s += 0x9e3779b97f4a7c15ull;
    return braid_train_mix64(r->s);
}

float braid_train_rng_uniform(braid_train_rng_t *r)
{
    return (float)(braid_train_rng_u64(r) >> 40) / 16777216.0f;
}

float braid_train_rng_normal(braid_train_rng_t *r)
{
    /* Box-Muller; 1 - u keeps the logarithm's argument in (0, 1]. */
    float u1 = 1.0f - braid_train_rng_uniform(r);
    float u2 = braid_train_rng_uniform(r);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853071795864f * u2);
}

double braid_train_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t braid_train_hash(const void *p, size_t n, uint64_t seed)
{
    /* Four independent lanes keep the multiplier latency out of the way;
     * every byte counts, so a single flipped bit changes the result. */
    const unsigned char *b = p;
    uint64_t h[4] = {seed ^ 0x243f6a8885a308d3ull, seed ^ 0x13198a2e03707344ull,
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
    uint64_t x = h[0] ^ braid_train_mix64(h[1]) ^
                 braid_train_mix64(h[2] + 1) ^ braid_train_mix64(h[3] + 2);
    for (; i < n; i++)
        x = (x ^ b[i]) * 0x100000001b3ull;
    return braid_train_mix64(x ^ n);
}
