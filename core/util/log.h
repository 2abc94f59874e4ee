/* Logging and error messages of the core.
 *
 * One logger per component ("loader", "select", "bootstrap", ...), filtered by
 * BRAID_DEBUG=error|warn|info|debug|trace (default warn).  braid_error()
 * records the message that braid_last_error() returns and passes the status
 * through, so error paths read `return braid_error(BRAID_ERR_X, "...")`. */
#ifndef BRAID_CORE_LOG_H
#define BRAID_CORE_LOG_H

#include <braid/plugin.h>

#define BRAID_LOG(level, comp, ...)                                    \
    do {                                                               \
        if ((int)(level) <= braid_log_level())                         \
            braid_log((level), (comp), __VA_ARGS__);                   \
    } while (0)

int  braid_log_level(void);
void braid_log(braid_log_level_t level, const char *component, const char *fmt,
               ...) __attribute__((format(printf, 3, 4)));
void braid_vlog(braid_log_level_t level, const char *component,
                const char *fmt, va_list ap);
braid_status_t braid_error(braid_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
braid_status_t braid_verror(braid_status_t status, const char *fmt, va_list ap);
void braid_error_clear(void);
/* Up to ~60 characters of text around pos, with "..." where cut and
 * non-printable bytes shown as '?', for error messages that quote user input
 * after having named the position (so a long input never hides it). */
const char *braid_excerpt(char *buf, size_t len, const char *text,
                          size_t text_len, size_t pos);
/* Prefix of every log line: "braid[rank]"; set once the rank is known. */
void braid_log_set_rank(int rank);

#endif
