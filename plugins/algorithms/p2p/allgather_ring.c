/* allgather "ring": n-1 pipelined ring steps, each forwarding the block
 * received in the previous one (see ring.c). */
#include "ring.h"

static braid_status_t start(braid_task_t *task)
{
    return braid_ucx_ring_start(task, BRAID_UCX_RING_ALLGATHER);
}

const braid_algo_v3_t braid_ucx_allgather_ring = {
    .name            = "ring",
    .coll            = BRAID_COLL_ALLGATHER,
    .needs_caps      = BRAID_CAP_SENDRECV,
    .transport       = NULL,
    .estimate        = braid_ucx_cost_allgather_ring,
    .start           = start,
    .progress        = braid_ucx_ring_progress,
    .finish          = braid_ucx_ring_finish,
    .comm_state_free = braid_ucx_comm_state_free,
};
