/* reduce_scatter "ring": n-1 pipelined ring steps; rank r ends with block r
 * reduced along one chain (see ring.c). */
#include "ring.h"

static braid_status_t start(braid_task_t *task)
{
    return braid_p2p_ring_start(task, BRAID_P2P_RING_REDUCE_SCATTER);
}

const braid_algo_v3_t braid_p2p_reduce_scatter_ring = {
    .name            = "ring",
    .coll            = BRAID_COLL_REDUCE_SCATTER,
    .needs_caps      = BRAID_CAP_SENDRECV,
    .transport       = NULL,
    .estimate        = braid_p2p_cost_reduce_scatter_ring,
    .start           = start,
    .progress        = braid_p2p_ring_progress,
    .finish          = braid_p2p_ring_finish,
    .comm_state_free = braid_p2p_comm_state_free,
};
