/* Environment helpers of the core.
 *
 * Every parser names the variable, quotes the value and points at the
 * character that is wrong, e.g. "BRAID_RANK='1x': unexpected 'x' at position
 * 1", and returns BRAID_ERR_PARSE (recorded for braid_last_error); the
 * value is quoted with braid_quote (util/log.h) around that position.  The
 * braid_parse_* functions take the text directly (name is only used in
 * messages); the braid_env_* functions read the variable and use dflt when it
 * is unset or empty. */
#ifndef BRAID_CORE_ENV_H
#define BRAID_CORE_ENV_H

#include <stddef.h>

#include <braid/braid.h>

/* Value of name, or NULL when unset or empty. */
const char *braid_env_get(const char *name);

/* Decimal integer in [min, max]; a leading '-' only when min < 0. */
braid_status_t braid_parse_int(const char *name, const char *value,
                               long long min, long long max, long long *out);
/* The size grammar every parser shares (environment variables, BRAID_ALGO,
 * tuning files): decimal digits, then optionally a binary unit K, M, G or T
 * (any case) with an 'i' after it, and a final 'B'.  Scans text[*pos, len):
 * BRAID_OK with *out and *pos just past the size; else BRAID_ERR_PARSE,
 * *pos at the fault and *fault "a decimal digit" (none at *pos) or "too
 * large" (past SIZE_MAX), and no message set: the caller words it. */
braid_status_t braid_size_scan(const char *text, size_t len, size_t *pos,
                               size_t *out, const char **fault);
/* Byte count in the size grammar above, the whole value, in [min, max]. */
braid_status_t braid_parse_size(const char *name, const char *value,
                                size_t min, size_t max, size_t *out);
/* Finite decimal floating point number in [min, max]. */
braid_status_t braid_parse_double(const char *name, const char *value,
                                  double min, double max, double *out);

braid_status_t braid_env_int(const char *name, long long dflt, long long min,
                             long long max, long long *out);
braid_status_t braid_env_size(const char *name, size_t dflt, size_t min,
                              size_t max, size_t *out);
braid_status_t braid_env_double(const char *name, double dflt, double min,
                                double max, double *out);

#define BRAID_TIMEOUT_DEFAULT_S 60.0

/* BRAID_TIMEOUT: seconds a single wait may last (float > 0, default 60).
 * Read once and cached, including a parse error, which is returned again on
 * every call. */
braid_status_t braid_env_timeout(double *seconds);
/* The cached BRAID_TIMEOUT; the default (with one warning) if malformed.
 * At most the calling thread's cap, while one is set. */
double braid_timeout_s(void);
/* Caps braid_timeout_s() on the calling thread at s seconds (0: no cap):
 * the core bounds the waits of a failed communicator's teardown with it,
 * including those plugins bound with their services' timeout_s(). */
void braid_timeout_cap(double s);
/* Forget the cached value so that the next call reads BRAID_TIMEOUT again.
 * For tests that change the variable inside one process. */
void braid_env_timeout_reset(void);

/* Monotonic clock in seconds. */
double braid_now_s(void);

#endif
