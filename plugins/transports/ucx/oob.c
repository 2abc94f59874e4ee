/* Out-of-band exchanges of the ucx transport (worker addresses).
 *
 * Two rounds: fixed-size headers (status, blob length, two extra words), then
 * the blobs padded to the longest one, since oob->allgather needs one length
 * on every rank.  The status in the header makes a local failure collective:
 * a rank that could not build its part still takes part in both rounds, so
 * its peers fail with a message naming it instead of hanging in the next
 * allgather.  (Running out of memory for the few bytes of headers is the one
 * failure that is not made collective; the core's OOB timeout covers it.) */
#include <stdlib.h>
#include <string.h>

#include "tl_ucx.h"

typedef struct xchg_hdr {
    int64_t  status;
    uint64_t len;
    uint64_t extra[2];
} xchg_hdr_t;

static braid_status_t oob_failed(const braid_services_t *svc,
                                 braid_status_t st, const char *what)
{
    return svc->error(st,
                      "ucx: out-of-band allgather failed while %s "
                      "(status %d)",
                      what, (int)st);
}

static braid_status_t no_memory(const braid_services_t *svc, const char *what)
{
    return svc->error(BRAID_ERR_NO_MEMORY, "ucx: out of memory while %s",
                      what);
}

/* First failed rank in statuses[], or -1. */
static int first_failed(const int64_t *status, size_t stride_words, int n)
{
    for (int r = 0; r < n; r++) {
        if (status[(size_t)r * stride_words] != BRAID_OK) {
            return r;
        }
    }
    return -1;
}

static braid_status_t remote_failed(const braid_services_t *svc,
                                    braid_status_t local, int rank,
                                    braid_status_t remote, const char *what)
{
    if (local != BRAID_OK) {
        return local; /* this rank's own message is already recorded */
    }
    return svc->error(remote,
                      "ucx: rank %d failed while %s (status %d), so "
                      "this rank gives up too",
                      rank, what, (int)remote);
}

void braid_ucx_xchg_free(braid_ucx_xchg_t *x)
{
    free(x->blobs);
    free(x->lens);
    free(x->extra);
    memset(x, 0, sizeof(*x));
}

braid_status_t braid_ucx_oob_exchange(braid_ucx_xchg_t       *out,
                                      const braid_services_t *svc,
                                      const braid_oob_t *oob, const char *what,
                                      braid_status_t local, const void *blob,
                                      size_t len, const uint64_t extra[2])
{
    const int      n      = oob->size;
    xchg_hdr_t     mine   = {0};
    xchg_hdr_t    *hdrs   = NULL;
    char          *pad    = NULL;
    size_t         maxlen = 0;
    braid_status_t st;
    int            bad;

    memset(out, 0, sizeof(*out));
    mine.status = local;
    mine.len    = local == BRAID_OK ? len : 0;
    if (extra != NULL) {
        mine.extra[0] = extra[0];
        mine.extra[1] = extra[1];
    }

    hdrs = calloc((size_t)n, sizeof(*hdrs));
    if (hdrs == NULL) {
        return no_memory(svc, what);
    }
    st = oob->allgather(oob->ctx, &mine, hdrs, sizeof(mine));
    if (st != BRAID_OK) {
        free(hdrs);
        return local != BRAID_OK ? local : oob_failed(svc, st, what);
    }
    bad =
        first_failed(&hdrs[0].status, sizeof(xchg_hdr_t) / sizeof(int64_t), n);
    if (bad >= 0) {
        st = remote_failed(svc, local, bad, (braid_status_t)hdrs[bad].status,
                           what);
        free(hdrs);
        return st;
    }
    for (int r = 0; r < n; r++) {
        if (hdrs[r].len > maxlen) {
            maxlen = hdrs[r].len;
        }
    }

    out->stride = maxlen;
    out->lens   = calloc((size_t)n, sizeof(*out->lens));
    out->extra  = calloc((size_t)n * 2, sizeof(*out->extra));
    out->blobs  = calloc((size_t)n, maxlen + 1);
    pad         = calloc(1, maxlen + 1);
    if (!out->lens || !out->extra || !out->blobs || !pad) {
        free(pad);
        free(hdrs);
        braid_ucx_xchg_free(out);
        return no_memory(svc, what);
    }
    for (int r = 0; r < n; r++) {
        out->lens[r]          = hdrs[r].len;
        out->extra[2 * r]     = hdrs[r].extra[0];
        out->extra[2 * r + 1] = hdrs[r].extra[1];
    }
    free(hdrs);
    if (len > 0) {
        memcpy(pad, blob, len);
    }
    st = oob->allgather(oob->ctx, pad, out->blobs, maxlen);
    free(pad);
    if (st != BRAID_OK) {
        braid_ucx_xchg_free(out);
        return oob_failed(svc, st, what);
    }
    return BRAID_OK;
}

braid_status_t braid_ucx_oob_agree(const braid_services_t *svc,
                                   const braid_oob_t *oob, const char *what,
                                   braid_status_t local)
{
    int64_t        mine = local;
    int64_t       *all  = calloc((size_t)oob->size, sizeof(*all));
    braid_status_t st;
    int            bad;

    if (all == NULL) {
        return no_memory(svc, what);
    }
    st = oob->allgather(oob->ctx, &mine, all, sizeof(mine));
    if (st != BRAID_OK) {
        free(all);
        return local != BRAID_OK ? local : oob_failed(svc, st, what);
    }
    bad = first_failed(all, 1, oob->size);
    st  = bad < 0
              ? BRAID_OK
              : remote_failed(svc, local, bad, (braid_status_t)all[bad], what);
    free(all);
    return st;
}
