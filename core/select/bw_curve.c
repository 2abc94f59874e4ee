/* The working set at which a call reads its paths' curves (select.h;
 * braid_bw_at in the plugin header interpolates them).
 *
 * The calibration measures each path twice: with an exchange whose buffers
 * stay in the caches, and with one whose buffers on every rank of a host
 * together exceed the last-level cache several times. */
#include "select/select.h"

/* What one rank's buffers hold during the call: the bytes it sends and
 * the bytes it receives, whatever the algorithm (its own staging areas
 * come on top and are the algorithm's business).  bytes as in
 * braid_cost_in_t: allgather's send count, reduce_scatter's receive
 * count, the whole buffer for the others. */
double braid_call_working_set(braid_coll_t coll, size_t bytes, int nranks)
{
    double b = (double)bytes, n = nranks > 1 ? (double)nranks : 1.0;
    switch (coll) {
    case BRAID_COLL_ALLGATHER:
    case BRAID_COLL_REDUCE_SCATTER: return b * (n + 1.0);
    case BRAID_COLL_BROADCAST: return b;
    default: return 2.0 * b;
    }
}
