/* Logging and error messages of the core.
 *
 * One logger per component ("loader", "select", "bootstrap", ...), filtered by
 * BRAID_DEBUG=error|warn|info|debug|trace (default warn).  braid_error()
 * records the message that braid_last_error() returns and passes the status
 * through, so error paths read `return braid_error(BRAID_ERR_X, "...")`. */
#ifndef BRAID_CORE_LOG_H
#define BRAID_CORE_LOG_H

#include <braid/plugin.h>

#define BRAID_LOG(level, comp, ...)                                           \
    do {                                                                      \
        if ((int)(level) <= braid_log_level())                                \
            braid_log((level), (comp), __VA_ARGS__);                          \
    } while (0)

/* Messages about the whole job's configuration (BRAID_ALGO, BRAID_DEBUG, a
 * tuning file: every rank reads the same) are printed by one rank only, and
 * messages about this host's installation (a plugin rejected) by one rank
 * per host, so that a job of 64 ranks does not print them 64 times. */
#define BRAID_LOG_JOB(level, comp, ...)                                       \
    do {                                                                      \
        if ((int)(level) <= braid_log_level() && braid_log_speaks(0))         \
            braid_log((level), (comp), __VA_ARGS__);                          \
    } while (0)
#define BRAID_LOG_HOST(level, comp, ...)                                      \
    do {                                                                      \
        if ((int)(level) <= braid_log_level() && braid_log_speaks(1))         \
            braid_log((level), (comp), __VA_ARGS__);                          \
    } while (0)

/* 1 when this process speaks for the job (per_host 0: it is rank 0) or for
 * its host (per_host 1: its launcher's local rank is 0, or it is rank 0 when
 * the launcher gives no local rank).  Before braid_log_set_rank, the rank
 * comes from the launcher's variables; a process without any is rank 0. */
int braid_log_speaks(int per_host);

int  braid_log_level(void);
void braid_log(braid_log_level_t level, const char *component, const char *fmt,
               ...) __attribute__((format(printf, 3, 4)));
void braid_vlog(braid_log_level_t level, const char *component,
                const char *fmt, va_list ap);
braid_status_t braid_error(braid_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
braid_status_t braid_verror(braid_status_t status, const char *fmt,
                            va_list ap);
void           braid_error_clear(void);
/* The one way error messages quote user input: up to 60 columns of the
 * text around the fault at pos (from the start when the message names no
 * position: pos 0), "..." on each side where the text is cut, so that a long
 * input never hides the fault, and \xNN (4 columns) for each byte outside
 * printable ASCII, so that a terminal or log never sees a raw control byte.
 * One byte: braid_quote(v + i, 1, 0).  Returned by value, its array living
 * until the end of the full expression, for call sites such as
 *   braid_error(st, "%s='%s': ...", name, braid_quote(v, n, pos).s); */
typedef struct braid_quote {
    char s[3 + 60 + 3 + 1]; /* "..." window "..." NUL */
} braid_quote_t;
braid_quote_t braid_quote(const char *text, size_t text_len, size_t pos);
/* Prefix of every log line: "braid[rank]"; set once the rank is known. */
void braid_log_set_rank(int rank);

#endif
