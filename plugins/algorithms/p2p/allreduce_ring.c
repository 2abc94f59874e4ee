/* allreduce "ring": ring reduce-scatter then ring allgather over n uneven
 * chunks, each chunk pipelined in segments (see ring.c). */
#include "ring.h"

static braid_status_t start(braid_task_t *task)
{
    return braid_p2p_ring_start(task, BRAID_P2P_RING_ALLREDUCE);
}

const braid_algo_v3_t braid_p2p_allreduce_ring = {
    .name            = "ring",
    .coll            = BRAID_COLL_ALLREDUCE,
    .needs_caps      = BRAID_CAP_SENDRECV,
    .transport       = NULL,
    .estimate        = braid_p2p_cost_allreduce_ring,
    .start           = start,
    .progress        = braid_p2p_ring_progress,
    .finish          = braid_p2p_ring_finish,
    .comm_state_free = braid_p2p_comm_state_free,
};
