/* Pool of send/receive ops.
 *
 * Posting must not call malloc on the hot path, and an op whose request an
 * algorithm dropped after an error must still be freed: ops come from slabs
 * owned by the communicator, and comm_destroy frees the slabs. */
#include <stdlib.h>
#include <string.h>

#include "shm.h"

braid_shm_op_t *braid_shm_op_get(braid_shm_comm_t *comm)
{
    braid_shm_op_t *op;

    if (comm->free_ops == NULL) {
        braid_shm_slab_t *slab = calloc(1, sizeof(*slab));
        size_t            n    = sizeof(slab->ops) / sizeof(slab->ops[0]);

        if (slab == NULL) {
            return NULL;
        }
        slab->next  = comm->slabs;
        comm->slabs = slab;
        for (size_t i = 0; i < n; i++) {
            slab->ops[i].next = comm->free_ops;
            comm->free_ops    = &slab->ops[i];
        }
    }
    op             = comm->free_ops;
    comm->free_ops = op->next;
    comm->live_ops++;
    memset(op, 0, sizeof(*op));
    return op;
}

void braid_shm_op_put(braid_shm_comm_t *comm, braid_shm_op_t *op)
{
    if (op->own != NULL) { /* a cancelled send's copy (cancel.c) */
        free(op->own);
        op->own = NULL;
    }
    op->kind       = 0;
    op->next       = comm->free_ops;
    comm->free_ops = op;
    comm->live_ops--;
}

void braid_shm_ops_release(braid_shm_comm_t *comm)
{
    while (comm->slabs != NULL) {
        braid_shm_slab_t *slab = comm->slabs;
        size_t            n    = sizeof(slab->ops) / sizeof(slab->ops[0]);

        /* Cancelled sends still queued to a peer that stopped reading. */
        for (size_t i = 0; i < n; i++) {
            free(slab->ops[i].own);
        }
        comm->slabs = slab->next;
        free(slab);
    }
    comm->free_ops = NULL;
}
