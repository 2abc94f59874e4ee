/* Per-call state (svc->state_get, state_put): one block per (communicator,
 * candidate), handed to each call in turn.  A decode step's all-reduce is a
 * few hundred instructions, so a malloc and a free per call would be a
 * visible share of it; calls of one candidate never overlap, so one block
 * serves them all.  A call that finds it held (it cannot happen under the
 * core's queue, but costs nothing to survive) gets a block of its own. */
#include <stdlib.h>
#include <string.h>

#include "algo/res.h"

braid_status_t braid_state_get(braid_task_t *task, size_t size, int *recycled)
{
    braid_res_t *r = task->res;

    if (recycled != NULL)
        *recycled = 0;
    if (r == NULL || r->state_busy) {
        task->priv = braid_res_zalloc(size);
        goto out;
    }
    if (r->state != NULL && r->state_cap >= size) {
        /* Recycled only when the same algorithm state comes back: a block
         * sized for something else is not what the caller left in it. */
        if (recycled != NULL && r->state_size == size)
            *recycled = 1;
        else
            memset(r->state, 0, size);
    } else {
        free(r->state);
        r->state_cap = 0;
        if ((r->state = braid_res_zalloc(size)) != NULL)
            r->state_cap = size;
    }
    r->state_size = size;
    r->state_busy = r->state != NULL;
    task->priv    = r->state;
out:
    if (task->priv == NULL)
        return task->svc->error(BRAID_ERR_NO_MEMORY,
                                "out of memory for the "
                                "%zu-byte state of a %s call on %d ranks",
                                size, braid_coll_name(task->coll), task->size);
    return BRAID_OK;
}

void braid_state_put(braid_task_t *task)
{
    braid_res_t *r = task->res;

    if (task->priv == NULL)
        return;
    if (r != NULL && task->priv == r->state)
        r->state_busy = 0;
    else
        free(task->priv);
    task->priv = NULL;
}

void braid_state_release(braid_res_t *res)
{
    free(res->state);
    res->state     = NULL;
    res->state_cap = 0;
}
