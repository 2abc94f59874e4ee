/* BRAID_ROCE_* environment variables.  A malformed value is an error that
 * points at the faulty character, never silently replaced by a default.
 * Parsing is done by hand rather than with strtod: strtod follows the
 * process locale (a "2,5" world), and every rank must read the same value. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "tl_roce.h"

/* One variable being parsed, and where its error message goes: to why (the
 * probe's reason) and to svc->error (the caller's braid_last_error). */
typedef struct env_var {
    const braid_services_t *svc;
    char                   *why;
    size_t                  why_len;
    const char             *name;
    const char             *value; /* NULL when unset or empty */
} env_var_t;

static env_var_t env_var(const braid_services_t *svc, const char *name,
                         char *why, size_t why_len)
{
    const char *v = getenv(name);
    env_var_t   e = {svc, why, why_len, name, v != NULL && *v ? v : NULL};
    return e;
}

__attribute__((format(printf, 2, 3))) static braid_status_t
parse_error(const env_var_t *e, const char *fmt, ...)
{
    char    msg[192];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(e->why, e->why_len, "%s='%s': %s", e->name, e->value, msg);
    return e->svc->error(BRAID_ERR_PARSE, "%s", e->why);
}

static braid_status_t bad_char(const env_var_t *e, size_t pos,
                               const char *expected)
{
    unsigned char c = (unsigned char)e->value[pos];

    if (c == '\0')
        return parse_error(e, "value ends at position %zu (expected %s)", pos,
                           expected);
    if (c < 0x20 || c >= 0x7f)
        return parse_error(e,
                           "unexpected '\\x%02x' at position %zu "
                           "(expected %s)",
                           c, pos, expected);
    return parse_error(e, "unexpected '%c' at position %zu (expected %s)", c,
                       pos, expected);
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Decimal digits from value[*pos]: at least one, at most limit. */
static braid_status_t parse_uint(const env_var_t *e, size_t *pos,
                                 unsigned long limit, unsigned long *out)
{
    size_t        i = *pos;
    unsigned long v = 0;

    if (!is_digit(e->value[i]))
        return bad_char(e, i, "a decimal digit");
    for (; is_digit(e->value[i]); i++) {
        v = v * 10 + (unsigned long)(e->value[i] - '0');
        if (v > limit)
            return parse_error(e,
                               "number too large at position %zu (at most "
                               "%lu)",
                               i, limit);
    }
    *pos = i;
    *out = v;
    return BRAID_OK;
}

/* A positive decimal such as "3", "2.5" or "0.75" (no sign, no exponent);
 * *out keeps its default when the variable is unset. */
static braid_status_t parse_positive(const env_var_t *e, double max,
                                     double *out)
{
    static const char *expected = "a positive decimal number such as 2.5";
    double             v = 0.0, scale = 1.0;
    size_t             i = 0, digits = 0;

    if (e->value == NULL)
        return BRAID_OK;
    for (; is_digit(e->value[i]); i++, digits++)
        v = v * 10.0 + (double)(e->value[i] - '0');
    if (e->value[i] == '.')
        for (i++; is_digit(e->value[i]); i++, digits++)
            v += (double)(e->value[i] - '0') * (scale *= 0.1);
    if (digits == 0 || e->value[i] != '\0')
        return bad_char(e, i, expected);
    if (!(v > 0.0) || v > max)
        return parse_error(e, "%g (at position 0) is out of range (0, %g]", v,
                           max);
    *out = v;
    return BRAID_OK;
}

braid_status_t braid_roce_env_link(const braid_services_t *svc,
                                   braid_link_t *link, char *why,
                                   size_t why_len)
{
    env_var_t      alpha = env_var(svc, "BRAID_ROCE_ALPHA_US", why, why_len);
    env_var_t      gbps  = env_var(svc, "BRAID_ROCE_GBPS", why, why_len);
    braid_status_t st;

    link->alpha_us  = BRAID_ROCE_DEFAULT_ALPHA_US;
    link->beta_gbps = BRAID_ROCE_DEFAULT_GBPS;
    st              = parse_positive(&alpha, 1e6, &link->alpha_us);
    if (st == BRAID_OK)
        st = parse_positive(&gbps, 1e6, &link->beta_gbps);
    /* The transport is one-sided only: its put path is the link. */
    link->put_alpha_us  = link->alpha_us;
    link->put_beta_gbps = link->beta_gbps;
    return st;
}

/* BRAID_ROCE_MAX_WRITE=N[k|m|g]: bytes per RDMA WRITE (0 when unset).
 * Smaller writes interleave the puts of one QP more finely; the tests use
 * it to cover puts that take more writes than one batch holds. */
braid_status_t braid_roce_env_max_write(const braid_services_t *svc,
                                        size_t *bytes, char *why,
                                        size_t why_len)
{
    env_var_t      e = env_var(svc, "BRAID_ROCE_MAX_WRITE", why, why_len);
    size_t         i = 0;
    unsigned long  v = 0, shift = 0;
    braid_status_t st;

    *bytes = 0;
    if (e.value == NULL)
        return BRAID_OK;
    if ((st = parse_uint(&e, &i, 1ul << 30, &v)) != BRAID_OK)
        return st;
    switch (e.value[i]) {
    case 'k':
    case 'K':
        shift = 10;
        i++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        i++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        i++;
        break;
    default: break;
    }
    if (e.value[i] != '\0')
        return bad_char(&e, i, "a size such as 4096, 64k or 1m");
    if (v == 0 || v > (1ul << 30) >> shift)
        return parse_error(&e, "size at position 0 is out of range "
                               "[1, 1g]");
    *bytes = (size_t)v << shift;
    return BRAID_OK;
}

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) ||
           c == '_' || c == '-' || c == '.';
}

/* BRAID_ROCE_DEV=NAME or NAME:PORT ("mlx5_0", "rxe0:1").  *port = 0: the
 * first active port. */
braid_status_t braid_roce_env_dev(const braid_services_t *svc, char *name,
                                  size_t name_len, int *port, char *why,
                                  size_t why_len)
{
    env_var_t      e = env_var(svc, "BRAID_ROCE_DEV", why, why_len);
    size_t         i = 0;
    unsigned long  p = 0;
    braid_status_t st;

    name[0] = '\0';
    *port   = 0;
    if (e.value == NULL)
        return BRAID_OK;
    for (; e.value[i] != '\0' && e.value[i] != ':'; i++) {
        if (!is_name_char(e.value[i]))
            return bad_char(&e, i,
                            "a device name such as mlx5_0, then "
                            "optionally :PORT");
        if (i + 1 >= name_len)
            return parse_error(&e,
                               "device name too long at position %zu "
                               "(at most %zu characters)",
                               i, name_len - 1);
        name[i] = e.value[i];
    }
    name[i] = '\0';
    if (i == 0)
        return bad_char(&e, 0, "a device name such as mlx5_0");
    if (e.value[i] == ':') {
        size_t at = ++i;
        if ((st = parse_uint(&e, &i, 255, &p)) != BRAID_OK)
            return st;
        if (e.value[i] != '\0')
            return bad_char(&e, i, "the end of the value after the port");
        if (p == 0)
            return parse_error(&e,
                               "port 0 at position %zu (ports are "
                               "numbered from 1)",
                               at);
        *port = (int)p;
    }
    return BRAID_OK;
}

/* BRAID_ROCE_GID_INDEX=N: GID table entry N instead of the one we pick.
 * *index = -1 when unset. */
braid_status_t braid_roce_env_gid_index(const braid_services_t *svc,
                                        int *index, char *why, size_t why_len)
{
    env_var_t      e = env_var(svc, "BRAID_ROCE_GID_INDEX", why, why_len);
    size_t         i = 0;
    unsigned long  v = 0;
    braid_status_t st;

    *index = -1;
    if (e.value == NULL)
        return BRAID_OK;
    if ((st = parse_uint(&e, &i, 65535, &v)) != BRAID_OK)
        return st;
    if (e.value[i] != '\0')
        return bad_char(&e, i, "a decimal digit");
    *index = (int)v;
    return BRAID_OK;
}
