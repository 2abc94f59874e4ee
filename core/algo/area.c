/* The registered area (svc->area_get): one per (communicator, candidate)
 * on its transport, grown collectively when a call needs more.
 *
 * The new area comes first and the old one is freed after: a transport's
 * mem_free may wait for peers (roce waits for its puts' signals, which
 * need the targets' receives), and a peer that grew first sits in the
 * collective mem_alloc without progressing, so freeing first could stall
 * both until the timeout.  Once mem_alloc returned every rank is past it
 * and progresses.  Peak memory is old + new area. */
#include <string.h>

#include "algo/res.h"

braid_status_t braid_area_get(braid_task_t *task, size_t bytes,
                              braid_rmem_t **mem, int *grown)
{
    braid_res_t      *r  = task->res;
    const braid_tl_t *tl = task->tl;

    if (grown != NULL)
        *grown = 0;
    if (r == NULL || tl == NULL || tl->ops->mem_alloc == NULL)
        return task->svc->error(BRAID_ERR_INTERNAL,
                                "%s: no registered "
                                "area here (%s)",
                                braid_coll_name(task->coll),
                                r == NULL    ? "no core resources"
                                : tl == NULL ? "no transport"
                                             : "no put-with-signal");
    if (r->area.local != NULL && r->area.len >= bytes) {
        *mem = &r->area;
        return BRAID_OK;
    }
    braid_rmem_t fresh;
    memset(&fresh, 0, sizeof(fresh));
    braid_status_t st = tl->ops->mem_alloc(tl->tcomm, bytes, &fresh);
    if (st != BRAID_OK) {
        /* The transport's message (why) stands; the log adds how much. */
        task->svc->log(BRAID_LOG_ERROR, "algo",
                       "rank %d: cannot allocate a "
                       "registered area of %zu bytes on %s",
                       task->rank, bytes, tl->ops->name);
        return st;
    }
    if (fresh.local == NULL || fresh.len < bytes) {
        tl->ops->mem_free(tl->tcomm, &fresh);
        return task->svc->error(BRAID_ERR_TRANSPORT,
                                "%s mem_alloc of %zu "
                                "bytes returned a smaller area",
                                tl->ops->name, bytes);
    }
    if (r->area.local != NULL)
        tl->ops->mem_free(tl->tcomm, &r->area);
    r->area = fresh;
    *mem    = &r->area;
    if (grown != NULL)
        *grown = 1;
    task->svc->log(BRAID_LOG_DEBUG, "algo",
                   "rank %d: registered area on %s "
                   "now %zu bytes",
                   task->rank, tl->ops->name, bytes);
    return BRAID_OK;
}

void braid_area_release(braid_res_t *res, braid_tl_t *tl)
{
    if (res->area.local != NULL && tl != NULL && tl->ops->mem_free != NULL)
        tl->ops->mem_free(tl->tcomm, &res->area);
    memset(&res->area, 0, sizeof(res->area));
}
