/* Small services of the engines: clocks, memory figures, number and list
 * parsing with error positions, a deterministic random generator, whole
 * files, paths. */
#ifndef BRAID_ENG_UTIL_H
#define BRAID_ENG_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <braid/braid.h>

/* Seconds on a monotonic clock (differences only). */
double braid_eng_now(void);

/* Resident set size of this process now and at its peak (VmRSS, VmHWM
 * from /proc/self/status), in bytes; 0 where unknown. */
void braid_eng_rss(uint64_t *rss, uint64_t *peak);

/* Whole-string integer in [lo, hi] (decimal, optional K/M/G suffix = 2^10,
 * 2^20, 2^30 when suffixes is set).  On failure the message names `what`
 * and the offending text. */
braid_status_t braid_eng_parse_int(int64_t *out, const char *s, int64_t lo,
                                   int64_t hi, int suffixes, const char *what);
/* Whole-string finite number in [lo, hi]. */
braid_status_t braid_eng_parse_double(double *out, const char *s, double lo,
                                      double hi, const char *what);
/* Comma-separated integers in [0, hi] ("1,2,3"); *ids is malloc'ed, the
 * caller frees it.  An error names the position (1-based character). */
braid_status_t braid_eng_parse_ids(int32_t **ids, size_t *n, const char *s,
                                   int64_t hi, const char *what);

/* splitmix64: a deterministic generator whose every output is a pure
 * function of (seed, counter), so that any rank can produce any part of a
 * generated tensor without producing the rest. */
static inline uint64_t braid_eng_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
/* Uniform in [0, 1) from 24 random bits of mix64(key): exact in f32. */
static inline float braid_eng_uniform(uint64_t key)
{
    return (float)(braid_eng_mix64(key) >> 40) * 0x1p-24f;
}
/* FNV-1a of a string, to derive per-tensor keys from names. */
uint64_t braid_eng_hash_str(const char *s);

typedef struct {
    uint64_t state;
} braid_eng_rng_t;
/* Next uniform in [0, 1) of a sequential generator seeded with its state. */
static inline float braid_eng_rng_next(braid_eng_rng_t *rng)
{
    return braid_eng_uniform(rng->state++);
}

/* Reads a whole file into a malloc'ed buffer with a NUL after the last
 * byte (*len excludes it).  Errors name the path. */
braid_status_t braid_eng_read_file(char **data, size_t *len, const char *path);
/* Writes len bytes to path through path.tmp and a rename, so that readers
 * see the old file or the whole new one. */
braid_status_t braid_eng_write_file(const char *path, const void *data,
                                    size_t len);
/* dir + "/" + name into out[cap]; BRAID_ERR_INVALID_ARG if it does not fit. */
braid_status_t braid_eng_path_join(char *out, size_t cap, const char *dir,
                                   const char *name);
/* 1 if path is an existing directory. */
int braid_eng_is_dir(const char *path);

#endif
