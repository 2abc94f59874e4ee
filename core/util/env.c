/* Environment parsing with messages that point at the faulty character. */
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/env.h"
#include "util/log.h"

const char *braid_env_get(const char *name)
{
    const char *v = getenv(name);
    return (v == NULL || *v == '\0') ? NULL : v;
}

static braid_status_t unexpected(const char *name, const char *value,
                                 size_t pos, const char *expected)
{
    size_t n = strlen(value);
    return braid_error(
        BRAID_ERR_PARSE,
        "%s='%s': unexpected '%s' at position %zu (expected %s)", name,
        braid_quote(value, n, pos).s, braid_quote(value + pos, 1, 0).s, pos,
        expected);
}

static braid_status_t empty(const char *name, const char *expected)
{
    return braid_error(BRAID_ERR_PARSE, "%s='': empty value, expected %s",
                       name, expected);
}

/* Accumulates decimal digits from value[*pos] into *acc, stopping at the
 * first non-digit.  Fails (naming the digit) when *acc would pass limit. */
static braid_status_t scan_digits(const char *name, const char *value,
                                  size_t *pos, unsigned long long limit,
                                  unsigned long long *acc, size_t *ndigits)
{
    *acc     = 0;
    *ndigits = 0;
    for (size_t i = *pos; value[i] >= '0' && value[i] <= '9'; i++) {
        unsigned d = (unsigned)(value[i] - '0');
        if (*acc > (limit - d) / 10)
            return braid_error(
                BRAID_ERR_PARSE, "%s='%s': number too large at position %zu",
                name, braid_quote(value, strlen(value), i).s, i);
        *acc = *acc * 10 + d;
        (*ndigits)++;
        *pos = i + 1;
    }
    return BRAID_OK;
}

braid_status_t braid_parse_int(const char *name, const char *value,
                               long long min, long long max, long long *out)
{
    if (value == NULL || *value == '\0')
        return empty(name, "an integer");
    size_t pos = 0;
    int    neg = 0;
    if (value[0] == '-' && min < 0) {
        neg = 1;
        pos = 1;
    }
    /* |LLONG_MIN| is one more than LLONG_MAX. */
    unsigned long long limit = (unsigned long long)LLONG_MAX + (neg ? 1 : 0);
    unsigned long long acc;
    size_t             nd;
    braid_status_t     st = scan_digits(name, value, &pos, limit, &acc, &nd);
    if (st != BRAID_OK)
        return st;
    if (nd == 0 || value[pos] != '\0')
        return unexpected(name, value, pos, "a decimal digit");

    long long v;
    if (neg)
        v = acc == (unsigned long long)LLONG_MAX + 1ull ? LLONG_MIN
                                                        : -(long long)acc;
    else
        v = (long long)acc;
    if (v < min || v > max)
        return braid_error(BRAID_ERR_PARSE,
                           "%s='%s': %lld (at position 0) is out of range "
                           "[%lld, %lld]",
                           name, braid_quote(value, strlen(value), 0).s, v,
                           min, max);
    *out = v;
    return BRAID_OK;
}

braid_status_t braid_size_scan(const char *text, size_t len, size_t *pos,
                               size_t *out, const char **fault)
{
    size_t i = *pos, v = 0;
    for (; i < len && text[i] >= '0' && text[i] <= '9'; i++) {
        size_t d = (size_t)(text[i] - '0');
        if (v > (SIZE_MAX - d) / 10) {
            *pos   = i;
            *fault = "too large";
            return BRAID_ERR_PARSE;
        }
        v = v * 10 + d;
    }
    if (i == *pos) {
        *fault = "a decimal digit";
        return BRAID_ERR_PARSE;
    }
    unsigned shift = 0;
    size_t   unit  = i;
    if (i < len) {
        switch (text[i]) {
        case 'k':
        case 'K': shift = 10; break;
        case 'm':
        case 'M': shift = 20; break;
        case 'g':
        case 'G': shift = 30; break;
        case 't':
        case 'T': shift = 40; break;
        default: break;
        }
    }
    if (shift != 0 && ++i < len && text[i] == 'i')
        i++;
    if (i < len && (text[i] == 'b' || text[i] == 'B'))
        i++;
    if (shift != 0 && v > (SIZE_MAX >> shift)) {
        *pos   = unit;
        *fault = "too large";
        return BRAID_ERR_PARSE;
    }
    *out = v << shift;
    *pos = i;
    return BRAID_OK;
}

braid_status_t braid_parse_size(const char *name, const char *value,
                                size_t min, size_t max, size_t *out)
{
    if (value == NULL || *value == '\0')
        return empty(name, "a size");
    size_t      pos = 0, v;
    const char *fault;
    if (braid_size_scan(value, strlen(value), &pos, &v, &fault) != BRAID_OK) {
        if (strcmp(fault, "too large") == 0)
            return braid_error(BRAID_ERR_PARSE,
                               "%s='%s': size too large at position %zu", name,
                               braid_quote(value, strlen(value), pos).s, pos);
        return unexpected(name, value, pos, fault);
    }
    if (value[pos] != '\0')
        return unexpected(name, value, pos,
                          "a digit, a unit (K, M, G, T) or the end of the "
                          "value");
    if (v < min || v > max)
        return braid_error(BRAID_ERR_PARSE,
                           "%s='%s': %zu bytes (at position 0) is out of "
                           "range [%zu, %zu]",
                           name, braid_quote(value, strlen(value), 0).s, v,
                           min, max);
    *out = v;
    return BRAID_OK;
}

/* Numbers are always written with '.', whatever LC_NUMERIC the application
 * set, so the conversion uses the C locale explicitly. */
static locale_t       c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void           c_locale_init(void)
{
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

braid_status_t braid_parse_double(const char *name, const char *value,
                                  double min, double max, double *out)
{
    if (value == NULL || *value == '\0')
        return empty(name, "a number");
    /* Our own syntax check first: strtod also takes hex, inf, nan and
     * leading blanks, none of which belongs in a setting. */
    size_t pos = 0, ndig = 0;
    if (value[pos] == '-' || value[pos] == '+')
        pos++;
    while (value[pos] >= '0' && value[pos] <= '9') {
        pos++;
        ndig++;
    }
    if (value[pos] == '.') {
        pos++;
        while (value[pos] >= '0' && value[pos] <= '9') {
            pos++;
            ndig++;
        }
    }
    if (ndig == 0)
        return unexpected(name, value, pos, "a decimal digit");
    if (value[pos] == 'e' || value[pos] == 'E') {
        pos++;
        if (value[pos] == '-' || value[pos] == '+')
            pos++;
        if (!(value[pos] >= '0' && value[pos] <= '9'))
            return unexpected(name, value, pos, "an exponent digit");
        while (value[pos] >= '0' && value[pos] <= '9')
            pos++;
    }
    if (value[pos] != '\0')
        return unexpected(name, value, pos, "a digit, '.' or an exponent");

    pthread_once(&c_locale_once, c_locale_init);
    double v = c_locale != (locale_t)0 ? strtod_l(value, NULL, c_locale)
                                       : strtod(value, NULL);
    if (!isfinite(v))
        return braid_error(BRAID_ERR_PARSE, "%s='%s': number too large", name,
                           braid_quote(value, strlen(value), 0).s);
    if (v < min || v > max)
        return braid_error(BRAID_ERR_PARSE,
                           "%s='%s': %g (at position 0) is out of range "
                           "[%g, %g]",
                           name, braid_quote(value, strlen(value), 0).s, v,
                           min, max);
    *out = v;
    return BRAID_OK;
}

braid_status_t braid_env_int(const char *name, long long dflt, long long min,
                             long long max, long long *out)
{
    const char *v = braid_env_get(name);
    if (v == NULL) {
        *out = dflt;
        return BRAID_OK;
    }
    return braid_parse_int(name, v, min, max, out);
}

braid_status_t braid_env_size(const char *name, size_t dflt, size_t min,
                              size_t max, size_t *out)
{
    const char *v = braid_env_get(name);
    if (v == NULL) {
        *out = dflt;
        return BRAID_OK;
    }
    return braid_parse_size(name, v, min, max, out);
}

braid_status_t braid_env_double(const char *name, double dflt, double min,
                                double max, double *out)
{
    const char *v = braid_env_get(name);
    if (v == NULL) {
        *out = dflt;
        return BRAID_OK;
    }
    return braid_parse_double(name, v, min, max, out);
}

/* ---------------------------------------------------------------- timeout */

/* One year: far beyond any sane wait; an upper bound keeps deadline
 * arithmetic finite. */
#define TIMEOUT_MAX_S (365.0 * 86400.0)

static pthread_mutex_t timeout_lock = PTHREAD_MUTEX_INITIALIZER;
static int             timeout_cached;
static braid_status_t  timeout_status;
static double          timeout_value = BRAID_TIMEOUT_DEFAULT_S;
static char            timeout_msg[256];
static int             timeout_warned;

braid_status_t braid_env_timeout(double *seconds)
{
    pthread_mutex_lock(&timeout_lock);
    if (!timeout_cached) {
        double v       = BRAID_TIMEOUT_DEFAULT_S;
        timeout_status = braid_env_double(
            "BRAID_TIMEOUT", BRAID_TIMEOUT_DEFAULT_S, 0.0, TIMEOUT_MAX_S, &v);
        if (timeout_status == BRAID_OK && v <= 0.0) {
            const char   *text = getenv("BRAID_TIMEOUT");
            braid_quote_t q    = braid_quote(text, strlen(text), 0);
            timeout_status =
                braid_error(BRAID_ERR_PARSE,
                            "BRAID_TIMEOUT='%s': value at position 0 must be "
                            "> 0 seconds",
                            q.s);
        }
        if (timeout_status == BRAID_OK) {
            timeout_value = v;
        } else {
            timeout_value = BRAID_TIMEOUT_DEFAULT_S;
            snprintf(timeout_msg, sizeof(timeout_msg), "%s",
                     braid_last_error());
        }
        timeout_cached = 1;
    }
    braid_status_t st = timeout_status;
    double         v  = timeout_value;
    if (st != BRAID_OK)
        braid_error(st, "%s", timeout_msg); /* per-thread last error */
    pthread_mutex_unlock(&timeout_lock);
    *seconds = v;
    return st;
}

static _Thread_local double timeout_cap;

void braid_timeout_cap(double s) { timeout_cap = s > 0 ? s : 0; }

double braid_timeout_s(void)
{
    double         s;
    braid_status_t st = braid_env_timeout(&s);
    if (timeout_cap > 0 && timeout_cap < s)
        s = timeout_cap;
    if (st != BRAID_OK) {
        pthread_mutex_lock(&timeout_lock);
        int warn       = !timeout_warned;
        timeout_warned = 1;
        pthread_mutex_unlock(&timeout_lock);
        if (warn)
            BRAID_LOG_JOB(BRAID_LOG_WARN, "env", "%s; using %g s", timeout_msg,
                          BRAID_TIMEOUT_DEFAULT_S);
    }
    return s;
}

void braid_env_timeout_reset(void)
{
    pthread_mutex_lock(&timeout_lock);
    timeout_cached = 0;
    timeout_warned = 0;
    timeout_value  = BRAID_TIMEOUT_DEFAULT_S;
    pthread_mutex_unlock(&timeout_lock);
}

double braid_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
