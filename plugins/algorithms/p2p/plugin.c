/* The p2p plugin: ring and recursive-doubling algorithms for every
 * collective, written against tagged send/receive only (BRAID_CAP_SENDRECV),
 * so they run over any transport that has it: ring@ucx, recdbl@shm, ...
 * They are the fallback that works everywhere and the bandwidth choice for
 * large messages. */
#include <stdio.h>

#include "algo_common.h"

static braid_status_t p2p_probe(const braid_plugin_t   *self,
                                const braid_services_t *svc, char *why,
                                size_t why_len)
{
    (void)self;
    /* A transport, and the machinery the core lends (revision 2). */
    if (!BRAID_HAS_MACHINERY(svc)) {
        snprintf(why, why_len, BRAID_NO_MACHINERY_WHY);
        return BRAID_ERR_UNAVAILABLE;
    }
    return BRAID_OK;
}

static const braid_algo_t *const algos[] = {
    &braid_p2p_allreduce_ring,         &braid_p2p_allreduce_recdbl,
    &braid_p2p_allreduce_rabenseifner, &braid_p2p_allreduce_halving,
    &braid_p2p_reduce_scatter_ring,
    &braid_p2p_reduce_scatter_recdbl,  &braid_p2p_allgather_ring,
    &braid_p2p_allgather_recdbl,       &braid_p2p_bcast_ring,
    &braid_p2p_bcast_recdbl,           &braid_p2p_barrier_ring,
    &braid_p2p_barrier_recdbl,
};

__attribute__((visibility("default"))) const braid_plugin_t braid_plugin_v4 = {
    .abi_version = BRAID_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(braid_plugin_t),
    .name        = "p2p",
    .version     = "0.1.0",
    .probe       = p2p_probe,
    .n_algos     = (int)(sizeof(algos) / sizeof(algos[0])),
    .algos       = algos,
};
