/* The bw plugin: large all-reduce, reduce_scatter and allgather at the
 * memory-bandwidth limit of one host, with no size cap (bw.h):
 *
 *   pull  single-copy reads (needs BRAID_CAP_GET: shm with cross-memory
 *         attach), chunked reduce-scatter + allgather
 *   pipe  the copy path over put-with-signal: the same slices, moved
 *         through bounded slot rings under credit flow control
 *
 * No transport of its own. */
#include <stdio.h>

#include <braid/plugin.h>

#include "bw.h"

static braid_status_t bw_probe(const braid_plugin_t   *self,
                               const braid_services_t *svc, char *why,
                               size_t why_len)
{
    (void)self;
    if (!BRAID_HAS_MACHINERY(svc)) {
        snprintf(why, why_len, "%s", BRAID_NO_MACHINERY_WHY);
        return BRAID_ERR_UNAVAILABLE;
    }
    /* Its copies go through svc->copy (streaming stores where the data
     * is not read again soon). */
    if (!BRAID_HAS(svc, braid_services_t, copy)) {
        snprintf(why, why_len,
                 "this libbraid lacks svc->copy (plugin ABI 4 revision 3)");
        return BRAID_ERR_UNAVAILABLE;
    }
    return BRAID_OK; /* the transports decide where the algorithms run */
}

static const braid_algo_t *const algos[] = {
    &braid_bw_pull_allreduce,      &braid_bw_pull_reduce_scatter,
    &braid_bw_pull_allgather,      &braid_bw_pipe_allreduce,
    &braid_bw_pipe_reduce_scatter, &braid_bw_pipe_allgather,
};

__attribute__((visibility("default"))) const braid_plugin_t braid_plugin_v4 = {
    .abi_version = BRAID_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(braid_plugin_t),
    .name        = "bw",
    .version     = "0.1",
    .probe       = bw_probe,
    .n_algos     = (int)(sizeof(algos) / sizeof(algos[0])),
    .algos       = algos,
};
