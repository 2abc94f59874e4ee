/* reduce_scatter "ring": n-1 pipelined ring steps; rank r ends with block r
 * reduced along one chain (see ring.c). */
#include "ring.h"

static braid_status_t start(braid_task_t *task, braid_wait_t *wait)
{
    (void)wait;
    return braid_p2p_ring_start(task, BRAID_P2P_RING_REDUCE_SCATTER);
}

const braid_algo_t braid_p2p_reduce_scatter_ring = {
    .struct_size     = sizeof(braid_algo_t),
    .flags           = BRAID_ALGO_CORE_REDUCE, /* braid_p2p_combine */
    .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .name            = "ring",
    .coll            = BRAID_COLL_REDUCE_SCATTER,
    .needs_caps      = BRAID_CAP_SENDRECV,
    .transport       = NULL,
    .estimate        = braid_p2p_cost_reduce_scatter_ring,
    .start           = start,
    .progress        = braid_p2p_ring_progress,
    .finish          = braid_p2p_finish,
    .comm_state_free = NULL,
};
