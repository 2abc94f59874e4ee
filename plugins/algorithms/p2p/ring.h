/* Segmented, pipelined ring engine behind the "ring" allreduce,
 * reduce_scatter, allgather and broadcast. */
#ifndef BRAID_P2P_RING_H
#define BRAID_P2P_RING_H

#include "algo_common.h"

typedef enum {
    BRAID_P2P_RING_ALLREDUCE, /* reduce-scatter steps, then allgather */
    BRAID_P2P_RING_REDUCE_SCATTER,
    BRAID_P2P_RING_ALLGATHER,
    BRAID_P2P_RING_BCAST, /* a chain from the root */
} braid_p2p_ring_mode_t;

braid_status_t braid_p2p_ring_start(braid_task_t         *task,
                                    braid_p2p_ring_mode_t mode);
braid_status_t braid_p2p_ring_progress(braid_task_t *task, braid_wait_t *wait);

#endif
