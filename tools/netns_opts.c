/* Parsers of braidrun's --netns options (see netns.h). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "netns.h"

int braid_netns_option(braid_netns_opts_t *o, int code, const char *arg,
                       char *err, size_t n)
{
    switch (code) {
    case BRAID_NETNS_OPT_KIND:
        return braid_netns_parse_kind(&o->kind, arg, err, n);
    case BRAID_NETNS_OPT_RATE:
        return braid_netns_parse_rate(&o->rate_bps, arg, err, n);
    case BRAID_NETNS_OPT_DELAY:
        return braid_netns_parse_delay(&o->delay_us, arg, err, n);
    default: {
        const char *p = arg;
        while (*p >= '0' && *p <= '9')
            p++;
        if (p == arg || *p != '\0') {
            snprintf(err, n,
                     "--ranks-per-host='%s': unexpected '%s' at "
                     "position %zu (expected a whole number)",
                     arg, *p ? p : "end", (size_t)(p - arg));
            return -1;
        }
        if (p - arg > 4 || atoi(arg) < 1 || atoi(arg) > 1024) {
            snprintf(err, n, "--ranks-per-host='%s': outside 1..1024", arg);
            return -1;
        }
        o->ppn = atoi(arg);
        return 0;
    }
    }
}

int braid_netns_parse_kind(braid_netns_kind_t *kind, const char *s, char *err,
                           size_t n)
{
    if (strcmp(s, "switch") == 0)
        *kind = BRAID_NETNS_SWITCH;
    else if (strcmp(s, "ring") == 0)
        *kind = BRAID_NETNS_RING;
    else {
        snprintf(err, n, "--netns='%s': expected 'switch' or 'ring'", s);
        return -1;
    }
    return 0;
}

int braid_netns_parse_rate(uint64_t *bps, const char *s, char *err, size_t n)
{
    static const struct {
        const char *unit;
        double      scale;
    } units[]     = {{"bit", 1.0},
                     {"kbit", 1e3},
                     {"mbit", 1e6},
                     {"gbit", 1e9},
                     {"tbit", 1e12}};
    const char *p = s;
    while (isdigit((unsigned char)*p))
        p++;
    if (*p == '.' && isdigit((unsigned char)p[1])) {
        p++;
        while (isdigit((unsigned char)*p))
            p++;
    }
    if (p == s) {
        snprintf(err, n,
                 "--link-rate='%s': expected a number at position 0 "
                 "(a rate such as 100mbit or 1gbit)",
                 s);
        return -1;
    }
    double v = strtod(s, NULL);
    for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
        if (strcasecmp(p, units[u].unit) != 0)
            continue;
        double r = v * units[u].scale;
        /* tbf needs at least a few packets per second to work at all, and
         * rates above 10 Tbit/s are not links this emulates. */
        if (!(r >= 8000.0) || r > 1e13) {
            snprintf(err, n,
                     "--link-rate='%s': %.0f bit/s is outside 8kbit"
                     "..10tbit",
                     s, r);
            return -1;
        }
        *bps = (uint64_t)llround(r);
        return 0;
    }
    snprintf(err, n,
             "--link-rate='%s': unexpected '%s' at position %zu "
             "(expected a unit: bit, kbit, mbit, gbit or tbit)",
             s, p, (size_t)(p - s));
    return -1;
}

int braid_netns_parse_delay(long *us, const char *s, char *err, size_t n)
{
    const char *p = s;
    while (isdigit((unsigned char)*p))
        p++;
    if (p == s || *p != '\0') {
        snprintf(err, n,
                 "--link-delay='%s': unexpected '%s' at position %zu "
                 "(expected whole microseconds)",
                 s, p == s && *p == '\0' ? "end" : p, (size_t)(p - s));
        return -1;
    }
    if (p - s > 8 || atol(s) > 10000000L) {
        snprintf(err, n, "--link-delay='%s': more than 10 s", s);
        return -1;
    }
    *us = atol(s);
    return 0;
}
