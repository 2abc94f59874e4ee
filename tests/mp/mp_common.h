/* Helpers shared by the multi-process test programs (tests/mp). */
#ifndef BRAID_TESTS_MP_COMMON_H
#define BRAID_TESTS_MP_COMMON_H

#include <stddef.h>

#include <braid/braid.h>

/* Prints "<prog> rank R: FATAL ..." with braid_last_error() and exits 1.
 * Used when a call fails: the ranks may now disagree on what comes next, so
 * carrying on would only turn one clear error into a hang. */
void mp_fatal(const char *prog, int rank, braid_status_t st, const char *fmt,
              ...) __attribute__((format(printf, 4, 5), noreturn));

/* Seconds on a monotonic clock. */
double mp_now(void);

/* Arms a watchdog: after `seconds` the process prints `*what` (the step it
 * is in, kept current by the caller) and exits 1, so that a hang names the
 * step instead of dying silently under meson's timeout.  0 disarms. */
void mp_watchdog(const char *prog, unsigned seconds, const char *const *what);
/* Names the process in the watchdog's message ("test_colls rank 3") once
 * the rank is known; the string must stay valid. */
void mp_watchdog_name(const char *name);

/* Builds the BRAID_ALGO value that forces `cand` on every collective in
 * `colls` (a comma-separated list such as "allreduce,allgather"), into out.
 * Returns 0 on success, -1 on an unknown collective name or overflow. */
int mp_algo_string(const char *cand, const char *colls, char *out,
                   size_t out_len);

/* Collective by name ("allreduce", ...); -1 if unknown. */
int mp_parse_coll(const char *name);

/* Reads what was written to fd since offset 0 into buf (at most len-1
 * bytes, NUL-terminated): a log captured in a file. */
void mp_slurp(int fd, char *buf, size_t len);

#endif
