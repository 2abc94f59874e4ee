/* The lowhop plugin: low-hop collectives written against put-with-signal
 * (so they run on shm, ucx and roce alike); no transport of its own.
 *
 *   allreduce       oneshot  one stage:  every rank writes all to all
 *   allreduce       twoshot  two stages: direct reduce-scatter + allgather
 *   allgather       direct   one stage
 *   reduce_scatter  direct   one stage
 *   barrier         direct   one stage of flags
 *
 * Their estimates (cost.c) make the dispatcher pick them for small and
 * middle sizes and leave large messages to the ring. */
#include <stdio.h>

#include <braid/plugin.h>

#include "lowhop.h"

static braid_status_t lowhop_probe(const braid_plugin_t   *self,
                                   const braid_services_t *svc, char *why,
                                   size_t why_len)
{
    (void)self;
    /* Any put-with-signal transport, and the machinery the core lends
     * (revision 2: state, registered areas, request sets). */
    if (!BRAID_HAS_MACHINERY(svc)) {
        snprintf(why, why_len, BRAID_NO_MACHINERY_WHY);
        return BRAID_ERR_UNAVAILABLE;
    }
    /* Blocks leave the receive area through svc->copy (revision 3). */
    if (!BRAID_HAS(svc, braid_services_t, copy)) {
        snprintf(why, why_len,
                 "this libbraid lacks svc->copy (plugin ABI 4 revision 3)");
        return BRAID_ERR_UNAVAILABLE;
    }
    return BRAID_OK;
}

static const braid_algo_t *const algos[] = {
    &braid_lowhop_oneshot_algo,
    &braid_lowhop_twoshot_algo,
    &braid_lowhop_allgather_direct_algo,
    &braid_lowhop_reduce_scatter_direct_algo,
    &braid_lowhop_barrier_direct_algo,
};

__attribute__((visibility("default"))) const braid_plugin_t braid_plugin_v4 = {
    .abi_version = BRAID_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(braid_plugin_t),
    .name        = "lowhop",
    .version     = "0.1",
    .probe       = lowhop_probe,
    .n_algos     = (int)(sizeof(algos) / sizeof(algos[0])),
    .algos       = algos,
};
