#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"

static int                log_level = -1;
static int                log_rank  = -1;
static pthread_once_t     log_once  = PTHREAD_ONCE_INIT;
static _Thread_local char last_error[1024];

static const char *level_names[] = {"error", "warn", "info", "debug", "trace"};

/* The first of these variables that holds a number, or -1. */
static int env_number(const char *const *names)
{
    for (int i = 0; names[i] != NULL; i++) {
        const char *v = getenv(names[i]);
        char       *end;
        if (v == NULL || *v == '\0')
            continue;
        long n = strtol(v, &end, 10);
        if (*end == '\0' && n >= 0 && n < (1 << 24))
            return (int)n;
    }
    return -1;
}

int braid_log_speaks(int per_host)
{
    static const char *const global[] = {"BRAID_RANK", "OMPI_COMM_WORLD_RANK",
                                         "SLURM_PROCID", "RANK", NULL};
    static const char *const local[]  = {
         "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", NULL};
    if (per_host) {
        int l = env_number(local);
        if (l >= 0)
            return l == 0;
    }
    int r = log_rank >= 0 ? log_rank : env_number(global);
    return r <= 0;
}

/* A malformed BRAID_DEBUG must not be silent, but the logger cannot fail
 * init either: it says so on stderr and keeps the default. */
static void log_init(void)
{
    const char *s = getenv("BRAID_DEBUG");
    log_level     = BRAID_LOG_WARN;
    if (s == NULL || *s == '\0')
        return;
    for (int i = 0; i <= BRAID_LOG_TRACE; i++) {
        if (strcasecmp(s, level_names[i]) == 0) {
            log_level = i;
            return;
        }
    }
    if (braid_log_speaks(0))
        fprintf(stderr,
                "braid: BRAID_DEBUG='%s' at position 0: expected one "
                "of error, warn, info, debug, trace; using warn\n",
                s);
}

int braid_log_level(void)
{
    pthread_once(&log_once, log_init);
    return log_level;
}

void braid_log_set_rank(int rank) { log_rank = rank; }

void braid_vlog(braid_log_level_t level, const char *component,
                const char *fmt, va_list ap)
{
    if ((int)level > braid_log_level())
        return;
    char line[1024];
    int  n;
    if (log_rank >= 0)
        n = snprintf(line, sizeof(line), "braid[%d] %s %s: ", log_rank,
                     level_names[level], component);
    else
        n = snprintf(line, sizeof(line), "braid %s %s: ", level_names[level],
                     component);
    if (n < 0 || (size_t)n >= sizeof(line))
        n = 0;
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    /* One write per line so that lines of concurrent ranks do not mix. */
    fprintf(stderr, "%s\n", line);
}

void braid_log(braid_log_level_t level, const char *component, const char *fmt,
               ...)
{
    va_list ap;
    va_start(ap, fmt);
    braid_vlog(level, component, fmt, ap);
    va_end(ap);
}

braid_status_t braid_verror(braid_status_t status, const char *fmt, va_list ap)
{
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    BRAID_LOG(BRAID_LOG_DEBUG, "error", "%s: %s", braid_status_str(status),
              last_error);
    return status;
}

braid_status_t braid_error(braid_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    braid_verror(status, fmt, ap);
    va_end(ap);
    return status;
}

#define QUOTE_COLS 60
_Static_assert(sizeof(((braid_quote_t *)0)->s) == 3 + QUOTE_COLS + 3 + 1,
               "braid_quote_t holds \"...\", the window, \"...\" and a NUL");

/* Columns one byte takes in a quote. */
static size_t quote_cols(unsigned char c)
{
    return c >= 0x20 && c < 0x7f ? 1 : 4;
}

braid_quote_t braid_quote(const char *text, size_t text_len, size_t pos)
{
    braid_quote_t q = {{0}};
    if (text == NULL)
        text_len = 0;
    if (pos > text_len)
        pos = text_len;
    /* Half the width before the fault, the rest from it on; a side that
     * runs out of text leaves its columns to the other. */
    size_t from = pos, to = pos, left = 0, used;
    while (from > 0 &&
           left + quote_cols((unsigned char)text[from - 1]) <= QUOTE_COLS / 2)
        left += quote_cols((unsigned char)text[--from]);
    used = left;
    while (to < text_len &&
           used + quote_cols((unsigned char)text[to]) <= QUOTE_COLS)
        used += quote_cols((unsigned char)text[to++]);
    while (from > 0 &&
           used + quote_cols((unsigned char)text[from - 1]) <= QUOTE_COLS)
        used += quote_cols((unsigned char)text[--from]);

    static const char hex[] = "0123456789abcdef";
    size_t            o     = 0;
    if (from > 0)
        for (int k = 0; k < 3; k++)
            q.s[o++] = '.';
    for (size_t i = from; i < to; i++) {
        unsigned char c = (unsigned char)text[i];
        if (quote_cols(c) == 1) {
            q.s[o++] = (char)c;
            continue;
        }
        q.s[o++] = '\\';
        q.s[o++] = 'x';
        q.s[o++] = hex[c >> 4];
        q.s[o++] = hex[c & 15];
    }
    if (to < text_len)
        for (int k = 0; k < 3; k++)
            q.s[o++] = '.';
    q.s[o] = '\0';
    return q;
}

void braid_error_clear(void) { last_error[0] = '\0'; }

__attribute__((visibility("default"))) const char *braid_last_error(void)
{
    return last_error;
}

__attribute__((visibility("default"))) const char *
braid_status_str(braid_status_t status)
{
    switch (status) {
    case BRAID_OK: return "ok";
    case BRAID_INPROGRESS: return "in progress";
    case BRAID_ERR_INVALID_ARG: return "invalid argument";
    case BRAID_ERR_NO_MEMORY: return "out of memory";
    case BRAID_ERR_NOT_SUPPORTED: return "not supported";
    case BRAID_ERR_NOT_FOUND: return "not found";
    case BRAID_ERR_UNAVAILABLE: return "unavailable";
    case BRAID_ERR_ABI: return "plugin ABI mismatch";
    case BRAID_ERR_PARSE: return "parse error";
    case BRAID_ERR_IO: return "I/O error";
    case BRAID_ERR_TIMEOUT: return "timeout";
    case BRAID_ERR_PEER: return "peer lost";
    case BRAID_ERR_AUTH: return "authentication failed";
    case BRAID_ERR_MISMATCH: return "mismatch between ranks";
    case BRAID_ERR_STATE: return "invalid state";
    case BRAID_ERR_TRANSPORT: return "transport error";
    case BRAID_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}
