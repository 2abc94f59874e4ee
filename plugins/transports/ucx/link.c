/* Declared link parameters of the ucx transport.
 *
 * Nothing is measured: the values are what UCX typically achieves through
 * shared memory on one host and through TCP/verbs across hosts, and they only
 * need to rank candidates sensibly.  BRAID_UCX_ALPHA_US and BRAID_UCX_GBPS
 * override them.  A malformed override is an error, not a warning: a typo
 * would otherwise silently change which algorithms every call uses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tl_ucx.h"

#define ALPHA_US_ONE_HOST 5.0
#define GBPS_ONE_HOST     1.0
#define ALPHA_US_MULTI    10.0
#define GBPS_MULTI        1.5
#define PUT_ALPHA_FACTOR  3.0
#define PUT_BETA_DIVISOR  2.0

/* Parses the whole of text as a finite number, > 0 or (allow_zero) >= 0. */
static braid_status_t parse_number(double *out, const braid_services_t *svc,
                                   const char *name, const char *text,
                                   int allow_zero)
{
    char  *end = NULL;
    double v;

    if (text[0] == '\0') {
        return svc->error(BRAID_ERR_PARSE,
                          "ucx: %s is set but empty (expected a number)",
                          name);
    }
    v = strtod(text, &end);
    if (end == text) {
        return svc->error(BRAID_ERR_PARSE,
                          "ucx: %s='%s': expected a number at position 1",
                          name, text);
    }
    if (*end != '\0') {
        return svc->error(BRAID_ERR_PARSE,
                          "ucx: %s='%s': unexpected character '%c' at "
                          "position %zu",
                          name, text, *end, (size_t)(end - text) + 1);
    }
    if (!isfinite(v) || v < 0.0 || (v == 0.0 && !allow_zero)) {
        return svc->error(BRAID_ERR_PARSE,
                          "ucx: %s='%s': value at position 1 must be a finite "
                          "number %s 0",
                          name, text, allow_zero ? ">=" : ">");
    }
    *out = v;
    return BRAID_OK;
}

/* Put-with-signal is one eager active message that the target's progress
 * copies into place (rma.c says why not ucp_put): its latency includes the
 * target getting round to progress, and the data is copied on both sides.
 * Three alphas per put and half the bandwidth rank a one-stage oneshot
 * behind a two-step recdbl on UCX, as measured (docs/performance.md). */
void braid_ucx_link_put(braid_link_t *link)
{
    link->put_alpha_us  = PUT_ALPHA_FACTOR * link->alpha_us;
    link->put_beta_gbps = link->beta_gbps / PUT_BETA_DIVISOR;
}

braid_status_t braid_ucx_link_declared(braid_link_t           *link,
                                       const braid_services_t *svc, int nnodes)
{
    const char    *env;
    braid_status_t st;

    if (nnodes <= 1) {
        link->alpha_us  = ALPHA_US_ONE_HOST;
        link->beta_gbps = GBPS_ONE_HOST;
    } else {
        link->alpha_us  = ALPHA_US_MULTI;
        link->beta_gbps = GBPS_MULTI;
    }

    env = getenv("BRAID_UCX_ALPHA_US");
    if (env != NULL) {
        st = parse_number(&link->alpha_us, svc, "BRAID_UCX_ALPHA_US", env, 1);
        if (st != BRAID_OK) {
            return st;
        }
    }
    env = getenv("BRAID_UCX_GBPS");
    if (env != NULL) {
        st = parse_number(&link->beta_gbps, svc, "BRAID_UCX_GBPS", env, 0);
        if (st != BRAID_OK) {
            return st;
        }
    }
    braid_ucx_link_put(link);
    return BRAID_OK;
}
