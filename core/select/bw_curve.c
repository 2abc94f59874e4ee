/* A path's bandwidth as a function of a call's working set (select.h).
 *
 * The calibration measures each path twice: with an exchange whose buffers
 * stay in the caches, and with one whose buffers on every rank of a host
 * together exceed the last-level cache several times.  A call moves its
 * data at the first figure while its working set is as small as the first
 * exchange's, and at the second once it is as large as the second one's;
 * in between the share of its bytes that miss the cache grows with the
 * logarithm of its size, so the time per byte (not the bandwidth) is
 * interpolated linearly on log size.  Outside the two points the nearer
 * figure holds: the model knows nothing beyond what was measured. */
#include <math.h>

#include "select/select.h"

double braid_bw_at(const braid_bw_curve_t *c, double ws)
{
    if (c->in_gbps <= 0.0)
        return c->out_gbps;
    if (c->out_gbps <= 0.0 || c->out_ws <= c->in_ws || ws <= c->in_ws)
        return c->in_gbps;
    if (ws >= c->out_ws)
        return c->out_gbps;
    double f = log(ws / c->in_ws) / log(c->out_ws / c->in_ws);
    double s = (1.0 - f) / c->in_gbps + f / c->out_gbps; /* ns per byte */
    return 1.0 / s;
}

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
