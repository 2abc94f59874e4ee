/* Per-thread error message of the engines (see err.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine/common/err.h"

#define ERR_LEN 1024

static _Thread_local char err_msg[ERR_LEN];

braid_status_t braid_eng_fail(braid_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof(err_msg), fmt, ap);
    va_end(ap);
    return st;
}

braid_status_t braid_eng_fail_braid(braid_status_t st, const char *what)
{
    return braid_eng_fail(st, "%s: %s (%s)", what, braid_last_error(),
                          braid_status_str(st));
}

braid_status_t braid_eng_wrap(braid_status_t st, const char *fmt, ...)
{
    char    both[2 * ERR_LEN + 2];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(both, ERR_LEN, fmt, ap);
    va_end(ap);
    size_t k   = n < 0 ? 0 : (size_t)n < ERR_LEN ? (size_t)n : ERR_LEN - 1;
    both[k++]  = ':';
    both[k++]  = ' ';
    size_t old = strnlen(err_msg, ERR_LEN - 1);
    memcpy(both + k, err_msg, old);
    k += old;
    if (k > ERR_LEN - 1)
        k = ERR_LEN - 1;
    memcpy(err_msg, both, k);
    err_msg[k] = '\0';
    return st;
}

const char *braid_eng_error(void) { return err_msg; }
