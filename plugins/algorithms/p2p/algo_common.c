/* What the p2p algorithms share: their per-call state's head and finish(),
 * tagged messages, and the arithmetic of partners and steps.  The state,
 * the scratch and the request sets themselves are the core's (svc). */
#include <string.h>

#include "algo_common.h"

braid_status_t braid_p2p_state(braid_task_t *task, size_t size,
                               size_t reqs_off, int nreqs)
{
    braid_status_t st = task->svc->state_get(task, size, NULL);
    if (st != BRAID_OK)
        return st;
    braid_p2p_head_t *h = task->priv;
    h->reqs  = (braid_treq_t *)(void *)((char *)task->priv + reqs_off);
    h->nreqs = nreqs;
    return BRAID_OK;
}

braid_status_t braid_p2p_scratch(braid_task_t *task, size_t bytes, char **buf)
{
    braid_p2p_head_t *h  = task->priv;
    braid_status_t    st = task->svc->scratch_get(task, bytes, &h->scratch);
    *buf                 = h->scratch;
    return st;
}

void braid_p2p_finish(braid_task_t *task)
{
    braid_p2p_head_t *h = task->priv;

    if (h != NULL) {
        task->svc->reqs_cancel(task, h->reqs, h->nreqs);
        task->svc->scratch_put(task, h->scratch);
        h->scratch = NULL;
    }
    task->svc->state_put(task);
}

braid_status_t braid_p2p_send(braid_task_t *task, int peer, long step,
                              const void *buf, size_t len, braid_treq_t *req)
{
    uint64_t tag = BRAID_TAG_CHECKED(task->seq, step, braid_task_sig32(task));
    return task->tl->ops->isend(task->tl->tcomm, peer, tag, buf, len, req);
}

braid_status_t braid_p2p_recv(braid_task_t *task, int peer, long step,
                              void *buf, size_t len, braid_treq_t *req)
{
    uint64_t tag = BRAID_TAG_CHECKED(task->seq, step, braid_task_sig32(task));
    return task->tl->ops->irecv(task->tl->tcomm, peer, tag, buf, len, req);
}

void braid_p2p_combine(braid_task_t *task, void *dst, const void *lower,
                       const void *higher, size_t count)
{
    if (count > 0)
        task->svc->reduce2(dst, lower, higher, count, task->dtype, task->op);
}

void braid_p2p_copy(braid_task_t *task, void *dst, const void *src,
                    size_t count)
{
    if (count > 0 && dst != src)
        memcpy(dst, src, count * task->dtsize);
}

void braid_p2p_local(braid_task_t *task)
{
    if (task->count == 0)
        return;
    braid_p2p_copy(task, task->recvbuf, task->sendbuf, task->count);
    task->svc->finish_avg(task->recvbuf, task->count, task->dtype, task->op,
                          1);
}

int braid_p2p_pow2_floor(int n)
{
    int p = 1;

    while (p <= n / 2)
        p *= 2;
    return p;
}

int braid_p2p_log2_ceil(int n)
{
    int k = 0;

    while ((1L << k) < n)
        k++;
    return k;
}
