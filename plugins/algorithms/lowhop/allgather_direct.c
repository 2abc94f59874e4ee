/* allgather "direct": one stage of direct writes.
 *
 * Every rank put_signals its block (sendcount elements) into its slot of
 * every peer's receive area (bank by call parity, recv_area.h) and copies each
 * peer's block from its own area to recvbuf + peer·block as it arrives.
 * One latency and (n-1)·m bytes out per rank, against n-1 latencies for the
 * ring: the allgather for small blocks.  In place (sendbuf == recvbuf +
 * rank·block) the puts read the rank's own block and the copies write the
 * others, so they never meet. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lowhop.h"
#include "recv_area.h"

typedef struct ag_direct {
    braid_lowhop_area_t *area;
    uint64_t             flag;
    int                  bank;
    int                  posted;
    int                  left; /* peers' blocks not yet copied */
    braid_treq_t        *reqs; /* [n-1]: reqs[i-1] to rank+i */
    unsigned char       *done; /* [n-1], by slot: copied */
} ag_direct_t;

static braid_status_t ag_start(braid_task_t *task, braid_wait_t *wait)
{
    size_t         len = task->count * task->dtsize;
    int            n   = task->size;
    braid_status_t st;

    (void)wait;
    if (len > BRAID_LOWHOP_ALLGATHER_MAX_BYTES)
        return task->svc->error(BRAID_ERR_NOT_SUPPORTED,
                                "lowhop: allgather "
                                "direct takes at most %zu bytes per rank, "
                                "this call sends %zu (its receive area holds "
                                "a whole block per peer)",
                                BRAID_LOWHOP_ALLGATHER_MAX_BYTES, len);
    size_t size =
        sizeof(ag_direct_t) + (size_t)n * sizeof(braid_treq_t) + (size_t)n;
    if ((st = task->svc->state_get(task, size, NULL)) != BRAID_OK)
        return st;
    ag_direct_t *s = task->priv;
    s->reqs        = (braid_treq_t *)(s + 1);
    s->done        = (unsigned char *)(s->reqs + n);
    if (len == 0 || n == 1)
        return BRAID_OK;

    st = braid_lowhop_area_get(&s->area, task, len,
                               BRAID_LOWHOP_ALLGATHER_MAX_BYTES);
    if (st != BRAID_OK)
        return st; /* finish() frees the state */
    s->bank = (int)(s->area->calls++ & 1);
    s->flag = braid_lowhop_flag(task);
    s->left = n - 1;
    return BRAID_OK;
}

static braid_status_t ag_progress(braid_task_t *task, braid_wait_t *wait)
{
    ag_direct_t   *s = task->priv;
    int            n = task->size, me = task->rank;
    size_t         len = task->count * task->dtsize;
    braid_status_t st;

    if (!s->posted) {
        for (int i = 1; s->area != NULL && i < n; i++) {
            st =
                braid_lowhop_put(task, s->area, (me + i) % n, s->bank,
                                 task->sendbuf, len, s->flag, &s->reqs[i - 1]);
            if (st != BRAID_OK)
                return st;
        }
        /* recvbuf may be NULL when len is 0: no arithmetic on it then */
        char *own = len > 0 ? (char *)task->recvbuf + (size_t)me * len : NULL;
        if (own != NULL && task->sendbuf != own)
            memcpy(own, task->sendbuf, len);
        s->posted = 1;
    }
    if (s->area == NULL)
        return BRAID_OK;
    if ((st = braid_lowhop_tl_progress(task)) != BRAID_OK)
        return st;
    for (int k = 0; k < n - 1 && s->left > 0; k++) {
        if (s->done[k])
            continue;
        int got = braid_lowhop_arrived(s->area, s->bank, k, s->flag);
        if (got < 0)
            return braid_lowhop_mismatch(task, s->area, s->bank, k, s->flag);
        if (got == 0)
            continue;
        int j = braid_lowhop_slot_source(k, me, n);
        task->svc->copy((char *)task->recvbuf + (size_t)j * len,
                        braid_lowhop_slot_data(s->area, s->bank, k), len,
                        braid_lowhop_stream_ok(task, s->area, len));
        s->done[k] = 1;
        s->left--;
    }
    st = task->svc->reqs_test(task, s->reqs, n - 1, NULL);
    if (st != BRAID_OK)
        return st;
    if (s->left == 0)
        return BRAID_OK;
    if (braid_lowhop_mates_in(s->area, s->done, n))
        *wait = BRAID_WAIT_REMOTE;
    return BRAID_INPROGRESS;
}

/* After an error the puts may still read sendbuf: withdrawn before the
 * caller gets it back. */
static void ag_finish(braid_task_t *task)
{
    ag_direct_t *s = task->priv;

    if (s != NULL)
        task->svc->reqs_cancel(task, s->reqs, task->size - 1);
    task->svc->state_put(task);
}

static double ag_estimate(const braid_algo_t *self, const braid_cost_in_t *in)
{
    (void)self;
    return braid_lowhop_cost_allgather_direct(in);
}

const braid_algo_t braid_lowhop_allgather_direct_algo = {
    .struct_size     = sizeof(braid_algo_t),
    .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .name            = "direct",
    .coll            = BRAID_COLL_ALLGATHER,
    .needs_caps      = BRAID_CAP_PUT_SIGNAL,
    .transport       = NULL,
    .estimate        = ag_estimate,
    .start           = ag_start,
    .progress        = ag_progress,
    .finish          = ag_finish,
    .comm_state_free = braid_lowhop_area_free,
};
