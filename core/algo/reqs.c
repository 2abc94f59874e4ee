/* Request sets (svc->reqs_test, reqs_cancel) on the call's transport. */
#include "algo/res.h"

braid_status_t braid_reqs_test(braid_task_t *task, braid_treq_t *reqs, int n,
                               int *ndone)
{
    const braid_tl_t *tl   = task->tl;
    braid_status_t    done = BRAID_OK;
    int               nd   = 0;

    /* Every request is tested, not only up to the first pending one, so
     * that all of them make progress. */
    for (int i = 0; i < n; i++) {
        if (reqs[i].active) {
            braid_status_t st = tl->ops->test(tl->tcomm, &reqs[i]);
            if (st == BRAID_INPROGRESS) {
                done = BRAID_INPROGRESS;
                continue;
            }
            if (st != BRAID_OK)
                return st; /* the transport named the peer and the cause */
            reqs[i].active = 0;
        }
        nd++;
    }
    if (ndone != NULL)
        *ndone = nd;
    return done;
}

void braid_reqs_cancel(braid_task_t *task, braid_treq_t *reqs, int n)
{
    const braid_tl_t *tl = task->tl;

    for (int i = 0; i < n; i++)
        if (reqs[i].active)
            tl->ops->cancel(tl->tcomm, &reqs[i]);
}
